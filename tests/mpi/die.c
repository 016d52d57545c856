/* A rank killed in the middle of a job: every rank loops over an allreduce
 * and a ring exchange; at iteration 20 the last rank SIGKILLs itself. The
 * survivors then wait on it inside MPI calls. The job must end, with the
 * launcher reporting failure, instead of hanging; the test script checks
 * the launcher's exit status and its time. This program never succeeds:
 * if the loop ever ends, that is itself reported as a failure. */
#define _POSIX_C_SOURCE 200809L /* SIGKILL, alarm */
#include "mpitest.h"
#include <signal.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "die");
    CHECK(mt_size >= 2, "needs at least 2 ranks");
    /* Last resort against leftovers if the launcher never cleans up: far
     * beyond the test's own time limit, so it cannot mask a hang. */
    alarm(300);
    int victim = mt_size - 1, right = (mt_rank + 1) % mt_size,
        left = (mt_rank + mt_size - 1) % mt_size;
    char out[65536], in[65536];
    for (int it = 0; it < 100000; it++) {
        int x = 1, sum = 0;
        if (mt_rank == victim && it == 20) {
            printf("die: rank %d of %d kills itself with SIGKILL at iteration %d\n", mt_rank,
                   mt_size, it);
            fflush(stdout);
            raise(SIGKILL);
        }
        MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        CHECK(sum == mt_size, "allreduce at iteration %d: %d", it, sum);
        memset(out, it & 0xff, sizeof out);
        MPI_Sendrecv(out, it % 2 ? (int)sizeof out : 8, MPI_BYTE, right, 1, in, sizeof in,
                     MPI_BYTE, left, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        CHECK(in[0] == (char)(it & 0xff), "ring exchange at iteration %d", it);
    }
    fprintf(stderr, "FAIL die rank %d: the job went on without the killed rank\n", mt_rank);
    MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
}
