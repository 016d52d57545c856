/*
 * coll.c: OpenSHMEM collectives, on teams (1.5) and on active sets (1.4, deprecated in 1.5).
 *
 * Teams, with 1.5 headers: SHMEM_TEAM_WORLD and SHMEM_TEAM_SHARED queries and translation;
 * shmem_team_split_strided into evens and odds; shmem_team_{my_pe,n_pes,translate_pe,sync,
 * destroy}.  On the world team, and on the evens/odds teams at once: shmem_broadcastmem,
 * shmem_{collect,fcollect,alltoall,alltoalls}mem, the typed broadcast, collect, fcollect,
 * alltoall and alltoalls, and the reductions of the team-reduction table (on the world team
 * every type and operation out of place and every type once in place; a sample on the split
 * teams); the generic and/or/xor reductions on int8_t to int64_t, and shmem_sync(team).
 *
 * Active sets, with any headers: shmem_barrier, shmem_sync, shmem_broadcast32/64,
 * shmem_collect32/64, shmem_fcollect32/64, shmem_alltoall32/64, shmem_alltoalls32/64 and
 * every TYPE_OP_to_all of the active-set table (and every type once in place), over the
 * whole world and over the stride-2 sets of evens and odds at once.
 *
 * Inputs encode the contributing PE's index within the team or set, so results that come
 * out in the wrong order or from the wrong members are caught.  Every call gets its own
 * destination block (see take()): a collective may write a PE's dest as soon as any member
 * has entered it, so a block must already be prepared (filled with GUARD) when the group
 * last synchronised, and must not be reused before the group synchronises again.
 *
 * Spec points checked on purpose:
 * - team broadcast writes dest on the root too; active-set broadcast leaves the root's
 *   dest untouched;
 * - reductions accept dest == source (and only that or disjoint buffers);
 * - team routines return 0 on success; calls on SHMEM_TEAM_INVALID return -1 (my_pe,
 *   n_pes, translate_pe) or do nothing (destroy).
 *
 * Active-set pSync/pWrk arrays come from a pool and each call takes a fresh pair, since
 * the spec only lets an array be reused once every earlier call on it has completed on
 * every member; the pool is recycled after a barrier over the set.
 */
#include "shtest.h"

#include <complex.h>

#define HAVE_1_5 (SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 5)

#define GUARD 0xEE
enum { NR = 9 };  /* reductions per call */

static int me, npes;

/*
 * Buffers: a bump allocator over one symmetric arena that is kept filled with GUARD.  Each
 * block is followed by at least TAIL guard bytes, checked when the arena is recycled, so a
 * collective writing past the end of its destination is caught.
 */
enum { ARENA = 1 << 20, TAIL = 16, MAX_BLOCKS = 1024 };
static unsigned char *arena;
static size_t arena_used, nblocks;
static struct {
    unsigned char *p;
    size_t n;
} blocks[MAX_BLOCKS];

static void *take(size_t n)
{
    unsigned char *p = arena + arena_used;

    arena_used += (n + TAIL + 63) / 64 * 64;
    if (arena_used > ARENA || nblocks == MAX_BLOCKS)
        fail("overflow", "fits", "collective test arena");
    blocks[nblocks].p = p;
    blocks[nblocks++].n = n;
    return p;
}

/* Checks the tails, refills the used part and starts over; a group sync must follow. */
static void arena_refill(void)
{
    for (size_t i = 0; i < nblocks; i++) {
        check_fill(blocks[i].p + blocks[i].n, TAIL, GUARD,
                   "bytes after buffer %zu (counting since the last sync) of %zu bytes", i,
                   blocks[i].n);
    }
    memset(arena, GUARD, arena_used);
    arena_used = 0;
    nblocks = 0;
}

/*
 * Reduction inputs for element j on the member with index p: small enough that no sum or
 * product overflows even int8_t, signed types see negative values under min/max, and the
 * bitwise inputs share three bits (one near the top) and differ in one low bit.
 */
#define IN_sum(T, p, j) ((T)(((p) + (j)) % 4))
#define IN_prod(T, p, j) ((T)(((p) + (j)) % 7 == 0 ? 2 : 1))
#define IN_max(T, p, j) ((T)((T)-1 > (T)0 ? ((p) * 3 + (j)) % 11 : ((p) * 3 + (j)) % 11 - 5))
#define IN_min(T, p, j) IN_max(T, p, j)
#define IN_and(T, p, j)                                                                            \
    ((T)((T)0x21 | (T)((T)1 << (sizeof(T) * 8 - 2)) | (T)((T)1 << (((p) + (j)) % 4 + 1))))
#define IN_or(T, p, j) IN_and(T, p, j)
#define IN_xor(T, p, j) IN_and(T, p, j)

#define OP_sum(a, b) ((a) + (b))
#define OP_prod(a, b) ((a) * (b))
#define OP_max(a, b) ((a) > (b) ? (a) : (b))
#define OP_min(a, b) ((a) < (b) ? (a) : (b))
#define OP_and(a, b) ((a) & (b))
#define OP_or(a, b) ((a) | (b))
#define OP_xor(a, b) ((a) ^ (b))

/* Expected result of reducing element j over members 0..n-1. */
#define EXPECTED(T, OP, n, j, out)                                                                 \
    do {                                                                                           \
        out = IN_##OP(T, 0, j);                                                                    \
        for (int p_ = 1; p_ < (n); p_++)                                                           \
            out = (T)OP_##OP(out, IN_##OP(T, p_, j));                                              \
    } while (0)

/* Complex inputs are powers of i, so sums and products stay exact. */
#define IN_CPLX(T, p, j) ((T)(((p) + (j)) % 2 ? I : 1))

#if HAVE_1_5
/* ---------------------------------------------------------------- teams (1.5) */

/* Typed element values for data movement, exact in every standard RMA type. */
#define VAL(T, a, b) ((T)(((a) * 7 + (b) * 3) % 97))

#define RMA_TYPES(X)                                                                               \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char)                     \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong)         \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                        \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8)                       \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8)                        \
    X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)                    \
    X(ptrdiff_t, ptrdiff)

static unsigned seedof(int pe, unsigned id)
{
    return (unsigned)pe * 1000003u + id;
}

static void team_rewind(shmem_team_t team)
{
    arena_refill();
    expect_eq(shmem_team_sync(team), 0, "shmem_team_sync return");
}

static void expect_ok(int rc, const char *routine)
{
    expect_eq(rc, 0, "%s return value", routine);
}

/* broadcastmem, collectmem, fcollectmem, alltoallmem, alltoallsmem. */
static void team_mem(shmem_team_t team, int tme, int tn, unsigned id)
{
    static const size_t bsizes[] = {1, 13, 65539};
    enum { FLEN = 37, ALEN = 29, SN = 5, DS = 2, SS = 3 };

    for (size_t k = 0; k < sizeof bsizes / sizeof bsizes[0]; k++) {
        size_t len = bsizes[k];
        int root = (int)(k + 1) % tn;
        unsigned char *src = take(len), *dst = take(len);

        fill_pat(src, len, seedof(tme, id + (unsigned)k));
        expect_ok(shmem_broadcastmem(team, dst, src, len, root), "shmem_broadcastmem");
        check_pat(dst, len, seedof(root, id + (unsigned)k),
                  "shmem_broadcastmem %zu bytes from team pe %d (team broadcast writes the "
                  "root's dest too)", len, root);
    }

    /* collectmem: member p contributes 3p+1 bytes. */
    size_t total = 0, mine = 3 * (size_t)tme + 1;

    for (int p = 0; p < tn; p++)
        total += 3 * (size_t)p + 1;
    unsigned char *src = take(mine), *dst = take(total);

    fill_pat(src, mine, seedof(tme, id + 10));
    expect_ok(shmem_collectmem(team, dst, src, mine), "shmem_collectmem");
    for (int p = 0, off = 0; p < tn; off += 3 * p + 1, p++)
        check_pat(dst + off, 3 * (size_t)p + 1, seedof(p, id + 10), "shmem_collectmem part %d", p);

    src = take(FLEN);
    dst = take((size_t)FLEN * tn);
    fill_pat(src, FLEN, seedof(tme, id + 11));
    expect_ok(shmem_fcollectmem(team, dst, src, FLEN), "shmem_fcollectmem");
    for (int p = 0; p < tn; p++)
        check_pat(dst + (size_t)p * FLEN, FLEN, seedof(p, id + 11), "shmem_fcollectmem part %d", p);

    /* alltoallmem: the block for member k is seeded by (sender, k). */
    src = take((size_t)ALEN * tn);
    dst = take((size_t)ALEN * tn);
    for (int k = 0; k < tn; k++)
        fill_pat(src + (size_t)k * ALEN, ALEN, seedof(tme * 100 + k, id + 12));
    expect_ok(shmem_alltoallmem(team, dst, src, ALEN), "shmem_alltoallmem");
    for (int p = 0; p < tn; p++) {
        check_pat(dst + (size_t)p * ALEN, ALEN, seedof(p * 100 + tme, id + 12),
                  "shmem_alltoallmem block from team pe %d", p);
    }

    /* alltoallsmem: byte e of the block for member k sits at (k*SN + e)*SS. */
    src = take((size_t)SS * SN * tn);
    dst = take((size_t)DS * SN * tn);
    fill_pat(src, (size_t)SS * SN * tn, seedof(tme, id + 13));
    expect_ok(shmem_alltoallsmem(team, dst, src, DS, SS, SN), "shmem_alltoallsmem");
    for (size_t i = 0; i < (size_t)DS * SN * tn; i++) {
        size_t q = i / DS, p = q / SN, e = q % SN;

        if (i % DS == 0) {
            expect_eq(dst[i], pat(seedof((int)p, id + 13), ((size_t)tme * SN + e) * SS),
                      "shmem_alltoallsmem byte %zu from team pe %zu", e, p);
        } else {
            check_fill(dst + i, 1, GUARD, "shmem_alltoallsmem gap at %zu", i);
        }
    }
}

/* Typed broadcast (from the last member), collect, fcollect, alltoall and alltoalls. */
#define DEFINE_TEAM_TYPED(T, N)                                                                    \
    static void team_typed_##N(shmem_team_t team, int tme, int tn)                                 \
    {                                                                                              \
        enum { NB = 7, NF = 4, NA = 3, SN = 2, DS = 2, SS = 3 };                                   \
        int root = tn - 1, mine = tme % 3 + 1, total = 0;                                          \
        T *src = take(NB * sizeof(T)), *dst = take(NB * sizeof(T));                                \
                                                                                                   \
        for (int i = 0; i < NB; i++)                                                               \
            src[i] = VAL(T, tme, i);                                                               \
        expect_ok(shmem_##N##_broadcast(team, dst, src, NB, root), "shmem_" #N "_broadcast");      \
        for (int i = 0; i < NB; i++)                                                               \
            expect_fp(dst[i], VAL(T, root, i), "shmem_" #N "_broadcast elem %d", i);               \
                                                                                                   \
        for (int p = 0; p < tn; p++)                                                               \
            total += p % 3 + 1;                                                                    \
        src = take(3 * sizeof(T));                                                                 \
        dst = take((size_t)total * sizeof(T));                                                     \
        for (int i = 0; i < mine; i++)                                                             \
            src[i] = VAL(T, tme, i);                                                               \
        expect_ok(shmem_##N##_collect(team, dst, src, (size_t)mine), "shmem_" #N "_collect");      \
        for (int p = 0, k = 0; p < tn; p++) {                                                      \
            for (int i = 0; i < p % 3 + 1; i++, k++)                                               \
                expect_fp(dst[k], VAL(T, p, i), "shmem_" #N "_collect elem %d", k);                \
        }                                                                                          \
                                                                                                   \
        src = take(NF * sizeof(T));                                                                \
        dst = take((size_t)NF * tn * sizeof(T));                                                   \
        for (int i = 0; i < NF; i++)                                                               \
            src[i] = VAL(T, tme, i + 10);                                                          \
        expect_ok(shmem_##N##_fcollect(team, dst, src, NF), "shmem_" #N "_fcollect");              \
        for (int k = 0; k < NF * tn; k++)                                                          \
            expect_fp(dst[k], VAL(T, k / NF, k % NF + 10), "shmem_" #N "_fcollect elem %d", k);    \
                                                                                                   \
        src = take((size_t)NA * tn * sizeof(T));                                                   \
        dst = take((size_t)NA * tn * sizeof(T));                                                   \
        for (int k = 0; k < NA * tn; k++)                                                          \
            src[k] = VAL(T, tme * 5 + k / NA, k % NA);                                             \
        expect_ok(shmem_##N##_alltoall(team, dst, src, NA), "shmem_" #N "_alltoall");              \
        for (int k = 0; k < NA * tn; k++) {                                                        \
            expect_fp(dst[k], VAL(T, k / NA * 5 + tme, k % NA),                                    \
                      "shmem_" #N "_alltoall elem %d", k);                                         \
        }                                                                                          \
                                                                                                   \
        src = take((size_t)SS * SN * tn * sizeof(T));                                              \
        dst = take((size_t)DS * SN * tn * sizeof(T));                                              \
        for (int k = 0; k < SS * SN * tn; k++)                                                     \
            src[k] = VAL(T, tme, k);                                                               \
        expect_ok(shmem_##N##_alltoalls(team, dst, src, DS, SS, SN), "shmem_" #N "_alltoalls");    \
        for (int k = 0; k < DS * SN * tn; k++) {                                                   \
            int q = k / DS, p = q / SN, e = q % SN;                                                \
                                                                                                   \
            if (k % DS == 0)                                                                       \
                expect_fp(dst[k], VAL(T, p, (tme * SN + e) * SS),                                  \
                          "shmem_" #N "_alltoalls elem %d", k);                                    \
            else                                                                                   \
                check_fill(dst + k, sizeof(T), GUARD, "shmem_" #N "_alltoalls gap %d", k);         \
        }                                                                                          \
    }

RMA_TYPES(DEFINE_TEAM_TYPED)

/* One team reduction, out of place or in place. */
#define DEFINE_TEAM_RED(T, N, CHECK, OP)                                                           \
    static void team_red_##N##_##OP(shmem_team_t team, int tme, int tn, int inplace)               \
    {                                                                                              \
        T *src = take(NR * sizeof(T)), *dst = inplace ? src : take(NR * sizeof(T));                \
                                                                                                   \
        for (int j = 0; j < NR; j++)                                                               \
            src[j] = IN_##OP(T, tme, j);                                                           \
        expect_ok(shmem_##N##_##OP##_reduce(team, dst, src, NR), "shmem_" #N "_" #OP "_reduce");   \
        for (int j = 0; j < NR; j++) {                                                             \
            T want;                                                                                \
                                                                                                   \
            EXPECTED(T, OP, tn, j, want);                                                          \
            CHECK(dst[j], want, "shmem_" #N "_" #OP "_reduce%s elem %d",                           \
                  inplace ? " in place" : "", j);                                                  \
        }                                                                                          \
    }

#define DEFINE_TEAM_ARITH(T, N, CHECK)                                                             \
    DEFINE_TEAM_RED(T, N, CHECK, max) DEFINE_TEAM_RED(T, N, CHECK, min)                            \
    DEFINE_TEAM_RED(T, N, CHECK, sum) DEFINE_TEAM_RED(T, N, CHECK, prod)
#define DEFINE_TEAM_BITWISE(T, N, CHECK)                                                           \
    DEFINE_TEAM_ARITH(T, N, CHECK) DEFINE_TEAM_RED(T, N, CHECK, and)                               \
    DEFINE_TEAM_RED(T, N, CHECK, or) DEFINE_TEAM_RED(T, N, CHECK, xor)

#define TEAM_ARITH_TYPES(X)                                                                        \
    X(char, char, expect_eq) X(signed char, schar, expect_eq) X(short, short, expect_eq)           \
    X(int, int, expect_eq) X(long, long, expect_eq) X(long long, longlong, expect_eq)              \
    X(ptrdiff_t, ptrdiff, expect_eq) X(float, float, expect_fp) X(double, double, expect_fp)       \
    X(long double, longdouble, expect_fp)
#define TEAM_BITWISE_TYPES(X)                                                                      \
    X(unsigned char, uchar, expect_eq) X(unsigned short, ushort, expect_eq)                        \
    X(unsigned int, uint, expect_eq) X(unsigned long, ulong, expect_eq)                            \
    X(unsigned long long, ulonglong, expect_eq) X(int8_t, int8, expect_eq)                         \
    X(int16_t, int16, expect_eq) X(int32_t, int32, expect_eq) X(int64_t, int64, expect_eq)         \
    X(uint8_t, uint8, expect_eq) X(uint16_t, uint16, expect_eq)                                    \
    X(uint32_t, uint32, expect_eq) X(uint64_t, uint64, expect_eq) X(size_t, size, expect_eq)

TEAM_ARITH_TYPES(DEFINE_TEAM_ARITH)
TEAM_BITWISE_TYPES(DEFINE_TEAM_BITWISE)

#define DEFINE_TEAM_CPLX(T, N, OP, OPER)                                                           \
    static void team_red_##N##_##OP(shmem_team_t team, int tme, int tn, int inplace)               \
    {                                                                                              \
        T *src = take(NR * sizeof(T)), *dst = inplace ? src : take(NR * sizeof(T));                \
                                                                                                   \
        for (int j = 0; j < NR; j++)                                                               \
            src[j] = IN_CPLX(T, tme, j);                                                           \
        expect_ok(shmem_##N##_##OP##_reduce(team, dst, src, NR), "shmem_" #N "_" #OP "_reduce");   \
        for (int j = 0; j < NR; j++) {                                                             \
            T want = IN_CPLX(T, 0, j);                                                             \
                                                                                                   \
            for (int p = 1; p < tn; p++)                                                           \
                want = want OPER IN_CPLX(T, p, j);                                                 \
            expect_fp(creall(dst[j]), creall(want), "shmem_" #N "_" #OP "_reduce real %d", j);     \
            expect_fp(cimagl(dst[j]), cimagl(want), "shmem_" #N "_" #OP "_reduce imag %d", j);     \
        }                                                                                          \
    }

DEFINE_TEAM_CPLX(double _Complex, complexd, sum, +)
DEFINE_TEAM_CPLX(double _Complex, complexd, prod, *)
DEFINE_TEAM_CPLX(float _Complex, complexf, sum, +)
DEFINE_TEAM_CPLX(float _Complex, complexf, prod, *)

/*
 * Every reduction of the table out of place, then every type once in place (in-place use
 * is a property of the call path, not of the operation).
 */
static void team_reductions_all(shmem_team_t team, int tme, int tn)
{
#define RUN_ARITH(T, N, C)                                                                         \
    team_red_##N##_max(team, tme, tn, 0);                                                          \
    team_red_##N##_min(team, tme, tn, 0);                                                          \
    team_red_##N##_sum(team, tme, tn, 0);                                                          \
    team_red_##N##_prod(team, tme, tn, 0);
#define RUN_BITWISE(T, N, C)                                                                       \
    RUN_ARITH(T, N, C)                                                                             \
    team_red_##N##_and(team, tme, tn, 0);                                                          \
    team_red_##N##_or(team, tme, tn, 0);                                                           \
    team_red_##N##_xor(team, tme, tn, 0);
#define RUN_ARITH_INPLACE(T, N, C) team_red_##N##_sum(team, tme, tn, 1);
#define RUN_BITWISE_INPLACE(T, N, C) team_red_##N##_xor(team, tme, tn, 1);
    TEAM_ARITH_TYPES(RUN_ARITH)
    TEAM_BITWISE_TYPES(RUN_BITWISE)
    team_red_complexd_sum(team, tme, tn, 0);
    team_red_complexd_prod(team, tme, tn, 0);
    team_red_complexf_sum(team, tme, tn, 0);
    team_red_complexf_prod(team, tme, tn, 0);
    team_rewind(team);
    TEAM_ARITH_TYPES(RUN_ARITH_INPLACE)
    TEAM_BITWISE_TYPES(RUN_BITWISE_INPLACE)
    team_red_complexd_prod(team, tme, tn, 1);
    team_red_complexf_sum(team, tme, tn, 1);
    team_rewind(team);
}

/* One type of each kind and every operation, for the split teams. */
static void team_reductions_sample(shmem_team_t team, int tme, int tn)
{
    team_red_int_sum(team, tme, tn, 0);
    team_red_long_max(team, tme, tn, 1);
    team_red_double_prod(team, tme, tn, 0);
    team_red_float_min(team, tme, tn, 1);
    team_red_uint64_and(team, tme, tn, 0);
    team_red_uint_or(team, tme, tn, 1);
    team_red_size_xor(team, tme, tn, 0);
    team_red_complexd_sum(team, tme, tn, 1);
    team_rewind(team);
}

static void world_and_shared(void)
{
    expect_eq(shmem_team_my_pe(SHMEM_TEAM_WORLD), me, "shmem_team_my_pe(SHMEM_TEAM_WORLD)");
    expect_eq(shmem_team_n_pes(SHMEM_TEAM_WORLD), npes, "shmem_team_n_pes(SHMEM_TEAM_WORLD)");

    int sme = shmem_team_my_pe(SHMEM_TEAM_SHARED), sn = shmem_team_n_pes(SHMEM_TEAM_SHARED);
    long sum_world = 0, *src = take(sizeof(long)), *dst = take(sizeof(long));

    expect_range(sn, 1, npes + 1, "shmem_team_n_pes(SHMEM_TEAM_SHARED)");
    expect_range(sme, 0, sn, "shmem_team_my_pe(SHMEM_TEAM_SHARED)");
    expect_eq(shmem_team_translate_pe(SHMEM_TEAM_SHARED, sme, SHMEM_TEAM_WORLD), me,
              "shmem_team_translate_pe(SHMEM_TEAM_SHARED, own number, SHMEM_TEAM_WORLD)");
    for (int i = 0; i < sn; i++) {
        int w = shmem_team_translate_pe(SHMEM_TEAM_SHARED, i, SHMEM_TEAM_WORLD);

        expect_range(w, 0, npes, "SHMEM_TEAM_SHARED member %d translated to world", i);
        expect_eq(shmem_team_translate_pe(SHMEM_TEAM_WORLD, w, SHMEM_TEAM_SHARED), i,
                  "translate world pe %d back to SHMEM_TEAM_SHARED", w);
        sum_world += w;
    }
    /* A collective on SHMEM_TEAM_SHARED must agree with the translations. */
    *src = me;
    expect_ok(shmem_long_sum_reduce(SHMEM_TEAM_SHARED, dst, src, 1), "shmem_long_sum_reduce");
    expect_eq(*dst, sum_world, "sum of world numbers over SHMEM_TEAM_SHARED");
    arena_refill();
    shmem_barrier_all();
}

static void split_teams(void)
{
    shmem_team_t evens, odds, mine;
    int ne = (npes + 1) / 2, no = npes / 2, even = me % 2 == 0;

    expect_ok(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, ne, NULL, 0, &evens),
              "shmem_team_split_strided (evens)");
    expect_ok(shmem_team_split_strided(SHMEM_TEAM_WORLD, 1, 2, no, NULL, 0, &odds),
              "shmem_team_split_strided (odds)");
    mine = even ? evens : odds;
    expect_eq((even ? odds : evens) == SHMEM_TEAM_INVALID, 1,
              "handle of the team this pe is not in is SHMEM_TEAM_INVALID");
    expect_eq(mine != SHMEM_TEAM_INVALID, 1, "handle of own split team is valid");
    expect_eq(shmem_team_my_pe(mine), me / 2, "shmem_team_my_pe of split team");
    expect_eq(shmem_team_n_pes(mine), even ? ne : no, "shmem_team_n_pes of split team");
    expect_eq(shmem_team_my_pe(even ? odds : evens), -1, "shmem_team_my_pe(SHMEM_TEAM_INVALID)");
    expect_eq(shmem_team_n_pes(even ? odds : evens), -1, "shmem_team_n_pes(SHMEM_TEAM_INVALID)");
    for (int i = 0; i < shmem_team_n_pes(mine); i++) {
        expect_eq(shmem_team_translate_pe(mine, i, SHMEM_TEAM_WORLD), 2 * i + !even,
                  "shmem_team_translate_pe(split team, %d, SHMEM_TEAM_WORLD)", i);
    }
    expect_eq(shmem_team_translate_pe(SHMEM_TEAM_WORLD, even ? 1 : 0, mine), -1,
              "shmem_team_translate_pe of a pe outside the destination team");
    expect_eq(shmem_team_translate_pe(SHMEM_TEAM_WORLD, me, even ? odds : evens), -1,
              "shmem_team_translate_pe into SHMEM_TEAM_INVALID");

    int tme = shmem_team_my_pe(mine), tn = shmem_team_n_pes(mine);

    expect_ok(shmem_team_sync(mine), "shmem_team_sync");
    team_mem(mine, tme, tn, 500);
    team_typed_long(mine, tme, tn);
    team_typed_double(mine, tme, tn);
    team_typed_uint8(mine, tme, tn);
    team_rewind(mine);
    team_reductions_sample(mine, tme, tn);

    /* Destroying SHMEM_TEAM_INVALID is a no-op, so every pe may destroy both handles. */
    shmem_team_destroy(evens);
    shmem_team_destroy(odds);
    arena_refill();
    shmem_barrier_all();
}

/* The generic names of the bitwise reductions on the signed fixed-width
 * types, and shmem_sync(team), 1.5's generic name of shmem_team_sync. */
#define GENERIC_BITWISE(T)                                                                         \
    {                                                                                              \
        T *src = take(sizeof(T)), *dst = take(3 * sizeof(T)), or_all = 0, xor_all = 0;             \
                                                                                                   \
        for (int p = 0; p < npes; p++) {                                                           \
            or_all |= (T)(1 << p % 7);                                                             \
            xor_all ^= (T)(p + 1);                                                                 \
        }                                                                                          \
        *src = (T)(1 << me % 7);                                                                   \
        expect_ok(shmem_or_reduce(SHMEM_TEAM_WORLD, &dst[0], src, 1), "shmem_or_reduce(" #T ")"); \
        *src = (T)~(1 << me % 7);                                                                  \
        expect_ok(shmem_and_reduce(SHMEM_TEAM_WORLD, &dst[1], src, 1),                             \
                  "shmem_and_reduce(" #T ")");                                                     \
        *src = (T)(me + 1);                                                                        \
        expect_ok(shmem_xor_reduce(SHMEM_TEAM_WORLD, &dst[2], src, 1),                             \
                  "shmem_xor_reduce(" #T ")");                                                     \
        expect_eq(dst[0], or_all, "shmem_or_reduce(" #T ")");                                      \
        expect_eq(dst[1], (T)~or_all, "shmem_and_reduce(" #T ")");                                 \
        expect_eq(dst[2], xor_all, "shmem_xor_reduce(" #T ")");                                    \
    }

static void generic_bitwise(void)
{
    GENERIC_BITWISE(int8_t)
    GENERIC_BITWISE(int16_t)
    GENERIC_BITWISE(int32_t)
    GENERIC_BITWISE(int64_t)
    expect_eq(shmem_sync(SHMEM_TEAM_WORLD), 0, "shmem_sync(SHMEM_TEAM_WORLD)");
    team_rewind(SHMEM_TEAM_WORLD);
}

/* Splitting until the implementation runs out of teams: a split that
 * cannot be made returns nonzero and SHMEM_TEAM_INVALID (the job goes on),
 * and destroying one makes room again. */
static void many_teams(void)
{
    enum { MAX = 100 };
    shmem_team_t t[MAX];
    int made = 0, rc = 0;

    while (made < MAX && (rc = shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, npes, NULL, 0,
                                                        &t[made])) == 0)
        made++;
    if (made < MAX) {
        expect_eq(rc != 0, 1, "a split beyond the last team");
        expect_eq(t[made] == SHMEM_TEAM_INVALID, 1, "the team of a split that failed");
        expect_range(made, 1, MAX, "teams made before one failed");
    }
    if (made > 0) {
        shmem_team_destroy(t[--made]);
        expect_eq(shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 1, npes, NULL, 0, &t[made]), 0,
                  "a split after a team was destroyed");
        made++;
    }
    while (made > 0)
        shmem_team_destroy(t[--made]);
    shmem_barrier_all();
}

static void teams(void)
{
    world_and_shared();
    generic_bitwise();
    many_teams();

    team_mem(SHMEM_TEAM_WORLD, me, npes, 100);
    team_rewind(SHMEM_TEAM_WORLD);
#define RUN_TYPED(T, N) team_typed_##N(SHMEM_TEAM_WORLD, me, npes);
    RMA_TYPES(RUN_TYPED)
    team_rewind(SHMEM_TEAM_WORLD);
    team_reductions_all(SHMEM_TEAM_WORLD, me, npes);

    split_teams();
}
#endif /* HAVE_1_5 */

/* ------------------------------------------------------- active sets (deprecated) */

/* These routines are deprecated in 1.5; their use here is deliberate. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define MAX2(a, b) ((a) > (b) ? (a) : (b))
#define PSYNC_LEN                                                                                  \
    MAX2(MAX2(MAX2(SHMEM_BARRIER_SYNC_SIZE, SHMEM_BCAST_SYNC_SIZE),                                \
              MAX2(SHMEM_COLLECT_SYNC_SIZE, SHMEM_REDUCE_SYNC_SIZE)),                              \
         MAX2(MAX2(SHMEM_ALLTOALL_SYNC_SIZE, SHMEM_ALLTOALLS_SYNC_SIZE), SHMEM_SYNC_SIZE))
#define WRK_LEN MAX2(NR / 2 + 1, SHMEM_REDUCE_MIN_WRKDATA_SIZE)

/* Large enough for every pWrk element type. */
typedef union {
    long double ld;
    long long ll;
    double _Complex cd;
} wrk_t;

enum { POOL = 48 };
static long psync_pool[POOL][PSYNC_LEN];
static wrk_t pwrk_pool[POOL][WRK_LEN];
static long barrier_psync[SHMEM_BARRIER_SYNC_SIZE], sync_psync[SHMEM_BARRIER_SYNC_SIZE];
static int pool_next;

struct aset {
    int start, logstride, size;
    int idx;  /* this pe's index in the set */
};

static int aset_pe(const struct aset *s, int idx)
{
    return s->start + (idx << s->logstride);
}

static void aset_rewind(const struct aset *s)
{
    arena_refill();
    shmem_barrier(s->start, s->logstride, s->size, barrier_psync);
    pool_next = 0;
}

/* A pSync no earlier call is still using, and its pWrk. */
static long *next_psync(const struct aset *s, void **pwrk)
{
    if (pool_next == POOL) {
        shmem_barrier(s->start, s->logstride, s->size, barrier_psync);
        pool_next = 0;
    }
    *pwrk = pwrk_pool[pool_next];
    return psync_pool[pool_next++];
}

static void aset_barrier_sync(const struct aset *s)
{
    static long slot[3], slot_sync;
    int next = aset_pe(s, (s->idx + 1) % s->size), prev_idx = (s->idx + s->size - 1) % s->size;

    /* Consecutive shmem_barrier calls on one set may share a pSync. */
    for (int r = 0; r < 3; r++) {
        shmem_long_p(&slot[r], 10L * s->idx + r, next);
        shmem_barrier(s->start, s->logstride, s->size, barrier_psync);
        expect_eq(slot[r], 10L * prev_idx + r, "shmem_barrier completing a put, round %d", r);
    }
    shmem_long_p(&slot_sync, 77L + s->idx, next);
    shmem_quiet();
    shmem_sync(s->start, s->logstride, s->size, sync_psync);
    expect_eq(slot_sync, 77L + prev_idx, "shmem_quiet + shmem_sync completing a put");
    shmem_barrier(s->start, s->logstride, s->size, barrier_psync);
}

/* Word values: sender index, receiver index (or 0xFF) and element number. */
#define WORD(T, from, to, e) ((T)((T)(from) << 16 | (T)(to) << 8 | (T)(e)))

#define DEFINE_ASET_MOVE(BITS)                                                                     \
    static void aset_move##BITS(const struct aset *s)                                              \
    {                                                                                              \
        typedef uint##BITS##_t W;                                                                  \
        enum { NB = 5, NF = 2, NA = 2, SN = 2, DS = 2, SS = 3 };                                   \
        int root = s->size - 1, n = s->size, i_ = s->idx, total = 0, mine = i_ % 3 + 1;            \
        void *wrk;                                                                                 \
        W *src = take(NB * sizeof(W)), *dst = take(NB * sizeof(W));                                \
                                                                                                   \
        for (int e = 0; e < NB; e++)                                                               \
            src[e] = WORD(W, i_, 0xFF, e);                                                         \
        shmem_broadcast##BITS(dst, src, NB, root, s->start, s->logstride, n,                       \
                              next_psync(s, &wrk));                                                \
        for (int e = 0; e < NB; e++) {                                                             \
            if (i_ == root)                                                                        \
                check_fill(dst + e, sizeof(W), GUARD,                                              \
                           "shmem_broadcast" #BITS " root's dest (must stay untouched) %d", e);    \
            else                                                                                   \
                expect_eq(dst[e], WORD(W, root, 0xFF, e), "shmem_broadcast" #BITS " elem %d", e);  \
        }                                                                                          \
                                                                                                   \
        for (int p = 0; p < n; p++)                                                                \
            total += p % 3 + 1;                                                                    \
        src = take(3 * sizeof(W));                                                                 \
        dst = take((size_t)total * sizeof(W));                                                     \
        for (int e = 0; e < mine; e++)                                                             \
            src[e] = WORD(W, i_, 0xFF, e);                                                         \
        shmem_collect##BITS(dst, src, (size_t)mine, s->start, s->logstride, n,                     \
                            next_psync(s, &wrk));                                                  \
        for (int p = 0, k = 0; p < n; p++) {                                                       \
            for (int e = 0; e < p % 3 + 1; e++, k++)                                               \
                expect_eq(dst[k], WORD(W, p, 0xFF, e), "shmem_collect" #BITS " elem %d", k);       \
        }                                                                                          \
                                                                                                   \
        src = take(NF * sizeof(W));                                                                \
        dst = take((size_t)NF * n * sizeof(W));                                                    \
        for (int e = 0; e < NF; e++)                                                               \
            src[e] = WORD(W, i_, 0xFE, e);                                                         \
        shmem_fcollect##BITS(dst, src, NF, s->start, s->logstride, n, next_psync(s, &wrk));        \
        for (int k = 0; k < NF * n; k++)                                                           \
            expect_eq(dst[k], WORD(W, k / NF, 0xFE, k % NF),                                       \
                      "shmem_fcollect" #BITS " elem %d", k);                                       \
                                                                                                   \
        src = take((size_t)NA * n * sizeof(W));                                                    \
        dst = take((size_t)NA * n * sizeof(W));                                                    \
        for (int k = 0; k < NA * n; k++)                                                           \
            src[k] = WORD(W, i_, k / NA, k % NA);                                                  \
        shmem_alltoall##BITS(dst, src, NA, s->start, s->logstride, n, next_psync(s, &wrk));        \
        for (int k = 0; k < NA * n; k++)                                                           \
            expect_eq(dst[k], WORD(W, k / NA, i_, k % NA), "shmem_alltoall" #BITS " elem %d", k);  \
                                                                                                   \
        src = take((size_t)SS * SN * n * sizeof(W));                                               \
        dst = take((size_t)DS * SN * n * sizeof(W));                                               \
        for (int k = 0; k < SS * SN * n; k++)                                                      \
            src[k] = WORD(W, i_, 0xFD, k);                                                         \
        shmem_alltoalls##BITS(dst, src, DS, SS, SN, s->start, s->logstride, n,                     \
                              next_psync(s, &wrk));                                                \
        for (int k = 0; k < DS * SN * n; k++) {                                                    \
            int q = k / DS, p = q / SN, e = q % SN;                                                \
                                                                                                   \
            if (k % DS == 0)                                                                       \
                expect_eq(dst[k], WORD(W, p, 0xFD, (i_ * SN + e) * SS),                            \
                          "shmem_alltoalls" #BITS " elem %d", k);                                  \
            else                                                                                   \
                check_fill(dst + k, sizeof(W), GUARD, "shmem_alltoalls" #BITS " gap %d", k);       \
        }                                                                                          \
    }

DEFINE_ASET_MOVE(32)
DEFINE_ASET_MOVE(64)

#define DEFINE_TO_ALL(T, N, CHECK, OP)                                                             \
    static void to_all_##N##_##OP(const struct aset *s, int inplace)                               \
    {                                                                                              \
        T *src = take(NR * sizeof(T)), *dst = inplace ? src : take(NR * sizeof(T));                \
        void *wrk;                                                                                 \
        long *ps = next_psync(s, &wrk);                                                            \
                                                                                                   \
        for (int j = 0; j < NR; j++)                                                               \
            src[j] = IN_##OP(T, s->idx, j);                                                        \
        shmem_##N##_##OP##_to_all(dst, src, NR, s->start, s->logstride, s->size, wrk, ps);         \
        for (int j = 0; j < NR; j++) {                                                             \
            T want;                                                                                \
                                                                                                   \
            EXPECTED(T, OP, s->size, j, want);                                                     \
            CHECK(dst[j], want, "shmem_" #N "_" #OP "_to_all%s elem %d",                           \
                  inplace ? " in place" : "", j);                                                  \
        }                                                                                          \
    }

#define DEFINE_TO_ALL_ARITH(T, N, CHECK)                                                           \
    DEFINE_TO_ALL(T, N, CHECK, max) DEFINE_TO_ALL(T, N, CHECK, min)                                \
    DEFINE_TO_ALL(T, N, CHECK, sum) DEFINE_TO_ALL(T, N, CHECK, prod)
#define DEFINE_TO_ALL_BITWISE(T, N, CHECK)                                                         \
    DEFINE_TO_ALL_ARITH(T, N, CHECK) DEFINE_TO_ALL(T, N, CHECK, and)                               \
    DEFINE_TO_ALL(T, N, CHECK, or) DEFINE_TO_ALL(T, N, CHECK, xor)

#define TO_ALL_INT_TYPES(X)                                                                        \
    X(short, short, expect_eq) X(int, int, expect_eq) X(long, long, expect_eq)                     \
    X(long long, longlong, expect_eq)
#define TO_ALL_FP_TYPES(X)                                                                         \
    X(float, float, expect_fp) X(double, double, expect_fp)                                        \
    X(long double, longdouble, expect_fp)

TO_ALL_INT_TYPES(DEFINE_TO_ALL_BITWISE)
TO_ALL_FP_TYPES(DEFINE_TO_ALL_ARITH)

#define DEFINE_TO_ALL_CPLX(T, N, OP, OPER)                                                         \
    static void to_all_##N##_##OP(const struct aset *s, int inplace)                               \
    {                                                                                              \
        T *src = take(NR * sizeof(T)), *dst = inplace ? src : take(NR * sizeof(T));                \
        void *wrk;                                                                                 \
        long *ps = next_psync(s, &wrk);                                                            \
                                                                                                   \
        for (int j = 0; j < NR; j++)                                                               \
            src[j] = IN_CPLX(T, s->idx, j);                                                        \
        shmem_##N##_##OP##_to_all(dst, src, NR, s->start, s->logstride, s->size, wrk, ps);         \
        for (int j = 0; j < NR; j++) {                                                             \
            T want = IN_CPLX(T, 0, j);                                                             \
                                                                                                   \
            for (int p = 1; p < s->size; p++)                                                      \
                want = want OPER IN_CPLX(T, p, j);                                                 \
            expect_fp(creall(dst[j]), creall(want), "shmem_" #N "_" #OP "_to_all real %d", j);     \
            expect_fp(cimagl(dst[j]), cimagl(want), "shmem_" #N "_" #OP "_to_all imag %d", j);     \
        }                                                                                          \
    }

DEFINE_TO_ALL_CPLX(double _Complex, complexd, sum, +)
DEFINE_TO_ALL_CPLX(double _Complex, complexd, prod, *)
DEFINE_TO_ALL_CPLX(float _Complex, complexf, sum, +)
DEFINE_TO_ALL_CPLX(float _Complex, complexf, prod, *)

/* As for teams: every reduction out of place, every type once in place. */
static void aset_reductions(const struct aset *s)
{
#define RUN_TO_ALL_ARITH(T, N, C)                                                                  \
    to_all_##N##_max(s, 0);                                                                        \
    to_all_##N##_min(s, 0);                                                                        \
    to_all_##N##_sum(s, 0);                                                                        \
    to_all_##N##_prod(s, 0);
#define RUN_TO_ALL_BITWISE(T, N, C)                                                                \
    RUN_TO_ALL_ARITH(T, N, C)                                                                      \
    to_all_##N##_and(s, 0);                                                                        \
    to_all_##N##_or(s, 0);                                                                         \
    to_all_##N##_xor(s, 0);
#define RUN_TO_ALL_INPLACE(T, N, C) to_all_##N##_sum(s, 1);
    TO_ALL_INT_TYPES(RUN_TO_ALL_BITWISE)
    TO_ALL_FP_TYPES(RUN_TO_ALL_ARITH)
    to_all_complexd_sum(s, 0);
    to_all_complexd_prod(s, 0);
    to_all_complexf_sum(s, 0);
    to_all_complexf_prod(s, 0);
    TO_ALL_INT_TYPES(RUN_TO_ALL_INPLACE)
    TO_ALL_FP_TYPES(RUN_TO_ALL_INPLACE)
    to_all_complexd_prod(s, 1);
    to_all_complexf_sum(s, 1);
}

static void aset_all(const struct aset *s)
{
    aset_barrier_sync(s);
    aset_move32(s);
    aset_rewind(s);
    aset_move64(s);
    aset_rewind(s);
    aset_reductions(s);
    aset_rewind(s);
}

static void active_sets(void)
{
    for (int i = 0; i < POOL; i++)
        for (int k = 0; k < PSYNC_LEN; k++)
            psync_pool[i][k] = SHMEM_SYNC_VALUE;
    for (int k = 0; k < SHMEM_BARRIER_SYNC_SIZE; k++)
        barrier_psync[k] = sync_psync[k] = SHMEM_SYNC_VALUE;
    shmem_barrier_all();

    struct aset world = {0, 0, npes, me};
    struct aset stride2 = {me % 2, 1, me % 2 ? npes / 2 : (npes + 1) / 2, me / 2};

    aset_all(&world);
    /* Evens and odds run side by side; each set only touches its own members' arrays. */
    aset_all(&stride2);
    shmem_barrier_all();
}

#pragma GCC diagnostic pop

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();
    arena = shmem_malloc(ARENA);
    if (arena == NULL)
        fail("NULL", "memory", "shmem_malloc(%d)", ARENA);
    memset(arena, GUARD, ARENA);
    shmem_barrier_all();

#if HAVE_1_5
    teams();
#endif
    active_sets();

    shmem_free(arena);
    return finish("coll");
}
