/*
 * atomics.c: OpenSHMEM atomic memory operations.
 *
 * Covered: fetch, set, swap, compare_swap, fetch_inc, inc, fetch_add and add for the
 * standard AMO types; fetch, set and swap for float and double; fetch_{and,or,xor} and
 * {and,or,xor} for the bitwise AMO types; the C11 generic names; the deprecated
 * shmem_int_{fetch,set,swap,cswap,finc,inc,fadd,add}; with 1.5 headers, the nonblocking
 * fetching AMOs, the bitwise generics on int32_t and int64_t, and the deprecated generic
 * names (shmem_swap on an int swaps 4 bytes).  Then a hammer (every PE adds to one counter on PE 0 and one on the last
 * PE, final values exact) and compare_swap elections (exactly one winner per round).
 *
 * In the per-type sequences every PE operates on its right neighbour only, so the values
 * each step returns are known exactly; a quiet follows every non-fetching AMO because only
 * completion, not program order, makes its effect visible to a later fetch.
 *
 * Guarded: Open MPI 4.1's oshmem (OpenSHMEM 1.4) lacks the int32, int64, uint32, uint64,
 * size and ptrdiff variants of fetch/set/swap/compare_swap/fetch_inc/inc/fetch_add/add,
 * although 1.4 specifies them; those are built only against 1.5 headers, as are the
 * nonblocking fetching AMOs, which are new in 1.5.  Its compare_swap on 32-bit types
 * (shmem_int_atomic_compare_swap, shmem_uint_..., shmem_int_cswap) writes past the caller's
 * stack frame ("stack smashing detected"), so with 1.4 headers a swap stands in for the
 * 32-bit compare_swap steps; the 64-bit ones, and the election, run everywhere.
 */
#include "shtest.h"

#define HAVE_1_5 (SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 5)
#define CSWAP32_WORKS HAVE_1_5  /* oshmem 4.1 bug, see the top */

static int me, npes, right;

/* Standard AMO types: the sequence leaves 42 in the right neighbour's variable. */
#define DEFINE_STD(T, N)                                                                           \
    static T amo_##N;                                                                              \
    static void std_##N(void)                                                                      \
    {                                                                                              \
        T *t = &amo_##N;                                                                           \
                                                                                                   \
        shmem_##N##_atomic_set(t, (T)10, right);                                                   \
        shmem_quiet();                                                                             \
        expect_eq(shmem_##N##_atomic_fetch(t, right), 10, "shmem_" #N "_atomic_set/fetch");        \
        expect_eq(shmem_##N##_atomic_swap(t, (T)20, right), 10, "shmem_" #N "_atomic_swap");       \
        if (sizeof(T) >= 8 || CSWAP32_WORKS) {                                                     \
            expect_eq(shmem_##N##_atomic_compare_swap(t, (T)99, (T)77, right), 20,                 \
                      "shmem_" #N "_atomic_compare_swap, cond false");                             \
            expect_eq(shmem_##N##_atomic_compare_swap(t, (T)20, (T)30, right), 20,                 \
                      "shmem_" #N "_atomic_compare_swap, cond true");                              \
        } else {                                                                                   \
            expect_eq(shmem_##N##_atomic_swap(t, (T)30, right), 20,                                \
                      "shmem_" #N "_atomic_swap standing in for compare_swap");                    \
        }                                                                                          \
        expect_eq(shmem_##N##_atomic_fetch_inc(t, right), 30, "shmem_" #N "_atomic_fetch_inc");    \
        shmem_##N##_atomic_inc(t, right);                                                          \
        shmem_quiet();                                                                             \
        expect_eq(shmem_##N##_atomic_fetch_add(t, (T)5, right), 32,                                \
                  "shmem_" #N "_atomic_inc/fetch_add");                                            \
        expect_eq(shmem_##N##_atomic_fetch_add(t, (T)-2, right), 37,                               \
                  "shmem_" #N "_atomic_fetch_add of (T)-2");                                       \
        shmem_##N##_atomic_add(t, (T)7, right);                                                    \
        shmem_quiet();                                                                             \
        expect_eq(shmem_##N##_atomic_fetch(t, right), 42, "shmem_" #N "_atomic_add");              \
    }                                                                                              \
    static void std_final_##N(void)                                                                \
    {                                                                                              \
        expect_eq(amo_##N, 42, "local value after shmem_" #N " AMO sequence");                     \
    }

/*
 * Bitwise AMO types, exercising the top bits of each width.  Only bitwise routines touch
 * the variable (it starts at zero), so the sequence needs nothing beyond the bitwise set.
 */
#define DEFINE_BIT(T, N)                                                                           \
    static T bit_##N;                                                                              \
    static T bit_expected_##N(void)                                                                \
    {                                                                                              \
        T high = (T)((T)1 << (sizeof(T) * 8 - 2));                                                 \
        T v = (T)((T)0x5A5A5A5A & (T)0x0FF00FF0);                                                  \
                                                                                                   \
        return (T)(~(T)(v | high | 1) ^ (T)0xF0);                                                  \
    }                                                                                              \
    static void bit_##N##_run(void)                                                                \
    {                                                                                              \
        T *t = &bit_##N, ones = (T)~(T)0, high = (T)((T)1 << (sizeof(T) * 8 - 2));                 \
        T v = (T)((T)0x5A5A5A5A & (T)0x0FF00FF0);                                                  \
                                                                                                   \
        expect_eq(shmem_##N##_atomic_fetch_or(t, ones, right), 0,                                  \
                  "shmem_" #N "_atomic_fetch_or on zero");                                         \
        expect_eq(shmem_##N##_atomic_fetch_and(t, (T)0x5A5A5A5A, right), ones,                     \
                  "shmem_" #N "_atomic_fetch_and");                                                \
        shmem_##N##_atomic_and(t, (T)0x0FF00FF0, right);                                           \
        shmem_quiet();                                                                             \
        expect_eq(shmem_##N##_atomic_fetch_or(t, high, right), v,                                  \
                  "shmem_" #N "_atomic_and/fetch_or");                                             \
        shmem_##N##_atomic_or(t, (T)1, right);                                                     \
        shmem_quiet();                                                                             \
        expect_eq(shmem_##N##_atomic_fetch_xor(t, ones, right), (T)(v | high | 1),                 \
                  "shmem_" #N "_atomic_or/fetch_xor");                                             \
        shmem_##N##_atomic_xor(t, (T)0xF0, right);                                                 \
        shmem_quiet();                                                                             \
        expect_eq(shmem_##N##_atomic_fetch_and(t, ones, right), bit_expected_##N(),                \
                  "shmem_" #N "_atomic_xor");                                                      \
    }                                                                                              \
    static void bit_final_##N(void)                                                                \
    {                                                                                              \
        expect_eq(bit_##N, bit_expected_##N(), "local value after shmem_" #N " bitwise AMOs");     \
    }

#define DEFINE_FP(T, N)                                                                            \
    static T fp_##N;                                                                               \
    static void fp_##N##_run(void)                                                                 \
    {                                                                                              \
        shmem_##N##_atomic_set(&fp_##N, (T)1.5, right);                                            \
        shmem_quiet();                                                                             \
        expect_fp(shmem_##N##_atomic_fetch(&fp_##N, right), 1.5, "shmem_" #N "_atomic_set/fetch"); \
        expect_fp(shmem_##N##_atomic_swap(&fp_##N, (T)-2.25, right), 1.5,                          \
                  "shmem_" #N "_atomic_swap");                                                     \
        expect_fp(shmem_##N##_atomic_fetch(&fp_##N, right), -2.25, "shmem_" #N "_atomic_swap");    \
    }                                                                                              \
    static void fp_final_##N(void)                                                                 \
    {                                                                                              \
        expect_fp(fp_##N, -2.25, "local value after shmem_" #N " AMOs");                           \
    }

#define STD_TYPES_14(X)                                                                            \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint)                         \
    X(unsigned long, ulong) X(unsigned long long, ulonglong)
#define STD_TYPES_FIXED(X)                                                                         \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)                    \
    X(size_t, size) X(ptrdiff_t, ptrdiff)
#if HAVE_1_5
#define STD_TYPES(X) STD_TYPES_14(X) STD_TYPES_FIXED(X)
#else
#define STD_TYPES(X) STD_TYPES_14(X)
#endif
#define BIT_TYPES(X)                                                                               \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong)                 \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)
#define FP_TYPES(X) X(float, float) X(double, double)

STD_TYPES(DEFINE_STD)
BIT_TYPES(DEFINE_BIT)
FP_TYPES(DEFINE_FP)

#if HAVE_1_5
/* Nonblocking fetching AMOs: the fetched value is only defined after a quiet. */
#define DEFINE_NBI(T, N)                                                                           \
    static T nbi_##N;                                                                              \
    static void nbi_##N##_run(void)                                                                \
    {                                                                                              \
        T f = (T)0;                                                                                \
                                                                                                   \
        shmem_##N##_atomic_set(&nbi_##N, (T)5, right);                                             \
        shmem_quiet();                                                                             \
        shmem_##N##_atomic_fetch_nbi(&f, &nbi_##N, right);                                         \
        shmem_quiet();                                                                             \
        expect_eq(f, 5, "shmem_" #N "_atomic_fetch_nbi");                                          \
        shmem_##N##_atomic_swap_nbi(&f, &nbi_##N, (T)6, right);                                    \
        shmem_quiet();                                                                             \
        expect_eq(f, 5, "shmem_" #N "_atomic_swap_nbi");                                           \
        shmem_##N##_atomic_compare_swap_nbi(&f, &nbi_##N, (T)6, (T)7, right);                      \
        shmem_quiet();                                                                             \
        expect_eq(f, 6, "shmem_" #N "_atomic_compare_swap_nbi");                                   \
        shmem_##N##_atomic_fetch_inc_nbi(&f, &nbi_##N, right);                                     \
        shmem_quiet();                                                                             \
        expect_eq(f, 7, "shmem_" #N "_atomic_fetch_inc_nbi");                                      \
        shmem_##N##_atomic_fetch_add_nbi(&f, &nbi_##N, (T)3, right);                               \
        shmem_quiet();                                                                             \
        expect_eq(f, 8, "shmem_" #N "_atomic_fetch_add_nbi");                                      \
        expect_eq(shmem_##N##_atomic_fetch(&nbi_##N, right), 11,                                   \
                  "value after shmem_" #N " nonblocking AMOs");                                    \
    }

#define DEFINE_BIT_NBI(T, N)                                                                       \
    static T bnbi_##N;                                                                             \
    static void bnbi_##N##_run(void)                                                               \
    {                                                                                              \
        T f = (T)0;                                                                                \
                                                                                                   \
        shmem_##N##_atomic_set(&bnbi_##N, (T)0x3C, right);                                         \
        shmem_quiet();                                                                             \
        shmem_##N##_atomic_fetch_and_nbi(&f, &bnbi_##N, (T)0x0F, right);                           \
        shmem_quiet();                                                                             \
        expect_eq(f, 0x3C, "shmem_" #N "_atomic_fetch_and_nbi");                                   \
        shmem_##N##_atomic_fetch_or_nbi(&f, &bnbi_##N, (T)0x40, right);                            \
        shmem_quiet();                                                                             \
        expect_eq(f, 0x0C, "shmem_" #N "_atomic_fetch_or_nbi");                                    \
        shmem_##N##_atomic_fetch_xor_nbi(&f, &bnbi_##N, (T)0x41, right);                           \
        shmem_quiet();                                                                             \
        expect_eq(f, 0x4C, "shmem_" #N "_atomic_fetch_xor_nbi");                                   \
        expect_eq(shmem_##N##_atomic_fetch(&bnbi_##N, right), 0x0D,                                \
                  "value after shmem_" #N " nonblocking bitwise AMOs");                            \
    }

#define DEFINE_FP_NBI(T, N)                                                                        \
    static T fnbi_##N;                                                                             \
    static void fnbi_##N##_run(void)                                                               \
    {                                                                                              \
        T f = (T)0;                                                                                \
                                                                                                   \
        shmem_##N##_atomic_set(&fnbi_##N, (T)0.75, right);                                         \
        shmem_quiet();                                                                             \
        shmem_##N##_atomic_fetch_nbi(&f, &fnbi_##N, right);                                        \
        shmem_quiet();                                                                             \
        expect_fp(f, 0.75, "shmem_" #N "_atomic_fetch_nbi");                                       \
        shmem_##N##_atomic_swap_nbi(&f, &fnbi_##N, (T)8.5, right);                                 \
        shmem_quiet();                                                                             \
        expect_fp(f, 0.75, "shmem_" #N "_atomic_swap_nbi");                                        \
        expect_fp(shmem_##N##_atomic_fetch(&fnbi_##N, right), 8.5,                                 \
                  "value after shmem_" #N "_atomic_swap_nbi");                                     \
    }

STD_TYPES(DEFINE_NBI)
BIT_TYPES(DEFINE_BIT_NBI)
FP_TYPES(DEFINE_FP_NBI)
#endif

static void per_type(void)
{
#define RUN(T, N) std_##N();
#define RUN_BIT(T, N) bit_##N##_run();
#define RUN_FP(T, N) fp_##N##_run();
    STD_TYPES(RUN)
    BIT_TYPES(RUN_BIT)
    FP_TYPES(RUN_FP)
#if HAVE_1_5
#define RUN_NBI(T, N) nbi_##N##_run();
#define RUN_BIT_NBI(T, N) bnbi_##N##_run();
#define RUN_FP_NBI(T, N) fnbi_##N##_run();
    STD_TYPES(RUN_NBI)
    BIT_TYPES(RUN_BIT_NBI)
    FP_TYPES(RUN_FP_NBI)
#endif
    /* The left neighbour's last AMOs on our variables are complete after the barrier. */
    shmem_barrier_all();
#define FINAL(T, N) std_final_##N();
#define FINAL_BIT(T, N) bit_final_##N();
#define FINAL_FP(T, N) fp_final_##N();
    STD_TYPES(FINAL)
    BIT_TYPES(FINAL_BIT)
    FP_TYPES(FINAL_FP)
}

/* The type-generic names select the same routines by argument type. */
static long gen_long;
static unsigned int gen_uint;
static double gen_double;

#if HAVE_1_5
static int32_t gen_i32;
static int64_t gen_i64;
#endif

static void generic(void)
{
    shmem_atomic_set(&gen_long, 100L, right);
    shmem_quiet();
    expect_eq(shmem_atomic_fetch_add(&gen_long, 11L, right), 100, "shmem_atomic_fetch_add(long)");
    expect_eq(shmem_atomic_compare_swap(&gen_long, 111L, 5L, right), 111,
              "shmem_atomic_compare_swap(long)");
    shmem_atomic_inc(&gen_long, right);
    shmem_quiet();
    expect_eq(shmem_atomic_fetch(&gen_long, right), 6, "shmem_atomic_inc(long)");

    shmem_atomic_set(&gen_uint, 0xF0u, right);
    shmem_quiet();
    expect_eq(shmem_atomic_fetch_xor(&gen_uint, 0xFFu, right), 0xF0,
              "shmem_atomic_fetch_xor(unsigned int)");
    expect_eq(shmem_atomic_swap(&gen_uint, 3u, right), 0x0F, "shmem_atomic_swap(unsigned int)");

    shmem_atomic_set(&gen_double, 0.5, right);
    shmem_quiet();
    expect_fp(shmem_atomic_swap(&gen_double, 4.0, right), 0.5, "shmem_atomic_swap(double)");
    expect_fp(shmem_atomic_fetch(&gen_double, right), 4.0, "shmem_atomic_fetch(double)");
#if HAVE_1_5
    /* The bitwise generics take int32_t and int64_t too (1.5, Table 7). */
    shmem_atomic_set(&gen_i32, (int32_t)0x0F, right);
    shmem_quiet();
    expect_eq(shmem_atomic_fetch_or(&gen_i32, (int32_t)0x30, right), 0x0F,
              "shmem_atomic_fetch_or(int32_t)");
    shmem_atomic_and(&gen_i32, (int32_t)0x3C, right);
    shmem_quiet();
    expect_eq(shmem_atomic_fetch_xor(&gen_i32, (int32_t)0x01, right), 0x3C,
              "shmem_atomic_and/fetch_xor(int32_t)");
    shmem_atomic_set(&gen_i64, (int64_t)1 << 40, right);
    shmem_quiet();
    shmem_atomic_xor(&gen_i64, (int64_t)3, right);
    shmem_quiet();
    expect_eq(shmem_atomic_fetch_and(&gen_i64, ~(int64_t)1, right), ((int64_t)1 << 40) | 3,
              "shmem_atomic_xor/fetch_and(int64_t)");
#endif
}

/* Deprecated since 1.4 but still part of 1.5; only the int forms are exercised. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static struct {
    int word, guard;
} dep_pair = {0, 0x5A5A5A5A};
#define dep_int dep_pair.word
#define dep_guard dep_pair.guard
#if HAVE_1_5
static double dep_double;
#endif

static void deprecated(void)
{
    shmem_int_set(&dep_int, 10, right);
    shmem_quiet();
    expect_eq(shmem_int_fetch(&dep_int, right), 10, "shmem_int_set/shmem_int_fetch");
    expect_eq(shmem_int_swap(&dep_int, 20, right), 10, "shmem_int_swap");
#if CSWAP32_WORKS
    expect_eq(shmem_int_cswap(&dep_int, 21, 99, right), 20, "shmem_int_cswap, cond false");
    expect_eq(shmem_int_cswap(&dep_int, 20, 30, right), 20, "shmem_int_cswap, cond true");
#else
    expect_eq(shmem_int_swap(&dep_int, 30, right), 20, "shmem_int_swap standing in for cswap");
#endif
    expect_eq(shmem_int_finc(&dep_int, right), 30, "shmem_int_finc");
    shmem_int_inc(&dep_int, right);
    shmem_quiet();
    expect_eq(shmem_int_fadd(&dep_int, 5, right), 32, "shmem_int_inc/shmem_int_fadd");
    shmem_int_add(&dep_int, -3, right);
    shmem_quiet();
    expect_eq(shmem_int_fetch(&dep_int, right), 34, "shmem_int_add");
#if HAVE_1_5
    /* Their generic names, on an int (4 bytes: a swap of a long's 8 would
     * show in dep_guard) and a double. */
    shmem_set(&dep_int, 7, right);
    shmem_quiet();
    expect_eq(shmem_swap(&dep_int, 8, right), 7, "shmem_swap(int)");
    expect_eq(shmem_cswap(&dep_int, 8, 9, right), 8, "shmem_cswap(int)");
    expect_eq(shmem_finc(&dep_int, right), 9, "shmem_finc(int)");
    shmem_inc(&dep_int, right);
    shmem_add(&dep_int, 10, right);
    shmem_quiet();
    expect_eq(shmem_fadd(&dep_int, 1, right), 21, "shmem_inc/add/fadd(int)");
    expect_eq(shmem_fetch(&dep_int, right), 22, "shmem_fetch(int)");
    expect_eq(shmem_int_g(&dep_guard, right), 0x5A5A5A5A, "the word after a swapped int");
    shmem_set(&dep_double, 1.5, right);
    shmem_quiet();
    expect_fp(shmem_swap(&dep_double, 2.5, right), 1.5, "shmem_swap(double)");
    expect_fp(shmem_fetch(&dep_double, right), 2.5, "shmem_fetch(double)");
#endif
}
#pragma GCC diagnostic pop

/*
 * Hammer: contention on one word at PE 0 and one at the last PE.  A PE's own fetch_adds on
 * a counter are ordered, so the values it sees must strictly increase.
 */
static long hammer_first, hammer_last, hammer_inc;

static void hammer(void)
{
    /* 10000 per PE with 2 PEs; beyond, 8000 per counter keeps oversubscribed runs (and
     * the sanitizer builds) short: every operation then waits for a busy target. */
    int iters = npes <= 2 ? 10000 : 8000 / npes;
    long total = (long)iters * npes, prev_first = -1, prev_last = -1;

    for (int i = 0; i < iters; i++) {
        long a = shmem_long_atomic_fetch_add(&hammer_first, 1, 0);
        long b = shmem_long_atomic_fetch_add(&hammer_last, 1, npes - 1);

        expect_range(a, prev_first + 1, total, "hammer fetch_add at PE 0, iteration %d", i);
        expect_range(b, prev_last + 1, total, "hammer fetch_add at the last PE, iteration %d", i);
        prev_first = a;
        prev_last = b;
        if (i % 8 == 0)
            shmem_long_atomic_inc(&hammer_inc, 0);
    }
    shmem_barrier_all();
    if (me == 0) {
        expect_eq(hammer_first, total, "hammer counter at PE 0");
        expect_eq(hammer_inc, (long)((iters + 7) / 8) * npes, "hammer inc counter at PE 0");
    }
    if (me == npes - 1)
        expect_eq(hammer_last, total, "hammer counter at last PE");
    expect_eq(shmem_long_atomic_fetch(&hammer_first, 0), total, "hammer counter fetched");
}

/* Election: the first compare_swap on -1 wins; every PE must agree on the single winner. */
enum { ROUNDS = 6 };
static long elected[ROUNDS] = {-1, -1, -1, -1, -1, -1};
static int wins[ROUNDS];

static void election(void)
{
    int won[ROUNDS];

    for (int r = 0; r < ROUNDS; r++) {
        long old = shmem_long_atomic_compare_swap(&elected[r], -1, me, r % npes);

        won[r] = old == -1;
        if (won[r])
            shmem_int_atomic_inc(&wins[r], 0);
        else
            expect_range(old, 0, npes, "election round %d: compare_swap result", r);
    }
    shmem_barrier_all();
    for (int r = 0; r < ROUNDS; r++) {
        long w = shmem_long_atomic_fetch(&elected[r], r % npes);

        expect_eq(w == me, won[r], "election round %d: winner %ld vs own result", r, w);
        if (me == 0)
            expect_eq(wins[r], 1, "election round %d: number of winners", r);
    }
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    right = (me + 1) % npes;

    per_type();
    generic();
    deprecated();
    hammer();
    election();
    return finish("atomics");
}
