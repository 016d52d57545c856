/*
 * compute.c: progress of one-sided operations while the target computes.
 *
 * PE 0 computes for COMPUTE_S seconds (a loop reading the clock) without calling OpenSHMEM.
 * Meanwhile every other PE performs ITERS shmem_long_g and ITERS
 * shmem_long_atomic_fetch_add on PE 0's data.  The spec ("Progress of OpenSHMEM
 * Operations") expects these to complete without PE 0 taking part; the worst latencies are
 * printed, not asserted, since what is acceptable depends on the implementation.  Values
 * are checked exactly: every get returns the word PE 0 published, the counter ends at
 * ITERS * (n - 1), and each PE's own fetch_adds see increasing values.
 */
#define _POSIX_C_SOURCE 200809L
#include "shtest.h"

#include <time.h>

enum { ITERS = 1000, COMPUTE_S = 2 };
#define PUBLISHED 0x0123456789abcdefL

static long published, counter;

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

int main(void)
{
    shmem_init();

    int me = shmem_my_pe(), npes = shmem_n_pes();

    if (me == 0)
        published = PUBLISHED;
    shmem_barrier_all();

    double start = now();

    if (me == 0) {
        while (now() - start < COMPUTE_S)
            ;
    } else {
        double max_g = 0, max_add = 0;
        long prev = -1;

        for (int i = 0; i < ITERS; i++) {
            double t0 = now();
            long v = shmem_long_g(&published, 0);
            double t1 = now();
            long f = shmem_long_atomic_fetch_add(&counter, 1, 0);
            double t2 = now();

            expect_eq(v, PUBLISHED, "shmem_long_g from a computing pe, iteration %d", i);
            expect_range(f, prev + 1, (long)ITERS * (npes - 1),
                         "shmem_long_atomic_fetch_add on a computing pe, iteration %d", i);
            prev = f;
            max_g = t1 - t0 > max_g ? t1 - t0 : max_g;
            max_add = t2 - t1 > max_add ? t2 - t1 : max_add;
        }
        printf("compute: pe %d: max shmem_long_g %.3f ms, max shmem_long_atomic_fetch_add "
               "%.3f ms, %d of each done %.3f s after pe 0 started computing for %d s\n",
               me, max_g * 1e3, max_add * 1e3, ITERS, now() - start, COMPUTE_S);
        fflush(stdout);
    }

    shmem_barrier_all();
    if (me == 0)
        expect_eq(counter, (long)ITERS * (npes - 1), "counter at pe 0 after everybody's adds");
    return finish("compute");
}
