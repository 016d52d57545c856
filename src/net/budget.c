/*
 * The receiver's incoming budget (congestion control for incast): many
 * peers sending to one process at once share a budget of bytes in flight,
 * B = clamp(2 x arrival rate x smallest round trip, BUDGET_MIN, BUDGET_MAX),
 * in grants that ride in every ACK. A peer alone is not limited: it has
 * only its ring's credit, as before. Up to BUDGET_TURN_PEERS (K) senders
 * share B equally. More take turns, as Homa overcommits a few messages at
 * a time: K of them hold a share of B for an epoch, the others keep one
 * packet in flight (which keeps them known as senders and brings them an
 * ACK a packet, with their turn in it), and the next epoch the turn passes
 * to the next K in the order they arrived. The queue at the receiver's
 * port is then about B plus a packet per waiting sender, where each
 * sender's own window (a ring per flow) would fill it N times over. See
 * ../shared/notes/net-cc-loss.md, section 4.1.
 *
 * Loss shrinks nothing: random loss is not congestion, and the sender's
 * RTO backoff still answers a path that loses everything.
 */
#include "session.h"

#include <stdlib.h>

/* The budget's bounds: below the minimum the senders stall on the ACK
 * loop's delay, which a busy host stretches well past the round trip
 * (measured with bench/incast.sh, 8 senders, 1 Gbit/s port: 64 KiB left
 * the port idle 7 % of the time, 96 KiB doubled the victim's p99, 80 KiB
 * did neither); above the maximum the queue is no longer short. */
#define BUDGET_MIN (80u << 10)
#define BUDGET_MAX (4u << 20)
#define GRANT_MIN_PACKETS 6
/* Round trip assumed before one was measured. */
#define RTT_DEFAULT_NS 100000u
/* A peer counts as active for this long after its last DATA (at least). */
#define ACTIVE_NS 500000u
/* The smallest round trip is forgotten after this long. */
#define RTT_MIN_LIFE_NS 10000000000ull

static uint64_t rtt_min(const struct fm_net *net)
{
    return net->rtt_min ? net->rtt_min : RTT_DEFAULT_NS;
}

void fm_budget_rtt(struct fm_net *net, uint64_t rtt, uint64_t now)
{
    if (!net->rtt_min || rtt < net->rtt_min || now - net->t_rtt_min > RTT_MIN_LIFE_NS) {
        net->rtt_min = FM_MAX(rtt, 1);
        net->t_rtt_min = now;
    }
}

/* The last epoch's senders take the next turn: BUDGET_TURN_PEERS of them,
 * from where the previous turn ended, hold a share of the budget in this
 * one. */
static void pass_turn(struct fm_net *net)
{
    struct fm_session **t = net->turns;
    net->turns = net->seen;
    net->nturns = net->nseen;
    net->seen = t;
    net->nseen = 0;
    uint32_t n = net->nturns;
    if (!n)
        return;
    uint32_t first = net->turn_next % n, k = FM_MIN((uint32_t)BUDGET_TURN_PEERS, n);
    for (uint32_t i = 0; i < k; i++)
        net->turns[(first + i) % n]->turn_epoch = net->epoch;
    net->turn_next = (first + k) % n;
}

/* Lists s among this epoch's senders; both lists grow together. */
static void list_sender(struct fm_net *net, struct fm_session *s)
{
    if (net->nseen == net->turns_cap) {
        uint32_t cap = net->turns_cap ? 2 * net->turns_cap : 16;
        struct fm_session **a = realloc(net->seen, sizeof(*a) * cap);
        if (a)
            net->seen = a;
        struct fm_session **b = a ? realloc(net->turns, sizeof(*b) * cap) : NULL;
        if (b)
            net->turns = b;
        if (!a || !b) {
            net->turns_lost = 1;
            return;
        }
        net->turns_cap = cap;
    }
    net->seen[net->nseen++] = s;
}

void fm_budget_epoch(struct fm_net *net, struct fm_session *s, size_t len, uint64_t now)
{
    /* Active peers, counted per epoch of a few round trips: O(1) a packet. */
    uint64_t elapsed = now - net->t_epoch;
    if (elapsed >= net->epoch_ns) {
        /* A gap of more than one epoch leaves no peer active in the last. */
        net->active_prev = elapsed < 2 * net->epoch_ns ? net->active_now : 0;
        net->active_now = 0;
        if (!net->active_prev)
            net->nseen = 0;
        net->epoch++;
        net->t_epoch = now;
        pass_turn(net);
        /* The arrival rate: a maximum that decays by 1/8 an epoch. */
        uint64_t rate = net->rx_bytes * 1000000000u / elapsed;
        net->rx_rate = FM_MAX(rate, net->rx_rate - net->rx_rate / 8);
        net->rx_bytes = 0;
        net->epoch_ns = FM_MAX(4 * rtt_min(net), (uint64_t)ACTIVE_NS);
    }
    net->rx_bytes += len;
    if (s->active_epoch != net->epoch) {
        s->active_epoch = net->epoch;
        net->active_now++;
        list_sender(net, s);
    }
}

uint32_t fm_budget_grant(const struct fm_net *net, const struct fm_session *s)
{
    uint32_t n = FM_MAX(net->active_now, net->active_prev);
    if (n < 2)
        return 0; /* one sender: its credit is enough */
    uint64_t b = 2 * net->rx_rate * rtt_min(net) / 1000000000u;
    b = FM_MIN(FM_MAX(b, (uint64_t)BUDGET_MIN), (uint64_t)BUDGET_MAX);
    if (n > BUDGET_TURN_PEERS && !net->turns_lost) {
        if (s->turn_epoch != net->epoch)
            return 1; /* one packet in flight (fm_budget_allows) until its turn */
        n = BUDGET_TURN_PEERS;
    }
    /* At least GRANT_MIN_PACKETS each: with two, every packet cost its
     * sender a wake-up for an ACK, and 32 senders on two CPUs left the port
     * idle half the time; with four, 34 processes on two CPUs stretched the
     * ACK loop so much that 32 senders filled 0.67-0.83x of the port, with
     * six 0.90-0.95x (bench/incast.sh --senders 32, 3 runs each, all 32
     * granted at once; drops 0-0.05 %, eight gave 0.96x but 0.5 %). */
    return (uint32_t)FM_MAX(b / n, GRANT_MIN_PACKETS * (uint64_t)net->p.payload);
}

uint32_t fm_budget_ack_every(const struct fm_net *net, const struct fm_session *s)
{
    /* A sender held to a small grant waits for each ACK: acknowledge every
     * half grant, so that it never stops for the delayed ACK. */
    if (!s->grant_given)
        return ACK_EVERY;
    return FM_MAX(1u, FM_MIN((uint32_t)ACK_EVERY, s->grant_given / (2 * net->p.payload)));
}

int fm_budget_allows(const struct fm_net *net, const struct fm_session *s, uint64_t len)
{
    if (!s->grant)
        return 1;
    uint64_t inflight = fm_session_inflight(net, s);
    return inflight == 0 || inflight + len <= s->grant;
}
