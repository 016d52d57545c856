#include "engine.h"

#include "session.h"

#include "core/util.h"
#include "fastmsg.h"
#include "core/log.h"
#include "core/siphash.h"

#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

const char *const fm_net_counter_names[FM_NC_COUNT] = {
    [FM_NC_TX_PACKETS] = "tx_packets", [FM_NC_TX_BYTES] = "tx_bytes",
    [FM_NC_RX_PACKETS] = "rx_packets", [FM_NC_RX_BYTES] = "rx_bytes",
    [FM_NC_RETX_TIMEOUT] = "retransmits_timeout", [FM_NC_RETX_FAST] = "retransmits_fast",
    [FM_NC_RETX_PROBE] = "retransmits_probe",
    [FM_NC_ACKS] = "acks_sent", [FM_NC_PINGS] = "pings_sent", [FM_NC_SESSIONS] = "sessions",
    [FM_NC_PEERS_LOST] = "peers_lost", [FM_NC_RAIL_DOWN] = "rail_failovers",
    [FM_NC_RAIL_UP] = "rail_recoveries",
};

/* Named sessions by the peer's epoch (open addressing). */
static size_t epoch_slot(const struct fm_net *net, uint32_t epoch)
{
    size_t i = (size_t)(epoch * 0x9E3779B1u) & (net->by_epoch_cap - 1);
    while (net->by_epoch[i] && net->sess[net->by_epoch[i] - 1]->peer_epoch_named != epoch)
        i = (i + 1) & (net->by_epoch_cap - 1);
    return i;
}

static struct fm_session *named_session(const struct fm_net *net, uint32_t epoch)
{
    if (!net->by_epoch_cap)
        return NULL;
    int p = net->by_epoch[epoch_slot(net, epoch)];
    return p ? net->sess[p - 1] : NULL;
}

static int named_register(struct fm_net *net, struct fm_session *s, uint32_t epoch)
{
    /* Named packets are found by the sender's epoch alone: two processes
     * that drew the same 32-bit epoch (about 1 in 4 billion pairs) cannot
     * both have a session here. */
    if (named_session(net, epoch)) {
        fm_error("net", "two peers have the epoch %08x: the later one is refused", epoch);
        return FM_EINVAL;
    }
    if ((net->nby_epoch + 1) * 2 > net->by_epoch_cap) {
        size_t cap = net->by_epoch_cap ? net->by_epoch_cap * 2 : 64;
        int *old = net->by_epoch;
        size_t old_cap = net->by_epoch_cap;
        net->by_epoch = calloc(cap, sizeof(*net->by_epoch));
        if (!net->by_epoch) {
            net->by_epoch = old;
            return FM_ENOMEM;
        }
        net->by_epoch_cap = cap;
        for (size_t i = 0; i < old_cap; i++)
            if (old[i])
                net->by_epoch[epoch_slot(net, net->sess[old[i] - 1]->peer_epoch_named)] =
                    old[i];
        free(old);
    }
    s->peer_epoch_named = epoch;
    net->by_epoch[epoch_slot(net, epoch)] = s->rank + 1;
    net->nby_epoch++;
    return 0;
}

struct fm_session *fm_session_get(struct fm_net *net, int rank)
{
    if (rank >= net->sess_cap) {
        int cap = FM_MAX(rank + 1, net->sess_cap * 2);
        struct fm_session **a = realloc(net->sess, sizeof(*a) * (size_t)cap);
        if (!a)
            return NULL;
        memset(a + net->sess_cap, 0, sizeof(*a) * (size_t)(cap - net->sess_cap));
        net->sess = a;
        net->sess_cap = cap;
    }
    struct fm_session *s = net->sess[rank];
    if (s)
        return s;
    int named = rank >= net->p.size;
    if (named && (!net->domain || !net->p.up.named_epoch))
        return NULL; /* no domain key yet: nobody to talk to by name */
    if (net->nall == net->all_cap) {
        int cap = net->all_cap ? net->all_cap * 2 : 16;
        struct fm_session **a = realloc(net->all, sizeof(*a) * (size_t)cap);
        if (!a)
            return NULL;
        net->all = a;
        net->all_cap = cap;
    }
    s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->net = net;
    s->rank = rank;
    s->named = named;
    s->snd_nxt = s->snd_una = (uint32_t)rnd(net);
    s->rto = net->p.rto_min_ns * 4;
    net->sess[rank] = s;
    if (named && named_register(net, s, net->p.up.named_epoch(net->p.up.core, rank))) {
        net->sess[rank] = NULL;
        free(s);
        return NULL;
    }
    net->all[net->nall++] = s;
    net->nc[FM_NC_SESSIONS]++;
    return s;
}

static void set_rail(const struct fm_session *s, struct fm_pkt_out *p, int r)
{
    p->rail = (uint8_t)r;
    p->hdr.rail = (uint8_t)r;
    p->to = s->rail[r].addr;
}

static void hdr_init(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *p, uint8_t op)
{
    memset(&p->hdr, 0, sizeof(p->hdr));
    p->hdr.version = FM_WIRE_VERSION;
    p->hdr.op = op;
    p->hdr.job = s->named ? net->domain : net->job;
    p->hdr.src_rank = s->named ? FM_WIRE_NAMED : (uint32_t)net->p.rank;
    p->hdr.dst_rank = s->named ? FM_WIRE_NAMED : (uint32_t)s->rank;
    p->hdr.src_epoch = net->p.epoch;
    p->hdr.dst_epoch = s->peer_epoch;
    if (s->rcv_known) {
        p->hdr.flags |= FM_HDR_ACK_VALID;
        p->hdr.ack = s->rcv_nxt;
        /* Riding on this packet, the acknowledgement needs no packet of its
         * own unless the peer must learn of a gap. */
        s->unacked = 0;
        if (!s->nheld)
            s->ack_now = 0;
    }
    p->sub_len = 0;
    p->raw = 0;
    p->nbytes[0] = p->nbytes[1] = 0;
    p->rank = s->rank;
    set_rail(s, p, s->ctl_rail);
}

static void session_gone(struct fm_net *net, struct fm_session *s, int state)
{
    if (s->state == S_GONE)
        return;
    s->state = S_GONE;
    for (uint32_t i = 0; i < s->nlive; i++)
        __atomic_fetch_add(&s->live[i]->gen, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < FM_WIRE_SACK_BITS; i++) {
        free(s->held[i].pkt);
        s->held[i].pkt = NULL;
    }
    s->nheld = 0;
    if (state == FM_NET_PEER_FAILED)
        net->nc[FM_NC_PEERS_LOST]++;
    fm_info("net", "session with rank %d ends: %s", s->rank,
            state == FM_NET_PEER_FAILED ? "lost" : "it left");
    net->p.up.peer_gone(net->p.up.core, s->rank, state);
}

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
    net->next_timer = UINT64_MAX;
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
    for (int i = 0; i < net->nall; i++) {
        struct fm_session *s = net->all[i];
        for (int k = 0; k < FM_WIRE_SACK_BITS; k++)
            free(s->held[k].pkt);
        fm_flows_free(s);
        free(s);
    }
    while (net->nspare)
        free(net->spare[--net->nspare]);
    free(net->all);
    free(net->pending);
    free(net->gathering);
    free(net->sess);
    free(net->by_epoch);
    free(net);
}

/* ---- receiving -------------------------------------------------------------- */

static enum fm_drop deliver(struct fm_net *net, struct fm_session *s, const struct fm_wire_hdr *h,
                            const unsigned char *pl)
{
    switch (h->op) {
    case FM_OP_FLOW: {
        struct fm_wire_flow w;
        memcpy(&w, pl, sizeof(w));
        return fm_flow_rx_new(net, s, &w) ? FM_DROP_NONE : FM_DROP_FLOW;
    }
    case FM_OP_DATA: {
        struct fm_wire_data d;
        memcpy(&d, pl, sizeof(d));
        if (d.flow >= s->rxf_cap || !s->rxf[d.flow])
            return FM_DROP_FLOW;
        return fm_flow_rx_data(net, s->rxf[d.flow], d.pos, pl + sizeof(d), h->len - sizeof(d));
    }
    case FM_OP_FLOW_END: {
        struct fm_wire_flow_end e;
        memcpy(&e, pl, sizeof(e));
        if (e.flow >= s->rxf_cap || !s->rxf[e.flow])
            return FM_DROP_FLOW;
        struct fm_rxflow *f = s->rxf[e.flow];
        s->rxf[e.flow] = NULL; /* the core owns it from here */
        __atomic_store_n(&f->ended, 1, __ATOMIC_RELEASE); /* read by the endpoint */
        net->p.up.flow_end(net->p.up.core, f);
        return FM_DROP_NONE;
    }
    case FM_OP_FLOW_STOP: {
        struct fm_wire_flow_end e;
        memcpy(&e, pl, sizeof(e));
        if (e.flow < s->txf_cap && s->txf[e.flow] && !s->txf[e.flow]->done)
            fm_net_flow_end(net, s->txf[e.flow]);
        return FM_DROP_NONE;
    }
    default: /* FM_OP_BYE: everything before it is delivered */
        s->bye_received = 1;
        s->ack_now = 1; /* the leaving process waits for this acknowledgement */
        session_gone(net, s, FM_NET_PEER_LEFT);
        return FM_DROP_NONE;
    }
}

/* A sequenced packet: deliver it in order, or hold it until its turn. */
static enum fm_drop on_sequenced(struct fm_net *net, struct fm_session *s, void *pkt, size_t len)
{
    struct fm_wire_hdr h;
    memcpy(&h, pkt, sizeof(h));
    uint32_t off = h.seq - s->rcv_nxt;
    if (fm_seq_lt(h.seq, s->rcv_nxt)) {
        s->ack_now = 1; /* the peer missed our acknowledgement */
        return FM_DROP_DUPLICATE;
    }
    if (off > FM_WIRE_SACK_BITS)
        return FM_DROP_WINDOW;
    if (off > 0) {
        struct held *hd = &s->held[h.seq % FM_WIRE_SACK_BITS];
        s->ack_now = 1; /* tell the sender about the gap at once */
        if (hd->pkt)
            return FM_DROP_DUPLICATE;
        hd->pkt = malloc(len);
        if (!hd->pkt)
            return FM_DROP_WINDOW;
        memcpy(hd->pkt, pkt, len);
        hd->len = len;
        s->nheld++;
        return FM_DROP_NONE;
    }
    enum fm_drop why = deliver(net, s, &h, (const unsigned char *)pkt + sizeof(h));
    s->rcv_nxt++;
    s->unacked++;
    /* Then whatever was waiting behind it. */
    struct held *hd;
    while (s->state != S_GONE && (hd = &s->held[s->rcv_nxt % FM_WIRE_SACK_BITS])->pkt) {
        struct fm_wire_hdr h2;
        memcpy(&h2, hd->pkt, sizeof(h2));
        enum fm_drop w2 = deliver(net, s, &h2, (unsigned char *)hd->pkt + sizeof(h2));
        if (w2 != FM_DROP_NONE)
            net->drops[w2]++;
        free(hd->pkt);
        hd->pkt = NULL;
        s->nheld--;
        s->rcv_nxt++;
        s->unacked++;
    }
    if (s->unacked >= ACK_EVERY)
        s->ack_now = 1;
    if (!s->t_ack_due)
        s->t_ack_due = 1; /* armed at the next output, with its clock */
    return why;
}

static size_t payload_size(uint8_t op)
{
    switch (op) {
    case FM_OP_HELLO:
    case FM_OP_HELLO_ACK: return sizeof(struct fm_wire_hello);
    case FM_OP_FLOW: return sizeof(struct fm_wire_flow);
    case FM_OP_DATA: return sizeof(struct fm_wire_data);
    case FM_OP_ACK: return sizeof(struct fm_wire_ack);
    case FM_OP_FLOW_END:
    case FM_OP_FLOW_STOP: return sizeof(struct fm_wire_flow_end);
    default: return 0;
    }
}

static enum fm_drop on_hello(struct fm_net *net, struct fm_session *s, int rail,
                             const struct fm_wire_hdr *h, const struct fm_wire_hello *hello,
                             const struct sockaddr_in *from)
{
    if (s->named && h->src_epoch != s->peer_epoch_named)
        return FM_DROP_STALE; /* another incarnation than its name says */
    if (s->state == S_GONE || (s->peer_epoch && s->peer_epoch != h->src_epoch))
        return FM_DROP_STALE; /* ranks do not come back */
    if (h->op == FM_OP_HELLO_ACK &&
        (h->dst_epoch != net->p.epoch || hello->nonce != s->hello_nonce || s->state == S_NEW))
        return FM_DROP_STALE;
    int first = !s->peer_epoch;
    if (first) {
        s->peer_epoch = h->src_epoch;
        s->rcv_nxt = hello->first_seq;
        s->rcv_known = 1;
    }
    /* The address comes from the first HELLO only: a replayed one from
     * elsewhere must not redirect the session. */
    if (!s->have_addr || (first && h->op == FM_OP_HELLO)) {
        s->rail[rail].addr = *from;
        s->rail[rail].up = 1;
        s->ctl_rail = (uint8_t)rail;
        s->have_addr = 1;
    }
    if (h->op == FM_OP_HELLO) {
        s->peer_nonce = hello->nonce;
        s->hello_ack_due = 1;
    }
    s->state = S_UP;
    mark_pending(net, s);
    return FM_DROP_NONE;
}

enum fm_drop fm_net_input(struct fm_net *net, void *pkt, size_t len, int rail,
                          const struct sockaddr_in *from, uint64_t now)
{
    if (rail < 0 || rail >= net->p.nrails)
        rail = 0;
    enum fm_drop why = fm_wire_check(pkt, len, net->job, net->domain, (uint32_t)net->p.rank,
                                     (uint32_t)net->p.size);
    struct fm_wire_hdr h;
    const unsigned char *pl = (const unsigned char *)pkt + sizeof(h);
    struct fm_session *s = NULL;
    if (why)
        goto drop;
    memcpy(&h, pkt, sizeof(h));
    if (h.len < payload_size(h.op) || (h.op == FM_OP_HELLO && h.dst_epoch != 0)) {
        why = FM_DROP_OPCODE;
        goto drop;
    }
    net->nc[FM_NC_RX_PACKETS]++;
    net->nc[FM_NC_RX_BYTES] += len;
    if (h.op == FM_OP_HELLO || h.op == FM_OP_HELLO_ACK) {
        struct fm_wire_hello hello;
        memcpy(&hello, pl, sizeof(hello));
        /* The MAC first: nothing is made for a request without the key. */
        int named = h.src_rank == FM_WIRE_NAMED;
        size_t extra = h.len - sizeof(hello);
        if (fm_wire_hello_mac(named ? net->domain_key : net->p.key, &h, &hello,
                              pl + sizeof(hello), extra) != hello.mac) {
            why = FM_DROP_AUTH;
            goto drop;
        }
        s = named ? named_session(net, h.src_epoch) : NULL;
        if (named && !s && h.op == FM_OP_HELLO && net->p.up.peer_named) {
            int peer = net->p.up.peer_named(net->p.up.core, pl + sizeof(hello), extra,
                                            h.src_epoch);
            s = peer >= net->p.size ? fm_session_get(net, peer) : NULL;
        } else if (!named) {
            s = h.op == FM_OP_HELLO ? fm_session_get(net, (int)h.src_rank) : net->sess[h.src_rank];
        }
        if (!s) {
            why = named ? FM_DROP_STALE : FM_DROP_NOSESSION;
            goto drop;
        }
        why = on_hello(net, s, rail, &h, &hello, from);
        if (why)
            goto drop;
        s->t_last_rx = now;
        fm_rail_heard(net, s, rail, h.rail, from, now);
        return FM_DROP_NONE;
    }
    s = h.src_rank == FM_WIRE_NAMED ? named_session(net, h.src_epoch) : net->sess[h.src_rank];
    if (!s) {
        why = FM_DROP_NOSESSION;
        goto drop;
    }
    if (s->state == S_GONE && s->bye_received && h.src_epoch == s->peer_epoch &&
        h.seq && fm_seq_lt(h.seq, s->rcv_nxt)) {
        /* A retransmission of what came before the peer's goodbye: our
         * acknowledgement was lost, send it again. */
        s->ack_now = 1;
        mark_pending(net, s);
        why = FM_DROP_DUPLICATE;
        goto drop;
    }
    if (s->state != S_UP) {
        why = s->state == S_GONE ? FM_DROP_STALE : FM_DROP_NOSESSION;
        goto drop;
    }
    /* dst_epoch 0: sent right after the HELLO, before its answer came. */
    if (h.src_epoch != s->peer_epoch || (h.dst_epoch != net->p.epoch && h.dst_epoch != 0)) {
        why = FM_DROP_STALE;
        goto drop;
    }
    s->t_last_rx = now;
    s->probed = 0;
    fm_rail_heard(net, s, rail, h.rail, from, now);
    if (h.flags & FM_HDR_ACK_VALID)
        fm_loss_on_ack(net, s, h.ack, NULL, 0, now);
    switch (h.op) {
    case FM_OP_ACK: {
        struct fm_wire_ack a;
        memcpy(&a, pl, sizeof(a));
        if (h.len != sizeof(a) + a.ncredit * sizeof(struct fm_wire_credit) ||
            !(h.flags & FM_HDR_ACK_VALID)) {
            why = FM_DROP_OPCODE;
            goto drop;
        }
        fm_loss_on_ack(net, s, h.ack, &a, (h.flags & FM_HDR_STATUS) != 0, now);
        struct fm_wire_credit c[FM_NET_MAX_CREDITS];
        int n = FM_MIN(a.ncredit, FM_NET_MAX_CREDITS);
        memcpy(c, pl + sizeof(a), sizeof(c[0]) * (size_t)n);
        fm_flow_credits(s, c, n);
        return FM_DROP_NONE;
    }
    case FM_OP_PING:
        /* Credits are sent once; an ACK that carried one may have been
         * lost, and a sender without credit sends nothing that would
         * bring it back. A PING asks for all of them again, on the rail it
         * came on (which it probes). */
        s->rail[rail].reply_due = 1;
        s->credit_all = 1;
        if (h.flags & FM_HDR_STATUS)
            s->status_due = 1;
        mark_pending(net, s);
        return FM_DROP_NONE;
    case FM_OP_DATA:
    case FM_OP_FLOW:
    case FM_OP_FLOW_END:
    case FM_OP_FLOW_STOP:
    case FM_OP_BYE:
        if ((h.op == FM_OP_FLOW && h.len != sizeof(struct fm_wire_flow)) ||
            ((h.op == FM_OP_FLOW_END || h.op == FM_OP_FLOW_STOP) &&
             h.len != sizeof(struct fm_wire_flow_end)) ||
            (h.op == FM_OP_BYE && h.len != 0)) {
            why = FM_DROP_OPCODE;
            goto drop;
        }
        why = on_sequenced(net, s, pkt, len);
        s->t_busy = now;
        mark_pending(net, s);
        if (why)
            goto drop;
        return FM_DROP_NONE;
    default:
        why = FM_DROP_OPCODE;
        goto drop;
    }
drop:
    net->drops[why]++;
    fm_debug("net", "dropped a %zu-byte packet: %s", len, fm_drop_names[why]);
    if ((why == FM_DROP_FOREIGN || why == FM_DROP_AUTH) && len >= sizeof(h)) {
        memcpy(&h, pkt, sizeof(h));
        if (h.op == FM_OP_HELLO && h.src_rank == FM_WIRE_NAMED)
            fm_log_limited(FM_LOG_ERROR, "net", 1,
                           "a process at %s:%u asked for a session under another domain key "
                           "(or before this one called fm_ep_name or fm_addr_insert), and is "
                           "refused: give both the same FM_KEY, or the same key file",
                           from ? inet_ntoa(from->sin_addr) : "?",
                           from ? ntohs(from->sin_port) : 0);
    }
    return why;
}

void fm_net_unreachable(struct fm_net *net, int rail, const struct sockaddr_in *from,
                        int refused, uint64_t now)
{
    if (rail < 0 || rail >= net->p.nrails)
        return;
    for (int i = 0; i < net->nall; i++) {
        struct fm_session *s = net->all[i];
        const struct sockaddr_in *a = &s->rail[rail].addr;
        if (!a->sin_family || a->sin_addr.s_addr != from->sin_addr.s_addr ||
            a->sin_port != from->sin_port || s->state == S_GONE)
            continue;
        if (!refused && fm_rail_next_usable(net, s, rail) != rail)
            fm_rail_down(net, s, rail, now);
        else
            session_gone(net, s, s->bye_sent ? FM_NET_PEER_LEFT : FM_NET_PEER_FAILED);
    }
}

void fm_net_set_rails_busy(struct fm_net *net, uint32_t mask) { net->rails_busy = mask; }

void fm_net_rail_counters(const struct fm_net *net, uint64_t tx_bytes[FM_RAILS_MAX])
{
    memcpy(tx_bytes, net->rail_tx, sizeof(net->rail_tx));
}

/* ---- sending ------------------------------------------------------------------ */

static void count_tx(struct fm_net *net, struct fm_pkt_out *p)
{
    net->nc[FM_NC_TX_PACKETS]++;
    net->nc[FM_NC_TX_BYTES] += sizeof(p->hdr) + p->sub_len + p->nbytes[0] + p->nbytes[1];
}

static void build_hello(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *p, int ack)
{
    hdr_init(net, s, p, ack ? FM_OP_HELLO_ACK : FM_OP_HELLO);
    if (!ack) {
        p->hdr.dst_epoch = 0;
        p->hdr.flags = 0;
        p->hdr.ack = 0;
    }
    struct fm_wire_hello *hl = &p->sub.hello.hello;
    memset(hl, 0, sizeof(*hl));
    hl->nonce = ack ? s->peer_nonce : s->hello_nonce;
    hl->first_seq = s->snd_una;
    /* A named HELLO introduces us: the peer may never have heard our name. */
    size_t extra = s->named && !ack ? net->card_len : 0;
    memcpy(p->sub.hello.card, net->card, extra);
    p->hdr.len = (uint16_t)(sizeof(*hl) + extra);
    hl->mac = fm_wire_hello_mac(s->named ? net->domain_key : net->p.key, &p->hdr, hl,
                                p->sub.hello.card, extra);
    p->sub_len = (uint16_t)(sizeof(*hl) + extra);
}

/* Fills p with the sequenced packet of table entry q. */
static void build_sequenced(struct fm_net *net, struct fm_session *s, uint32_t q,
                            struct fm_pkt_out *p)
{
    struct txent *e = &s->tx[q % FM_NET_TXWIN];
    hdr_init(net, s, p, e->op);
    p->hdr.seq = q;
    if (e->op == FM_OP_FLOW) {
        struct fm_txflow *f = s->txf[e->flow];
        p->sub.flow = (struct fm_wire_flow){.flow = f->id, .src_channel = f->src_channel,
                                            .dst_channel = f->dst_channel,
                                            .ring_size = (uint32_t)f->ring.size};
        p->sub_len = sizeof(p->sub.flow);
    } else if (e->op == FM_OP_FLOW_END || e->op == FM_OP_FLOW_STOP) {
        p->sub.end = (struct fm_wire_flow_end){.flow = e->flow};
        p->sub_len = sizeof(p->sub.end);
    } else if (e->op == FM_OP_DATA) {
        struct fm_txflow *f = s->txf[e->flow];
        p->sub.data = (struct fm_wire_data){.flow = f->id, .pos = e->pos};
        p->sub_len = sizeof(p->sub.data);
        uint64_t off = e->pos & (f->ring.size - 1);
        uint64_t first = FM_MIN((uint64_t)e->len, f->ring.size - off);
        p->bytes[0] = f->ring.data + off;
        p->nbytes[0] = (uint16_t)first;
        p->bytes[1] = f->ring.data;
        p->nbytes[1] = (uint16_t)(e->len - first);
    }
}

/* Builds the packet of entry q and sends it on the rail the policy picks. */
static void emit(struct fm_net *net, struct fm_session *s, uint32_t q, struct fm_pkt_out *p,
                 uint64_t now)
{
    struct txent *e = &s->tx[q % FM_NET_TXWIN];
    build_sequenced(net, s, q, p);
    s->t_busy = now;
    int r = fm_rail_pick(net, s);
    set_rail(s, p, r);
    e->rail = (uint8_t)r;
    if (e->op == FM_OP_DATA) {
        e->counted = 1;
        s->rail[r].inflight += e->len;
        net->rail_tx[r] += e->len;
    }
}

/* Takes a new sequence number for a packet of kind op. */
static uint32_t sequence(struct fm_session *s, uint8_t op, uint32_t flow, uint64_t pos,
                         uint32_t len, uint64_t now)
{
    uint32_t q = s->snd_nxt++;
    s->tx[q % FM_NET_TXWIN] = (struct txent){
        .t_sent = now, .pos = pos, .flow = flow, .len = len, .op = op};
    return q;
}

static int window_open(const struct fm_session *s)
{
    return s->snd_nxt - s->snd_una < FM_NET_TXWIN;
}

/* Finds how far a mirror holds complete records. */
static void scan_complete(struct fm_txflow *f, uint64_t limit)
{
    while (f->complete - f->sent < limit) {
        uint64_t h = fm_ring_peek(&f->ring, f->complete);
        if (!h)
            break;
        f->complete += FM_REC_SIZE(FM_REC_LEN(h));
    }
}

static void build_ack(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *p)
{
    hdr_init(net, s, p, FM_OP_ACK);
    struct fm_wire_ack *a = &p->sub.ack.ack;
    memset(a, 0, sizeof(*a));
    for (uint32_t i = 0; s->nheld && i < FM_WIRE_SACK_BITS; i++)
        if (s->held[(s->rcv_nxt + 1 + i) % FM_WIRE_SACK_BITS].pkt)
            a->sack[i / 64] |= 1ull << (i % 64);
    int n = 0;
    if (s->credit_due || s->credit_all) {
        int all = s->credit_all;
        s->credit_due = s->credit_all = 0;
        for (uint32_t i = 0; i < s->rxf_cap; i++) {
            struct fm_rxflow *f = s->rxf[i];
            if (!f)
                continue;
            uint64_t head = __atomic_load_n(&f->ctl.head, __ATOMIC_ACQUIRE);
            if (head == f->credited && !all)
                continue;
            if (n == FM_NET_MAX_CREDITS) {
                s->credit_due = 1; /* the rest in the next ACK */
                s->credit_all = (uint8_t)all;
                break;
            }
            p->sub.ack.credit[n++] = (struct fm_wire_credit){.flow = f->id, .head = head};
            f->credited = head;
        }
    }
    a->ncredit = (uint16_t)n;
    a->rails_busy = net->rails_busy;
    p->sub_len = (uint16_t)(sizeof(*a) + (size_t)n * sizeof(struct fm_wire_credit));
    s->ack_now = 0;
    s->unacked = 0;
    s->t_ack_due = 0;
    net->nc[FM_NC_ACKS]++;
}

/* Whether a flow has something not sent yet. */
static int has_new_data(struct fm_session *s)
{
    for (uint32_t i = 0; i < s->nlive; i++) {
        struct fm_txflow *f = s->live[i];
        scan_complete(f, f->ring.size);
        if (!f->announced || f->complete > f->sent || (f->ending && !f->end_sent))
            return 1;
    }
    return 0;
}

/* Fills packets for one session; returns how many. */
static int session_output(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts,
                          int max, int flush, uint64_t now)
{
    int n = 0;
    if (s->state == S_GONE) {
        /* Only the last acknowledgement for a peer that said goodbye. */
        if (s->bye_received && s->ack_now && max > 0) {
            build_ack(net, s, &pkts[n++]);
            s->t_last_tx = now;
        }
        return n;
    }
    if (s->state == S_NEW && s->nlive) {
        s->hello_nonce = rnd(net);
        s->state = S_HELLO_SENT;
        s->t_first_hello = now;
        s->hello_backoff = HELLO_RETRY_NS;
        s->t_hello = 0;
    }
    if (s->state == S_HELLO_SENT && now >= s->t_hello && n < max) {
        if (s->t_hello) /* a retry: perhaps the first rail is the broken one */
            s->ctl_rail = (uint8_t)fm_rail_next_usable(net, s, s->ctl_rail);
        build_hello(net, s, &pkts[n++], 0);
        s->t_hello = now + s->hello_backoff;
        s->hello_backoff = FM_MIN(s->hello_backoff * 2, net->p.timeout_ns / 4);
    }
    /* Data follows the HELLO without waiting for its answer (it carries
     * dst_epoch 0 until then): a message sent just before the program
     * blocks elsewhere still leaves, and a first exchange costs no extra
     * round trip. */
    if (s->state != S_UP && s->state != S_HELLO_SENT)
        return n;
    if (s->hello_ack_due && n < max) {
        build_hello(net, s, &pkts[n++], 1);
        s->hello_ack_due = 0;
    }
    /* Retransmissions first: they hold the receiver's window. */
    for (uint32_t q = s->snd_una; q != s->snd_nxt && n < max; q++) {
        struct txent *e = &s->tx[q % FM_NET_TXWIN];
        if (!e->due || !e->op)
            continue;
        emit(net, s, q, &pkts[n++], now);
        e->due = 0;
        e->retx++;
        e->t_sent = now;
    }
    /* rail_query: a burst from idle first asks for the peer's rail status
     * and waits for the answer, as seed 000 queried before each message. */
    int hold = 0;
    if (net->p.rail_query && net->p.nrails > 1 && !s->status_fresh &&
        s->snd_una == s->snd_nxt && has_new_data(s)) {
        hold = 1;
        if ((!s->t_status_asked || now - s->t_status_asked >= s->rto) && n < max) {
            hdr_init(net, s, &pkts[n], FM_OP_PING);
            pkts[n++].hdr.flags |= FM_HDR_STATUS;
            net->nc[FM_NC_PINGS]++;
            s->t_status_asked = now;
        }
    }
    /* New flows and new data, round-robin over the flows. */
    uint32_t nlive = hold ? 0 : s->nlive;
    for (uint32_t k = 0; k < nlive && n < max && window_open(s); k++) {
        struct fm_txflow *f = s->live[(s->next_live + k) % nlive];
        if (f->end_sent)
            continue;
        if (!f->announced) {
            uint32_t q = sequence(s, FM_OP_FLOW, f->id, 0, 0, now);
            emit(net, s, q, &pkts[n++], now);
            f->announced = 1;
        }
        scan_complete(f, f->ring.size);
        while (n < max && window_open(s) && f->complete > f->sent) {
            uint64_t len = FM_MIN(f->complete - f->sent, (uint64_t)net->p.payload);
            /* Gather small messages written in a burst while earlier ones are
             * in flight; the burst's end goes at the next flush. */
            if (len < net->p.payload && !flush && s->snd_una != s->snd_nxt && !f->ending &&
                __atomic_load_n(&f->burst, __ATOMIC_RELAXED)) {
                list_add(&net->gathering, &net->ngathering, &net->gathering_cap, s,
                         &s->gathering);
                break;
            }
            uint32_t q = sequence(s, FM_OP_DATA, f->id, f->sent, (uint32_t)len, now);
            emit(net, s, q, &pkts[n++], now);
            f->sent += len;
        }
        if (f->ending && f->complete == f->sent && n < max && window_open(s)) {
            f->end_seq = sequence(s, FM_OP_FLOW_END, f->id, 0, 0, now);
            emit(net, s, f->end_seq, &pkts[n++], now);
            f->end_sent = 1;
        }
    }
    /* Receiving flows whose endpoint closed ask their sender to stop. */
    for (uint32_t i = 0; s->nstops && i < s->rxf_cap && n < max && window_open(s); i++) {
        struct fm_rxflow *f = s->rxf[i];
        if (f && f->orphan && !f->ended && f->stop_due) {
            uint32_t q = sequence(s, FM_OP_FLOW_STOP, f->id, 0, 0, now);
            emit(net, s, q, &pkts[n++], now);
            f->stop_due = 0;
            s->nstops--;
        }
    }
    if (s->nlive)
        s->next_live = (s->next_live + 1) % s->nlive;
    if (s->bye_due && !s->bye_sent && n < max && window_open(s)) {
        int all_sent = 1;
        for (uint32_t i = 0; i < s->nlive; i++) {
            scan_complete(s->live[i], s->live[i]->ring.size);
            all_sent &= s->live[i]->complete == s->live[i]->sent;
        }
        if (all_sent) {
            uint32_t q = sequence(s, FM_OP_BYE, 0, 0, 0, now);
            emit(net, s, q, &pkts[n++], now);
            s->bye_sent = 1;
        }
    }
    /* An acknowledgement of its own: for gaps, credits, or after enough. */
    if (s->t_ack_due == 1)
        s->t_ack_due = now + net->p.ack_delay_ns;
    /* PINGs (rail probes, and requests for credit the peer may owe us) and
     * the ACKs that answer the peer's go on their rail. */
    for (int r = 0; r < net->p.nrails && n < max; r++) {
        struct sess_rail *sr = &s->rail[r];
        if (sr->ping_due) {
            hdr_init(net, s, &pkts[n], FM_OP_PING);
            set_rail(s, &pkts[n++], r);
            net->nc[FM_NC_PINGS]++;
            sr->ping_due = 0;
            sr->t_ping = now;
        }
        if (sr->reply_due && n < max) {
            build_ack(net, s, &pkts[n]);
            if (s->status_due) /* the answer to a rail status query */
                pkts[n].hdr.flags |= FM_HDR_STATUS;
            s->status_due = 0;
            set_rail(s, &pkts[n++], r);
            sr->reply_due = 0;
        }
    }
    /* (Not on flush: a reply about to be sent carries the acknowledgement.) */
    if (n < max && (s->ack_now || s->credit_due || (s->unacked && now >= s->t_ack_due)))
        build_ack(net, s, &pkts[n++]);
    if (n)
        s->t_last_tx = now;
    return n;
}

/* Two smoothed round trips and twice the peer's longest ACK delay (one
 * round trip can take that long when the receiver delays its ACK). */
static uint64_t probe_timeout(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t srtt = s->srtt ? s->srtt : net->p.rto_min_ns / 4;
    return 2 * srtt + 2 * net->p.ack_delay_ns;
}

/* Timers of one session: retransmission, heartbeat, liveness. */
static void session_timers(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    if (s->state == S_GONE)
        return;
    if (s->state == S_HELLO_SENT) {
        if (now - s->t_first_hello > net->p.timeout_ns)
            session_gone(net, s, FM_NET_PEER_FAILED);
        else if (now >= s->t_hello)
            mark_pending(net, s);
        return;
    }
    if (s->state != S_UP)
        return;
    if (s->t_last_rx && now - s->t_last_rx > net->p.timeout_ns) {
        fm_info("net", "rank %d silent for %llu ms", s->rank,
                (unsigned long long)((now - s->t_last_rx) / 1000000));
        session_gone(net, s, FM_NET_PEER_FAILED);
        return;
    }
    if (!s->t_last_rx)
        s->t_last_rx = now;
    if (net->p.nrails > 1)
        fm_rail_check(net, s, now);
    if (s->t_status_asked && now - s->t_status_asked >= s->rto)
        mark_pending(net, s); /* the status query or its answer was lost */
    if (s->snd_una != s->snd_nxt) {
        struct txent *e = &s->tx[s->snd_una % FM_NET_TXWIN];
        /* Tail loss probe (as TCP's TLP): no acknowledgement for two round
         * trips, maybe because the last packets of a burst were lost and
         * nothing after them can reveal it. Sending the last one again
         * brings an ACK whose selective part lets loss detection find the
         * holes, long before a timeout. */
        fm_loss_detect(net, s, now);
        uint64_t pto = probe_timeout(net, s);
        if (now - s->t_last_rx >= pto && now - e->t_sent >= pto && now - e->t_sent < s->rto &&
            !s->probed) {
            /* A hole resent once and still open: its copy was lost too,
             * and nothing sent later can tell. Otherwise probe the tail. */
            uint32_t q = e->retx ? s->snd_una : s->snd_nxt - 1;
            struct txent *t = &s->tx[q % FM_NET_TXWIN];
            if (t->op && !t->sacked && !t->due) {
                fm_rail_settle(s, t);
                t->due = 1;
                net->nc[FM_NC_RETX_PROBE]++;
                mark_pending(net, s);
            }
            s->probed = 1;
        }
        if (now - e->t_sent >= s->rto) {
            /* Timeout: resend the oldest packet, as TCP does. Resending the
             * whole window would, on a link slower than the sender (a
             * shaped rail), add copies of packets that are only queued,
             * lengthen the queue and collapse the stream. If more was lost,
             * each acknowledgement of a resent packet finds the next one
             * older than the timeout, so they go one per round trip, and
             * loss detection takes over as soon as later packets arrive. */
            for (uint32_t q = s->snd_una; q != s->snd_nxt; q++) {
                struct txent *t = &s->tx[q % FM_NET_TXWIN];
                if (t->op && !t->sacked && !t->due && now - t->t_sent >= s->rto) {
                    fm_rail_settle(s, t);
                    t->due = 1;
                    net->nc[FM_NC_RETX_TIMEOUT]++;
                    break;
                }
            }
            s->rto = FM_MIN(s->rto * 2, net->p.rto_max_ns);
            mark_pending(net, s);
        }
    }
    /* Everything sent is acknowledged, yet data waits for credit and the
     * peer has been quiet for a retransmission timeout: its credit may
     * have been lost. Ask again (backing off like a retransmission). */
    if (s->snd_una == s->snd_nxt && now - s->t_last_rx >= s->rto &&
        now - s->t_last_tx >= s->rto) {
        for (uint32_t i = 0; i < s->nlive; i++) {
            struct fm_txflow *f = s->live[i];
            if (f->sent > __atomic_load_n(&f->ctl.head, __ATOMIC_ACQUIRE)) {
                s->rail[s->ctl_rail].ping_due = 1;
                s->rto = FM_MIN(s->rto * 2, net->p.rto_max_ns);
                mark_pending(net, s);
                break;
            }
        }
    }
    uint64_t ping_every = net->p.timeout_ns / PINGS_PER_TIMEOUT;
    if (now - s->t_last_tx >= ping_every || (s->unacked && now >= s->t_ack_due) ||
        s->credit_due)
        mark_pending(net, s);
}

static uint64_t session_deadline(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t d = UINT64_MAX;
    if (s->state == S_HELLO_SENT)
        return FM_MIN(s->t_hello, s->t_first_hello + net->p.timeout_ns);
    if (s->state != S_UP)
        return d;
    if (s->snd_una != s->snd_nxt) {
        const struct txent *e = &s->tx[s->snd_una % FM_NET_TXWIN];
        d = FM_MIN(d, e->t_sent + FM_MIN(s->rto, probe_timeout(net, s)));
        uint64_t rtt = s->rail[e->rail].srtt ? s->rail[e->rail].srtt : s->srtt;
        if (e->t_sent <= s->rail[e->rail].rack_t) /* loss detection waits a round trip */
            d = FM_MIN(d, e->t_sent + rtt + FM_MAX(rtt / 4, (uint64_t)20000));
    } else if (s->nlive)
        d = FM_MIN(d, FM_MAX(s->t_last_tx, s->t_last_rx) + s->rto); /* credit check */
    if (s->unacked && s->t_ack_due > 1)
        d = FM_MIN(d, s->t_ack_due);
    d = FM_MIN(d, s->t_last_tx + net->p.timeout_ns / PINGS_PER_TIMEOUT);
    if (s->t_last_rx)
        d = FM_MIN(d, s->t_last_rx + net->p.timeout_ns + 1);
    if (s->t_status_asked)
        d = FM_MIN(d, s->t_status_asked + s->rto);
    return FM_MIN(d, fm_rail_deadline(net, s));
}

int fm_net_output(struct fm_net *net, struct fm_pkt_out *pkts, int max, int flush, uint64_t now)
{
    /* Back after a long time without progress (the program computed, or
     * waited on something else): our peers' heartbeats are only now being
     * read, and they may have been away as well. Silence while we were not
     * listening proves nothing, so every peer gets a full timeout again. */
    if (net->t_last_output && now - net->t_last_output > net->p.timeout_ns / PINGS_PER_TIMEOUT) {
        for (int i = 0; i < net->nall; i++) {
            struct fm_session *s = net->all[i];
            if (s->t_last_rx)
                s->t_last_rx = now;
            for (int r = 0; r < net->p.nrails; r++)
                if (s->rail[r].t_rx)
                    s->rail[r].t_rx = now;
        }
        net->next_timer = now;
    }
    net->t_last_output = now;
    if (now >= net->next_timer) {
        uint64_t next = UINT64_MAX;
        for (int i = 0; i < net->nall; i++) {
            session_timers(net, net->all[i], now);
            next = FM_MIN(next, session_deadline(net, net->all[i]));
        }
        net->next_timer = next;
    }
    if (flush) {
        for (int i = 0; i < net->ngathering; i++) {
            net->gathering[i]->gathering = 0;
            mark_pending(net, net->gathering[i]);
        }
        net->ngathering = 0;
    }
    int n = 0, i = 0;
    for (; i < net->npending && n < max; i++) {
        struct fm_session *s = net->pending[i];
        int k = session_output(net, s, pkts + n, max - n, flush, now);
        /* Heartbeat: an idle established session still says it lives. */
        if (k == 0 && s->state == S_UP && n < max &&
            now - s->t_last_tx >= net->p.timeout_ns / PINGS_PER_TIMEOUT) {
            hdr_init(net, s, &pkts[n], FM_OP_PING);
            net->nc[FM_NC_PINGS]++;
            s->t_last_tx = now;
            k = 1;
        }
        for (int j = 0; j < k; j++)
            count_tx(net, &pkts[n + j]);
        n += k;
        net->next_timer = FM_MIN(net->next_timer, session_deadline(net, s));
        if (n < max)
            s->pending = 0; /* done with it; it returns when there is more */
        else
            break;
    }
    /* Sessions not reached stay pending for the next call. */
    int keep = 0;
    for (int j = 0; j < net->npending; j++)
        if (net->pending[j]->pending)
            net->pending[keep++] = net->pending[j];
    net->npending = keep;
    return n;
}

void fm_net_kick(struct fm_net *net, struct fm_txflow *f) { mark_pending(net, f->s); }

uint64_t fm_net_deadline(const struct fm_net *net) { return net->next_timer; }

uint64_t fm_net_unacked(const struct fm_net *net)
{
    uint64_t n = 0;
    for (int i = 0; i < net->nall; i++) {
        struct fm_session *s = net->all[i];
        if (s->state != S_UP && s->state != S_HELLO_SENT)
            continue;
        n += s->snd_nxt - s->snd_una;
        for (uint32_t k = 0; k < s->nlive; k++) {
            struct fm_txflow *f = s->live[k];
            scan_complete(f, f->ring.size);
            n += f->complete - f->sent;
        }
        n += s->bye_due && !s->bye_sent;
    }
    return n;
}

void fm_net_bye(struct fm_net *net)
{
    for (int i = 0; i < net->nall; i++) {
        struct fm_session *s = net->all[i];
        if (s->state == S_UP) {
            s->bye_due = 1;
            mark_pending(net, s);
        }
    }
}

void fm_net_counters(const struct fm_net *net, uint64_t nc[FM_NC_COUNT],
                     uint64_t drops[FM_DROP_COUNT])
{
    memcpy(nc, net->nc, sizeof(net->nc));
    memcpy(drops, net->drops, sizeof(net->drops));
}

void fm_net_count_drop(struct fm_net *net, enum fm_drop why) { net->drops[why]++; }

int fm_pkt_seal(struct fm_pkt_out *p, struct iovec iov[4])
{
    if (p->raw) {
        iov[0] = (struct iovec){(void *)p->bytes[0], p->nbytes[0]};
        return 1;
    }
    int n = 0;
    iov[n++] = (struct iovec){&p->hdr, sizeof(p->hdr)};
    if (p->sub_len)
        iov[n++] = (struct iovec){&p->sub, p->sub_len};
    for (int i = 0; i < 2; i++)
        if (p->nbytes[i])
            iov[n++] = (struct iovec){(void *)p->bytes[i], p->nbytes[i]};
    fm_wire_seal(&p->hdr, iov + 1, n - 1);
    return n;
}
