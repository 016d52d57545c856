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
#include <mpi.h>

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif

/* Parses a positive count such as 2000000000 or 2e9; exits with a message otherwise. */
static long long parse_count(const char *s, const char *what, int rank)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < 1 || v > 9e18 || v != floor(v)) {
        if (rank == 0) fprintf(stderr, "pi: %s must be a positive integer, not '%s'\n", what, s);
        MPI_Finalize();
        exit(2);
    }
    return (long long)v;
}

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
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);

    if (argc > 3 || (argc > 1 && argv[1][0] == '-')) {
        if (rank == 0) fprintf(stderr, "usage: pi [N intervals] [REPS]\n");
        MPI_Finalize();
        return 2;
    }
    long long n = argc > 1 ? parse_count(argv[1], "N", rank) : 2000000000LL;
    int reps = argc > 2 ? (int)parse_count(argv[2], "REPS", rank) : 1;

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
