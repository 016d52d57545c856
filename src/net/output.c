/*
 * Sending: which packets each session has to send, in their order of
 * importance (handshake, retransmissions, new data, flow control, goodbye,
 * probes, acknowledgements), built over the mirror rings without copying;
 * the timers that run first; and the sealing of a packet for the wire.
 */
#include "session.h"

#include <stddef.h>
#include <string.h>

void fm_pkt_rail(const struct fm_session *s, struct fm_pkt_out *p, int r)
{
    p->rail = (uint8_t)r;
    p->hdr.rail = (uint8_t)r;
    p->to = s->rail[r].addr;
    p->side_ok = s->rail[r].heard;
}

void fm_pkt_init(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *p, uint8_t op)
{
    memset(&p->hdr, 0, sizeof(p->hdr));
    p->hdr.version = FM_WIRE_VERSION;
    p->hdr.op = op;
    if (op == FM_OP_DATA)
        s->rx_since_tx = 0;
    p->hdr.job = s->named ? net->domain : net->job;
    p->hdr.src_rank = s->named ? FM_WIRE_NAMED : (uint32_t)net->p.rank;
    p->hdr.dst_rank = s->named ? FM_WIRE_NAMED : (uint32_t)s->rank;
    p->hdr.src_epoch = net->p.epoch;
    p->hdr.dst_epoch = s->peer_epoch;
    /* Not on a HELLO or HELLO_ACK: the handshake's receiver takes no
     * acknowledgement from them, and a first message, acknowledged only
     * there, waited for its retransmission timeout. */
    if (s->rcv_known && op != FM_OP_HELLO && op != FM_OP_HELLO_ACK) {
        if ((s->ack_now || s->unacked) && op != FM_OP_ACK && fm_budget_news(net, s))
            s->grant_due = 1;
        p->hdr.flags |= FM_HDR_ACK_VALID;
        p->hdr.ack = s->rcv_nxt;
        /* Riding on this packet, the acknowledgement needs no packet of its
         * own unless the peer must learn of a gap. */
        s->unacked = 0;
        s->ack_soon = 0;
        if (op != FM_OP_ACK)
            s->echo_due = 0; /* what came is answered here: a later ACK names nothing */
        if (!s->nheld)
            s->ack_now = 0;
        ack_timer_settle(s);
    }
    p->sub_len = 0;
    p->raw = 0;
    p->token = 0;
    p->nbytes[0] = p->nbytes[1] = 0;
    p->rank = s->rank;
    fm_pkt_rail(s, p, s->ctl_rail);
}

static void count_tx(struct fm_net *net, struct fm_pkt_out *p)
{
    net->nc[FM_NC_TX_PACKETS]++;
    net->nc[FM_NC_TX_BYTES] += fm_pkt_len(p);
}

/* Fills p with the sequenced packet of table entry q. */
static void build_sequenced(struct fm_net *net, struct fm_session *s, uint32_t q,
                            struct fm_pkt_out *p)
{
    struct txent *e = txent_at(s, q);
    fm_pkt_init(net, s, p, e->op);
    p->hdr.seq = q;
    if (e->op == FM_OP_FLOW) {
        struct fm_txflow *f = s->txf[e->flow];
        p->sub.flow = (struct fm_wire_flow){.flow = f->id, .src_channel = f->src_channel,
                                            .dst_channel = f->dst_channel,
                                            .ring_size = (uint32_t)f->ring.size};
        p->sub_len = sizeof(p->sub.flow);
    } else if (e->op == FM_OP_FLOW_END || e->op == FM_OP_FLOW_STOP) {
        /* A FLOW_STOP names its FLOW, kept in the entry's pos. */
        p->sub.end = (struct fm_wire_flow_end){.flow = e->flow, .flow_seq = (uint32_t)e->pos};
        p->sub_len = sizeof(p->sub.end);
    } else if (e->op == FM_OP_DATA) {
        struct fm_txflow *f = s->txf[e->flow];
        p->sub.data = (struct fm_wire_data){.flow = f->id, .pos = e->pos};
        p->sub_len = sizeof(p->sub.data);
        if (e->alone)
            p->hdr.flags |= FM_HDR_ALONE;
        uint64_t off = e->pos & (f->ring.size - 1);
        uint64_t first = FM_MIN((uint64_t)e->len, f->ring.size - off);
        p->bytes[0] = f->ring.data + off;
        p->nbytes[0] = (uint16_t)first;
        p->bytes[1] = f->ring.data;
        p->nbytes[1] = (uint16_t)(e->len - first);
        /* A credit needs the full header: it rides where that fits. */
        if (s->credit_owed && e->len <= net->p.payload)
            fm_flow_credit_ride(s, p);
        if (!(p->hdr.flags & FM_HDR_CREDIT))
            p->token = s->peer_token;
    }
}

/* Builds the packet of entry q and sends it on the rail the policy picks. */
static void emit(struct fm_net *net, struct fm_session *s, uint32_t q, struct fm_pkt_out *p,
                 uint64_t now)
{
    struct txent *e = txent_at(s, q);
    build_sequenced(net, s, q, p);
    s->t_busy = now;
    int r = fm_rail_pick(net, s);
    fm_pkt_rail(s, p, r);
    e->rail = (uint8_t)r;
    if (e->op == FM_OP_DATA) {
        fm_rail_sent(net, &s->rail[r], e, now);
        net->rail_tx[r] += e->len;
    }
}

/* Takes a new sequence number for a packet of kind op. */
static uint32_t sequence(struct fm_session *s, uint8_t op, uint32_t flow, uint64_t pos,
                         uint32_t len, uint64_t now)
{
    uint32_t q = s->snd_nxt++;
    *txent_at(s, q) = (struct txent){
        .t_sent = now, .pos = pos, .flow = flow, .len = len, .op = op};
    fm_loss_sent(s, q);
    return q;
}

/* Whether another sequenced packet may go. The table of packets in flight
 * doubles as the window fills: to FM_NET_WIN_SMALL packets of any size,
 * and beyond, up to FM_NET_WIN_MAX, while they are mostly full ones (a
 * window that large is for bulk data: as many small packets would only
 * flood the peer's socket). */
static int window_open(struct fm_net *net, struct fm_session *s)
{
    if (s->snd_nxt - s->snd_una < s->tx_cap)
        return 1;
    if (s->tx_cap >= FM_NET_WIN_MAX)
        return 0;
    if (s->tx_cap >= FM_NET_WIN_SMALL) {
        if (fm_session_inflight(net, s) < (uint64_t)s->tx_cap * net->p.payload / 2)
            return 0;
    }
    uint32_t cap = s->tx_cap * 2;
    struct txent *t = calloc(cap, sizeof(*t));
    if (!t)
        return 0;
    for (uint32_t q = s->snd_una; q != s->snd_nxt; q++)
        t[q & (cap - 1)] = *txent_at(s, q);
    free(s->tx);
    s->tx = t;
    s->tx_cap = cap;
    return 1;
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

/* The packets held after the first gap, as ranges, lowest first. */
static int sack_ranges(const struct fm_session *s, struct fm_wire_sack *r)
{
    int n = 0;
    uint32_t seen = 0;
    for (uint32_t q = s->rcv_nxt + 1; seen < s->nheld && q - s->rcv_nxt <= s->held_cap; q++) {
        if (!held_at(s, q)->pkt && !held_at(s, q)->placed)
            continue;
        seen++;
        if (n && r[n - 1].first + r[n - 1].count == q)
            r[n - 1].count++;
        else if (n == FM_WIRE_SACK_MAX)
            break;
        else
            r[n++] = (struct fm_wire_sack){.first = q, .count = 1};
    }
    return n;
}

static void build_ack(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *p)
{
    fm_pkt_init(net, s, p, FM_OP_ACK);
    struct fm_wire_ack *a = &p->sub.ack.ack;
    memset(a, 0, sizeof(*a));
    struct fm_wire_credit credit[FM_NET_MAX_CREDITS];
    int n = 0;
    if (s->credit_due || s->credit_owed || s->credit_round) {
        uint32_t round = FM_MIN(s->credit_round, s->rxf_cap);
        s->credit_due = s->credit_owed = 0;
        s->credit_round = 0;
        /* Every flow's credit goes again from where the last ACK's list
         * ended, and the request ends once round: started from slot 0 each
         * time, past FM_NET_MAX_CREDITS flows the same first ones went in
         * every ACK, the request never ended, and a later flow's new
         * credit never went (its sender stalled for good, a review). The
         * round is counted in slots: when each ACK looked at every slot
         * from where the last stopped, past 2 x FM_NET_MAX_CREDITS flows
         * no ACK ever reached the end, and one PING brought ACKs without
         * end (a process answering a peer's heartbeat sent nothing else,
         * and its other peers took it for lost). Outside the round's slots
         * a flow goes only with new credit. */
        uint32_t start = round ? s->credit_next % s->rxf_cap : 0;
        for (uint32_t k = 0; k < s->rxf_cap; k++) {
            uint32_t i = start + k < s->rxf_cap ? start + k : start + k - s->rxf_cap;
            struct fm_rxflow *f = s->rxf[i];
            if (!f)
                continue;
            uint64_t head = __atomic_load_n(&f->ctl.head, __ATOMIC_ACQUIRE);
            if (head == f->credited && k >= round)
                continue;
            if (n == FM_NET_MAX_CREDITS) {
                s->credit_due = 1; /* the rest in the next ACK */
                s->credit_round = round - FM_MIN(k, round);
                s->credit_next = i;
                break;
            }
            credit[n++] = (struct fm_wire_credit){.flow = f->id, .head = head};
            f->credited = head;
        }
    }
    struct fm_wire_sack sack[FM_WIRE_SACK_MAX];
    int nsack = sack_ranges(s, sack);
    a->ncredit = (uint16_t)n;
    a->nsack = (uint16_t)nsack;
    a->grant = fm_budget_grant(net, s);
    fm_budget_granted(net, s, a->grant);
    s->grant_due = 0;
    s->grant_told = 1;
    a->ring_max = fm_flow_ring_max(net);
    a->rails_busy = net->rails_busy;
    memcpy(p->sub.ack.tail, credit, sizeof(credit[0]) * (size_t)n);
    memcpy(p->sub.ack.tail + sizeof(credit[0]) * (size_t)n, sack,
           sizeof(sack[0]) * (size_t)nsack);
    p->sub_len = (uint16_t)(sizeof(*a) + sizeof(credit[0]) * (size_t)n +
                            sizeof(sack[0]) * (size_t)nsack);
    if (s->echo_due) {
        p->hdr.seq = s->echo_seq;
        p->hdr.flags |= FM_HDR_ECHO;
        s->echo_due = 0;
    }
    s->ack_now = 0;
    s->ack_soon = 0;
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

/* Whether len more bytes of DATA may go now: under the peer's grant
 * (budget.c; last: they are all their flow has to send) and our
 * congestion window (cwnd.c). */
static int may_send(const struct fm_net *net, const struct fm_session *s, uint64_t len, int last)
{
    return fm_budget_allows(net, s, len, last) &&
           fm_cwnd_allows(s, s->cwnd ? fm_session_inflight(net, s) : 0, len);
}

/* Retransmissions first: they hold the receiver's window. The window is
 * walked only after a packet was marked due: a stream's output runs at
 * every send and every read of the sockets, and its window holds hundreds
 * of packets. */
static int retransmit(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts, int max,
                      uint64_t now)
{
    if (!s->due_marked)
        return 0;
    int n = 0, exempt = 0;
    uint32_t q = s->snd_una;
    for (; q != s->snd_nxt && n < max; q++) {
        struct txent *e = txent_at(s, q);
        if (!e->due || !e->op)
            continue;
        /* Under the receiver's budget and our window like new data: a
         * sender waiting for its turn resends nothing until then, but for
         * the oldest packet (the timeout's, one per timeout): packets lost
         * in a burst still count in flight until found lost, and would
         * hold the grant. And but for the holes below a full list of the
         * peer's ranges: above it, what counts in flight was mostly
         * delivered, and with the window cut to its floor only the lowest
         * hole went, one a round trip (a 4 MiB stream at 15 % loss each
         * way took 300-400 ms of engine_test's clock instead of 10-20):
         * they go past the window (not the grant), FM_WIRE_SACK_MAX at a
         * time. */
        if (e->op == FM_OP_DATA && q != s->snd_una && !may_send(net, s, e->len, 0)) {
            if (!s->sack_cut || !fm_sack_listed(s, q) || exempt == FM_WIRE_SACK_MAX ||
                !fm_budget_allows(net, s, e->len, 0))
                break;
            exempt++;
        }
        emit(net, s, q, &pkts[n++], now);
        e->due = 0;
        e->retx += e->retx < UINT8_MAX; /* 0 would mean never resent */
        e->t_sent = now;
        fm_loss_resent(s, q);
    }
    if (q == s->snd_nxt)
        s->due_marked = 0;
    return n;
}

/* rail_query: a burst from idle first asks for the peer's rail status and
 * waits for the answer, as seed 000 queried before each message. Sets
 * *hold while new data must wait. */
static int status_query(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts,
                        int max, uint64_t now, int *hold)
{
    *hold = net->p.rail_query && net->p.nrails > 1 && !s->status_fresh &&
            s->snd_una == s->snd_nxt && has_new_data(s);
    if (!*hold)
        s->t_status_asked = 0; /* nothing waits for the answer: no deadline */
    if (!*hold || max < 1 || (s->t_status_asked && now - s->t_status_asked < s->rto))
        return 0;
    fm_pkt_init(net, s, &pkts[0], FM_OP_PING);
    pkts[0].hdr.flags |= FM_HDR_STATUS;
    net->nc[FM_NC_PINGS]++;
    s->t_status_asked = now;
    return 1;
}

/* Whether an earlier flow of f's channels is still to be announced: the
 * receiver reads a sender's flows in the order their FLOW packets came. */
static int announce_waits(const struct fm_session *s, const struct fm_txflow *f)
{
    for (uint32_t i = 0; i < s->nlive; i++) {
        const struct fm_txflow *g = s->live[i];
        if (!g->announced && g->src_channel == f->src_channel &&
            g->dst_channel == f->dst_channel && (int32_t)(g->birth - f->birth) < 0)
            return 1;
    }
    return 0;
}

/* The data one packet to s carries at most: more once the peer's token
 * lets it go under the short header. */
static uint32_t data_room(const struct fm_net *net, const struct fm_session *s)
{
    return net->p.payload + (s->peer_token ? (uint32_t)FM_WIRE_SHORT_SAVING : 0);
}

/* Sequences and builds f's FLOW_END in p. */
static int flow_end(struct fm_net *net, struct fm_session *s, struct fm_txflow *f,
                    struct fm_pkt_out *p, uint64_t now)
{
    f->end_seq = sequence(s, FM_OP_FLOW_END, f->id, 0, 0, now);
    emit(net, s, f->end_seq, p, now);
    f->end_sent = 1;
    return 1;
}

/* No packets but small ones ahead of DATA in this output (see first_cut). */
#define NO_LEAD UINT32_MAX

/*
 * The first DATA after `lead` bytes of small packets (a FLOW, stops and
 * ends) for the same datagram, when they and a full packet of data would
 * not fit one: cut so that together they are exactly a full packet, which
 * the link then sends as the first segment of the GSO send of the data
 * after it (udp.c) instead of a datagram of its own. len: the data a
 * packet takes; returns the cut length, or len.
 */
static uint64_t first_cut(const struct fm_net *net, const struct fm_session *s, uint32_t lead,
                          uint64_t len)
{
    if (lead == 0 || lead == NO_LEAD)
        return len;
    /* A credit rides on a DATA shorter than a packet, under the full header. */
    size_t hdr = s->peer_token && !s->credit_owed ? sizeof(struct fm_wire_short)
                                                   : sizeof(struct fm_wire_hdr);
    size_t full = sizeof(struct fm_wire_hdr) + sizeof(struct fm_wire_data) + net->p.payload;
    size_t used = lead + hdr + sizeof(struct fm_wire_data);
    if (used + len <= full || used + 8 > full || (full - used) & 7)
        return len;
    return full - used;
}

/*
 * Whether a flow's data written in a burst, while earlier packets are in
 * flight, waits for more, `emitted` packets into this output: a packet that
 * is not full, and at the start of a datagram (gather_packets) what does
 * not fill one. A send call costs about as much per datagram whatever it
 * carries (a 16 KiB one 3.7 us, a 64 KiB one 6-7 us), and a stream of
 * 16 KiB messages went a message a call. Gathered, 64 messages in flight
 * moved 2.4x the bytes at 4 KiB, 1.5x at 16 KiB; MsgRate of 8 B 1.3x.
 * What waits goes with the next message that fills it, once what is in
 * flight is acknowledged, or at the next call that might wait (a flush):
 * a burst's end waits for the program's next call into the library, as a
 * short message always did (FM_NET_GATHER_US=0 ends bursts, and this).
 * Not while the peer's grant paces the session (budget.c).
 */
static int gathers(const struct fm_net *net, const struct fm_session *s, uint32_t room,
                   uint64_t avail, uint32_t emitted)
{
    if (avail < room)
        return 1;
    uint32_t per = net->p.gather_packets;
    return per > 1 && !s->grant && emitted % per == 0 && avail < (uint64_t)room * per;
}

/* One pass of new_data over the live flows, from pkts[n]; returns the new
 * n. gather: a packet that is not full may wait (session_output);
 * *waited: a flow waited for an earlier one; *announced: a FLOW went;
 * *lead: bytes of small packets ahead in this output (first_cut). */
static int new_data_pass(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts,
                         int n, int max, int gather, uint64_t now, int *waited, int *announced,
                         uint32_t *lead)
{
    uint32_t nlive = s->nlive;
    for (uint32_t k = 0; k < nlive && n < max && window_open(net, s); k++) {
        struct fm_txflow *f = s->live[(s->next_live + k) % nlive];
        if (f->end_sent)
            continue;
        if (!f->announced) {
            if (announce_waits(s, f)) {
                *waited = 1;
                continue;
            }
            uint32_t q = sequence(s, FM_OP_FLOW, f->id, 0, 0, now);
            f->flow_seq = f->credit_seq = q;
            emit(net, s, q, &pkts[n], now);
            if (*lead != NO_LEAD)
                *lead += (uint32_t)fm_pkt_len(&pkts[n]);
            n++;
            f->announced = 1;
            *announced = 1;
        }
        scan_complete(f, f->ring.size);
        uint32_t room = data_room(net, s), emitted = 0;
        while (n < max && window_open(net, s) && f->complete > f->sent) {
            uint64_t avail = f->complete - f->sent, len = FM_MIN(avail, (uint64_t)room);
            if (!may_send(net, s, len, len == avail))
                break; /* until an ACK returns some of the grant or the window */
            if (gather && !f->ending && __atomic_load_n(&f->burst, __ATOMIC_RELAXED) &&
                gathers(net, s, room, avail, emitted)) {
                list_add(net->gathering, &net->ngathering, s, &s->gathering);
                break;
            }
            len = first_cut(net, s, *lead, len);
            *lead = NO_LEAD;
            uint32_t q = sequence(s, FM_OP_DATA, f->id, f->sent, (uint32_t)len, now);
            emit(net, s, q, &pkts[n++], now);
            f->sent += len;
            emitted++;
        }
        if (emitted)
            s->t_credit = now; /* its consumption will bring credit */
        if (f->ending && !f->stopped && f->complete == f->sent && n < max &&
            window_open(net, s)) {
            n += flow_end(net, s, f, &pkts[n], now);
            if (*lead != NO_LEAD)
                *lead += (uint32_t)fm_pkt_len(&pkts[n - 1]);
        }
    }
    return n;
}

/* New flows and new data, round-robin over the flows, and the ends of
 * flows whose data has all gone. A pass repeats while a flow waited for an
 * earlier one that the pass announced. */
static int new_data(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts, int max,
                    int gather, uint64_t now, uint32_t lead)
{
    int n = 0, waited = 1, announced = 1;
    while (waited && announced && n < max) {
        waited = announced = 0;
        n = new_data_pass(net, s, pkts, n, max, gather, now, &waited, &announced, &lead);
    }
    return n;
}

/* The bytes of pkts[0..n) if they may share a datagram with DATA
 * (first_cut): neither DATA nor a handshake or PING, which leave by
 * another socket; else NO_LEAD. */
static uint32_t small_lead(const struct fm_pkt_out *pkts, int n)
{
    uint32_t lead = 0;
    for (int i = 0; i < n; i++) {
        uint8_t op = pkts[i].hdr.op;
        if (op == FM_OP_DATA || op == FM_OP_HELLO || op == FM_OP_HELLO_ACK || op == FM_OP_PING)
            return NO_LEAD;
        lead += (uint32_t)fm_pkt_len(&pkts[i]);
    }
    return lead;
}

/* Receiving flows whose endpoint closed ask their sender to stop. */
static int flow_stops(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts, int max,
                      uint64_t now)
{
    int n = 0;
    if (s->stops_lost)
        fm_flow_stops_rescan(s);
    while (s->nstops && n < max && window_open(net, s)) {
        uint32_t id = s->stops[--s->nstops];
        struct fm_rxflow *f = id < s->rxf_cap ? s->rxf[id] : NULL;
        if (!f || !f->orphan || f->ended || !f->stop_due)
            continue; /* it ended meanwhile */
        uint32_t q = sequence(s, FM_OP_FLOW_STOP, f->id, f->flow_seq, 0, now);
        emit(net, s, q, &pkts[n++], now);
        f->stop_due = 0;
    }
    return n;
}

/*
 * The FLOW_ENDs of flows the receiver stopped (its endpoint closed): no one
 * waits for them, so they ride with the session's next packets, the
 * program's reply or the delayed ACK, instead of a datagram of their own on
 * the way of that reply (in a connection per message, the server's end of
 * the last connection went just before its answer to the next). By
 * t_ends_due at the latest.
 */
static int stopped_ends(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts,
                        int max, uint64_t now)
{
    int n = 0, waiting = 0;
    for (uint32_t i = 0; i < s->nlive; i++) {
        struct fm_txflow *f = s->live[i];
        if (!f->stopped || f->end_sent)
            continue;
        scan_complete(f, f->ring.size);
        if (f->complete == f->sent && n < max && window_open(net, s))
            n += flow_end(net, s, f, &pkts[n], now);
        else
            waiting = 1;
    }
    if (!waiting)
        s->t_ends_due = 0;
    else if (now >= s->t_ends_due) /* data, the window or a grant holds them: they go */
        s->t_ends_due = now + FM_MAX(net->p.ack_delay_ns, s->rto); /* with what moves those */
    return n;
}

/* Whether a flow the receiver did not stop has a FLOW or data to send. */
static int data_waits(struct fm_session *s)
{
    for (uint32_t i = 0; i < s->nlive; i++) {
        struct fm_txflow *f = s->live[i];
        scan_complete(f, f->ring.size);
        if (!f->stopped && (!f->announced || f->complete > f->sent))
            return 1;
    }
    return 0;
}

/* Our goodbye, once every flow's data has gone before it. */
static int bye(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts, int max,
               uint64_t now)
{
    if (!s->bye_due || s->bye_sent || max < 1 || !window_open(net, s))
        return 0;
    for (uint32_t i = 0; i < s->nlive; i++) {
        scan_complete(s->live[i], s->live[i]->ring.size);
        if (s->live[i]->complete != s->live[i]->sent)
            return 0;
    }
    uint32_t q = sequence(s, FM_OP_BYE, 0, 0, 0, now);
    emit(net, s, q, &pkts[0], now);
    s->bye_sent = 1;
    return 1;
}

/* PINGs (rail probes, and requests for credit the peer may owe us) and the
 * ACKs that answer the peer's go on their rail. */
static int rail_probes(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts, int max,
                       uint64_t now)
{
    int n = 0;
    for (int r = 0; r < net->p.nrails && n < max; r++) {
        struct sess_rail *sr = &s->rail[r];
        if (sr->ping_due) {
            fm_pkt_init(net, s, &pkts[n], FM_OP_PING);
            fm_pkt_rail(s, &pkts[n++], r);
            net->nc[FM_NC_PINGS]++;
            sr->ping_due = 0;
            sr->t_ping = now;
        }
        if (sr->reply_due && n < max) {
            build_ack(net, s, &pkts[n]);
            if (s->status_due) /* the answer to a rail status query */
                pkts[n].hdr.flags |= FM_HDR_STATUS;
            s->status_due = 0;
            fm_pkt_rail(s, &pkts[n++], r);
            sr->reply_due = 0;
        }
    }
    return n;
}

/* Whether the session's acknowledgement goes now, in a packet of its own if
 * nothing else carries it. */
static int ack_goes(const struct fm_session *s, int ack_waits, uint64_t now)
{
    return s->ack_now || s->credit_due || s->grant_due || (s->ack_soon && !ack_waits) ||
           ((s->unacked || s->credit_owed) && now >= s->t_ack_due);
}

/* Fills packets for one session; returns how many, and in *again whether
 * it wants the next output as well. */
static int session_output(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts,
                          int max, int flush, uint64_t now, int *again)
{
    int n = 0;
    *again = 0;
    /* Short packets may wait for more only behind packets that left before
     * this output, whose acknowledgements bring the next one: not behind
     * the head of their own message (a 2 KiB message's tail waited for the
     * next flush, a send call of its own, in a quarter of a ping-pong's
     * exchanges). */
    int idle = s->snd_una == s->snd_nxt, gather = !flush && !idle;
    if (s->state == S_GONE) {
        /* Only the last acknowledgement for a peer that said goodbye. */
        if (s->bye_received && s->ack_now && max > 0) {
            build_ack(net, s, &pkts[n++]);
            s->t_last_tx = now;
        }
        return n;
    }
    n += fm_session_handshake(net, s, pkts, max, now);
    /* Data follows the HELLO without waiting for its answer (it carries
     * dst_epoch 0 until then): a message sent just before the program
     * blocks elsewhere still leaves, and a first exchange costs no extra
     * round trip. */
    if (s->state != S_UP && s->state != S_HELLO_SENT)
        return n;
    n += retransmit(net, s, pkts + n, max - n, now);
    int hold;
    n += status_query(net, s, pkts + n, max - n, now, &hold);
    /* Flows' stops and ends go ahead of new data: small packets that share
     * its first datagram, where after it they would take one of their own. */
    n += flow_stops(net, s, pkts + n, max - n, now);
    if (s->t_ends_due == 1)
        s->t_ends_due = now + net->p.ack_delay_ns;
    if (s->t_ends_due && !hold && data_waits(s))
        n += stopped_ends(net, s, pkts + n, max - n, now);
    if (!hold) {
        /* Alone: from idle, and all the session had to send (a request or
         * a reply). A sender held back by its grant or window, sending a
         * packet at a time from idle, is not alone: the receiver's budget
         * counts it as a sender (budget.c). */
        int first = n;
        n += new_data(net, s, pkts + n, max - n, gather, now, small_lead(pkts, n));
        int alone = idle && n > first && !has_new_data(s);
        for (int i = first; alone && i < n; i++) {
            if (pkts[i].hdr.op == FM_OP_DATA) {
                pkts[i].hdr.flags |= FM_HDR_ALONE;
                txent_at(s, pkts[i].hdr.seq)->alone = 1;
            }
        }
    }
    if (s->nlive)
        s->next_live = (s->next_live + 1) % s->nlive;
    /* An acknowledgement of its own: for gaps, credits, or after enough.
     * (Not on flush: a reply about to be sent carries the acknowledgement.)
     * An ACK that is only soon waits one more output while its data is
     * fresh or its message incomplete: the session stays pending for it. */
    if (s->t_ack_due == 1)
        s->t_ack_due = now + net->p.ack_delay_ns;
    int ack_waits = s->ack_soon && (s->rx_fresh || s->rx_open);
    s->rx_fresh = 0;
    if (s->t_ends_due && (n || s->bye_due || now >= s->t_ends_due || ack_goes(s, ack_waits, now)))
        n += stopped_ends(net, s, pkts + n, max - n, now);
    n += bye(net, s, pkts + n, max - n, now);
    n += rail_probes(net, s, pkts + n, max - n, now);
    /* Credits beyond one ACK's list go in the next ones at once: left for a
     * later output, they waited for the session's next timer or packet (a
     * PING asking for 512 flows' credits got 3 ACKs, a review). */
    while (n < max && ack_goes(s, ack_waits, now))
        build_ack(net, s, &pkts[n++]);
    *again = s->ack_soon || s->credit_due;
    if (n)
        s->t_last_tx = now;
    return n;
}

int fm_net_output(struct fm_net *net, struct fm_pkt_out *pkts, int max, int flush, uint64_t now)
{
    /* Back long after the engine asked to run (the program computed, or
     * waited on something else): our peers' heartbeats are only now being
     * read, and they may have been away as well. Silence while we were not
     * listening proves nothing, so every peer gets a full timeout again.
     * Measured from the deadline, not from the last output: a process
     * asleep in fm_wait wakes for its heartbeats, a timeout/4 apart, and
     * a gap of that much forgave a silent peer at every heartbeat, so it
     * was never found lost. */
    uint64_t late = net->p.timeout_ns / (2 * PINGS_PER_TIMEOUT);
    if (net->t_last_output && now > net->t_wake && now - net->t_wake > late &&
        now - net->t_last_output > net->p.timeout_ns / PINGS_PER_TIMEOUT) {
        for (int i = 0; i < net->nall; i++)
            fm_session_amnesty(net, net->all[i], now);
    }
    net->t_last_output = now;
    fm_budget_tick(net, now);
    /* The sessions whose timers are due, each once: a deadline that is
     * still past afterwards (an ACK that only this output sends) waits for
     * the next output. */
    net->outputs++;
    for (struct fm_session *s; (s = fm_timer_due(net, now));) {
        fm_session_timers(net, s, now);
        fm_timer_set(net, s, FM_MAX(fm_session_deadline(net, s), now + 1));
        s->timers_ran = net->outputs;
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
        int again;
        int k = session_output(net, s, pkts + n, max - n, flush, now, &again);
        /* Heartbeat: an idle established session still says it lives. */
        if (k == 0 && s->state == S_UP && n < max &&
            now - s->t_last_tx >= net->p.timeout_ns / PINGS_PER_TIMEOUT) {
            fm_pkt_init(net, s, &pkts[n], FM_OP_PING);
            net->nc[FM_NC_PINGS]++;
            s->t_last_tx = now;
            k = 1;
        }
        for (int j = 0; j < k; j++)
            count_tx(net, &pkts[n + j]);
        n += k;
        /* (At the next clock reading at the earliest, as the due loop
         * refiles: a full batch's next call, at the same `now`, does not
         * run the timers again for a resend it had no room for.) If its
         * timers ran in this call, what they left due has gone now: the
         * deadline is exact again (sooner would keep the due loop's now+1,
         * a wake-up for nothing after every heartbeat or delayed ACK). */
        uint64_t d = FM_MAX(fm_session_deadline(net, s), now + 1);
        if (s->timers_ran == net->outputs)
            fm_timer_set(net, s, d);
        else
            fm_timer_sooner(net, s, d);
        if (n >= max)
            break;
        if (!again)
            s->pending = 0; /* done with it; it returns when there is more */
    }
    /* Sessions not reached stay pending for the next call. */
    int keep = 0;
    for (int j = 0; j < net->npending; j++)
        if (net->pending[j]->pending)
            net->pending[keep++] = net->pending[j];
    net->npending = keep;
    net->t_wake = fm_net_deadline(net);
    return n;
}

void fm_net_kick(struct fm_net *net, struct fm_txflow *f) { mark_pending(net, f->s); }

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

/* Seals p (copy: as for fm_wire_seal) and describes it in iov: the
 * header with its sub-header, then the payload's pieces; returns how many. */
static int seal(struct fm_pkt_out *p, struct iovec iov[4], void *copy)
{
    if (p->raw) {
        iov[0] = (struct iovec){(void *)p->bytes[0], p->nbytes[0]};
        return 1;
    }
    /* The header and its sub-header are one piece: every piece of a
     * datagram costs the kernel an iovec to import and a copy to start. */
    _Static_assert(offsetof(struct fm_pkt_out, sub) == sizeof(struct fm_wire_hdr),
                   "the sub-header follows the header");
    int k = 1;
    for (int i = 0; i < 2; i++)
        if (p->nbytes[i])
            iov[k++] = (struct iovec){(void *)p->bytes[i], p->nbytes[i]};
    if (p->token) {
        fm_wire_seal_short(&p->hdr, p->token, p->sub_len, iov + 1, k - 1, copy);
        iov[0] = (struct iovec){fm_wire_short_of(&p->hdr),
                                sizeof(struct fm_wire_short) + p->sub_len};
    } else {
        fm_wire_seal(&p->hdr, p->sub_len, iov + 1, k - 1, copy);
        iov[0] = (struct iovec){&p->hdr, sizeof(p->hdr) + p->sub_len};
    }
    return k;
}

int fm_pkt_seal(struct fm_pkt_out *p, struct iovec iov[4])
{
    return seal(p, iov, NULL);
}

size_t fm_pkt_seal_into(struct fm_pkt_out *p, void *dst)
{
    struct iovec iov[4];
    unsigned char *d = dst;
    size_t len = fm_pkt_len(p);
    if (p->raw) {
        memcpy(d, p->bytes[0], len);
        return len;
    }
    size_t head = len - p->nbytes[0] - p->nbytes[1];
    seal(p, iov, d + head);
    memcpy(d, iov[0].iov_base, head);
    return len;
}
