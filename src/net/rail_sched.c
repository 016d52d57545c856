/*
 * Rail scheduling (seed 000, 2.3): which rail each packet takes, measured
 * delivery rates, a rail that goes silent and comes back, and probes. The
 * policy is FM_RAIL_POLICY's; docs/rails.md describes it.
 */
#include "session.h"

#include "core/log.h"

/* e no longer counts as in flight on its rail (acknowledged, or given up
 * and due again). */
void fm_rail_settle(struct fm_session *s, struct txent *e)
{
    if (e->counted) {
        s->rail[e->rail].inflight -= e->len;
        s->rail[e->rail].given_up++; /* acknowledged: fm_rail_acked zeroes it after */
        e->counted = 0;
    }
}

/* Bytes in flight on a rail (in packets) above which what it delivers is
 * what it can carry, not what it was given. */
#define RAIL_BACKLOG_PACKETS 8

/* A rate sample spans at least this long (shorter ones measure how the
 * acknowledgements bunched, not the rail), and the estimate takes the
 * largest sample of each stretch this long. */
#define RATE_STRETCH_NS 200000u

/* DATA entry e leaves on rail sr: it counts in flight there, and notes how
 * much the rail had delivered by when, to measure the rate it delivers at
 * over e's flight when e is acknowledged. */
void fm_rail_sent(struct fm_net *net, struct sess_rail *sr, struct txent *e, uint64_t now)
{
    if (!sr->inflight)
        sr->delivered_t = now; /* from idle: the pause is no part of a sample */
    e->rs_busy = sr->inflight >= RAIL_BACKLOG_PACKETS * (uint64_t)net->p.payload;
    e->rs_delivered = sr->delivered;
    e->rs_t = sr->delivered_t;
    e->counted = 1;
    sr->inflight += e->len;
    if (!sr->t_unanswered)
        sr->t_unanswered = now;
    sr->t_sent = now;
}

/*
 * e was acknowledged: its bytes count as delivered by its rail. A sample of
 * the rail's rate is what it delivered from the last delivery before e
 * left until e's acknowledgement, over that time: it spans at least e's
 * round trip, so acknowledgements that come in a bunch (a receiver that
 * was descheduled, packets held behind another rail's gap) do not inflate
 * it. Only a packet that left behind a backlog gives a sample, so a sample
 * measures what the rail can carry; an idle or lightly used rail says only
 * what it was given (else a rail given little would look slow and be
 * given less). The estimate is the larger of the stretch's largest sample
 * and the old estimate less 1/8.
 */
void fm_rail_acked(struct fm_session *s, struct txent *e, uint64_t now)
{
    struct sess_rail *sr = &s->rail[e->rail];
    sr->t_unanswered = 0; /* the peer hears us on it */
    if (e->counted) {
        sr->delivered += e->len;
        sr->delivered_t = now;
        if (e->rs_busy && now - e->rs_t >= RATE_STRETCH_NS) {
            /* Divided only when it is a new largest: a 128-bit division
             * for every packet acknowledged was 0.5 % of a stream's CPU. */
            unsigned __int128 bytes_ns = (unsigned __int128)(sr->delivered - e->rs_delivered) *
                                         1000000000u;
            uint64_t dt = now - e->rs_t;
            if (bytes_ns > (unsigned __int128)sr->rate_max * dt)
                sr->rate_max = (uint64_t)(bytes_ns / dt);
        }
        if (sr->rate_max && now - sr->rate_t >= RATE_STRETCH_NS) {
            sr->rate = FM_MAX(sr->rate_max, sr->rate - sr->rate / 8);
            sr->rate_t = now;
            sr->rate_max = 0;
        }
    }
    fm_rail_settle(s, e);
    sr->given_up = 0;
}

static int rail_usable(const struct sess_rail *r) { return r->addr.sin_family && r->up; }

/* The first usable rail after r, or r itself when no other is. */
int fm_rail_next_usable(const struct fm_net *net, const struct fm_session *s, int r)
{
    for (int k = 1; k <= net->p.nrails; k++) {
        int c = (r + k) % net->p.nrails;
        if (rail_usable(&s->rail[c]))
            return c;
    }
    return r;
}

/* Rail r stopped answering: what is in flight on it goes again on the
 * others, and nothing new goes on it until it answers a probe. */
void fm_rail_down(struct fm_net *net, struct fm_session *s, int r, uint64_t now)
{
    struct sess_rail *sr = &s->rail[r];
    if (!sr->up)
        return;
    sr->up = 0;
    net->nc[FM_NC_RAIL_DOWN]++;
    if (sr->deaf)
        fm_warn("net", "rail %d to rank %d delivers nothing of ours for %llu ms, though its "
                "packets come: its traffic moves to the other rails", r, s->rank,
                (unsigned long long)((now - sr->t_unanswered) / 1000000));
    else
        fm_warn("net", "rail %d to rank %d is silent for %llu ms: its traffic moves to the "
                "other rails", r, s->rank, (unsigned long long)((now - sr->t_rx) / 1000000));
    for (uint32_t q = s->snd_una; q != s->snd_nxt; q++) {
        struct txent *e = txent_at(s, q);
        if (e->op && e->rail == r && !e->sacked && !e->due)
            fm_loss_mark_due(s, e);
    }
    if (s->ctl_rail == r)
        s->ctl_rail = (uint8_t)fm_rail_next_usable(net, s, r);
    s->rtt_min = 0; /* the path changed: the next round trip says how */
    mark_pending(net, s);
}

/* A valid packet from the peer came on rail r (which the peer calls
 * peer_idx) from `from`. */
void fm_rail_heard(struct fm_net *net, struct fm_session *s, int r, unsigned peer_idx,
                   uint8_t op, const struct sockaddr_in *from, uint64_t now)
{
    struct sess_rail *sr = &s->rail[r];
    sr->t_rx = now;
    sr->heard = 1;
    sr->peer_idx = (uint8_t)(peer_idx % FM_RAILS_MAX);
    if (!sr->addr.sin_family) {
        /* The side that did not start the session learns the peer's other
         * rails from what comes on them (but from a connected sender's
         * socket, whose port is not our peer's address: from NULL). */
        if (!from)
            return;
        sr->addr = *from;
        sr->up = 1;
    } else if (!sr->up && (!sr->deaf || op == FM_OP_ACK)) {
        sr->up = 1;
        sr->deaf = 0;
        sr->t_unanswered = 0;
        sr->given_up = 0;
        net->nc[FM_NC_RAIL_UP]++;
        fm_warn("net", "rail %d to rank %d answers again", r, s->rank);
    }
    if (sr->up) /* not the way back on a rail the peer does not hear us on */
        s->ctl_rail = (uint8_t)r;
}

/*
 * The rail for the next sequenced packet to this peer (seed 000's dynamic
 * dispatch): among the rails that answer, the one that would deliver it
 * first, which is the one whose bytes in flight it drains soonest at the
 * rate it delivers (a rail not measured yet counts as fast as the fastest
 * one measured; before any is: the fewest bytes in flight). A rail whose
 * receive queue the peer reports busy counts as loaded. A short message therefore goes whole on an idle rail, and a
 * long one spreads packet by packet in proportion to each rail's
 * throughput, so its packets arrive about together instead of the faster
 * rail's waiting at the receiver for the slower one's.
 */
int fm_rail_pick(struct fm_net *net, struct fm_session *s)
{
    int n = net->p.nrails;
    if (n == 1)
        return 0;
    int first = 0, step = 1;
    if (net->p.rail_policy == FM_RAIL_STATIC) {
        int r = (net->p.rank + s->rank) % n;
        if (rail_usable(&s->rail[r]))
            return r;
    } else if (net->p.rail_policy == FM_RAIL_UNIDIRECTIONAL) {
        first = net->p.rank < s->rank ? 0 : 1;
        step = 2;
    }
    for (int pass = 0; pass < 2; pass++) {
        int best = -1;
        uint64_t best_load = UINT64_MAX, top_rate = 0;
        for (int r = first; r < n; r += step)
            if (rail_usable(&s->rail[r]))
                top_rate = FM_MAX(top_rate, s->rail[r].rate);
        for (int r = first; r < n; r += step) {
            const struct sess_rail *sr = &s->rail[r];
            if (!rail_usable(sr))
                continue;
            uint64_t load = sr->inflight + (sr->peer_busy ? RAIL_BUSY_BYTES : 0);
            if (top_rate) /* when the queue would drain: microseconds */
                load = (load + net->p.payload) * 1000000u / (sr->rate ? sr->rate : top_rate);
            if (load < best_load) {
                best = r;
                best_load = load;
            }
        }
        if (best >= 0)
            return best;
        first = 0; /* the policy's rails are all down: any rail that works */
        step = 1;
    }
    return s->ctl_rail; /* none answers: the session timeout decides */
}

/*
 * Probes of each rail and their deadlines (several rails only). Rails are
 * watched while the session is busy (data in flight, or a sequenced packet
 * within the last heartbeat): then a failure costs throughput. An idle
 * session does not probe them, so a thousand idle peers cost no packets
 * beyond the session's own heartbeat, and a rail's silence while idle
 * proves nothing; watching starts afresh when traffic does.
 */
static int session_busy(const struct fm_net *net, const struct fm_session *s, uint64_t now)
{
    return s->snd_una != s->snd_nxt || now - s->t_busy < net->p.rail_heartbeat_ns;
}

/* Whether a rail other than r shows that the peer hears us: it answers,
 * and what went on it lately was acknowledged. */
static int others_heard(const struct fm_net *net, const struct fm_session *s, int r,
                        uint64_t now)
{
    uint64_t hb = net->p.rail_heartbeat_ns;
    for (int c = 0; c < net->p.nrails; c++) {
        const struct sess_rail *o = &s->rail[c];
        if (c != r && rail_usable(o) && now - o->t_rx <= hb &&
            (!o->t_unanswered || now - o->t_unanswered <= hb))
            return 1;
    }
    return 0;
}

/*
 * A rail goes down when the peer is silent on it for a heartbeat, or when
 * DATA kept going on it for that long, none acknowledged and some given up
 * as lost, while another rail's was acknowledged: a link broken one way
 * only (a firewall rule, a fibre) still brings the peer's packets, and its
 * probes kept the rail up while all of ours on it were lost, each repaired
 * only by a timeout (a review's engine program: 8 MiB in 557 instead of
 * 31 ms). A rail merely left unused after a loss is not taken down.
 */
void fm_rail_check(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    uint64_t hb = net->p.rail_heartbeat_ns;
    int busy = session_busy(net, s, now);
    for (int r = 0; r < net->p.nrails; r++) {
        struct sess_rail *sr = &s->rail[r];
        if (!sr->addr.sin_family)
            continue;
        if (!busy || !s->rails_watched || !sr->t_rx) {
            sr->t_rx = now; /* a fresh start */
            if (sr->t_unanswered)
                sr->t_unanswered = now;
        } else if (sr->up && now - sr->t_rx > hb) {
            fm_rail_down(net, s, r, now);
        } else if (sr->up && sr->t_unanswered && now - sr->t_unanswered > hb &&
                   sr->given_up >= 2 && now - sr->t_sent <= hb && others_heard(net, s, r, now)) {
            sr->deaf = 1;
            fm_rail_down(net, s, r, now);
        }
        if (busy && (now - sr->t_rx >= hb / 3 || sr->deaf) && now - sr->t_ping >= hb / 3) {
            sr->ping_due = 1;
            mark_pending(net, s);
        }
    }
    s->rails_watched = (uint8_t)busy;
    if (s->t_status_asked && now - s->t_status_asked >= s->rto)
        mark_pending(net, s); /* rail_query: the status query or its answer was lost */
}

uint64_t fm_rail_deadline(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t d = UINT64_MAX, hb = net->p.rail_heartbeat_ns;
    if (net->p.nrails == 1)
        return d;
    if (s->t_status_asked)
        d = s->t_status_asked + s->rto;
    if (!s->rails_watched) /* watching starts at the first timer after traffic */
        return d;
    if (s->snd_una == s->snd_nxt)
        d = FM_MIN(d, s->t_busy + hb); /* when it falls idle */
    for (int r = 0; r < net->p.nrails; r++) {
        const struct sess_rail *sr = &s->rail[r];
        if (!sr->addr.sin_family)
            continue;
        d = FM_MIN(d, (sr->deaf ? sr->t_ping : FM_MAX(sr->t_rx, sr->t_ping)) + hb / 3);
        if (sr->up)
            d = FM_MIN(d, sr->t_rx + hb + 1);
        if (sr->up && sr->t_unanswered)
            d = FM_MIN(d, sr->t_unanswered + hb + 1);
    }
    return d;
}
