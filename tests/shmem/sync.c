/*
 * sync.c: OpenSHMEM synchronisation and ordering.
 *
 * Covered: shmem_barrier_all, shmem_sync_all, shmem_quiet; shmem_TYPE_wait_until and
 * shmem_TYPE_test with every comparison operator and every standard AMO type; shmem_fence
 * ordering (data then flag, with the flag written both by an AMO and by a put); locks
 * (shmem_set_lock, shmem_test_lock, shmem_clear_lock) guarding a non-atomic get+put
 * increment.  With 1.5 headers: shmem_TYPE_{wait_until,test}_{all,any,some}[_vector] and
 * put-with-signal (shmem_putmem_signal, typed and sized forms, _nbi forms, SHMEM_SIGNAL_SET
 * and SHMEM_SIGNAL_ADD, shmem_signal_wait_until, shmem_signal_fetch); a PE that polls with
 * shmem_TYPE_test_all while its own large get is out must still let that get's target
 * serve others.
 *
 * Point-to-point tests pass a token around the ring 0 -> 1 -> ... -> n-1 -> 0, so every PE
 * but PE 0 really blocks in the wait under test before its flag is written.
 *
 * Flags: 1.5 describes wait_until as waiting for an update "by an AMO", where 1.4 also
 * allowed a put.  The ring flags are therefore set with AMOs; the put-flag form, which
 * 1.4 allows and much existing code relies on, has its own fence test.
 *
 * Guarded, for Open MPI 4.1's oshmem (OpenSHMEM 1.4):
 * - it has no shmem_{int32,int64,uint32,uint64,size,ptrdiff}_atomic_set, so the wait_until
 *   tests of those types, which need an AMO to write the flag, need 1.5 headers;
 * - a PE polling shmem_TYPE_test or shmem_test_lock makes no progress there, so a peer's
 *   AMO or get targeting it never completes (deadlock; the spec requires progress
 *   regardless).  With 1.4 headers the shmem_test loops become wait_until followed by a
 *   test that must succeed at once, and the lock loop takes the lock with shmem_set_lock
 *   only; shmem_test_lock is still checked on a held and on a free lock.
 */
#include "shtest.h"

#include <stdlib.h>

#define HAVE_1_5 (SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 5)
#define POLLING_PROGRESSES HAVE_1_5  /* oshmem 4.1 bug, see the top */

enum { PAYLOAD = 1024 };

/* Polls shmem_TYPE_test until the condition holds; each iteration is a library call. */
#if POLLING_PROGRESSES
#define TEST_UNTIL(N, ivar, cmp, value)                                                            \
    do {                                                                                           \
        while (!shmem_##N##_test(ivar, cmp, value))                                                \
            ;                                                                                      \
    } while (0)
#else
#define TEST_UNTIL(N, ivar, cmp, value)                                                            \
    do {                                                                                           \
        shmem_##N##_wait_until(ivar, cmp, value);                                                  \
        expect_eq(shmem_##N##_test(ivar, cmp, value), 1, "shmem_" #N "_test after wait");          \
    } while (0)
#endif

static int me, npes, right, left;

/* Ring token: PE 0 sends first; everybody else receives, then forwards. */
static void ring(void (*send)(int), void (*recv)(int), int c)
{
    if (me == 0) {
        send(c);
        recv(c);
    } else {
        recv(c);
        send(c);
    }
}

static void barriers(void)
{
    static long slot[4], pub;

    for (int r = 0; r < 4; r++) {
        shmem_long_p(&slot[r], 100L * me + r, right);
        shmem_barrier_all();
        expect_eq(slot[r], 100L * left + r, "shmem_barrier_all completing a put, round %d", r);
    }

    shmem_long_p(&slot[0], 1000L + me, right);
    shmem_quiet();
    shmem_sync_all();
    expect_eq(slot[0], 1000L + left, "shmem_quiet + shmem_sync_all completing a put");

    /* sync_all makes local stores visible to other PEs' gets. */
    pub = 7L * me + 1;
    shmem_sync_all();
    expect_eq(shmem_long_g(&pub, left), 7L * left + 1, "shmem_sync_all publishing a store");
    shmem_barrier_all();
}

/* wait_until with each comparison; the flag starts at 0, which satisfies none of them. */
static const struct {
    int cmp;
    long value, set;
    const char *name;
} cmps[] = {
    {SHMEM_CMP_EQ, 5, 5, "SHMEM_CMP_EQ"},    {SHMEM_CMP_NE, 0, 7, "SHMEM_CMP_NE"},
    {SHMEM_CMP_GT, 10, 11, "SHMEM_CMP_GT"},  {SHMEM_CMP_GE, 20, 20, "SHMEM_CMP_GE"},
    {SHMEM_CMP_LT, -1, -5, "SHMEM_CMP_LT"},  {SHMEM_CMP_LE, -10, -10, "SHMEM_CMP_LE"},
};
enum { NCMP = sizeof cmps / sizeof cmps[0] };

static long cmp_flag[NCMP], test_flag[NCMP];
static long cmp_data[NCMP][PAYLOAD];

static void cmp_send(int c)
{
    long buf[PAYLOAD];

    for (int i = 0; i < PAYLOAD; i++)
        buf[i] = 1000000L * me + 10000L * c + i;
    shmem_long_put(cmp_data[c], buf, PAYLOAD, right);
    shmem_fence();
    shmem_long_atomic_set(&cmp_flag[c], cmps[c].set, right);
    shmem_long_atomic_set(&test_flag[c], cmps[c].set, right);
}

static void cmp_check(int c, const char *how)
{
    expect_eq(cmp_flag[c], cmps[c].set, "flag after %s %s", how, cmps[c].name);
    for (int i = 0; i < PAYLOAD; i++) {
        expect_eq(cmp_data[c][i], 1000000L * left + 10000L * c + i,
                  "data fenced before flag, %s %s, elem %d", how, cmps[c].name, i);
    }
}

static void cmp_recv_wait(int c)
{
    shmem_long_wait_until(&cmp_flag[c], cmps[c].cmp, cmps[c].value);
    cmp_check(c, "shmem_long_wait_until");
}

static void cmp_recv_test(int c)
{
    TEST_UNTIL(long, &test_flag[c], cmps[c].cmp, cmps[c].value);
    expect_eq(test_flag[c], cmps[c].set, "flag after shmem_long_test %s", cmps[c].name);
}

static void comparisons(void)
{
    for (int c = 0; c < NCMP; c++) {
        expect_eq(shmem_long_test(&cmp_flag[c], cmps[c].cmp, cmps[c].value), 0,
                  "shmem_long_test %s before the flag is set", cmps[c].name);
    }
    shmem_barrier_all();
    for (int c = 0; c < NCMP; c++)
        ring(cmp_send, cmp_recv_wait, c);
    for (int c = 0; c < NCMP; c++)
        cmp_recv_test(c);
    shmem_barrier_all();
}

/* Every standard AMO type: wait for GE on a flag set by an AMO of that type. */
#define DEFINE_TYPED_WAIT(T, N)                                                                    \
    static T wflag_##N, tflag_##N;                                                                 \
    static void wsend_##N(void)                                                                    \
    {                                                                                              \
        shmem_##N##_atomic_set(&wflag_##N, (T)3, right);                                           \
        shmem_##N##_atomic_set(&tflag_##N, (T)4, right);                                           \
    }                                                                                              \
    static void wrecv_##N(void)                                                                    \
    {                                                                                              \
        shmem_##N##_wait_until(&wflag_##N, SHMEM_CMP_GE, (T)3);                                    \
        expect_eq(wflag_##N, 3, "shmem_" #N "_wait_until");                                        \
        TEST_UNTIL(N, &tflag_##N, SHMEM_CMP_EQ, (T)4);                                             \
    }

#define WAIT_TYPES_14(X)                                                                           \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint)                         \
    X(unsigned long, ulong) X(unsigned long long, ulonglong)
#if HAVE_1_5
#define WAIT_TYPES(X)                                                                              \
    WAIT_TYPES_14(X) X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32)                       \
    X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)
#else
#define WAIT_TYPES(X) WAIT_TYPES_14(X)
#endif

WAIT_TYPES(DEFINE_TYPED_WAIT)

static void typed_send(int c)
{
    (void)c;
#define WSEND(T, N) wsend_##N();
    WAIT_TYPES(WSEND)
}

static void typed_recv(int c)
{
    (void)c;
#define WRECV(T, N) wrecv_##N();
    WAIT_TYPES(WRECV)
}

/*
 * Fence ordering under a stream: FENCE_ROUNDS data blocks, each followed by a fence and a
 * flag carrying its round number.  Whatever round the receiver observes, every block up to
 * it must already be there.  Odd rounds write the flag with a put, even rounds with an AMO.
 */
enum { FENCE_ROUNDS = 64, FENCE_BLOCK = 128 };
static long fence_data[FENCE_ROUNDS + 1][FENCE_BLOCK];
static long fence_seq;

static void fence_send(int c)
{
    long buf[FENCE_BLOCK];

    (void)c;
    for (long k = 1; k <= FENCE_ROUNDS; k++) {
        for (int i = 0; i < FENCE_BLOCK; i++)
            buf[i] = 1000000L * me + 1000L * k + i;
        shmem_long_put(fence_data[k], buf, FENCE_BLOCK, right);
        shmem_fence();
        if (k % 2)
            shmem_long_p(&fence_seq, k, right);
        else
            shmem_long_atomic_set(&fence_seq, k, right);
    }
}

static void fence_recv(int c)
{
    long checked = 0;

    (void)c;
    while (checked < FENCE_ROUNDS) {
        shmem_long_wait_until(&fence_seq, SHMEM_CMP_GT, checked);

        long seen = fence_seq;

        for (long k = checked + 1; k <= seen; k++) {
            for (int i = 0; i < FENCE_BLOCK; i++) {
                expect_eq(fence_data[k][i], 1000000L * left + 1000L * k + i,
                          "block %ld before flag %ld (shmem_fence), elem %d", k, seen, i);
            }
        }
        checked = seen;
    }
}

/* A non-atomic read-modify-write of a counter on PE 0, made safe by the lock alone. */
enum { LOCK_ITERS = 16 };
static long lock, probe_lock, locked_count;

static void locks(void)
{
    for (int i = 0; i < LOCK_ITERS; i++) {
        if (i % 2 || !POLLING_PROGRESSES) {
            shmem_set_lock(&lock);
        } else {
            while (shmem_test_lock(&lock))
                ;
        }

        long v = shmem_long_g(&locked_count, 0);

        shmem_long_p(&locked_count, v + 1, 0);
        shmem_clear_lock(&lock);
    }
    shmem_barrier_all();
    if (me == 0)
        expect_eq(locked_count, (long)LOCK_ITERS * npes, "lock-protected get+put increments");

    /* shmem_test_lock reports a held lock without taking it. */
    if (me == 0)
        shmem_set_lock(&probe_lock);
    shmem_barrier_all();
    if (me != 0)
        expect_eq(shmem_test_lock(&probe_lock), 1, "shmem_test_lock on a lock PE 0 holds");
    shmem_barrier_all();
    if (me == 0)
        shmem_clear_lock(&probe_lock);
    shmem_barrier_all();
    if (me == npes - 1) {
        expect_eq(shmem_test_lock(&probe_lock), 0, "shmem_test_lock on a free lock");
        shmem_clear_lock(&probe_lock);
    }
    shmem_barrier_all();
}

#if HAVE_1_5
/*
 * Wait/test on sets.  Phase 1 sets one element so "any" and "some" have a single answer;
 * after an acknowledgement, phase 2 sets the rest.
 */
enum { NV = 4 };
static long ivars[NV], ack;

static void expect_index_set(const size_t *idx, size_t n, unsigned want_mask, const char *what)
{
    unsigned seen = 0;

    for (size_t i = 0; i < n; i++) {
        if (idx[i] >= NV || (seen & 1u << idx[i]))
            expect_eq(idx[i], NV, "%s: index %zu out of range or repeated", what, i);
        seen |= 1u << idx[i];
    }
    expect_eq(seen, want_mask, "%s: set of indices (bit mask)", what);
}

static void wait_sets(void)
{
    static const int all_excluded[NV] = {1, 1, 1, 1};
    static const int only2[NV] = {1, 1, 0, 1};
    static const int not2[NV] = {0, 0, 1, 0};
    long ones[NV] = {1, 1, 1, 1}, any2[NV] = {5, 5, 1, 5}, some02[NV] = {1, 9, 1, 9};
    long last3[NV] = {9, 9, 9, 1};
    size_t idx[NV];

    expect_eq(shmem_long_test_any(ivars, NV, NULL, SHMEM_CMP_EQ, 1), SIZE_MAX,
              "shmem_long_test_any, nothing set");
    expect_eq(shmem_long_test_all(ivars, NV, NULL, SHMEM_CMP_EQ, 1), 0,
              "shmem_long_test_all, nothing set");
    expect_eq(shmem_long_test_some(ivars, NV, idx, NULL, SHMEM_CMP_EQ, 1), 0,
              "shmem_long_test_some, nothing set");
    expect_eq(shmem_long_test_any(ivars, 0, NULL, SHMEM_CMP_EQ, 0), SIZE_MAX,
              "shmem_long_test_any, nelems 0");
    expect_eq(shmem_long_test_some(ivars, 0, idx, NULL, SHMEM_CMP_EQ, 0), 0,
              "shmem_long_test_some, nelems 0");
    expect_eq(shmem_long_wait_until_any(ivars, NV, all_excluded, SHMEM_CMP_EQ, 1), SIZE_MAX,
              "shmem_long_wait_until_any, every element excluded");
    expect_eq(shmem_long_wait_until_some(ivars, NV, idx, all_excluded, SHMEM_CMP_EQ, 1), 0,
              "shmem_long_wait_until_some, every element excluded");
    shmem_long_wait_until_all(ivars, NV, all_excluded, SHMEM_CMP_EQ, 1);
    shmem_long_wait_until_all(ivars, 0, NULL, SHMEM_CMP_EQ, 1);
    shmem_barrier_all();

    shmem_long_atomic_set(&ivars[2], 1, right);
    expect_eq(shmem_long_wait_until_any(ivars, NV, NULL, SHMEM_CMP_EQ, 1), 2,
              "shmem_long_wait_until_any");
    expect_eq(shmem_long_test_any(ivars, NV, NULL, SHMEM_CMP_EQ, 1), 2, "shmem_long_test_any");
    expect_eq(shmem_long_test_any(ivars, NV, not2, SHMEM_CMP_EQ, 1), SIZE_MAX,
              "shmem_long_test_any with the set element excluded");
    expect_eq(shmem_long_wait_until_some(ivars, NV, idx, NULL, SHMEM_CMP_EQ, 1), 1,
              "shmem_long_wait_until_some count");
    expect_eq(idx[0], 2, "shmem_long_wait_until_some index");
    expect_eq(shmem_long_test_some(ivars, NV, idx, NULL, SHMEM_CMP_NE, 0), 1,
              "shmem_long_test_some count");
    expect_eq(idx[0], 2, "shmem_long_test_some index");
    expect_eq(shmem_long_test_all(ivars, NV, only2, SHMEM_CMP_EQ, 1), 1,
              "shmem_long_test_all over the one set element");
    shmem_long_wait_until_all(ivars, NV, only2, SHMEM_CMP_EQ, 1);
    expect_eq(shmem_long_wait_until_any_vector(ivars, NV, NULL, SHMEM_CMP_EQ, any2), 2,
              "shmem_long_wait_until_any_vector");
    expect_eq(shmem_long_test_all(ivars, NV, NULL, SHMEM_CMP_EQ, 1), 0,
              "shmem_long_test_all, one of four set");

    shmem_long_atomic_inc(&ack, left);
    shmem_long_wait_until(&ack, SHMEM_CMP_EQ, 1);

    shmem_long_atomic_set(&ivars[0], 1, right);
    shmem_long_atomic_set(&ivars[3], 1, right);
    shmem_long_atomic_set(&ivars[1], 1, right);
    shmem_long_wait_until_all(ivars, NV, NULL, SHMEM_CMP_EQ, 1);
    expect_eq(shmem_long_test_all(ivars, NV, NULL, SHMEM_CMP_EQ, 1), 1, "shmem_long_test_all");
    expect_index_set(idx, shmem_long_wait_until_some(ivars, NV, idx, NULL, SHMEM_CMP_EQ, 1),
                     0xF, "shmem_long_wait_until_some, all set");
    expect_index_set(idx, shmem_long_test_some(ivars, NV, idx, NULL, SHMEM_CMP_GE, 1), 0xF,
                     "shmem_long_test_some, all set");
    shmem_long_wait_until_all_vector(ivars, NV, NULL, SHMEM_CMP_EQ, ones);
    expect_eq(shmem_long_test_all_vector(ivars, NV, NULL, SHMEM_CMP_EQ, ones), 1,
              "shmem_long_test_all_vector");
    expect_eq(shmem_long_test_any_vector(ivars, NV, NULL, SHMEM_CMP_EQ, last3), 3,
              "shmem_long_test_any_vector");
    expect_index_set(idx, shmem_long_wait_until_some_vector(ivars, NV, idx, NULL, SHMEM_CMP_EQ,
                                                            some02),
                     0x5, "shmem_long_wait_until_some_vector");
    expect_index_set(idx, shmem_long_test_some_vector(ivars, NV, idx, NULL, SHMEM_CMP_EQ, some02),
                     0x5, "shmem_long_test_some_vector");
    /* With every element set, a series of test_any (and wait_until_any)
     * calls must return each index in turn, not the first one for ever. */
    unsigned tested = 0, waited = 0;
    for (int k = 0; k < 2 * NV; k++) {
        size_t t = shmem_long_test_any(ivars, NV, NULL, SHMEM_CMP_EQ, 1);
        tested |= t < NV ? 1u << t : 0;
    }
    for (int k = 0; k < 2 * NV; k++) {
        size_t w = shmem_long_wait_until_any(ivars, NV, NULL, SHMEM_CMP_EQ, 1);
        waited |= w < NV ? 1u << w : 0;
    }
    expect_eq(tested, 0xF, "indices shmem_long_test_any returned in %d calls (bit mask)", 2 * NV);
    expect_eq(waited, 0xF, "indices shmem_long_wait_until_any returned in %d calls (bit mask)",
              2 * NV);
    shmem_barrier_all();
}

/*
 * Put-with-signal.  Each signal word is only ever updated with one operator, which is all
 * 1.5 makes atomic; the payload must be complete once the signal is seen.
 */
enum { SIG_BYTES = 256 * 1024, SIG_LONGS = 333, SIG_SLOT = 4096 };
static uint64_t sig_mem, sig_typed, sig_sized, sig_nbi, sig_typed_nbi, sig_add, sig_add_nbi;
static long sig_long[SIG_LONGS], sig_long_nbi[SIG_LONGS];
static uint64_t sig_u64[SIG_LONGS];

static void signals(void)
{
    const uint64_t big = 0xFEDCBA9876543210u;
    unsigned char *mem = shmem_malloc(SIG_BYTES), *mem_nbi = shmem_malloc(SIG_BYTES);
    unsigned char *slots = shmem_malloc((size_t)SIG_SLOT * npes);
    unsigned char *slots_nbi = shmem_malloc((size_t)SIG_SLOT * npes);
    static unsigned char src[SIG_BYTES];
    long lsrc[SIG_LONGS];
    uint64_t usrc[SIG_LONGS];

    for (int i = 0; i < SIG_LONGS; i++) {
        lsrc[i] = 1000L * me + i;
        usrc[i] = (uint64_t)me << 48 | (uint64_t)i;
    }

    /* SHMEM_SIGNAL_SET to the right neighbour, blocking then nonblocking. */
    fill_pat(src, SIG_BYTES, 1u + (unsigned)me);
    shmem_putmem_signal(mem, src, SIG_BYTES, &sig_mem, big, SHMEM_SIGNAL_SET, right);
    shmem_long_put_signal(sig_long, lsrc, SIG_LONGS, &sig_typed, 2, SHMEM_SIGNAL_SET, right);
    shmem_put64_signal(sig_u64, usrc, SIG_LONGS, &sig_sized, 3, SHMEM_SIGNAL_SET, right);
    expect_eq(shmem_signal_wait_until(&sig_mem, SHMEM_CMP_EQ, big), big,
              "shmem_signal_wait_until return value");
    check_pat(mem, SIG_BYTES, 1u + (unsigned)left, "shmem_putmem_signal payload");
    shmem_uint64_wait_until(&sig_typed, SHMEM_CMP_EQ, 2);
    shmem_signal_wait_until(&sig_sized, SHMEM_CMP_GE, 3);
    for (int i = 0; i < SIG_LONGS; i++) {
        expect_eq(sig_long[i], 1000L * left + i, "shmem_long_put_signal payload elem %d", i);
        expect_eq(sig_u64[i], (uint64_t)left << 48 | (uint64_t)i,
                  "shmem_put64_signal payload elem %d", i);
    }

    fill_pat(src, SIG_BYTES, 100u + (unsigned)me);
    shmem_putmem_signal_nbi(mem_nbi, src, SIG_BYTES, &sig_nbi, 4, SHMEM_SIGNAL_SET, right);
    shmem_long_put_signal_nbi(sig_long_nbi, lsrc, SIG_LONGS, &sig_typed_nbi, 5,
                              SHMEM_SIGNAL_SET, right);
    shmem_quiet();
    expect_eq(shmem_signal_wait_until(&sig_nbi, SHMEM_CMP_NE, 0), 4,
              "shmem_signal_wait_until after shmem_putmem_signal_nbi");
    check_pat(mem_nbi, SIG_BYTES, 100u + (unsigned)left, "shmem_putmem_signal_nbi payload");
    shmem_signal_wait_until(&sig_typed_nbi, SHMEM_CMP_EQ, 5);
    for (int i = 0; i < SIG_LONGS; i++) {
        expect_eq(sig_long_nbi[i], 1000L * left + i, "shmem_long_put_signal_nbi payload elem %d",
                  i);
    }

    /* SHMEM_SIGNAL_ADD: everybody signals PE 0, so the additions race. */
    fill_pat(src, SIG_SLOT, 200u + (unsigned)me);
    shmem_putmem_signal(slots + (size_t)me * SIG_SLOT, src, SIG_SLOT, &sig_add, 1,
                        SHMEM_SIGNAL_ADD, 0);
    shmem_put32_signal_nbi(slots_nbi + (size_t)me * SIG_SLOT, src, SIG_SLOT / 4, &sig_add_nbi,
                           (uint64_t)me + 1, SHMEM_SIGNAL_ADD, 0);
    shmem_quiet();
    if (me == 0) {
        uint64_t want_nbi = (uint64_t)npes * (npes + 1) / 2;

        expect_eq(shmem_signal_wait_until(&sig_add, SHMEM_CMP_GE, (uint64_t)npes), npes,
                  "SHMEM_SIGNAL_ADD total");
        expect_eq(shmem_signal_wait_until(&sig_add_nbi, SHMEM_CMP_EQ, want_nbi), want_nbi,
                  "SHMEM_SIGNAL_ADD total, shmem_put32_signal_nbi");
        for (int p = 0; p < npes; p++) {
            check_pat(slots + (size_t)p * SIG_SLOT, SIG_SLOT, 200u + (unsigned)p,
                      "SHMEM_SIGNAL_ADD payload from pe %d", p);
            check_pat(slots_nbi + (size_t)p * SIG_SLOT, SIG_SLOT, 200u + (unsigned)p,
                      "SHMEM_SIGNAL_ADD nbi payload from pe %d", p);
        }
    }
    shmem_barrier_all();

    expect_eq(shmem_signal_fetch(&sig_mem), big, "shmem_signal_fetch");
    expect_eq(shmem_signal_fetch(&sig_typed_nbi), 5, "shmem_signal_fetch");
    if (me == 0)
        expect_eq(shmem_signal_fetch(&sig_add), npes, "shmem_signal_fetch of an added signal");

    shmem_free(slots_nbi);
    shmem_free(slots);
    shmem_free(mem_nbi);
    shmem_free(mem);
}

/*
 * Progress while a PE only tests: PE 0 has a 4 MiB get from PE 1 out and polls a flag with
 * shmem_int_test_all; PE 2 sets the flag only after a put to PE 1 and a shmem_quiet.  Where
 * PE 1 answers the get by sending to PE 0 and serves PE 2 only once that is done, the flag
 * comes only if PE 0's test calls take the answer in (the spec requires progress there).
 */
static void progress_while_testing(void)
{
    enum { BIG = 4 << 20 };
    static int flag, landed;
    unsigned char *src = shmem_malloc(BIG), *dst = malloc(BIG);

    if (src == NULL || dst == NULL)
        fail("NULL", "memory", "allocating %d-byte buffers", BIG);
    fill_pat(src, BIG, 300u + (unsigned)me);
    flag = 0;
    landed = 0;
    shmem_barrier_all();
    if (me == 0) {
        shmem_getmem_nbi(dst, src, BIG, 1);
        while (!shmem_int_test_all(&flag, 1, NULL, SHMEM_CMP_EQ, 1))
            ;
        shmem_quiet();
        check_pat(dst, BIG, 301u, "shmem_getmem_nbi beside a test loop");
        expect_eq((unsigned long long)shmem_int_g(&landed, 1), 1,
                  "PE 2's put before its quiet and flag");
    } else if (me == 2) {
        shmem_int_p(&landed, 1, 1);
        shmem_quiet();
        shmem_int_atomic_set(&flag, 1, 0);
    }
    shmem_barrier_all();
    free(dst);
    shmem_free(src);
}
#endif

int main(void)
{
    shmem_init();
    ring_place(&me, &npes, &right, &left);

    barriers();
    comparisons();
    ring(typed_send, typed_recv, 0);
    shmem_barrier_all();
    ring(fence_send, fence_recv, 0);
    shmem_barrier_all();
    locks();
#if HAVE_1_5
    wait_sets();
    signals();
    if (npes >= 3)
        progress_while_testing();
#endif
    return finish("sync");
}
