/*
 * shmem_start_pes: a program started with start_pes need not call
 * shmem_finalize; the library finalizes collectively at exit (OpenSHMEM
 * 1.5, start_pes). PE 1 returns from main at once, while PE 0 still reads
 * PE 1's memory: the read must succeed and the job end with status 0.
 * Run with every peer remote (FM_SHMEM_LOCAL=0), where PE 1's data lives
 * only as long as its process.
 */
#define _POSIX_C_SOURCE 200809L
#include <shmem.h>
#include <stdio.h>
#include <time.h>

static long x;

int main(void)
{
    start_pes(0);
    if (_my_pe() == 1)
        x = 42;
    shmem_barrier_all();
    if (_my_pe() == 0) {
        struct timespec pause = {0, 200000000};
        nanosleep(&pause, NULL);
        long got = shmem_long_g(&x, 1);
        if (got != 42) {
            fprintf(stderr, "FAIL: PE 0 read %ld from PE 1, want 42\n", got);
            return 1;
        }
    }
    return 0;
}
