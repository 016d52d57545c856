/*
 * The session engine's object: its setup and teardown, and what it tells
 * the link and the core (counters, the next deadline). The work is in the
 * files session.h lists.
 */
#include "engine.h"

#include "session.h"

#include <stdlib.h>
#include <string.h>

const char *const fm_net_counter_names[FM_NC_COUNT] = {
    [FM_NC_TX_PACKETS] = "tx_packets", [FM_NC_TX_BYTES] = "tx_bytes",
    [FM_NC_RX_PACKETS] = "rx_packets", [FM_NC_RX_BYTES] = "rx_bytes",
    [FM_NC_RETX_TIMEOUT] = "retransmits_timeout", [FM_NC_RETX_FAST] = "retransmits_fast",
    [FM_NC_RETX_PROBE] = "retransmits_probe",
    [FM_NC_ACKS] = "acks_sent", [FM_NC_PINGS] = "pings_sent", [FM_NC_SESSIONS] = "sessions",
    [FM_NC_PEERS_LOST] = "peers_lost", [FM_NC_RAIL_DOWN] = "rail_failovers",
    [FM_NC_RAIL_UP] = "rail_recoveries", [FM_NC_RING_RX_BYTES] = "ring_rx_bytes",
    [FM_NC_RING_TX_BYTES] = "ring_tx_bytes", [FM_NC_RING_GROWN] = "rings_grown",
    [FM_NC_PLACED] = "placed_ahead", [FM_NC_CWND_CUTS] = "cwnd_cuts",
    [FM_NC_FLOWS_IDLE] = "flows_idle_ended",
};

/* ---- setup ------------------------------------------------------------------ */

struct fm_net *fm_net_new(const struct fm_net_params *p)
{
    struct fm_net *net = calloc(1, sizeof(*net));
    if (!net)
        return NULL;
    net->p = *p;
    net->p.nrails = FM_MAX(1, FM_MIN(p->nrails, FM_RAILS_MAX));
    if (!net->p.rail_heartbeat_ns)
        net->p.rail_heartbeat_ns = p->timeout_ns / 10;
    net->sess_cap = FM_MAX(p->size, 1);
    net->sess = calloc((size_t)net->sess_cap, sizeof(*net->sess));
    if (!net->sess) {
        free(net);
        return NULL;
    }
    net->job = fm_wire_job_tag(p->key);
    net->rng = ((uint64_t)p->epoch << 32) ^ net->job ^ 0x9E3779B97F4A7C15ull;
    return net;
}

void fm_net_named(struct fm_net *net, const uint8_t key[16], const void *card, size_t len)
{
    memcpy(net->domain_key, key, 16);
    net->domain = fm_wire_job_tag(key);
    net->card_len = FM_MIN(len, sizeof(net->card));
    memcpy(net->card, card, net->card_len);
}

void fm_net_free(struct fm_net *net)
{
    if (!net)
        return;
    for (int i = 0; i < net->nall; i++)
        fm_session_free(net->all[i]);
    while (net->nspare)
        free(net->spare[--net->nspare]);
    free(net->all);
    free(net->timers);
    free(net->pending);
    free(net->gathering);
    free(net->sess);
    free(net->by_epoch.slot);
    free(net->by_token.slot);
    free(net->recent);
    free(net);
}

void fm_net_set_rails_busy(struct fm_net *net, uint32_t mask) { net->rails_busy = mask; }

void fm_net_rail_counters(const struct fm_net *net, uint64_t tx_bytes[FM_RAILS_MAX])
{
    memcpy(tx_bytes, net->rail_tx, sizeof(net->rail_tx));
}

/* The first session timer, or while senders wait for their turn the
 * budget's epoch end, for which the receiver wakes. */
uint64_t fm_net_heartbeat_ns(const struct fm_net *net)
{
    return net->p.timeout_ns / PINGS_PER_TIMEOUT;
}

uint64_t fm_net_deadline(const struct fm_net *net)
{
    return FM_MIN(fm_timer_next(net), fm_budget_deadline(net));
}

void fm_net_counters(const struct fm_net *net, uint64_t nc[FM_NC_COUNT],
                     uint64_t drops[FM_DROP_COUNT])
{
    memcpy(nc, net->nc, sizeof(net->nc));
    memcpy(drops, net->drops, sizeof(net->drops));
}

void fm_net_count_drop(struct fm_net *net, enum fm_drop why) { net->drops[why]++; }
