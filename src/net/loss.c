/*
 * Acknowledgements and loss recovery: the round-trip estimate and the
 * retransmission timeout, selective acknowledgements, and RACK's time-based
 * loss detection, the tail loss probe and the timeout itself (run from the
 * session's timers).
 */
#include "session.h"

#include "core/log.h"

#include <assert.h>
#include <string.h>

/*
 * RFC 6298's timeout, but never below one and a half times the longest
 * recent round trip. On a link slower than the sender (a shaped rail) the
 * round trip grows with the queue faster than the smoothed estimate
 * follows; a timeout below it resends a window that was never lost, the
 * copies lengthen the queue, and the stream collapses into retransmissions.
 */
static uint64_t base_rto(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t rto = FM_MAX(s->srtt + 4 * s->rttvar, s->rtt_peak + s->rtt_peak / 2);
    return FM_MAX(net->p.rto_min_ns, FM_MIN(rto, net->p.rto_max_ns));
}

static void rtt_sample(struct fm_net *net, struct fm_session *s, const struct txent *e,
                       uint64_t now)
{
    uint64_t rtt = now - e->t_sent;
    struct sess_rail *sr = &s->rail[e->rail];
    sr->srtt = sr->srtt ? (7 * sr->srtt + rtt) / 8 : rtt;
    /* RFC 6298 in nanoseconds. */
    if (!s->srtt) {
        s->srtt = rtt;
        s->rttvar = rtt / 2;
    } else {
        uint64_t d = s->srtt > rtt ? s->srtt - rtt : rtt - s->srtt;
        s->rttvar = (3 * s->rttvar + d) / 4;
        s->srtt = (7 * s->srtt + rtt) / 8;
    }
    s->rtt_peak = FM_MAX(rtt, s->rtt_peak - s->rtt_peak / 16);
    /* Kept longer while a window above its floor holds a queue at the
     * port (a review: a loss burst at every 10 s expiry); at the floor a
     * stale minimum only keeps the window from growing. */
    fm_rtt_min_update(&s->rtt_min, &s->t_rtt_min, rtt, now,
                      RTT_MIN_LIFE_NS * (fm_cwnd_holds_queue(net, s) ? RTT_MIN_HELD : 1));
    s->cc_rtt_round = s->cc_rtt_round ? FM_MIN(s->cc_rtt_round, rtt) : rtt;
    fm_budget_rtt(net, rtt, now);
    s->rto = base_rto(net, s);
}

/* Packet q, sent in e, is known delivered: the latest such sets RACK's
 * reference. Packets of one burst share a send time; among them the
 * sequence number says which went later. */
static void rack_delivered(struct sess_rail *sr, const struct txent *e, uint32_t q)
{
    if (e->t_sent > sr->rack_t || (e->t_sent == sr->rack_t && fm_seq_lt(sr->rack_seq, q))) {
        sr->rack_t = e->t_sent;
        sr->rack_seq = q;
    }
}

/* Whether the acknowledgement of e, first known now, is for its last
 * copy, whose send time may then be RACK's reference: yes if it was sent
 * once, or if its last copy left at least the path's shortest round trip
 * ago (sooner, the first copy is what arrived), as RFC 8985 has it. Taking
 * none of the retransmissions left a lost one to the timeout, one per
 * timeout, while only retransmissions were in flight: 4 MiB through 15 %
 * loss each way took more than a minute. */
static int copy_known(const struct fm_session *s, const struct txent *e, uint64_t now)
{
    return !e->retx || (s->rtt_min && now - e->t_sent >= s->rtt_min);
}

/* Whether a packet sent after q, in e, is known delivered on its rail. */
static int rack_passed(const struct sess_rail *sr, const struct txent *e, uint32_t q)
{
    return e->t_sent < sr->rack_t || (e->t_sent == sr->rack_t && fm_seq_lt(q, sr->rack_seq));
}

/* The send-time list: a packet joins at its end when it is sent or sent
 * again, and leaves when it is acknowledged. */
void fm_loss_sent(struct fm_session *s, uint32_t q)
{
    struct txent *e = txent_at(s, q);
    e->t_prev = s->t_last;
    if (s->t_count++)
        txent_at(s, s->t_last)->t_next = q;
    else
        s->t_first = q;
    s->t_last = q;
}

static void unlist(struct fm_session *s, uint32_t q)
{
    struct txent *e = txent_at(s, q);
    if (q == s->t_first)
        s->t_first = e->t_next;
    else
        txent_at(s, e->t_prev)->t_next = e->t_next;
    if (q == s->t_last)
        s->t_last = e->t_prev;
    else
        txent_at(s, e->t_next)->t_prev = e->t_prev;
    s->t_count--;
}

#ifndef NDEBUG
/* Debug builds (the sanitizer tests) check the list against the window
 * after every ACK: each packet in flight and not acknowledged is on it
 * once, in the order of its send time. */
static void check_list(const struct fm_session *s)
{
    uint64_t t = 0;
    uint32_t q = s->t_first;
    for (uint32_t i = 0; i < s->t_count; i++, q = txent_at(s, q)->t_next) {
        const struct txent *e = txent_at(s, q);
        assert(e->op && !e->sacked && e->t_sent >= t);
        assert(!fm_seq_lt(q, s->snd_una) && fm_seq_lt(q, s->snd_nxt));
        t = e->t_sent;
    }
    uint32_t n = 0;
    for (q = s->snd_una; q != s->snd_nxt; q++)
        n += txent_at(s, q)->op && !txent_at(s, q)->sacked;
    assert(n == s->t_count);
}
#else
static void check_list(const struct fm_session *s) { (void)s; }
#endif

void fm_loss_mark_due(struct fm_session *s, struct txent *e)
{
    fm_rail_settle(s, e); /* no longer in flight on its rail */
    e->due = 1;
    s->due_marked = 1;
}

void fm_loss_resent(struct fm_session *s, uint32_t q)
{
    if (txent_at(s, q)->sacked)
        return; /* its first copy arrived after all */
    unlist(s, q);
    fm_loss_sent(s, q);
}

/*
 * Loss detection in the manner of RACK (RFC 8985): a packet is lost when a
 * packet sent after it has been delivered and a round trip (plus a small
 * reordering allowance) has passed since it was sent. Time-based rather
 * than counting duplicate ACKs, so a retransmission is judged only by what
 * was sent after it: packets whose acknowledgement is merely on its way
 * are not sent again. Runs on every ACK and from the timers.
 */
/* The send time of the latest packet known delivered, on any rail. */
static uint64_t rack_latest(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t t = 0;
    for (int r = 0; r < net->p.nrails; r++)
        t = FM_MAX(t, s->rail[r].rack_t);
    return t;
}


/* How long after its sending a packet that a later delivery passed is
 * taken for lost: a round trip of its rail and a reordering window. Per
 * rail: packets on a slower rail arrive after later packets on a faster
 * one without being lost. */
static uint64_t rack_wait(const struct fm_net *net, const struct fm_session *s,
                          const struct sess_rail *sr)
{
    uint64_t rtt = sr->srtt ? sr->srtt : s->srtt ? s->srtt : net->p.rto_min_ns / 4;
    return rtt + FM_MAX(rtt / 4, (uint64_t)20000);
}

void fm_loss_detect(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    /* The walk follows send times over the packets not yet acknowledged
     * (as Linux's RACK does): it ends at the first sent after the latest
     * delivered one on every rail, since no later packet can have been
     * passed. While a hole is open, walking by sequence number instead
     * crossed every packet delivered after it, on every ACK. */
    uint64_t latest = rack_latest(net, s);
    uint32_t q = s->t_first;
    for (uint32_t i = 0; i < s->t_count; i++, q = txent_at(s, q)->t_next) {
        struct txent *e = txent_at(s, q);
        if (e->t_sent > latest)
            break;
        const struct sess_rail *sr = &s->rail[e->rail];
        if (e->due || !rack_passed(sr, e, q) || !fm_sack_listed(s, q))
            continue;
        if (now - e->t_sent >= rack_wait(net, s, sr)) {
            fm_loss_mark_due(s, e);
            fm_cwnd_lost(net, s, now);
            net->nc[FM_NC_RETX_FAST]++;
            mark_pending(net, s);
        }
    }
}

/* The packets of a selective acknowledgement that are still in flight,
 * from `from` on (what came before was taken from an earlier ACK).
 * Returns the range as far as it was taken. */
static struct fm_wire_sack on_sack(struct fm_session *s, struct fm_wire_sack r, uint32_t from,
                                   uint64_t now)
{
    if (!r.count || r.count > FM_NET_WIN_MAX)
        return (struct fm_wire_sack){0, 0}; /* not from a receiver of ours */
    /* Offsets from snd_una: no range, however far off it claims to lie (an
     * ACK carries no MAC), walks outside what is in flight. One 2^31 ahead
     * escaped a comparison with snd_nxt and marked empty slots of the table
     * acknowledged: the send-time list came apart, and the next loss
     * detection never ended (found by fuzz_net). A range past snd_nxt
     * claims what was not sent, and proves nothing there. */
    int64_t first = (int32_t)(r.first - s->snd_una);
    int64_t end = FM_MIN(first + r.count, (int64_t)(s->snd_nxt - s->snd_una));
    int64_t k = FM_MAX(FM_MAX(first, (int64_t)(int32_t)(from - s->snd_una)), 0);
    for (; k < end; k++) {
        uint32_t q = s->snd_una + (uint32_t)k;
        struct txent *e = txent_at(s, q);
        if (!e->sacked) {
            e->sacked = 1;
            e->due = 0; /* the peer holds it: a retransmission would be a duplicate */
            unlist(s, q);
            fm_cwnd_delivered(s, e->len, now);
            fm_rail_acked(s, e, now);
            if (copy_known(s, e, now))
                rack_delivered(&s->rail[e->rail], e, q);
        }
    }
    return (struct fm_wire_sack){r.first, first < end ? (uint32_t)(end - first) : 0};
}

/*
 * The packet a round trip is timed from, copied before the acknowledgement
 * changes it; 0 if none. An ACK names the packet whose arrival it answers
 * (FM_HDR_ECHO), timed if it was sent once and is news. Timing instead the
 * packets an ACK newly listed timed, after a lost ACK, the packets the lost
 * one had listed, from the ACK that a tail probe's copy brought two
 * smoothed round trips later: with a fifth of the ACKs lost, a loopback
 * path's round trip stayed at 2-40 ms, the timeout at hundreds, and RACK
 * waited as long. A packet carrying our acknowledgement back (a reply)
 * times the packet that moved it, if this is the first news of it: one
 * selectively acknowledged before was delivered long ago (a hole held it
 * back), and timing it now would add the repair to the round trip.
 */
static int timed_packet(const struct fm_session *s, uint32_t ack, int64_t echo,
                        const struct fm_wire_ack *a, struct txent *out)
{
    uint32_t q;
    if (a) {
        if (echo < 0)
            return 0;
        q = (uint32_t)echo;
    } else {
        if (!fm_seq_lt(s->snd_una, ack) || fm_seq_lt(s->snd_nxt, ack) ||
            !fm_sack_listed(s, ack - 1))
            return 0;
        q = ack - 1;
    }
    if (fm_seq_lt(q, s->snd_una) || !fm_seq_lt(q, s->snd_nxt))
        return 0;
    const struct txent *e = txent_at(s, q);
    if (!e->op || e->retx || e->sacked)
        return 0;
    *out = *e;
    return 1;
}

void fm_loss_on_ack(struct fm_net *net, struct fm_session *s, uint32_t ack,
                    const struct fm_wire_ack *a, const struct fm_wire_sack *sack, int64_t echo,
                    int status_answer, uint64_t now)
{
    struct txent timed;
    if (timed_packet(s, ack, echo, a, &timed))
        rtt_sample(net, s, &timed, now);
    if (fm_seq_lt(s->snd_una, ack) && !fm_seq_lt(s->snd_nxt, ack)) {
        for (uint32_t q = s->snd_una; q != ack; q++) {
            struct txent *e = txent_at(s, q);
            struct sess_rail *sr = &s->rail[e->rail];
            if (!e->sacked && copy_known(s, e, now)) /* judged once, when first known */
                rack_delivered(sr, e, q);
            fm_rail_acked(s, e, now);
            if (!e->sacked) {
                unlist(s, q);
                fm_cwnd_delivered(s, e->len, now);
            }
            e->op = 0;
        }
        s->snd_una = ack;
        fm_cwnd_round(net, s, now);
        if (ack == s->snd_nxt)
            s->status_fresh = 0; /* rail_query: the next burst asks again */
        /* Progress ends a timeout's backoff (as Linux TCP does): in a lossy
         * stream a clean sample may be long in coming. */
        s->rto = base_rto(net, s);
        mark_pending(net, s); /* the window moved: more may go */
        for (uint32_t i = 0; s->nending && i < s->nlive;) {
            struct fm_txflow *f = s->live[i];
            if (f->end_sent && fm_seq_lt(f->end_seq, ack)) {
                s->nending--;
                fm_flow_done(s, f); /* moves another flow to index i */
            } else {
                i++;
            }
        }
    }
    if (!a)
        return;
    if (!net->p.rail_query || status_answer) {
        for (int r = 0; r < net->p.nrails; r++)
            s->rail[r].peer_busy = (uint8_t)(a->rails_busy >> s->rail[r].peer_idx & 1);
        if (status_answer) {
            s->status_fresh = 1;
            s->t_status_asked = 0;
            mark_pending(net, s);
        }
    }
    /* While a hole is open the ranges cover the window and repeat from ACK
     * to ACK: of a range that starts where one of the last ACK's did, only
     * what follows that one is new (both lists ascend). */
    struct fm_wire_sack seen[FM_WIRE_SACK_MAX];
    int nseen = FM_MIN(a->nsack, FM_WIRE_SACK_MAX);
    for (int i = 0, j = 0; i < nseen; i++) {
        while (j < s->nsack_seen && fm_seq_lt(s->sack_seen[j].first, sack[i].first))
            j++;
        uint32_t from = sack[i].first;
        if (j < s->nsack_seen && s->sack_seen[j].first == sack[i].first)
            from += s->sack_seen[j].count;
        seen[i] = on_sack(s, sack[i], from, now);
    }
    memcpy(s->sack_seen, seen, sizeof(seen[0]) * (size_t)nseen);
    s->nsack_seen = (uint8_t)nseen;
    s->sack_cut = a->nsack == FM_WIRE_SACK_MAX;
    if (s->sack_cut) /* as far as the last range was taken: none, nothing listed */
        s->sack_end = seen[nseen - 1].count ? seen[nseen - 1].first + seen[nseen - 1].count
                                            : s->snd_una;
    fm_loss_detect(net, s, now);
    check_list(s);
    /* What the ACK brought may be due sooner: a packet it passed, the tail
     * probe again (it came from the peer). */
    if (s->snd_una != s->snd_nxt)
        fm_timer_sooner(net, s, fm_loss_deadline(net, s));
}

/* Two smoothed round trips and twice the peer's longest ACK delay (one
 * round trip can take that long when the receiver delays its ACK). */
static uint64_t probe_timeout(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t srtt = s->srtt ? s->srtt : net->p.rto_min_ns / 4;
    return 2 * srtt + 2 * net->p.ack_delay_ns;
}

/* The timers of the packets in flight: RACK's reordering window, the tail
 * loss probe and the retransmission timeout. */
void fm_loss_timers(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    if (s->snd_una == s->snd_nxt)
        return;
    struct txent *e = txent_at(s, s->snd_una);
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
        struct txent *t = txent_at(s, q);
        if (t->op && !t->sacked && !t->due) {
            fm_loss_mark_due(s, t);
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
            struct txent *t = txent_at(s, q);
            if (t->op && !t->sacked && !t->due && now - t->t_sent >= s->rto) {
                fm_loss_mark_due(s, t);
                fm_cwnd_lost(net, s, now);
                net->nc[FM_NC_RETX_TIMEOUT]++;
                break;
            }
        }
        s->rto = FM_MIN(s->rto * 2, net->p.rto_max_ns);
        mark_pending(net, s);
    }
}

/* When fm_loss_detect will next find a packet that a later delivery passed
 * lost, or UINT64_MAX: the same walk (each rail waits its own round trip,
 * so the earliest sent is not always the first due). */
static uint64_t rack_deadline(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t latest = rack_latest(net, s), d = UINT64_MAX;
    uint32_t q = s->t_first;
    for (uint32_t i = 0; i < s->t_count; i++, q = txent_at(s, q)->t_next) {
        const struct txent *e = txent_at(s, q);
        if (e->t_sent > latest || e->t_sent >= d)
            break;
        const struct sess_rail *sr = &s->rail[e->rail];
        if (e->due || !rack_passed(sr, e, q) || !fm_sack_listed(s, q))
            continue;
        d = FM_MIN(d, e->t_sent + rack_wait(net, s, sr));
    }
    return d;
}

/* Exactly when fm_loss_timers will act: a deadline it would pass over
 * stays past, and the session's timers would run at every output (and
 * fm_wait poll) until it moved, as after a tail probe while the peer
 * computes without acknowledging: 99.7 % of a CPU in fm_wait before. */
uint64_t fm_loss_deadline(const struct fm_net *net, const struct fm_session *s)
{
    const struct txent *e = txent_at(s, s->snd_una);
    uint64_t d = e->t_sent + s->rto;
    if (!s->probed) /* the tail probe, if it comes before the timeout */
        d = FM_MIN(d, FM_MAX(e->t_sent, s->t_last_rx) + probe_timeout(net, s));
    return FM_MIN(d, rack_deadline(net, s));
}
