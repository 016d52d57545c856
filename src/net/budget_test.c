/* The receiver's budget: a lone sender is not limited, a few share the
 * budget equally, and many take turns at it, each getting its turn; how
 * many hold a share adapts; the ones waiting keep a packet in flight, or,
 * when those packets would be more than the budget, send nothing but a
 * small message, stay listed while quiet, and are called back when their
 * turn comes. A client (its DATA alone) is no sender. */
#include "net/session.h"
#include "testing/fmtest.h"

#include <string.h>

#define SENDERS 200
#define PAYLOAD 1400
#define EPOCH_NS 10000000u /* longer than any epoch of the budget (4 ms at most here) */

static struct fm_net *make(void)
{
    struct fm_net_params p = {
        .rank = 0, .size = SENDERS + 2, .epoch = 0x1234u, .ring_size = 1 << 16,
        .payload = PAYLOAD, .timeout_ns = 2000000000ull, .rto_min_ns = 1000000,
        .rto_max_ns = 200000000, .ack_delay_ns = 200000, .nrails = 1,
        .rail_heartbeat_ns = 3000000,
    };
    memset(p.key, 7, sizeof(p.key));
    return fm_net_new(&p);
}

static int waits(uint32_t g) { return g == FM_GRANT_TRICKLE || g == FM_GRANT_PAUSE; }

/* One epoch in which senders [1, n] each send a packet and are answered
 * (their grants recorded as an ACK would); returns how many hold a share
 * (or no limit) afterwards, and counts each one's turns in turns[]. */
static int epoch(struct fm_net *net, struct fm_session **s, int n, uint64_t *now, int turns[])
{
    *now += EPOCH_NS;
    for (int i = 1; i <= n; i++)
        fm_budget_on_data(net, s[i], PAYLOAD, 0, *now);
    int granted = 0;
    for (int i = 1; i <= n; i++) {
        uint32_t g = fm_budget_grant(net, s[i]);
        fm_budget_granted(net, s[i], g);
        s[i]->grant_told = 1;
        CHECK(!fm_budget_news(net, s[i])); /* told just now: no news */
        CHECK(waits(g) || g == 0 || g >= 6 * PAYLOAD);
        if (!waits(g)) {
            granted++;
            turns[i]++;
        }
    }
    return granted;
}

int main(void)
{
    struct fm_net *net = make();
    CHECK(net != NULL);
    struct fm_session *s[SENDERS + 1];
    for (int i = 1; i <= SENDERS; i++) {
        s[i] = fm_session_get(net, i);
        CHECK(s[i] != NULL);
        s[i]->state = S_UP;
        /* A sender's first burst, before any ACK: a packet. */
        CHECK_EQ(s[i]->grant, PAYLOAD);
    }
    uint64_t now = 1000000000ull;
    int turns[SENDERS + 1] = {0};

    /* A lone sender: no limit, a small message leaves at once. */
    epoch(net, s, 1, &now, turns);
    CHECK_EQ(fm_budget_grant(net, s[1]), 0);

    /* A few: a share each, all at once. */
    memset(turns, 0, sizeof(turns));
    epoch(net, s, 4, &now, turns);
    CHECK_EQ(epoch(net, s, 4, &now, turns), 4);
    /* Their shares make the whole budget (at least 80 KiB: a busy host's
     * ACK loop is slow). */
    CHECK((uint64_t)4 * fm_budget_grant(net, s[1]) >= (80u << 10) - 3);

    /* Many: turn_peers of them hold a share at once, as many shares of six
     * packets as the budget has while DATA comes at its peak rate (as
     * here); the others pause (their packets would be more than the
     * budget). Every sender gets its turns. */
    now += 20 * (uint64_t)EPOCH_NS; /* a quiet spell: the list starts over */
    memset(turns, 0, sizeof(turns));
    epoch(net, s, SENDERS, &now, turns);
    uint32_t k0 = net->turn_peers;
    CHECK(k0 >= 1 && (uint64_t)k0 * 6 * PAYLOAD <= (80u << 10));
    for (int i = 1; i <= SENDERS; i++) {
        uint32_t g = fm_budget_grant(net, s[i]);
        CHECK(waits(g) || (uint64_t)g * k0 <= (80u << 10));
    }
    memset(turns, 0, sizeof(turns));
    int rounds = 0;
    for (int e = 0; e < 60; e++) {
        int g = epoch(net, s, SENDERS, &now, turns);
        CHECK_EQ(g, (int)net->turn_peers);
        rounds += g;
    }
    CHECK_EQ(net->turn_peers, k0);
    for (int i = 1; i <= SENDERS; i++)
        CHECK(turns[i] >= rounds / SENDERS - 1 && turns[i] <= rounds / SENDERS + 2);
    int w = 0;
    for (int i = 1; i <= SENDERS && !w; i++)
        if (fm_budget_grant(net, s[i]) == FM_GRANT_PAUSE)
            w = i;
    CHECK(w > 0);

    /* A client whose DATA comes alone is not listed; while senders take
     * turns it may have one packet in flight, and if it was told a share
     * or no limit before, it hears of the turns once. One with more to
     * send than that packet sends it not alone, and is counted. */
    struct fm_session *c = fm_session_get(net, SENDERS + 1);
    CHECK(c != NULL);
    c->state = S_UP;
    fm_budget_granted(net, c, 0);
    c->grant_told = 1;
    fm_budget_on_data(net, c, 8, 1, now);
    CHECK(!c->in_recent);
    CHECK_EQ(fm_budget_grant(net, c), FM_GRANT_TRICKLE);
    CHECK(fm_budget_news(net, c));
    fm_budget_granted(net, c, FM_GRANT_TRICKLE);
    CHECK(!fm_budget_news(net, c));
    fm_budget_on_data(net, c, 8, 1, now + 1);
    CHECK(!c->in_recent);
    fm_budget_on_data(net, c, PAYLOAD, 0, now + 2);
    CHECK(c->in_recent);

    /* DATA below its peak rate (the senders with a share do not fill the
     * port): one more at once each epoch. A loss at the full rate: fewer,
     * by a quarter; then back up to the fit, one an epoch. */
    for (int e = 0; e < 4; e++) {
        now += EPOCH_NS;
        for (int i = 1; i <= SENDERS / 2; i++) /* half the DATA of before */
            fm_budget_on_data(net, s[i], PAYLOAD, 0, now);
        for (int i = 1; i <= SENDERS; i++)
            fm_budget_granted(net, s[i], fm_budget_grant(net, s[i]));
    }
    now += EPOCH_NS;
    fm_budget_tick(net, now);
    CHECK(net->turn_peers > k0);
    for (int e = 0; e < 8; e++)
        epoch(net, s, SENDERS, &now, turns);
    uint32_t before = net->turn_peers;
    net->rx_gaps = 1;
    epoch(net, s, SENDERS, &now, turns);
    CHECK_EQ(net->turn_peers, FM_MAX(before * 3 / 4, 1u));
    if (net->turn_peers < k0) {
        epoch(net, s, SENDERS, &now, turns);
        CHECK_EQ(net->turn_peers, FM_MAX(before * 3 / 4, 1u) + 1);
    }

    /* A paused sender may send only a message that fits a packet, and only
     * with nothing in flight; a trickling one any packet, one at a time. */
    s[w]->grant = FM_GRANT_PAUSE;
    CHECK(fm_budget_allows(net, s[w], 8, 1));
    CHECK(!fm_budget_allows(net, s[w], PAYLOAD, 0));
    s[w]->grant = FM_GRANT_TRICKLE;
    CHECK(fm_budget_allows(net, s[w], PAYLOAD, 0));
    s[w]->rail[0].inflight = 8;
    CHECK(!fm_budget_allows(net, s[w], 8, 1));
    s[w]->rail[0].inflight = 0;

    /* Paused senders stay listed while quiet (they wait because we asked),
     * and each hears of its turn when it comes: the receiver owes it an
     * ACK. */
    for (int i = 1; i <= SENDERS; i++)
        s[i]->ack_now = 0;
    int paused = 0, called = 0;
    for (int i = 1; i <= SENDERS; i++)
        paused += s[i]->grant_given == FM_GRANT_PAUSE;
    CHECK(paused > 0);
    CHECK(fm_budget_deadline(net) < UINT64_MAX);
    for (int e = 0; e < SENDERS && fm_budget_deadline(net) < UINT64_MAX; e++) {
        now += EPOCH_NS;
        fm_budget_tick(net, now);
        for (int i = 1; i <= SENDERS; i++)
            if (s[i]->ack_now && s[i]->grant_given == FM_GRANT_PAUSE) {
                called++;
                /* Its turn is news: DATA to it must not replace the ACK. */
                CHECK(fm_budget_news(net, s[i]));
                s[i]->ack_now = 0;
                fm_budget_granted(net, s[i], fm_budget_grant(net, s[i]));
                CHECK(!fm_budget_news(net, s[i]));
            }
    }
    CHECK_EQ(called, paused);

    /* Senders that stop and were not told to wait leave the list: the few
     * still sending share the budget among themselves. */
    for (int e = 0; e < 20; e++)
        epoch(net, s, 3, &now, turns);
    CHECK_EQ(net->nrecent, 3u);
    CHECK_EQ(epoch(net, s, 3, &now, turns), 3);

    fm_net_free(net);
    return 0;
}
