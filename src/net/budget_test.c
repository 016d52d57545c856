/* The receiver's budget: a lone sender is not limited, a few share the
 * budget equally, and many take turns at it, each getting its turn. */
#include "net/session.h"
#include "testing/fmtest.h"

#include <string.h>

#define SENDERS (3 * BUDGET_TURN_PEERS)
#define K BUDGET_TURN_PEERS
#define PAYLOAD 1400
#define EPOCH_NS 600000u /* longer than the budget's epoch (0.5 ms at first) */

static struct fm_net *make(void)
{
    struct fm_net_params p = {
        .rank = 0, .size = SENDERS + 1, .epoch = 0x1234u, .ring_size = 1 << 16,
        .payload = PAYLOAD, .timeout_ns = 2000000000ull, .rto_min_ns = 1000000,
        .rto_max_ns = 200000000, .ack_delay_ns = 200000, .nrails = 1,
        .rail_heartbeat_ns = 3000000,
    };
    memset(p.key, 7, sizeof(p.key));
    return fm_net_new(&p);
}

/* One epoch in which senders [1, n] each send a packet; returns how many
 * of them may send more than one packet afterwards (a share of the budget,
 * or no limit), and counts each one's turns in turns[]. */
static int epoch(struct fm_net *net, struct fm_session **s, int n, uint64_t *now, int turns[])
{
    *now += EPOCH_NS;
    for (int i = 1; i <= n; i++)
        fm_budget_on_data(net, s[i], PAYLOAD, *now);
    int granted = 0;
    for (int i = 1; i <= n; i++) {
        uint32_t g = fm_budget_grant(net, s[i]);
        CHECK(g <= 1 || g >= 6 * PAYLOAD);
        if (g != 1) {
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
    }
    uint64_t now = 1000000000ull;
    int turns[SENDERS + 1] = {0};

    /* A lone sender: no limit, a small message leaves at once. */
    epoch(net, s, 1, &now, turns);
    CHECK_EQ(fm_budget_grant(net, s[1]), 0);

    /* Up to K: a share each, all at once. */
    memset(turns, 0, sizeof(turns));
    epoch(net, s, K, &now, turns);
    CHECK_EQ(epoch(net, s, K, &now, turns), K);

    /* Many: K at a time hold a share, the others one packet. After an
     * epoch that lists them, every sender gets one turn in three epochs. */
    now += 3 * EPOCH_NS; /* a quiet spell: the lists start over */
    memset(turns, 0, sizeof(turns));
    epoch(net, s, SENDERS, &now, turns);
    memset(turns, 0, sizeof(turns));
    for (int e = 0; e < 3; e++)
        CHECK_EQ(epoch(net, s, SENDERS, &now, turns), K);
    for (int i = 1; i <= SENDERS; i++)
        CHECK_EQ(turns[i], 1);
    /* And again in the next three. */
    for (int e = 0; e < 3; e++)
        CHECK_EQ(epoch(net, s, SENDERS, &now, turns), K);
    for (int i = 1; i <= SENDERS; i++)
        CHECK_EQ(turns[i], 2);

    /* Senders that stop leave the rotation: the K + 1 still sending share
     * the turns among themselves, each sitting one epoch out of K + 1. */
    epoch(net, s, K + 1, &now, turns);
    memset(turns, 0, sizeof(turns));
    for (int e = 0; e < K + 1; e++)
        CHECK_EQ(epoch(net, s, K + 1, &now, turns), K);
    for (int i = 1; i <= K + 1; i++)
        CHECK_EQ(turns[i], K);
    for (int i = K + 2; i <= SENDERS; i++)
        CHECK_EQ(turns[i], 0);

    fm_net_free(net);
    return 0;
}
