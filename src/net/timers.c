/*
 * The sessions' timers: each session is filed under its next deadline
 * (fm_session_deadline) in a binary min-heap, so that an output finds the
 * sessions whose timers are due without looking at the others. Before,
 * whenever any session's deadline came, every session's timers ran and
 * every deadline was worked out again: a receiver of a thousand senders
 * (tests/incast_sim) looked at 870 sessions every 130 us of simulated
 * time, 71 for each output, for one or two that were due.
 *
 * A session's deadline is worked out afresh after its timers ran, and
 * brought forward after each output that took it up (an ACK that moves
 * the window, or finds a loss, makes it pending). Not every timer is in
 * the deadline (a probe for a turn, a ring idle for long): those wait for
 * the session's next deadline, as a lone session's did under the walk.
 * Each session's timers run as often as a lone session's did. (Running
 * them on every ACK as well, sooner, made engine_test's heavy loss take
 * 163 ms of its clock instead of 19 ms: each run while packets are past
 * the timeout resends one more and doubles the timeout.)
 */
#include "session.h"

#include <stdlib.h>

static void put(struct fm_net *net, uint32_t i, struct fm_timer t)
{
    net->timers[i] = t;
    t.s->timer_idx = i + 1;
}

static void sift_up(struct fm_net *net, uint32_t i)
{
    struct fm_timer t = net->timers[i];
    while (i > 0) {
        uint32_t parent = (i - 1) / 2;
        if (net->timers[parent].at <= t.at)
            break;
        put(net, i, net->timers[parent]);
        i = parent;
    }
    put(net, i, t);
}

static void sift_down(struct fm_net *net, uint32_t i)
{
    struct fm_timer t = net->timers[i];
    for (;;) {
        uint32_t child = 2 * i + 1;
        if (child >= net->ntimers)
            break;
        if (child + 1 < net->ntimers && net->timers[child + 1].at < net->timers[child].at)
            child++;
        if (t.at <= net->timers[child].at)
            break;
        put(net, i, net->timers[child]);
        i = child;
    }
    put(net, i, t);
}

int fm_timers_reserve(struct fm_net *net, uint32_t sessions)
{
    if (sessions <= net->timers_cap)
        return 0;
    struct fm_timer *t = realloc(net->timers, sizeof(*t) * sessions);
    if (!t)
        return FM_ENOMEM;
    net->timers = t;
    net->timers_cap = sessions;
    return 0;
}

void fm_timer_set(struct fm_net *net, struct fm_session *s, uint64_t at)
{
    if (at == UINT64_MAX) { /* no timer: out of the heap */
        if (!s->timer_idx)
            return;
        uint32_t i = s->timer_idx - 1;
        s->timer_idx = 0;
        struct fm_timer last = net->timers[--net->ntimers];
        if (last.s == s)
            return;
        put(net, i, last);
        sift_up(net, i);
        sift_down(net, last.s->timer_idx - 1);
        return;
    }
    if (!s->timer_idx) { /* room for every session: fm_timers_reserve */
        put(net, net->ntimers++, (struct fm_timer){at, s});
        sift_up(net, net->ntimers - 1);
        return;
    }
    uint32_t i = s->timer_idx - 1;
    uint64_t old = net->timers[i].at;
    net->timers[i].at = at;
    if (at < old)
        sift_up(net, i);
    else if (at > old)
        sift_down(net, i);
}

void fm_timer_sooner(struct fm_net *net, struct fm_session *s, uint64_t at)
{
    if (!s->timer_idx || at < net->timers[s->timer_idx - 1].at)
        fm_timer_set(net, s, at);
}

struct fm_session *fm_timer_due(const struct fm_net *net, uint64_t now)
{
    return net->ntimers && net->timers[0].at <= now ? net->timers[0].s : NULL;
}

uint64_t fm_timer_next(const struct fm_net *net)
{
    return net->ntimers ? net->timers[0].at : UINT64_MAX;
}
