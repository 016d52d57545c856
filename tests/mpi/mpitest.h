/* Shared helpers for the MPI test programs in tests/mpi/: a check that
 * names the failed condition and aborts the job (so a failure can never turn
 * into a hang), byte patterns to fill and verify buffers, and a short
 * "ok" line per section from rank 0. */
#ifndef FM_MPITEST_H
#define FM_MPITEST_H

#include <mpi.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int mt_rank = -1, mt_size = 0;
static const char *mt_prog = "?";

static inline void mt_init(int *argc, char ***argv, const char *prog)
{
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &mt_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &mt_size);
    mt_prog = prog;
}

/* Prints what failed, then ends the whole job with exit status 1. */
static inline void mt_fail(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "FAIL %s rank %d/%d at %s:%d: %s (%s)\n", mt_prog, mt_rank, mt_size, file,
            line, msg, cond);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define CHECK(cond, ...)                                                                       \
    do {                                                                                       \
        if (!(cond))                                                                           \
            mt_fail(__FILE__, __LINE__, #cond, __VA_ARGS__);                                   \
    } while (0)

/* The byte at offset i of a message identified by (a, b). */
static inline unsigned char mt_byte(unsigned a, unsigned b, size_t i)
{
    uint64_t x = (uint64_t)a * 0x9E3779B97F4A7C15ULL ^ (uint64_t)b * 0xC2B2AE3D27D4EB4FULL;
    x ^= (uint64_t)i * 0x165667B19E3779F9ULL;
    x ^= x >> 29;
    return (unsigned char)(x ^ (x >> 8) ^ (i >> 12));
}

static inline void mt_fill(void *buf, size_t n, unsigned a, unsigned b)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < n; i++)
        p[i] = mt_byte(a, b, i);
}

/* Returns the first offset that differs from the pattern, or -1. */
static inline long mt_verify(const void *buf, size_t n, unsigned a, unsigned b)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < n; i++)
        if (p[i] != mt_byte(a, b, i))
            return (long)i;
    return -1;
}

static inline void *mt_alloc(size_t n)
{
    void *p = calloc(n ? n : 1, 1);
    CHECK(p != NULL, "out of memory for %zu bytes", n);
    return p;
}

/* Rank 0 reports a finished section once every rank has got through it. */
static inline void mt_ok(const char *what)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) {
        printf("  %s: %s\n", mt_prog, what);
        fflush(stdout);
    }
}

static inline int mt_finish(void)
{
    MPI_Barrier(MPI_COMM_WORLD);
    if (mt_rank == 0) {
        printf("%s: all checks passed on %d ranks\n", mt_prog, mt_size);
        fflush(stdout);
    }
    MPI_Finalize();
    return 0;
}

#endif
