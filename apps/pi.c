/* pi — seed 004's first application: pi by numerical integration, as an MPI program.
 *
 *   pi [N] [REPS]        N intervals (default 2000000000), REPS timed repetitions (default 1)
 *
 * pi = integral of 4/(1+x^2) over [0,1], approximated by the midpoint rule with N intervals.
 * As in the paper, rank i of M sums the points j*M + i (a cyclic distribution), and one rank
 * adds the M partial sums up.  Rank 0 prints one line:
 *
 *   pi n=N ranks=M time_s=T pi=... error=E ok
 *
 * and the program exits 1 if |pi - M_PI| exceeds the tolerance (a lost or doubled share of the
 * intervals changes pi by far more).  The time is the best of REPS, from a barrier to the end of
 * the reduction, measured on rank 0.
 */
#define _POSIX_C_SOURCE 200809L
#include "app.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* The share of rank `rank` of `ranks`: points rank, rank+ranks, rank+2*ranks, ... < n. */
static double partial_sum(long long n, int rank, int ranks)
{
    const double h = 1.0 / (double)n;
    double sum = 0.0;
    for (long long k = rank; k < n; k += ranks) {
        double x = ((double)k + 0.5) * h;
        sum += 4.0 / (1.0 + x * x);
    }
    return sum * h;
}

int main(int argc, char **argv)
{
    int rank, ranks;
    app_start(&argc, &argv, "pi", " intervals", &rank, &ranks);
    long long n = argc > 1 ? app_count(argv[1], 9000000000000000000LL, "N", rank) : 2000000000LL;
    int reps = argc > 2 ? (int)app_count(argv[2], 1000, "REPS", rank) : 1;

    double best = INFINITY, pi = 0.0;
    for (int r = 0; r < reps; r++) {
        long long my_n = n;
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        /* The paper's master hands out the problem size, then collects the partial sums. */
        MPI_Bcast(&my_n, 1, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
        double mine = partial_sum(my_n, rank, ranks);
        MPI_Reduce(&mine, &pi, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
    }

    int ok = 1;
    if (rank == 0) {
        /* Midpoint rule error ~ 1/(6 N^2); rounding in the sums ~ sqrt(N) * 1e-16 / N. */
        double err = fabs(pi - M_PI);
        double tol = 1e-9 + 1.0 / (6.0 * (double)n * (double)n) * 2.0;
        ok = err <= tol;
        printf("pi n=%lld ranks=%d time_s=%.6f pi=%.15f error=%.2e %s\n", n, ranks, best, pi, err,
               ok ? "ok" : "WRONG");
        fflush(stdout);
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    MPI_Finalize();
    return ok ? 0 : 1;
}
