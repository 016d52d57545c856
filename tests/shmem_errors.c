/*
 * shmem_errors: bad use of OpenSHMEM must end the job with one clear line,
 * never a hang or a silent corruption. Run by shmem_test.sh, which checks
 * the message and that nothing is left in /dev/shm.
 *   shmem_errors pe|addr|heap|die
 * pe:   a put to PE n_pes (out of range)
 * addr: a put to a stack variable (not symmetric)
 * heap: shmem_malloc beyond SHMEM_SYMMETRIC_SIZE: NULL and a message naming it
 * die:  the last PE kills itself while the others wait in a barrier
 * exit STATUS: PE 1 calls shmem_global_exit(STATUS) while the others wait in
 *       a barrier: every PE ends and the job's status is STATUS
 */
#include <shmem.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static long target;

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    long v = 1;
    if (!strcmp(argv[1], "pe")) {
        if (me == 0)
            shmem_long_put(&target, &v, 1, n);
    } else if (!strcmp(argv[1], "addr")) {
        long on_stack = 0;
        if (me == 0)
            shmem_long_put(&on_stack, &v, 1, n - 1);
    } else if (!strcmp(argv[1], "heap")) {
        void *p = shmem_malloc((size_t)1 << 40);
        if (p) {
            fprintf(stderr, "FAIL: a 1 TiB allocation succeeded\n");
            return 1;
        }
        void *q = shmem_malloc(1024); /* the heap still works */
        if (!q) {
            fprintf(stderr, "FAIL: the heap is unusable after a failed allocation\n");
            return 1;
        }
        shmem_free(q);
        shmem_finalize();
        return 0;
    } else if (!strcmp(argv[1], "die")) {
        shmem_barrier_all();
        if (me == n - 1)
            raise(SIGKILL);
        shmem_barrier_all(); /* never completes: PE n-1 is gone */
        fprintf(stderr, "FAIL: a barrier completed without PE %d\n", n - 1);
        return 1;
    } else if (!strcmp(argv[1], "exit") && argc == 3) {
        shmem_barrier_all();
        if (me == 1)
            shmem_global_exit(atoi(argv[2]));
        shmem_barrier_all(); /* never completes: PE 1 ended the job */
        fprintf(stderr, "FAIL: PE %d ran on after shmem_global_exit\n", me);
        return 1;
    } else {
        return 2;
    }
    shmem_barrier_all();
    shmem_finalize();
    fprintf(stderr, "FAIL: bad use went unnoticed\n");
    return 1;
}
