/* The sessions' timer heap: the earliest deadline comes first whatever the
 * order deadlines were filed, moved and withdrawn in; a session is filed
 * once; and among a thousand sessions only the due ones are handed out. */
#include "net/session.h"
#include "testing/fmtest.h"

#include <string.h>

#define SESSIONS 1000

static uint64_t rng = 88172645463325252ull;

static uint64_t next_rand(void) { return fmt_rand(&rng); }

/* Every entry knows its place, and no parent is later than its children. */
static void check_heap(const struct fm_net *net, uint32_t filed)
{
    CHECK_EQ(net->ntimers, filed);
    for (uint32_t i = 0; i < net->ntimers; i++) {
        CHECK_EQ(net->timers[i].s->timer_idx, i + 1);
        if (i)
            CHECK(net->timers[(i - 1) / 2].at <= net->timers[i].at);
    }
}

int main(void)
{
    struct fm_net_params p = {
        .rank = 0, .size = SESSIONS + 1, .epoch = 0x5151u, .ring_size = 1u << 16,
        .payload = 1400, .timeout_ns = 2000000000ull, .rto_min_ns = 1000000,
        .rto_max_ns = 200000000, .ack_delay_ns = 200000, .nrails = 1,
        .rail_heartbeat_ns = 3000000,
    };
    memset(p.key, 3, sizeof(p.key));
    struct fm_net *net = fm_net_new(&p);
    CHECK(net != NULL);
    struct fm_session *s[SESSIONS];
    uint64_t at[SESSIONS];
    for (int i = 0; i < SESSIONS; i++) {
        s[i] = fm_session_get(net, i + 1);
        CHECK(s[i] != NULL);
        at[i] = UINT64_MAX;
    }
    CHECK_EQ(fm_timer_next(net), UINT64_MAX);
    CHECK(fm_timer_due(net, UINT64_MAX - 1) == NULL);

    /* Random filings, moves both ways, withdrawals and "sooner"s. */
    uint32_t filed = 0;
    for (int op = 0; op < 200000; op++) {
        int i = (int)(next_rand() % SESSIONS);
        uint64_t t = 1000 + next_rand() % 1000000;
        switch (next_rand() % 4) {
        case 0:
        case 1:
            filed += at[i] == UINT64_MAX;
            fm_timer_set(net, s[i], t);
            at[i] = t;
            break;
        case 2:
            filed -= at[i] != UINT64_MAX;
            fm_timer_set(net, s[i], UINT64_MAX);
            at[i] = UINT64_MAX;
            break;
        default:
            filed += at[i] == UINT64_MAX;
            fm_timer_sooner(net, s[i], t);
            at[i] = at[i] < t ? at[i] : t;
            break;
        }
        if (op % 997 == 0)
            check_heap(net, filed);
    }
    check_heap(net, filed);
    uint64_t first = UINT64_MAX;
    for (int i = 0; i < SESSIONS; i++)
        first = at[i] < first ? at[i] : first;
    CHECK_EQ(fm_timer_next(net), first);

    /* Drained in order: each due session is the earliest, and is filed
     * where its deadline says. */
    uint64_t last = 0;
    uint32_t drained = 0;
    for (struct fm_session *d; (d = fm_timer_due(net, UINT64_MAX - 1));) {
        int i = d->rank - 1;
        CHECK(i >= 0 && i < SESSIONS && s[i] == d);
        CHECK(at[i] >= last);
        CHECK_EQ(fm_timer_next(net), at[i]);
        last = at[i];
        fm_timer_set(net, d, UINT64_MAX);
        at[i] = UINT64_MAX;
        drained++;
    }
    CHECK_EQ(drained, filed);
    check_heap(net, 0);

    /* A thousand sessions filed for later and one due: only that one. */
    for (int i = 0; i < SESSIONS; i++)
        fm_timer_set(net, s[i], 5000000 + (uint64_t)i);
    fm_timer_set(net, s[617], 100);
    CHECK(fm_timer_due(net, 4000000) == s[617]);
    fm_timer_set(net, s[617], 6000000);
    CHECK(fm_timer_due(net, 4000000) == NULL);
    CHECK(fm_timer_due(net, 5000000) == s[0]);
    check_heap(net, SESSIONS);
    fm_net_free(net);
    return 0;
}
