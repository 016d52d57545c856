/*
 * Sessions: made on first contact (ranks by index, named peers also by the
 * epoch their name gives, all by the token they give their peer), the
 * handshake that fixes each side's epoch, first sequence number and token,
 * their timers (liveness, heartbeats, and those of the rails, of loss
 * recovery and of credit), their end.
 */
#include "session.h"

#include "core/log.h"

#include <string.h>

static uint32_t epoch_key(const struct fm_session *s) { return s->peer_epoch_named; }
static uint32_t token_key(const struct fm_session *s) { return s->token; }

/* The slot of key in t: the session's, or the empty one it would take. */
static size_t table_slot(const struct fm_net *net, const struct sess_table *t,
                         uint32_t (*key_of)(const struct fm_session *), uint32_t key)
{
    size_t i = (size_t)(key * 0x9E3779B1u) & (t->cap - 1);
    while (t->slot[i] && key_of(net->sess[t->slot[i] - 1]) != key)
        i = (i + 1) & (t->cap - 1);
    return i;
}

static struct fm_session *table_find(const struct fm_net *net, const struct sess_table *t,
                                     uint32_t (*key_of)(const struct fm_session *), uint32_t key)
{
    if (!t->cap)
        return NULL;
    int p = t->slot[table_slot(net, t, key_of, key)];
    return p ? net->sess[p - 1] : NULL;
}

/* Makes room in t for one more session, keeping it at most half full. */
static int table_reserve(struct fm_net *net, struct sess_table *t,
                         uint32_t (*key_of)(const struct fm_session *))
{
    if ((t->n + 1) * 2 <= t->cap)
        return 0;
    struct sess_table g = {.cap = t->cap ? t->cap * 2 : 64, .n = t->n};
    g.slot = calloc(g.cap, sizeof(*g.slot));
    if (!g.slot)
        return FM_ENOMEM;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slot[i])
            g.slot[table_slot(net, &g, key_of, key_of(net->sess[t->slot[i] - 1]))] = t->slot[i];
    free(t->slot);
    *t = g;
    return 0;
}

/* Adds s, whose key is not in t, after table_reserve. */
static void table_add(struct fm_net *net, struct sess_table *t,
                      uint32_t (*key_of)(const struct fm_session *), struct fm_session *s)
{
    t->slot[table_slot(net, t, key_of, key_of(s))] = s->rank + 1;
    t->n++;
}

struct fm_session *fm_session_named(const struct fm_net *net, uint32_t epoch)
{
    return table_find(net, &net->by_epoch, epoch_key, epoch);
}

struct fm_session *fm_session_by_token(const struct fm_net *net, uint32_t token)
{
    return table_find(net, &net->by_token, token_key, token);
}

/*
 * Finds s in the tables: by its token, and if named by its peer's epoch.
 * Named packets are found by the sender's epoch alone: two processes that
 * drew the same 32-bit epoch (about 1 in 4 billion pairs) cannot both have
 * a session here. The token is random, so that short DATA meant for
 * another incarnation of this process, or for another job on this port,
 * finds no session.
 */
static int sess_register(struct fm_net *net, struct fm_session *s)
{
    uint32_t epoch = s->named ? net->p.up.named_epoch(net->p.up.core, s->rank) : 0;
    if (s->named && fm_session_named(net, epoch)) {
        fm_error("net", "two peers have the epoch %08x: the later one is refused", epoch);
        return FM_EINVAL;
    }
    if (table_reserve(net, &net->by_token, token_key) ||
        (s->named && table_reserve(net, &net->by_epoch, epoch_key)))
        return FM_ENOMEM;
    do
        s->token = (uint32_t)rnd(net);
    while (!s->token || fm_session_by_token(net, s->token));
    table_add(net, &net->by_token, token_key, s);
    if (s->named) {
        s->peer_epoch_named = epoch;
        table_add(net, &net->by_epoch, epoch_key, s);
    }
    return 0;
}

/* Doubles the table of all sessions, and with it the room of every list a
 * session may be on (the pending and gathering lists, the timers' heap),
 * so that putting one on a list never fails. */
static int grow_all(struct fm_net *net)
{
    int cap = net->all_cap ? net->all_cap * 2 : 16;
    struct fm_session ***lists[] = {&net->all, &net->pending, &net->gathering};
    for (size_t i = 0; i < FM_ARRAY_LEN(lists); i++) {
        struct fm_session **a = realloc(*lists[i], sizeof(*a) * (size_t)cap);
        if (!a)
            return FM_ENOMEM; /* those grown already just have spare room */
        *lists[i] = a;
    }
    if (fm_timers_reserve(net, (uint32_t)cap))
        return FM_ENOMEM;
    net->all_cap = cap;
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
    if (net->nall == net->all_cap && grow_all(net) != 0)
        return NULL;
    s = calloc(1, sizeof(*s));
    if (s) {
        s->tx_cap = FM_NET_WIN_MIN;
        s->tx = calloc(s->tx_cap, sizeof(*s->tx));
    }
    if (!s || !s->tx) {
        free(s);
        return NULL;
    }
    s->net = net;
    s->rank = rank;
    s->named = named;
    s->snd_nxt = s->snd_una = (uint32_t)rnd(net);
    s->rto = net->p.rto_min_ns * 4;
    s->grant = fm_budget_unscheduled(net);
    net->sess[rank] = s;
    if (sess_register(net, s)) {
        net->sess[rank] = NULL;
        fm_session_free(s);
        return NULL;
    }
    net->all[net->nall++] = s;
    net->nc[FM_NC_SESSIONS]++;
    return s;
}

/* Lets go of the packets held after a gap. */
static void drop_held(struct fm_session *s)
{
    for (uint32_t i = 0; s->nheld && i < s->held_cap; i++) {
        if (s->held[i].pkt || s->held[i].placed)
            s->nheld--;
        free(s->held[i].pkt);
        if (s->held[i].made)
            fm_net_rxflow_free(s->held[i].made);
        s->held[i] = (struct held){0};
    }
}

void fm_session_free(struct fm_session *s)
{
    drop_held(s);
    free(s->held);
    fm_flows_free(s);
    free(s->tx);
    free(s);
}

void fm_session_gone(struct fm_net *net, struct fm_session *s, int state)
{
    if (s->state == S_GONE)
        return;
    s->state = S_GONE;
    for (uint32_t i = 0; i < s->nlive; i++)
        __atomic_fetch_add(&s->live[i]->gen, 1, __ATOMIC_RELEASE);
    drop_held(s);
    fm_flows_over(net, s, state == FM_NET_PEER_FAILED);
    /* What is in flight is given up, and the tables that grew with the
     * window go: a server whose peers come and go kept each one's (the
     * send table grows to FM_NET_WIN_MAX entries, 458 KB, for a peer that
     * streamed). The session itself stays, to tell a late packet from a
     * new peer. */
    s->snd_una = s->snd_nxt;
    s->t_count = 0;
    free(s->held);
    s->held = NULL;
    s->held_cap = 0;
    struct txent *small = s->tx_cap > FM_NET_WIN_MIN ? calloc(FM_NET_WIN_MIN, sizeof(*small))
                                                     : NULL;
    if (small) {
        free(s->tx);
        s->tx = small;
        s->tx_cap = FM_NET_WIN_MIN;
    }
    if (state == FM_NET_PEER_FAILED)
        net->nc[FM_NC_PEERS_LOST]++;
    fm_info("net", "session with rank %d ends: %s", s->rank,
            state == FM_NET_PEER_FAILED ? "lost" : "it left");
    net->p.up.peer_gone(net->p.up.core, s->rank, state);
}

enum fm_drop fm_session_on_hello(struct fm_net *net, struct fm_session *s, int rail,
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
        s->peer_token = hello->token; /* 0: the peer takes only full headers */
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
    /* The peer's bound on our flows' rings, before its first ACK: a first
     * flow larger than it allows would stay so as long as it lives. */
    if (!s->ring_max && fm_wire_ring_max_valid(hello->ring_max))
        s->ring_max = hello->ring_max;
    s->state = S_UP;
    mark_pending(net, s);
    return FM_DROP_NONE;
}

static void build_hello(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *p, int ack)
{
    fm_pkt_init(net, s, p, ack ? FM_OP_HELLO_ACK : FM_OP_HELLO);
    if (!ack) {
        p->hdr.dst_epoch = 0;
        p->hdr.flags = 0;
        p->hdr.ack = 0;
    }
    struct fm_wire_hello *hl = &p->sub.hello.hello;
    memset(hl, 0, sizeof(*hl));
    hl->nonce = ack ? s->peer_nonce : s->hello_nonce;
    hl->first_seq = s->snd_una;
    hl->token = s->token;
    hl->ring_max = fm_flow_ring_max(net);
    /* A named HELLO introduces us: the peer may never have heard our name. */
    size_t extra = s->named && !ack ? net->card_len : 0;
    memcpy(p->sub.hello.card, net->card, extra);
    p->hdr.len = (uint16_t)(sizeof(*hl) + extra);
    hl->mac = fm_wire_hello_mac(s->named ? net->domain_key : net->p.key, &p->hdr, hl,
                                p->sub.hello.card, extra);
    p->sub_len = (uint16_t)(sizeof(*hl) + extra);
}

/* The handshake's packets: our HELLO (and its retries) once there is
 * something to send, and the answer to the peer's. */
int fm_session_handshake(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts,
                         int max, uint64_t now)
{
    int n = 0;
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
    if ((s->state == S_UP || s->state == S_HELLO_SENT) && s->hello_ack_due && n < max) {
        build_hello(net, s, &pkts[n++], 1);
        s->hello_ack_due = 0;
    }
    return n;
}

void fm_session_amnesty(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    if (s->t_last_rx)
        s->t_last_rx = now;
    for (int r = 0; r < net->p.nrails; r++)
        if (s->rail[r].t_rx)
            s->rail[r].t_rx = now;
    /* A handshake starts over: it was judged from its first HELLO, and a
     * rank back from a long computation took its peer for lost at once,
     * without a retry (a review). */
    if (s->state == S_HELLO_SENT) {
        s->t_first_hello = s->t_hello = now;
        s->hello_backoff = HELLO_RETRY_NS;
    }
    fm_timer_set(net, s, now); /* its timers run now */
}

/* Timers of one session: retransmission, heartbeat, liveness. */
void fm_session_timers(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    if (s->state == S_GONE)
        return;
    if (s->state == S_HELLO_SENT) {
        if (now - s->t_first_hello > net->p.timeout_ns)
            fm_session_gone(net, s, FM_NET_PEER_FAILED);
        else if (now >= s->t_hello)
            mark_pending(net, s);
        return;
    }
    if (s->state != S_UP)
        return;
    if (s->t_last_rx && now - s->t_last_rx > net->p.timeout_ns) {
        fm_info("net", "rank %d silent for %llu ms", s->rank,
                (unsigned long long)((now - s->t_last_rx) / 1000000));
        fm_session_gone(net, s, FM_NET_PEER_FAILED);
        return;
    }
    if (!s->t_last_rx)
        s->t_last_rx = now;
    if (net->p.nrails > 1)
        fm_rail_check(net, s, now);
    fm_loss_timers(net, s, now);
    fm_flow_credit_check(net, s, now);
    fm_budget_probe(net, s, now);
    fm_flow_idle_check(net, s, now);
    uint64_t ping_every = fm_net_heartbeat_ns(net);
    if (now - s->t_last_tx >= ping_every ||
        ((s->unacked || s->credit_owed) && now >= s->t_ack_due) ||
        (s->t_ends_due > 1 && now >= s->t_ends_due) || s->credit_due)
        mark_pending(net, s);
}

uint64_t fm_session_deadline(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t d = UINT64_MAX;
    if (s->state == S_HELLO_SENT)
        return FM_MIN(s->t_hello, s->t_first_hello + net->p.timeout_ns + 1); /* as its timer */
    if (s->state != S_UP)
        return d;
    /* Only what a timer will act on: a deadline that stays past would
     * bring the session's timers back at every output, and keep fm_wait
     * polling instead of sleeping. */
    if (s->snd_una != s->snd_nxt)
        d = fm_loss_deadline(net, s);
    else if (fm_flow_credit_awaited(s))
        d = s->t_credit + s->rto; /* the credit check */
    else
        d = fm_budget_probe_deadline(s);
    if ((s->unacked || s->credit_owed) && s->t_ack_due > 1)
        d = FM_MIN(d, s->t_ack_due);
    if (s->t_ends_due > 1)
        d = FM_MIN(d, s->t_ends_due);
    d = FM_MIN(d, s->t_last_tx + net->p.timeout_ns / PINGS_PER_TIMEOUT);
    if (s->t_last_rx)
        d = FM_MIN(d, s->t_last_rx + net->p.timeout_ns + 1);
    return FM_MIN(d, fm_rail_deadline(net, s));
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
        /* A host or network unreachable may be our own link's, for a
         * while (a failed address resolution, a switch restarting): it takes
         * the rail out, and the last one is left to the session's timeout,
         * as TCP takes it for a soft error. A port unreachable is the peer
         * process gone. */
        if (refused)
            fm_session_gone(net, s, s->bye_sent ? FM_NET_PEER_LEFT : FM_NET_PEER_FAILED);
        else if (fm_rail_next_usable(net, s, rail) != rail)
            fm_rail_down(net, s, rail, now);
    }
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
