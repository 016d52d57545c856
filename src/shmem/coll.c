/*
 * Collectives over a set of PEs: a team (counters in its slot) or an active
 * set of the deprecated forms (counters in the caller's pSync).
 *
 * Every collective is "synchronize, pull, synchronize": once all members
 * have entered, each PE reads what it needs straight from the other
 * members' symmetric sources (a memcpy on this node, gets in flight
 * together across nodes), and the second synchronization keeps sources
 * unchanged until everybody has read them. No staging buffers, and dest may
 * be the source. Reductions combine in member order on every PE, so all
 * PEs get bit-identical results, floats included. Each PE reads from all
 * members: O(N) per PE, which suits the node-sized and moderate teams this
 * library targets; trees for large teams are future work (docs/shmem.md).
 */
#include "shmem_internal.h"

#include <complex.h>
#include <stdlib.h>
#include <string.h>

struct set {
    int start, stride, size, me; /* me: this PE's index */
    long *psync;
    struct fmshmem_team *team;   /* NULL for an active set */
};

static int member(const struct set *s, int i) { return s->start + i * s->stride; }
static void set_sync(const struct set *s)
{
    if (s->team)
        fmshmem_team_sync_internal(s->team);
    else
        fmshmem_set_sync(s->start, s->stride, s->size, s->me, s->psync);
}

static bool team_set(shmem_team_t t, struct set *s)
{
    if (t == SHMEM_TEAM_INVALID || t->my_pe < 0)
        return false;
    *s = (struct set){t->start, t->stride, t->size, t->my_pe, fmshmem_team_psync(t->slot), t};
    return true;
}

static struct set active_set(int start, int log_stride, int size, long *psync, const char *what)
{
    int stride = 1 << log_stride, d = S.me - start;
    if (d < 0 || d % stride || d / stride >= size)
        fmshmem_fatal("%s: PE %d is not in the active set (start %d, log stride %d, size %d)",
                      what, S.me, start, log_stride, size);
    return (struct set){start, stride, size, d / stride, psync, NULL};
}

/* Gets issued without waiting complete here (they ran in parallel). */
static void gets_done(void)
{
    if (S.any_remote)
        fmshmem_am_quiet_gets();
}

static void broadcast(const struct set *s, void *dest, const void *src, size_t bytes, int root,
                      bool update_root)
{
    set_sync(s);
    if (s->me != root)
        fmshmem_get(dest, src, bytes, member(s, root), false);
    else if (update_root && dest != src)
        memmove(dest, src, bytes);
    set_sync(s);
}

static void fcollect(const struct set *s, void *dest, const void *src, size_t bytes)
{
    set_sync(s);
    for (int i = 0; i < s->size; i++)
        fmshmem_get((char *)dest + (size_t)i * bytes, src, bytes, member(s, i), true);
    gets_done();
    set_sync(s);
}

static void collect(const struct set *s, void *dest, const void *src, size_t bytes)
{
    long *scratch = s->psync + SLOT_SCRATCH;
    __atomic_store_n(scratch, (long)bytes, __ATOMIC_RELEASE);
    set_sync(s);
    size_t at = 0;
    for (int i = 0; i < s->size; i++) {
        long n;
        fmshmem_get(&n, scratch, sizeof(n), member(s, i), false);
        fmshmem_get((char *)dest + at, src, (size_t)n, member(s, i), true);
        at += (size_t)n;
    }
    gets_done();
    set_sync(s);
    __atomic_store_n(scratch, SHMEM_SYNC_VALUE, __ATOMIC_RELAXED);
}

static void alltoall(const struct set *s, void *dest, const void *src, size_t bytes)
{
    set_sync(s);
    for (int i = 0; i < s->size; i++)
        fmshmem_get((char *)dest + (size_t)i * bytes, (const char *)src + (size_t)s->me * bytes,
                    bytes, member(s, i), true);
    gets_done();
    set_sync(s);
}

static void alltoalls(const struct set *s, void *dest, const void *src, ptrdiff_t dst,
                      ptrdiff_t sst, size_t nelems, size_t size)
{
    set_sync(s);
    for (int i = 0; i < s->size; i++)
        for (size_t k = 0; k < nelems; k++)
            fmshmem_get((char *)dest + ((ptrdiff_t)((size_t)i * nelems + k) * dst) * (ptrdiff_t)size,
                        (const char *)src +
                            ((ptrdiff_t)((size_t)s->me * nelems + k) * sst) * (ptrdiff_t)size,
                        size, member(s, i), true);
    gets_done();
    set_sync(s);
}

typedef void combine_fn(void *acc, const void *x, size_t n);

static void reduce(const struct set *s, void *dest, const void *src, size_t n, size_t size,
                   combine_fn *combine)
{
    size_t bytes = n * size;
    set_sync(s);
    char *acc = malloc(bytes ? bytes : 1), *tmp = malloc(bytes ? bytes : 1);
    if (!acc || !tmp)
        fmshmem_fatal("out of memory for a reduction of %zu bytes", bytes);
    for (int i = 0; i < s->size; i++) {
        char *into = i == 0 ? acc : tmp;
        if (i == s->me)
            memcpy(into, src, bytes);
        else
            fmshmem_get(into, src, bytes, member(s, i), false);
        if (i > 0)
            combine(acc, tmp, n);
    }
    set_sync(s);
    memcpy(dest, acc, bytes);
    free(acc);
    free(tmp);
}

/* ---- team collectives (1.5) ---- */

int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems,
                       int PE_root)
{
    struct set s;
    if (!team_set(team, &s) || PE_root < 0 || PE_root >= s.size)
        return -1;
    broadcast(&s, dest, source, nelems, PE_root, true);
    return 0;
}

int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems)
{
    struct set s;
    if (!team_set(team, &s))
        return -1;
    collect(&s, dest, source, nelems);
    return 0;
}

int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems)
{
    struct set s;
    if (!team_set(team, &s))
        return -1;
    fcollect(&s, dest, source, nelems);
    return 0;
}

int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems)
{
    struct set s;
    if (!team_set(team, &s))
        return -1;
    alltoall(&s, dest, source, nelems);
    return 0;
}

int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems)
{
    struct set s;
    if (!team_set(team, &s))
        return -1;
    alltoalls(&s, dest, source, dst, sst, nelems, 1);
    return 0;
}

#define DEF_COLL(T, N)                                                                         \
    int shmem_##N##_broadcast(shmem_team_t team, T *dest, const T *source, size_t nelems,      \
                              int PE_root)                                                     \
    {                                                                                          \
        return shmem_broadcastmem(team, dest, source, nelems * sizeof(T), PE_root);            \
    }                                                                                          \
    int shmem_##N##_collect(shmem_team_t team, T *dest, const T *source, size_t nelems)        \
    {                                                                                          \
        return shmem_collectmem(team, dest, source, nelems * sizeof(T));                       \
    }                                                                                          \
    int shmem_##N##_fcollect(shmem_team_t team, T *dest, const T *source, size_t nelems)       \
    {                                                                                          \
        return shmem_fcollectmem(team, dest, source, nelems * sizeof(T));                      \
    }                                                                                          \
    int shmem_##N##_alltoall(shmem_team_t team, T *dest, const T *source, size_t nelems)       \
    {                                                                                          \
        return shmem_alltoallmem(team, dest, source, nelems * sizeof(T));                      \
    }                                                                                          \
    int shmem_##N##_alltoalls(shmem_team_t team, T *dest, const T *source, ptrdiff_t dst,      \
                              ptrdiff_t sst, size_t nelems)                                    \
    {                                                                                          \
        struct set s;                                                                          \
        if (!team_set(team, &s))                                                               \
            return -1;                                                                         \
        alltoalls(&s, dest, source, dst, sst, nelems, sizeof(T));                              \
        return 0;                                                                              \
    }
FMSHMEM_RMA_TYPES(DEF_COLL)

/* ---- reductions ---- */

#define OP_sum(a, b) ((a) + (b))
#define OP_prod(a, b) ((a) * (b))
#define OP_max(a, b) ((a) > (b) ? (a) : (b))
#define OP_min(a, b) ((a) < (b) ? (a) : (b))
#define OP_and(a, b) ((a) & (b))
#define OP_or(a, b) ((a) | (b))
#define OP_xor(a, b) ((a) ^ (b))

#define DEF_COMBINE(T, N, OP)                                                                  \
    static void combine_##N##_##OP(void *acc, const void *x, size_t n)                         \
    {                                                                                          \
        T *a = acc;                                                                            \
        const T *b = x;                                                                        \
        for (size_t i = 0; i < n; i++)                                                         \
            a[i] = OP_##OP(a[i], b[i]);                                                        \
    }
#define DEF_TEAM_REDUCE(T, N, OP)                                                              \
    int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce) \
    {                                                                                          \
        struct set s;                                                                          \
        if (!team_set(team, &s))                                                               \
            return -1;                                                                         \
        reduce(&s, dest, source, nreduce, sizeof(T), combine_##N##_##OP);                      \
        return 0;                                                                              \
    }
#define DEF_BIT(T, N)                                                                          \
    DEF_COMBINE(T, N, and) DEF_COMBINE(T, N, or) DEF_COMBINE(T, N, xor)                        \
    DEF_TEAM_REDUCE(T, N, and) DEF_TEAM_REDUCE(T, N, or) DEF_TEAM_REDUCE(T, N, xor)
#define DEF_CMP(T, N)                                                                          \
    DEF_COMBINE(T, N, max) DEF_COMBINE(T, N, min)                                              \
    DEF_TEAM_REDUCE(T, N, max) DEF_TEAM_REDUCE(T, N, min)
#define DEF_ARITH(T, N)                                                                        \
    DEF_COMBINE(T, N, sum) DEF_COMBINE(T, N, prod)                                             \
    DEF_TEAM_REDUCE(T, N, sum) DEF_TEAM_REDUCE(T, N, prod)
FMSHMEM_REDUCE_BIT_TYPES(DEF_BIT)
FMSHMEM_REDUCE_CMP_TYPES(DEF_CMP)
FMSHMEM_REDUCE_ARITH_TYPES(DEF_ARITH)
/* The active-set forms also AND, OR and XOR signed types. */
DEF_COMBINE(short, short, and) DEF_COMBINE(short, short, or) DEF_COMBINE(short, short, xor)
DEF_COMBINE(int, int, and) DEF_COMBINE(int, int, or) DEF_COMBINE(int, int, xor)
DEF_COMBINE(long, long, and) DEF_COMBINE(long, long, or) DEF_COMBINE(long, long, xor)
DEF_COMBINE(long long, longlong, and) DEF_COMBINE(long long, longlong, or)
DEF_COMBINE(long long, longlong, xor)

/* ---- active-set forms (deprecated in 1.5) ---- */

#define DEF_TO_ALL(T, N, OP)                                                                   \
    void shmem_##N##_##OP##_to_all(T *dest, const T *source, int nreduce, int PE_start,        \
                                   int logPE_stride, int PE_size, T *pWrk, long *pSync)        \
    {                                                                                          \
        (void)pWrk;                                                                            \
        struct set s = active_set(PE_start, logPE_stride, PE_size, pSync,                      \
                                  "shmem_" #N "_" #OP "_to_all");                              \
        reduce(&s, dest, source, (size_t)nreduce, sizeof(T), combine_##N##_##OP);              \
    }
#define DEF_TO_ALL_BIT(T, N) DEF_TO_ALL(T, N, and) DEF_TO_ALL(T, N, or) DEF_TO_ALL(T, N, xor)
#define DEF_TO_ALL_CMP(T, N) DEF_TO_ALL(T, N, max) DEF_TO_ALL(T, N, min)
#define DEF_TO_ALL_ARITH(T, N) DEF_TO_ALL(T, N, sum) DEF_TO_ALL(T, N, prod)
FMSHMEM_TOALL_BIT_TYPES(DEF_TO_ALL_BIT)
FMSHMEM_TOALL_CMP_TYPES(DEF_TO_ALL_CMP)
FMSHMEM_TOALL_ARITH_TYPES(DEF_TO_ALL_ARITH)

#define DEF_ACTIVE_SET(BITS)                                                                   \
    void shmem_broadcast##BITS(void *dest, const void *source, size_t nelems, int PE_root,      \
                               int PE_start, int logPE_stride, int PE_size, long *pSync)       \
    {                                                                                          \
        struct set s = active_set(PE_start, logPE_stride, PE_size, pSync, "shmem_broadcast");  \
        if (PE_root < 0 || PE_root >= PE_size)                                                 \
            fmshmem_fatal("shmem_broadcast" #BITS ": root %d is not in the active set", PE_root); \
        broadcast(&s, dest, source, nelems * (BITS / 8), PE_root, false);                      \
    }                                                                                          \
    void shmem_collect##BITS(void *dest, const void *source, size_t nelems, int PE_start,      \
                             int logPE_stride, int PE_size, long *pSync)                       \
    {                                                                                          \
        struct set s = active_set(PE_start, logPE_stride, PE_size, pSync, "shmem_collect");    \
        collect(&s, dest, source, nelems * (BITS / 8));                                        \
    }                                                                                          \
    void shmem_fcollect##BITS(void *dest, const void *source, size_t nelems, int PE_start,     \
                              int logPE_stride, int PE_size, long *pSync)                      \
    {                                                                                          \
        struct set s = active_set(PE_start, logPE_stride, PE_size, pSync, "shmem_fcollect");   \
        fcollect(&s, dest, source, nelems * (BITS / 8));                                       \
    }                                                                                          \
    void shmem_alltoall##BITS(void *dest, const void *source, size_t nelems, int PE_start,     \
                              int logPE_stride, int PE_size, long *pSync)                      \
    {                                                                                          \
        struct set s = active_set(PE_start, logPE_stride, PE_size, pSync, "shmem_alltoall");   \
        alltoall(&s, dest, source, nelems * (BITS / 8));                                       \
    }                                                                                          \
    void shmem_alltoalls##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,   \
                               size_t nelems, int PE_start, int logPE_stride, int PE_size,     \
                               long *pSync)                                                    \
    {                                                                                          \
        struct set s = active_set(PE_start, logPE_stride, PE_size, pSync, "shmem_alltoalls");  \
        alltoalls(&s, dest, source, dst, sst, nelems, BITS / 8);                               \
    }
DEF_ACTIVE_SET(32)
DEF_ACTIVE_SET(64)
