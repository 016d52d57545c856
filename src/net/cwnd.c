/*
 * The sender's congestion window: what keeps one sender from overflowing a
 * port slower than itself. The receiver's budget (budget.c) shares a port
 * among several senders; a sender alone has only its ring's credit, a
 * megabyte, and through a 1 Gbit/s port with 64-256 KB of buffer (a tbf,
 * as a switch port would be) 43-77 % of the packets it sent were resent,
 * and it moved 0.34-0.77x of TCP's goodput.
 *
 * Random loss must not shrink anything (at 1 % random loss fastmsg keeps
 * 0.9x of its loss-free goodput, where CUBIC keeps a fifth), so the window
 * is not Reno's: it is cut only after a round trip in which more than an
 * eighth of the packets were lost, as when a port's queue overflows, and
 * not when a few percent are lost at random. The cut is to what the path
 * carries in two unloaded round trips, the round's delivery rate times the
 * smallest round trip (BBR's estimate of a path's capacity), and at least
 * by half. Halving alone took five rounds from a ring's megabyte down to a
 * 200 Mbit/s port's share, and they lost 10,000 packets. A clean round
 * adds a sixteenth, unless even its fastest packet waited in a queue (its
 * shortest round trip is more than max(QUEUE_TARGET_NS, the path's) above
 * the path's): then the window already keeps the port busy, and growing
 * it only led to the next overflow (4.6-5.2 % of the packets resent
 * through 1 Gbit/s ports of 64-256 KB, 0.5-1 % with the hold). Once the
 * window is above the session's rings together it no longer limits. Until a first
 * overflow there is no window at all: idle sessions and lone messages
 * leave as before. That first overflow is judged as it happens, with the
 * 64th loss if more than a quarter of what the round saw was lost (the
 * round would otherwise last until a ring's worth sent into the port was
 * acknowledged): through a 200 Mbit/s port with a 64 KB buffer a 32 MiB
 * stream resent 12-29 % of its packets, 700-1,000 of them after timeouts,
 * and now 3-4 %.
 */
#include "session.h"

/* A round is judged once it holds this many packets; a quieter session's
 * rounds add up until it does. Rounds of 64 that lose packets at random
 * lose more than an eighth once in 60 million at 1 %, once in 8,000 at
 * 3 %; rounds of a megabyte's 700 never. */
#define ROUND_MIN_PACKETS 64
/* A round that lost more than 1/2^OVERFLOW_SHIFT of its packets overflowed. */
#define OVERFLOW_SHIFT 3
/* A round that lost more than 1/2^EARLY_SHIFT of what it has seen so
 * far, and ROUND_MIN_PACKETS at least, is judged at once. At 9 % random
 * loss (engine_test), an eighth of a part of a round is not rare. */
#define EARLY_SHIFT 2
/* A clean round grows the window by 1/2^GROW_SHIFT. */
#define GROW_SHIFT 4
/* A clean round grows the window only while its shortest round trip is
 * within this much (or the path's shortest round trip, if longer) of the
 * path's shortest: past that the window already keeps a queue at the port,
 * and more would only lengthen it until it overflows. */
#define QUEUE_TARGET_NS 200000u
/* The smallest window, in packets: two of the receiver's ACK_EVERY, so that
 * an ACK comes back before the window is used up and the sender never
 * waits for a delayed one. */
#define CWND_MIN_PACKETS (2 * ACK_EVERY)

/* Whether the round's shortest round trip says the window keeps a queue:
 * a queue delays every packet, where a busy CPU delays some. (The path's
 * shortest expires and starts again from a later sample, which may be
 * above the round's.) */
static int queue_builds(const struct fm_session *s)
{
    return s->cc_rtt_round > s->rtt_min && s->rtt_min &&
           s->cc_rtt_round - s->rtt_min > FM_MAX(s->rtt_min, (uint64_t)QUEUE_TARGET_NS);
}

int fm_cwnd_holds_queue(const struct fm_net *net, const struct fm_session *s)
{
    return s->cwnd > (uint64_t)CWND_MIN_PACKETS * net->p.payload;
}

/* What the session's flows may have in flight by their credit: a ring's
 * worth each. (One ring's worth let the window go with several flows
 * open, and all of their rings go into the port at once.) */
static uint64_t rings_credit(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t sum = 0;
    for (uint32_t i = 0; i < s->nlive; i++)
        sum += s->live[i]->ring.size;
    return FM_MAX(sum, (uint64_t)net->p.ring_size);
}

/* Ends the round and judges it: one that overflowed cuts the window, a
 * clean one grows it. */
static void judge(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    s->cc_end = s->snd_nxt;
    uint32_t total = s->cc_delivered + s->cc_lost;
    /* The path's capacity, unknown before a round trip was timed. */
    uint64_t path = now > s->cc_t_start && s->cc_t_start && s->rtt_min
                        ? 2 * s->cc_bytes * s->rtt_min / (now - s->cc_t_start)
                        : UINT64_MAX;
    s->cc_t_start = now;
    /* The round after a cut saw the losses of packets sent before it. */
    int judged = !s->cc_recovering;
    s->cc_recovering = 0;
    if (judged && s->cc_lost > total >> OVERFLOW_SHIFT) {
        uint64_t carried = s->cwnd ? FM_MIN(s->cwnd, s->cc_bytes) : s->cc_bytes;
        s->cwnd = FM_MAX(FM_MIN(path, carried / 2), (uint64_t)CWND_MIN_PACKETS * net->p.payload);
        s->cc_recovering = 1;
        net->nc[FM_NC_CWND_CUTS]++;
    } else if (judged && s->cwnd && !queue_builds(s)) {
        s->cwnd += FM_MAX(s->cwnd >> GROW_SHIFT, (uint64_t)net->p.payload);
        if (s->cwnd > rings_credit(net, s))
            s->cwnd = 0; /* above what the rings' credit allows anyway */
    }
    s->cc_delivered = s->cc_lost = 0;
    s->cc_bytes = 0;
    s->cc_rtt_round = 0;
}

void fm_cwnd_round(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    /* Not over while what was in flight when it began is not all
     * acknowledged (a cc_end past snd_nxt is from before the session's
     * first packet). */
    if (fm_seq_lt(s->snd_una, s->cc_end) && !fm_seq_lt(s->snd_nxt, s->cc_end))
        return;
    if (s->cc_delivered + s->cc_lost < ROUND_MIN_PACKETS) {
        s->cc_end = s->snd_nxt; /* the round goes on past the next ACK */
        return;
    }
    judge(net, s, now);
}

void fm_cwnd_lost(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    /* A round that has lost this many already, more than a quarter of
     * what it has seen, overflowed whatever follows: it is judged now. The
     * first round of a stream, with no window yet, otherwise lasts until
     * what it put into the port is acknowledged, and goes on sending at
     * the ring's pace (3,000-9,000 packets lost through a 200 Mbit/s port
     * with a 64 KB buffer, tests/rails_test.sh). */
    fm_cwnd_news(s, now);
    if (++s->cc_lost >= ROUND_MIN_PACKETS && !s->cc_recovering &&
        s->cc_lost > (s->cc_delivered + s->cc_lost) >> EARLY_SHIFT)
        judge(net, s, now);
}
