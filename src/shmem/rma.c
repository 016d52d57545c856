/*
 * Puts and gets: a memcpy through the mapping of a PE on this node, an
 * active message to one on another node. A blocking put returns once the
 * source may be reused: on this node the data is already there; across
 * nodes it is in fastmsg's ring, and quiet waits until it is applied.
 */
#include "shmem_internal.h"

#include <string.h>

void fmshmem_put(void *dest, const void *src, size_t len, int pe, bool nbi)
{
    (void)nbi; /* the source is copied before return either way */
    fmshmem_check_pe(pe, "shmem_put");
    if (fm_unlikely(len == 0))
        return;
    uint64_t off;
    enum seg s = fmshmem_seg_of(dest, len, &off, "shmem_put");
    char *base = S.peer_base[s][pe];
    if (fm_likely(base != NULL))
        memmove(base + off, src, len);
    else
        fmshmem_am_put(pe, s, off, src, len);
}

void fmshmem_get(void *dest, const void *src, size_t len, int pe, bool nbi)
{
    fmshmem_check_pe(pe, "shmem_get");
    if (fm_unlikely(len == 0))
        return;
    uint64_t off;
    enum seg s = fmshmem_seg_of(src, len, &off, "shmem_get");
    char *base = S.peer_base[s][pe];
    if (fm_likely(base != NULL))
        memmove(dest, base + off, len);
    else
        fmshmem_am_get(pe, s, off, dest, len, !nbi);
}

/* Strided forms move element by element; consecutive elements of a remote
 * put still travel in few messages because fastmsg's ring batches them. */
static void iput(char *dest, const char *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                 size_t size, int pe)
{
    for (size_t i = 0; i < nelems; i++)
        fmshmem_put(dest + (ptrdiff_t)i * dst * (ptrdiff_t)size,
                    src + (ptrdiff_t)i * sst * (ptrdiff_t)size, size, pe, false);
}

static void iget(char *dest, const char *src, ptrdiff_t dst, ptrdiff_t sst, size_t nelems,
                 size_t size, int pe)
{
    for (size_t i = 0; i < nelems; i++)
        fmshmem_get(dest + (ptrdiff_t)i * dst * (ptrdiff_t)size,
                    src + (ptrdiff_t)i * sst * (ptrdiff_t)size, size, pe, true);
    /* The nbi gets above complete together. */
    if (!S.peer_base[SEG_HEAP][pe])
        fmshmem_am_quiet_gets();
}

/* Put, then the signal: on this node a release store or atomic add after the
 * copy; across nodes the signal's AMO follows the data on the same ordered
 * channel. */
static void put_signal(void *dest, const void *src, size_t len, uint64_t *sig_addr,
                       uint64_t signal, int sig_op, int pe)
{
    fmshmem_put(dest, src, len, pe, false);
    if (sig_op == SHMEM_SIGNAL_SET) {
        __atomic_thread_fence(__ATOMIC_RELEASE);
        fmshmem_amo(sig_addr, pe, AMO_SET, 8, signal, 0, false, "shmem_put_signal");
    } else if (sig_op == SHMEM_SIGNAL_ADD) {
        fmshmem_amo(sig_addr, pe, AMO_ADD, 8, signal, 0, false, "shmem_put_signal");
    } else {
        fmshmem_fatal("shmem_put_signal: sig_op %d is neither SHMEM_SIGNAL_SET nor "
                      "SHMEM_SIGNAL_ADD",
                      sig_op);
    }
}

#define DEF_RMA(T, N)                                                                          \
    void shmem_##N##_put(T *dest, const T *source, size_t nelems, int pe)                      \
    {                                                                                          \
        fmshmem_put(dest, source, nelems * sizeof(T), pe, false);                              \
    }                                                                                          \
    void shmem_##N##_put_nbi(T *dest, const T *source, size_t nelems, int pe)                  \
    {                                                                                          \
        fmshmem_put(dest, source, nelems * sizeof(T), pe, true);                               \
    }                                                                                          \
    void shmem_##N##_p(T *dest, T value, int pe) { fmshmem_put(dest, &value, sizeof(T), pe, false); } \
    void shmem_##N##_iput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe)                                               \
    {                                                                                          \
        iput((char *)dest, (const char *)source, dst, sst, nelems, sizeof(T), pe);             \
    }                                                                                          \
    void shmem_##N##_get(T *dest, const T *source, size_t nelems, int pe)                      \
    {                                                                                          \
        fmshmem_get(dest, source, nelems * sizeof(T), pe, false);                              \
    }                                                                                          \
    void shmem_##N##_get_nbi(T *dest, const T *source, size_t nelems, int pe)                  \
    {                                                                                          \
        fmshmem_get(dest, source, nelems * sizeof(T), pe, true);                               \
    }                                                                                          \
    T shmem_##N##_g(const T *source, int pe)                                                   \
    {                                                                                          \
        T v;                                                                                   \
        fmshmem_get(&v, source, sizeof(T), pe, false);                                         \
        return v;                                                                              \
    }                                                                                          \
    void shmem_##N##_iget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe)                                               \
    {                                                                                          \
        iget((char *)dest, (const char *)source, dst, sst, nelems, sizeof(T), pe);             \
    }                                                                                          \
    void shmem_##N##_put_signal(T *dest, const T *source, size_t nelems, uint64_t *sig_addr,   \
                                uint64_t signal, int sig_op, int pe)                           \
    {                                                                                          \
        put_signal(dest, source, nelems * sizeof(T), sig_addr, signal, sig_op, pe);            \
    }                                                                                          \
    void shmem_##N##_put_signal_nbi(T *dest, const T *source, size_t nelems,                   \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)   \
    {                                                                                          \
        put_signal(dest, source, nelems * sizeof(T), sig_addr, signal, sig_op, pe);            \
    }
FMSHMEM_RMA_TYPES(DEF_RMA)

#define DEF_RMA_SIZE(BITS)                                                                     \
    void shmem_put##BITS(void *dest, const void *source, size_t nelems, int pe)                \
    {                                                                                          \
        fmshmem_put(dest, source, nelems * (BITS / 8), pe, false);                             \
    }                                                                                          \
    void shmem_put##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe)          \
    {                                                                                          \
        fmshmem_put(dest, source, nelems * (BITS / 8), pe, true);                              \
    }                                                                                          \
    void shmem_get##BITS(void *dest, const void *source, size_t nelems, int pe)                \
    {                                                                                          \
        fmshmem_get(dest, source, nelems * (BITS / 8), pe, false);                             \
    }                                                                                          \
    void shmem_get##BITS##_nbi(void *dest, const void *source, size_t nelems, int pe)          \
    {                                                                                          \
        fmshmem_get(dest, source, nelems * (BITS / 8), pe, true);                              \
    }                                                                                          \
    void shmem_iput##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,        \
                          size_t nelems, int pe)                                               \
    {                                                                                          \
        iput(dest, source, dst, sst, nelems, BITS / 8, pe);                                    \
    }                                                                                          \
    void shmem_iget##BITS(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,        \
                          size_t nelems, int pe)                                               \
    {                                                                                          \
        iget(dest, source, dst, sst, nelems, BITS / 8, pe);                                    \
    }                                                                                          \
    void shmem_put##BITS##_signal(void *dest, const void *source, size_t nelems,               \
                                  uint64_t *sig_addr, uint64_t signal, int sig_op, int pe)     \
    {                                                                                          \
        put_signal(dest, source, nelems * (BITS / 8), sig_addr, signal, sig_op, pe);           \
    }                                                                                          \
    void shmem_put##BITS##_signal_nbi(void *dest, const void *source, size_t nelems,           \
                                      uint64_t *sig_addr, uint64_t signal, int sig_op, int pe) \
    {                                                                                          \
        put_signal(dest, source, nelems * (BITS / 8), sig_addr, signal, sig_op, pe);           \
    }
FMSHMEM_SIZES(DEF_RMA_SIZE)

void shmem_putmem(void *dest, const void *source, size_t nelems, int pe)
{
    fmshmem_put(dest, source, nelems, pe, false);
}

void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe)
{
    fmshmem_put(dest, source, nelems, pe, true);
}

void shmem_getmem(void *dest, const void *source, size_t nelems, int pe)
{
    fmshmem_get(dest, source, nelems, pe, false);
}

void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe)
{
    fmshmem_get(dest, source, nelems, pe, true);
}

void shmem_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                         uint64_t signal, int sig_op, int pe)
{
    put_signal(dest, source, nelems, sig_addr, signal, sig_op, pe);
}

void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                             uint64_t signal, int sig_op, int pe)
{
    put_signal(dest, source, nelems, sig_addr, signal, sig_op, pe);
}

uint64_t shmem_signal_fetch(const uint64_t *sig_addr)
{
    fmshmem_test_progress(); /* polled in a loop, like a test */
    return __atomic_load_n(sig_addr, __ATOMIC_ACQUIRE);
}
