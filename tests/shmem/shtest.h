/*
 * shtest.h: helpers shared by the OpenSHMEM test programs in this directory.
 *
 * Everything here uses standard OpenSHMEM names only, so the programs test any
 * implementation (they are also run against Open MPI's oshmem by run_oshmem.sh).
 *
 * A failed check prints exactly one line,
 *     FAIL: <what> (pe N: got X want Y)
 * to stderr and calls shmem_global_exit(1): a PE that stops checking must not leave its
 * peers blocked in a collective, and one line per failure keeps logs of 8 PEs readable.
 */
#ifndef SHTEST_H
#define SHTEST_H

#include <shmem.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* This PE, the number of PEs, and its neighbours in the ring of PEs. */
static inline void ring_place(int *me, int *npes, int *right, int *left)
{
    *me = shmem_my_pe();
    *npes = shmem_n_pes();
    *right = (*me + 1) % *npes;
    *left = (*me + *npes - 1) % *npes;
}

/* Formats the "what" part and reports; never returns. */
static inline void shtest_vfail(const char *got, const char *want, const char *fmt, va_list ap)
{
    char what[256];

    vsnprintf(what, sizeof what, fmt, ap);
    fprintf(stderr, "FAIL: %s (pe %d: got %s want %s)\n", what, shmem_my_pe(), got, want);
    fflush(stderr);
    shmem_global_exit(1);
}

static inline void fail(const char *got, const char *want, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    shtest_vfail(got, want, fmt, ap);
    va_end(ap);
}

/*
 * Integer check. Every standard integer type up to 64 bits converts to unsigned long long
 * without two values colliding, so one comparison serves all of them exactly.
 */
static inline void expect_eq(unsigned long long got, unsigned long long want,
                             const char *fmt, ...)
{
    char g[32], w[32];
    va_list ap;

    if (got == want)
        return;
    snprintf(g, sizeof g, "%lld", (long long)got);
    snprintf(w, sizeof w, "%lld", (long long)want);
    va_start(ap, fmt);
    shtest_vfail(g, w, fmt, ap);
    va_end(ap);
}

/* Range check: fails unless lo <= v < hi. */
static inline void expect_range(long long v, long long lo, long long hi, const char *fmt, ...)
{
    char g[32], w[64];
    va_list ap;

    if (v >= lo && v < hi)
        return;
    snprintf(g, sizeof g, "%lld", v);
    snprintf(w, sizeof w, "a value in [%lld, %lld)", lo, hi);
    va_start(ap, fmt);
    shtest_vfail(g, w, fmt, ap);
    va_end(ap);
}

/* Floating-point check: float and double convert to long double exactly. */
static inline void expect_fp(long double got, long double want, const char *fmt, ...)
{
    char g[48], w[48];
    va_list ap;

    if (got == want)
        return;
    snprintf(g, sizeof g, "%.21Lg", got);
    snprintf(w, sizeof w, "%.21Lg", want);
    va_start(ap, fmt);
    shtest_vfail(g, w, fmt, ap);
    va_end(ap);
}

/*
 * Byte pattern for bulk transfers. It depends on the position, so data landing at a shifted
 * offset is caught, and on the seed, which every test derives from the writing PE.
 */
static inline unsigned char pat(unsigned seed, size_t i)
{
    uint32_t x = (uint32_t)i * 2654435761u + seed * 40503u + 0x9e37u;

    x ^= x >> 15;
    x *= 0x2c1b3c6du;
    x ^= x >> 12;
    return (unsigned char)x;
}

static inline void fill_pat(void *buf, size_t n, unsigned seed)
{
    unsigned char *b = buf;

    for (size_t i = 0; i < n; i++)
        b[i] = pat(seed, i);
}

/* Checks a pattern written by fill_pat; reports the first byte that differs. */
static inline void check_pat(const void *buf, size_t n, unsigned seed, const char *fmt, ...)
{
    const unsigned char *b = buf;

    for (size_t i = 0; i < n; i++) {
        if (b[i] != pat(seed, i)) {
            char g[8], w[8], what[224];
            va_list ap;

            va_start(ap, fmt);
            vsnprintf(what, sizeof what, fmt, ap);
            va_end(ap);
            snprintf(g, sizeof g, "0x%02x", b[i]);
            snprintf(w, sizeof w, "0x%02x", pat(seed, i));
            fail(g, w, "%s byte %zu of %zu", what, i, n);
        }
    }
}

/* Checks that bytes nobody should have written still hold the fill value. */
static inline void check_fill(const void *buf, size_t n, unsigned char v, const char *fmt, ...)
{
    const unsigned char *b = buf;

    for (size_t i = 0; i < n; i++) {
        if (b[i] != v) {
            char g[8], w[8], what[224];
            va_list ap;

            va_start(ap, fmt);
            vsnprintf(what, sizeof what, fmt, ap);
            va_end(ap);
            snprintf(g, sizeof g, "0x%02x", b[i]);
            snprintf(w, sizeof w, "0x%02x", v);
            fail(g, w, "%s untouched byte %zu", what, i);
        }
    }
}

/* Common ending: the final barrier makes "ok" mean every PE got through every check. */
static inline int finish(const char *prog)
{
    shmem_barrier_all();
    if (shmem_my_pe() == 0) {
        printf("ok: %s\n", prog);
        fflush(stdout);
    }
    shmem_finalize();
    return 0;
}

#endif /* SHTEST_H */
