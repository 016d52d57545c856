/*
 * shmem_blocked_reply: a PE's server thread whose reply waits for room in
 * its initiator's ring must sleep, not spin, when more requests queue
 * behind it (a busy loop there starves a co-located process).
 *
 * PE 1 asks PE 0 for GETS gets of 1 MiB at once, more than the rings hold,
 * then computes for 1.5 s without calling OpenSHMEM, so its client ring
 * stays full. Meanwhile PE 0 sleeps for 1 s outside the library: all its
 * CPU time then is its server thread's, blocked on the first reply with
 * the other requests queued. It must stay under a third of the interval.
 * Finally every byte is checked. Run with every peer remote
 * (FM_SHMEM_LOCAL=0), over shared memory and over UDP.
 */
#define _POSIX_C_SOURCE 200809L
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

enum { GETS = 8 };
#define CHUNK ((size_t)1 << 20)

static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
           (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

static void sleep_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), fails = 0;
    if (shmem_n_pes() != 2) {
        fprintf(stderr, "run with 2 PEs\n");
        return 2;
    }
    unsigned char *src = shmem_malloc(GETS * CHUNK);
    unsigned char *dst = malloc(GETS * CHUNK);
    if (!src || !dst)
        return 2;
    for (size_t i = 0; i < GETS * CHUNK; i++)
        src[i] = (unsigned char)(i * 7 + 3);
    memset(dst, 0, GETS * CHUNK);
    shmem_barrier_all();
    if (me == 1) {
        for (int g = 0; g < GETS; g++)
            shmem_getmem_nbi(dst + g * CHUNK, src + g * CHUNK, CHUNK, 0);
        sleep_s(1.5);
        shmem_quiet();
        for (size_t i = 0; i < GETS * CHUNK; i++)
            if (dst[i] != (unsigned char)(i * 7 + 3)) {
                fprintf(stderr, "FAIL: byte %zu of the gets is %u\n", i, dst[i]);
                fails++;
                break;
            }
    } else {
        double before = cpu_seconds();
        sleep_s(1.0);
        double used = cpu_seconds() - before;
        printf("PE 0 used %.3f s of CPU in 1 s with its replies blocked\n", used);
        if (used > 0.33) {
            fprintf(stderr, "FAIL: the server spun: %.3f s of CPU in 1 s\n", used);
            fails++;
        }
    }
    shmem_barrier_all();
    shmem_free(src);
    free(dst);
    shmem_finalize();
    return fails != 0;
}
