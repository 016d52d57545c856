/*
 * Contexts: views of this PE's one communication path.
 *
 * A context names a team (the world for shmem_ctx_create) in whose numbers
 * its operations give PEs; the operations are the default context's, so
 * they are ordered with every other operation of this PE and a quiet or
 * fence on any context completes or orders them all. The spec asks less
 * (contexts are independent streams), so this is correct, only without
 * the overlap separate streams could give (under SHMEM_THREAD_MULTIPLE the
 * threads share the path too, am.c).
 */
#include "shmem_internal.h"

#include <stdlib.h>

struct fmshmem_ctx {
    shmem_team_t team;
    long options;
};

struct fmshmem_ctx fmshmem_ctx_default = {&fmshmem.world, 0};

static shmem_ctx_t new_ctx(shmem_team_t team, long options)
{
    struct fmshmem_ctx *c = malloc(sizeof(*c));
    if (c)
        *c = (struct fmshmem_ctx){team, options};
    return c;
}

int shmem_ctx_create(long options, shmem_ctx_t *ctx)
{
    *ctx = new_ctx(SHMEM_TEAM_WORLD, options);
    return *ctx ? 0 : -1;
}

int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx)
{
    *ctx = team == SHMEM_TEAM_INVALID || team->my_pe < 0 ? NULL : new_ctx(team, options);
    return *ctx ? 0 : -1;
}

void shmem_ctx_destroy(shmem_ctx_t ctx)
{
    if (ctx == SHMEM_CTX_DEFAULT)
        fmshmem_fatal("shmem_ctx_destroy: SHMEM_CTX_DEFAULT cannot be destroyed");
    if (ctx == SHMEM_CTX_INVALID)
        return;
    /* Its operations complete before it goes, as the spec requires. */
    shmem_quiet();
    free(ctx);
}

int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team)
{
    if (ctx == SHMEM_CTX_INVALID || !team) {
        if (team)
            *team = SHMEM_TEAM_INVALID;
        return -1;
    }
    *team = ctx->team;
    return 0;
}

void shmem_ctx_fence(shmem_ctx_t ctx)
{
    (void)ctx;
    shmem_fence();
}

void shmem_ctx_quiet(shmem_ctx_t ctx)
{
    (void)ctx;
    shmem_quiet();
}

/* The world number of PE `pe` of the context's team. */
static int world_pe(shmem_ctx_t ctx, int pe, const char *what)
{
    if (fm_unlikely(ctx == SHMEM_CTX_INVALID))
        fmshmem_fatal("%s: the context is SHMEM_CTX_INVALID", what);
    const struct fmshmem_team *t = ctx->team;
    if (t == SHMEM_TEAM_WORLD)
        return pe;
    if (fm_unlikely(pe < 0 || pe >= t->size))
        fmshmem_fatal("%s: PE %d is out of range of the context's team (0..%d)", what, pe,
                      t->size - 1);
    return t->start + pe * t->stride;
}

#define PE world_pe(ctx, pe, __func__)

#define DEF_CTX_RMA(T, N)                                                                      \
    void shmem_ctx_##N##_put(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe) \
    {                                                                                          \
        shmem_##N##_put(dest, source, nelems, PE);                                             \
    }                                                                                          \
    void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,     \
                                 int pe)                                                       \
    {                                                                                          \
        shmem_##N##_put_nbi(dest, source, nelems, PE);                                         \
    }                                                                                          \
    void shmem_ctx_##N##_p(shmem_ctx_t ctx, T *dest, T value, int pe)                          \
    {                                                                                          \
        shmem_##N##_p(dest, value, PE);                                                        \
    }                                                                                          \
    void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,        \
                              ptrdiff_t sst, size_t nelems, int pe)                            \
    {                                                                                          \
        shmem_##N##_iput(dest, source, dst, sst, nelems, PE);                                  \
    }                                                                                          \
    void shmem_ctx_##N##_get(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe) \
    {                                                                                          \
        shmem_##N##_get(dest, source, nelems, PE);                                             \
    }                                                                                          \
    void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,     \
                                 int pe)                                                       \
    {                                                                                          \
        shmem_##N##_get_nbi(dest, source, nelems, PE);                                         \
    }                                                                                          \
    T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T *source, int pe)                              \
    {                                                                                          \
        return shmem_##N##_g(source, PE);                                                      \
    }                                                                                          \
    void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,        \
                              ptrdiff_t sst, size_t nelems, int pe)                            \
    {                                                                                          \
        shmem_##N##_iget(dest, source, dst, sst, nelems, PE);                                  \
    }                                                                                          \
    void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,  \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)   \
    {                                                                                          \
        shmem_##N##_put_signal(dest, source, nelems, sig_addr, signal, sig_op, PE);            \
    }                                                                                          \
    void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T *dest, const T *source,             \
                                        size_t nelems, uint64_t *sig_addr, uint64_t signal,    \
                                        int sig_op, int pe)                                    \
    {                                                                                          \
        shmem_##N##_put_signal_nbi(dest, source, nelems, sig_addr, signal, sig_op, PE);        \
    }
FMSHMEM_RMA_TYPES(DEF_CTX_RMA)

#define DEF_CTX_RMA_SIZE(S)                                                                    \
    void shmem_ctx_put##S(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,      \
                          int pe)                                                              \
    {                                                                                          \
        shmem_put##S(dest, source, nelems, PE);                                                \
    }                                                                                          \
    void shmem_ctx_put##S##_nbi(shmem_ctx_t ctx, void *dest, const void *source,               \
                                size_t nelems, int pe)                                         \
    {                                                                                          \
        shmem_put##S##_nbi(dest, source, nelems, PE);                                          \
    }                                                                                          \
    void shmem_ctx_get##S(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,      \
                          int pe)                                                              \
    {                                                                                          \
        shmem_get##S(dest, source, nelems, PE);                                                \
    }                                                                                          \
    void shmem_ctx_get##S##_nbi(shmem_ctx_t ctx, void *dest, const void *source,               \
                                size_t nelems, int pe)                                         \
    {                                                                                          \
        shmem_get##S##_nbi(dest, source, nelems, PE);                                          \
    }                                                                                          \
    void shmem_ctx_iput##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,     \
                           ptrdiff_t sst, size_t nelems, int pe)                               \
    {                                                                                          \
        shmem_iput##S(dest, source, dst, sst, nelems, PE);                                     \
    }                                                                                          \
    void shmem_ctx_iget##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,     \
                           ptrdiff_t sst, size_t nelems, int pe)                               \
    {                                                                                          \
        shmem_iget##S(dest, source, dst, sst, nelems, PE);                                     \
    }                                                                                          \
    void shmem_ctx_put##S##_signal(shmem_ctx_t ctx, void *dest, const void *source,            \
                                   size_t nelems, uint64_t *sig_addr, uint64_t signal,         \
                                   int sig_op, int pe)                                         \
    {                                                                                          \
        shmem_put##S##_signal(dest, source, nelems, sig_addr, signal, sig_op, PE);             \
    }                                                                                          \
    void shmem_ctx_put##S##_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source,        \
                                       size_t nelems, uint64_t *sig_addr, uint64_t signal,     \
                                       int sig_op, int pe)                                     \
    {                                                                                          \
        shmem_put##S##_signal_nbi(dest, source, nelems, sig_addr, signal, sig_op, PE);         \
    }
FMSHMEM_SIZES(DEF_CTX_RMA_SIZE)

void shmem_ctx_putmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe)
{
    shmem_putmem(dest, source, nelems, PE);
}

void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe)
{
    shmem_putmem_nbi(dest, source, nelems, PE);
}

void shmem_ctx_getmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe)
{
    shmem_getmem(dest, source, nelems, PE);
}

void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe)
{
    shmem_getmem_nbi(dest, source, nelems, PE);
}

void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                             uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)
{
    shmem_putmem_signal(dest, source, nelems, sig_addr, signal, sig_op, PE);
}

void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source,
                                 size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op,
                                 int pe)
{
    shmem_putmem_signal_nbi(dest, source, nelems, sig_addr, signal, sig_op, PE);
}

#define DEF_CTX_AMO_EXT(T, N)                                                                  \
    T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T *source, int pe)                   \
    {                                                                                          \
        return shmem_##N##_atomic_fetch(source, PE);                                           \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T *fetch, const T *source, int pe)  \
    {                                                                                          \
        shmem_##N##_atomic_fetch_nbi(fetch, source, PE);                                       \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T *dest, T value, int pe)                 \
    {                                                                                          \
        shmem_##N##_atomic_set(dest, value, PE);                                               \
    }                                                                                          \
    T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T *dest, T value, int pe)                   \
    {                                                                                          \
        return shmem_##N##_atomic_swap(dest, value, PE);                                       \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe)  \
    {                                                                                          \
        shmem_##N##_atomic_swap_nbi(fetch, dest, value, PE);                                   \
    }
FMSHMEM_AMO_EXT_TYPES(DEF_CTX_AMO_EXT)

#define DEF_CTX_AMO_STD(T, N)                                                                  \
    T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T *dest, T cond, T value, int pe)   \
    {                                                                                          \
        return shmem_##N##_atomic_compare_swap(dest, cond, value, PE);                         \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T cond,   \
                                                 T value, int pe)                              \
    {                                                                                          \
        shmem_##N##_atomic_compare_swap_nbi(fetch, dest, cond, value, PE);                     \
    }                                                                                          \
    T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T *dest, int pe)                       \
    {                                                                                          \
        return shmem_##N##_atomic_fetch_inc(dest, PE);                                         \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T *fetch, T *dest, int pe)      \
    {                                                                                          \
        shmem_##N##_atomic_fetch_inc_nbi(fetch, dest, PE);                                     \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T *dest, int pe)                          \
    {                                                                                          \
        shmem_##N##_atomic_inc(dest, PE);                                                      \
    }                                                                                          \
    T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T *dest, T value, int pe)              \
    {                                                                                          \
        return shmem_##N##_atomic_fetch_add(dest, value, PE);                                  \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe)                                          \
    {                                                                                          \
        shmem_##N##_atomic_fetch_add_nbi(fetch, dest, value, PE);                              \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T *dest, T value, int pe)                 \
    {                                                                                          \
        shmem_##N##_atomic_add(dest, value, PE);                                               \
    }
FMSHMEM_AMO_STD_TYPES(DEF_CTX_AMO_STD)

#define DEF_CTX_AMO_BIT_OP(T, N, OP)                                                           \
    T shmem_ctx_##N##_atomic_fetch_##OP(shmem_ctx_t ctx, T *dest, T value, int pe)             \
    {                                                                                          \
        return shmem_##N##_atomic_fetch_##OP(dest, value, PE);                                 \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_fetch_##OP##_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,  \
                                                 int pe)                                       \
    {                                                                                          \
        shmem_##N##_atomic_fetch_##OP##_nbi(fetch, dest, value, PE);                           \
    }                                                                                          \
    void shmem_ctx_##N##_atomic_##OP(shmem_ctx_t ctx, T *dest, T value, int pe)                \
    {                                                                                          \
        shmem_##N##_atomic_##OP(dest, value, PE);                                              \
    }
#define DEF_CTX_AMO_BIT(T, N)                                                                  \
    DEF_CTX_AMO_BIT_OP(T, N, and) DEF_CTX_AMO_BIT_OP(T, N, or) DEF_CTX_AMO_BIT_OP(T, N, xor)
FMSHMEM_AMO_BIT_TYPES(DEF_CTX_AMO_BIT)
