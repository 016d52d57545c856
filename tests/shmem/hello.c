/*
 * hello.c: smallest OpenSHMEM program, used as a smoke test of start-up and shutdown.
 */
#include "shtest.h"

int main(void)
{
    shmem_init();

    int me = shmem_my_pe(), n = shmem_n_pes();

    if (n < 1 || me < 0 || me >= n) {
        char g[32];

        snprintf(g, sizeof g, "%d of %d", me, n);
        fail(g, "0 <= my_pe < n_pes", "shmem_my_pe/shmem_n_pes");
    }
    shmem_barrier_all();
    return finish("hello");
}
