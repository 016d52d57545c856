/*
 * The receiver's incoming budget (congestion control for incast): many
 * peers sending to one process at once share a budget of bytes in flight,
 * B = clamp(2 x arrival rate x smallest round trip, floor, BUDGET_MAX), in
 * grants that ride in every ACK; the floor is BUDGET_MIN, whether every
 * sender holds a share or they take turns. A peer alone is not limited:
 * it has only its ring's credit, as before. Up to k
 * senders share B equally. More take turns, as Homa overcommits a few
 * messages at a time: k of them hold a share of B for an epoch, and the
 * next epoch the turn passes to the next k in the order they arrived
 * (adapt_turn sets k). The others wait with a packet in flight
 * (FM_GRANT_TRICKLE: its ACK brings the turn, and on a crowded host the
 * trickle keeps the port busy while the senders with a share wait for a
 * CPU), or, when that would put more than B into the port (at a thousand
 * senders, 1.4 MB), with nothing in flight but a message that fits one
 * packet (FM_GRANT_PAUSE), so a small request is not held behind the bulk.
 * The receiver keeps the paused ones listed, and calls each back with an
 * ACK when its turn comes; a paused sender that hears no grant for
 * PAUSE_PROBE_NS asks with a PING. The queue at the receiver's port then
 * holds about the shares granted, where each sender's own window (a ring
 * per flow) would fill it N times over (tests/incast_sim). See
 * ../shared/notes/net-cc-loss.md, section 4.1.
 *
 * A sender is a peer whose DATA comes other than alone (FM_HDR_ALONE: from
 * idle, and all it had to send): a client's requests and replies are not,
 * and while senders take turns such a peer may have one packet in flight
 * (FM_GRANT_TRICKLE) without joining them; one with more to send than that
 * packet sends it not alone, and is counted. Counted as senders, 992
 * clients sending 8 bytes each 50 ms took turns with 8 bulk senders and
 * left them 0.02x of the port (tests/incast_sim --light).
 *
 * Random loss shrinks nothing (only a loss while DATA comes at its peak
 * rate, the shares overflowing the port, shrinks k), and the sender's RTO
 * backoff still answers a path that loses everything.
 */
#include "session.h"

#include <stdlib.h>

/* The budget's bounds. Below the minimum the senders stall on the ACK
 * loop's delay, which a busy host stretches well past the round trip, and
 * what the minimum holds above the port's fill waits in its queue, before
 * every small message: 8 senders into a 1 Gbit/s port (bench/incast.sh, 3
 * rounds each, 2026-11-26, under the short DATA header) filled
 * 0.984-0.995x of CUBIC's goodput with 128 KiB, 0.978-0.984x with 80 KiB
 * and 0.970-0.975x with 64 KiB, the queue at the port 106-121, 64 and 53
 * KB, the victim's p99 760-920, 525-576 and 473-522 us. (Before the short
 * header, 80 KiB filled only 0.94-0.95x.) While senders take turns the
 * minimum must be small as well: the set whose turn ended still has its
 * shares in flight when the next set starts, so the port sees up to two
 * budgets at once (tests/incast_sim, 64 to 1000 fast senders: 128 KiB
 * dropped 0.7-2.6 % and starved 250 of 1000, 80 KiB nothing). Above the
 * maximum the queue is no longer short. */
#define BUDGET_MIN (80u << 10)
#define BUDGET_MAX (4u << 20)
#define GRANT_MIN_PACKETS 6
/* Round trip assumed before one was measured. */
#define RTT_DEFAULT_NS 100000u
/* An epoch lasts at least this long (and four smallest round trips). */
#define ACTIVE_NS 500000u
/* A waiting sender that heard no grant (no ACK) for this long asks for it
 * (the ACK with its turn may have been lost; the receiver's DATA carries
 * none, so it does not count): rarely, since at a thousand
 * senders every probe is a packet into the port the budget protects. */
#define PAUSE_PROBE_NS 50000000u
/* Each probe that finds the sender still waiting doubles the next wait, up
 * to 2^4 x 50 ms: a turn comes round every N / turn_peers() epochs, 144 ms
 * at a thousand senders into 1 Gbit/s, and 1000 senders probing every 20 ms
 * sent 55,000 PINGs a second (tests/incast_sim). */
#define PAUSE_PROBE_DOUBLINGS 4

static uint64_t rtt_min(const struct fm_net *net)
{
    return net->rtt_min ? net->rtt_min : RTT_DEFAULT_NS;
}

/* Kept longer while several peers send to us: our own round trips then
 * come back through the port their data queues at, and a sample taken
 * from that queue sized the budget that keeps it (a review's simulation:
 * at the expiry the minimum went from 12 to 912 us, and 5 % of the
 * packets were dropped after it, none before). */
void fm_budget_rtt(struct fm_net *net, uint64_t rtt, uint64_t now)
{
    fm_rtt_min_update(&net->rtt_min, &net->t_rtt_min, rtt, now,
                      RTT_MIN_LIFE_NS * (net->nrecent >= 2 ? RTT_MIN_HELD : 1));
}

/* An epoch is at most this many times its base (a rate measured low, as
 * after a quiet spell, would make a turn last for seconds); at 80 KiB,
 * ports below about 160 Mbit/s then see turns pass a little faster than
 * they drain. */
#define EPOCH_STRETCH 8
/* The peak arrival rate forgets 1/PEAK_DECAY of itself an epoch. */
#define PEAK_DECAY 256
/* A peer counts as a sender for this many epochs after its last DATA: an
 * epoch is a few unloaded round trips, while a sender whose packets queue
 * at a busy port sends once per loaded round trip, which is longer.
 * Counted over one epoch, 64 senders into a 1 Gbit/s port looked like 10
 * (tests/incast_sim), were all granted a share, and kept the port's queue
 * full, 13 % of their packets dropped. */
#define RECENT_EPOCHS 8

/* Lists s among the recent senders. */
static void list_recent(struct fm_net *net, struct fm_session *s)
{
    if (s->in_recent)
        return;
    if (net->nrecent == net->recent_cap) {
        uint32_t cap = net->recent_cap ? 2 * net->recent_cap : 16;
        struct fm_session **a = realloc(net->recent, sizeof(*a) * cap);
        if (!a) {
            net->turns_lost = 1;
            return;
        }
        net->recent = a;
        net->recent_cap = cap;
    }
    net->recent[net->nrecent++] = s;
    s->in_recent = 1;
}

static uint32_t turn_peers(const struct fm_net *net);
static uint64_t budget(const struct fm_net *net);

/*
 * k, how many senders hold a share at once, while others wait: as many as
 * the budget has shares of GRANT_MIN_PACKETS, and one more each epoch in
 * which DATA came below 19/20 of its peak rate (the senders with a share
 * leave the port room); a quarter fewer after a loss while it came at the
 * peak rate (the shares overflowed the port's buffer). Fast senders
 * (tests/incast_sim) fill the port at the budget's fit and lose nothing;
 * growing on every loss-free epoch instead, they lost 2 % at the top of
 * each climb. On two CPUs shared by 34 processes, where a grant waits
 * milliseconds for its sender to run, the fit (9) filled a quarter of a
 * 1 Gbit/s port, and the growth takes k to 30-40. With nobody waiting, k
 * starts over.
 */
static void adapt_turn(struct fm_net *net, uint64_t rate)
{
    uint64_t fit = budget(net) / (GRANT_MIN_PACKETS * (uint64_t)net->p.payload);
    uint32_t k = net->turn_peers, k_fit = (uint32_t)FM_MAX(FM_MIN(fit, BUDGET_TURN_PEERS), 1);
    if (!k || net->nrecent <= k)
        k = k_fit; /* nobody waits: a share each */
    else if (net->rx_gaps && rate >= net->rx_peak / 10 * 9)
        k = FM_MAX(k * 3 / 4, 1); /* a loss at the port's full rate: too many */
    else if (k < k_fit || rate < net->rx_peak / 20 * 19)
        k = FM_MIN(k + 1, FM_MAX(net->nrecent, 1u)); /* the port has room */
    net->turn_peers = k;
    net->rx_gaps = 0;
}

/* The epoch ends: senders quiet for RECENT_EPOCHS leave the list (not the
 * paused ones: they are quiet because we asked), and the turn passes to
 * the next k of the list. A paused sender whose turn it is hears of it
 * now, in an ACK of its own: it has nothing in flight that an ACK would
 * answer. */
static void next_epoch(struct fm_net *net, uint64_t now)
{
    uint64_t elapsed = now - net->t_epoch;
    net->epoch++;
    net->t_epoch = now;
    /* The arrival rate: a maximum that decays by 1/8 an epoch. */
    uint64_t rate = net->rx_bytes * 1000000000u / elapsed;
    net->rx_rate = FM_MAX(rate, net->rx_rate - net->rx_rate / 8);
    net->rx_peak = FM_MAX(rate, net->rx_peak - net->rx_peak / PEAK_DECAY);
    net->rx_bytes = 0;
    adapt_turn(net, rate);
    /* A turn lasts as long as the port takes to carry the budget twice:
     * each new set of senders puts a budget into the network while the
     * last set's is still arriving (in turns of an epoch of 0.5 ms, 32
     * senders into 1 Gbit/s put 164 MB/s into a 125 MB/s port and kept
     * its queue full: tests/incast_sim). */
    uint64_t base = FM_MAX(4 * rtt_min(net), (uint64_t)ACTIVE_NS);
    uint64_t granted = FM_MAX(budget(net),
                              (uint64_t)turn_peers(net) * GRANT_MIN_PACKETS * net->p.payload);
    uint64_t drain = net->rx_rate ? 2 * granted * 1000000000u / net->rx_rate : 0;
    net->epoch_ns = FM_MIN(FM_MAX(base, drain), EPOCH_STRETCH * base);
    uint32_t keep = 0;
    for (uint32_t i = 0; i < net->nrecent; i++) {
        struct fm_session *s = net->recent[i];
        int waits = s->grant_given == FM_GRANT_PAUSE;
        if (s->state == S_UP && (waits || s->active_epoch + RECENT_EPOCHS > net->epoch)) {
            net->recent[keep++] = s;
        } else {
            s->in_recent = 0;
            if (i < net->turn_next)
                net->turn_next--; /* the turn goes on from the same sender */
        }
    }
    net->nrecent = keep;
    uint32_t n = keep, k = turn_peers(net);
    int all = n <= k;
    if (!all) {
        uint32_t first = net->turn_next % n;
        for (uint32_t i = 0; i < k; i++)
            net->recent[(first + i) % n]->turn_epoch = net->epoch;
        net->turn_next = (first + k) % n;
    }
    net->nwaiting = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct fm_session *s = net->recent[i];
        if (s->grant_given != FM_GRANT_PAUSE)
            continue;
        if (all || s->turn_epoch == net->epoch) {
            s->ack_now = 1;
            mark_pending(net, s);
        } else {
            net->nwaiting++;
        }
    }
}

/* Whether a sender told grant `was` must hear of `now` in an ACK: a change
 * of kind (no limit, a share, waiting), or of its share by more than a
 * quarter. */
static int grant_news(uint32_t was, uint32_t now)
{
    if (was == now)
        return 0;
    if (was <= FM_GRANT_PAUSE || now <= FM_GRANT_PAUSE)
        return 1;
    return now < was - was / 4 || now > was + was / 4;
}

void fm_budget_epoch(struct fm_net *net, struct fm_session *s, size_t len, int alone,
                     uint64_t now)
{
    if (now - net->t_epoch >= net->epoch_ns)
        next_epoch(net, now);
    net->rx_bytes += len;
    if (alone)
        return;
    s->active_epoch = net->epoch;
    list_recent(net, s);
}

int fm_budget_news(const struct fm_net *net, const struct fm_session *s)
{
    if (s->in_recent)
        return !s->grant_told || grant_news(s->grant_given, fm_budget_grant(net, s));
    /* A client told a share or no limit before senders began to take turns
     * hears of them once: its replies acknowledge, but carry no grant, and
     * it went on sending whole requests into the crowded port (a review). */
    return s->grant_told && s->grant_given != FM_GRANT_TRICKLE &&
           fm_budget_grant(net, s) == FM_GRANT_TRICKLE;
}

void fm_budget_tick(struct fm_net *net, uint64_t now)
{
    if (net->nwaiting && now - net->t_epoch >= net->epoch_ns)
        next_epoch(net, now);
}

uint64_t fm_budget_deadline(const struct fm_net *net)
{
    return net->nwaiting ? net->t_epoch + net->epoch_ns : UINT64_MAX;
}

void fm_budget_granted(struct fm_net *net, struct fm_session *s, uint32_t grant)
{
    if (grant == FM_GRANT_PAUSE && s->grant_given != FM_GRANT_PAUSE)
        net->nwaiting++; /* counted again at each epoch's end */
    s->grant_given = grant;
    /* A paused sender may say nothing until its turn (a PING that asked
     * brought it here): it stays listed so that the turn finds it. */
    if (grant == FM_GRANT_PAUSE)
        list_recent(net, s);
}

static uint64_t budget(const struct fm_net *net)
{
    uint64_t b = 2 * net->rx_rate * rtt_min(net) / 1000000000u;
    return FM_MIN(FM_MAX(b, (uint64_t)BUDGET_MIN), (uint64_t)BUDGET_MAX);
}

static uint32_t turn_peers(const struct fm_net *net)
{
    return net->turn_peers ? net->turn_peers : BUDGET_TURN_PEERS;
}

uint32_t fm_budget_unscheduled(const struct fm_net *net)
{
    return net->p.payload;
}

uint32_t fm_budget_grant(const struct fm_net *net, const struct fm_session *s)
{
    uint32_t n = net->nrecent + !s->in_recent;
    if (n < 2)
        return 0; /* one sender: its credit is enough */
    uint32_t k = turn_peers(net);
    int turns = n > k && !net->turns_lost;
    uint64_t b = budget(net);
    if (turns && !s->in_recent)
        return FM_GRANT_TRICKLE; /* a lone message goes; a sender with more is counted */
    if (turns) {
        if (s->turn_epoch != net->epoch)
            return (uint64_t)(n - k) * net->p.payload > b ? FM_GRANT_PAUSE : FM_GRANT_TRICKLE;
        n = k;
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

int fm_budget_allows(const struct fm_net *net, const struct fm_session *s, uint64_t len,
                     int last)
{
    if (!s->grant)
        return 1;
    uint64_t inflight = fm_session_inflight(net, s);
    if (s->grant == FM_GRANT_TRICKLE)
        return inflight == 0;
    if (s->grant == FM_GRANT_PAUSE)
        return inflight == 0 && last;
    return inflight == 0 || inflight + len <= s->grant;
}

uint64_t fm_budget_probe_deadline(const struct fm_session *s)
{
    if (s->grant != FM_GRANT_PAUSE || s->snd_una != s->snd_nxt)
        return UINT64_MAX;
    for (uint32_t i = 0; i < s->nlive; i++)
        if (s->live[i]->complete > s->live[i]->sent)
            return s->t_grant + ((uint64_t)PAUSE_PROBE_NS << s->probes);
    return UINT64_MAX;
}

void fm_budget_probe(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    if (now < fm_budget_probe_deadline(s))
        return;
    s->rail[s->ctl_rail].ping_due = 1; /* its answer carries the grant */
    s->probes += s->probes < PAUSE_PROBE_DOUBLINGS;
    mark_pending(net, s);
}

