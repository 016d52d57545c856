/* Each PE writes its number into the next PE's global `from`, then every PE
 * adds one to a counter on PE 0. Build: oshcc shmem_ring.c -o ring
 * Run: oshrun -np 4 ./ring */
#include <shmem.h>
#include <stdio.h>

static int from = -1;  /* static data is symmetric: no allocation needed */
static long arrived;

int main(void)
{
    shmem_init();
    int me = shmem_my_pe(), n = shmem_n_pes();
    shmem_int_p(&from, me, (me + 1) % n);
    shmem_long_atomic_inc(&arrived, 0);
    shmem_barrier_all(); /* completes the puts and the increments */
    printf("PE %d of %d: from PE %d\n", me, n, from);
    if (me == 0)
        printf("arrived: %ld\n", arrived);
    shmem_finalize();
    return 0;
}
