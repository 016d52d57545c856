/* mm — seed 004's second application: dense matrix multiply C = A * B, as an MPI program.
 *
 *   mm [N] [REPS]        N x N matrices (default 2000), REPS timed repetitions (default 1)
 *
 * As in the paper, the master (rank 0) broadcasts B to every task and hands out the rows of A;
 * each task multiplies its rows by B and sends its rows of C back.  Here the rows go out in one
 * block per rank (MPI_Scatterv) rather than one row at a time, and rank 0 computes a block too.
 * The timed region is that whole exchange: scatter, broadcast, multiply, gather.
 *
 * Rank 0 checks C with Freivalds' test: for a random vector r, C r must equal A (B r); a wrong
 * element, row or block changes C r far beyond rounding.  It prints one line:
 *
 *   mm n=N ranks=M time_s=T error=E ok
 *
 * and the program exits 1 if the check fails.  The time is the best of REPS.
 */
#define _POSIX_C_SOURCE 200809L
#include "app.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* c (rows x n) = a (rows x n) * b (n x n), row-major, in tiles of b that stay in the cache
 * (KB x JB doubles = 512 KiB): the plain i-k-j loop streams all of b from memory for every row. */
enum { KB = 64, JB = 1024 };

static void multiply(const double *a, const double *b, double *c, int rows, int n)
{
    memset(c, 0, sizeof(double) * (size_t)rows * (size_t)n);
    for (int k0 = 0; k0 < n; k0 += KB)
        for (int j0 = 0; j0 < n; j0 += JB) {
            const int k1 = k0 + KB < n ? k0 + KB : n, j1 = j0 + JB < n ? j0 + JB : n;
            for (int i = 0; i < rows; i++) {
                double *ci = c + (size_t)i * n;
                for (int k = k0; k < k1; k++) {
                    const double aik = a[(size_t)i * n + k];
                    const double *bk = b + (size_t)k * n;
                    for (int j = j0; j < j1; j++) ci[j] += aik * bk[j];
                }
            }
        }
}

/* y = m x for an n x n matrix m. */
static void matvec(const double *m, const double *x, double *y, int n)
{
    for (int i = 0; i < n; i++) {
        double s = 0.0;
        for (int j = 0; j < n; j++) s += m[(size_t)i * n + j] * x[j];
        y[i] = s;
    }
}

int main(int argc, char **argv)
{
    int rank, ranks;
    app_start(&argc, &argv, "mm", "", &rank, &ranks);
    const int n = argc > 1 ? (int)app_count(argv[1], 20000, "N", rank) : 2000;
    const int reps = argc > 2 ? (int)app_count(argv[2], 1000, "REPS", rank) : 1;

    /* Block row distribution: rank r gets rows[r] rows starting at first[r]; counts in doubles. */
    int *counts = app_malloc(sizeof(int) * (size_t)ranks);
    int *displs = app_malloc(sizeof(int) * (size_t)ranks);
    for (int r = 0, row = 0; r < ranks; r++) {
        int rows = n / ranks + (r < n % ranks);
        counts[r] = rows * n;
        displs[r] = row * n;
        row += rows;
    }
    const int my_rows = counts[rank] / n;
    const size_t nn = (size_t)n * (size_t)n;

    double *a = NULL, *c = NULL, *b = app_malloc(sizeof(double) * nn);
    double *a_mine = app_malloc(sizeof(double) * (size_t)counts[rank]);
    double *c_mine = app_malloc(sizeof(double) * (size_t)counts[rank]);
    if (rank == 0) { /* the master holds A, B and the result C */
        a = app_malloc(sizeof(double) * nn);
        c = app_malloc(sizeof(double) * nn);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++) {
                a[(size_t)i * n + j] = app_entry(1, (uint64_t)i, (uint64_t)j);
                b[(size_t)i * n + j] = app_entry(2, (uint64_t)i, (uint64_t)j);
            }
    }

    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        MPI_Bcast(b, (int)nn, MPI_DOUBLE, 0, MPI_COMM_WORLD);
        MPI_Scatterv(a, counts, displs, MPI_DOUBLE, a_mine, counts[rank], MPI_DOUBLE, 0,
                     MPI_COMM_WORLD);
        multiply(a_mine, b, c_mine, my_rows, n);
        MPI_Gatherv(c_mine, counts[rank], MPI_DOUBLE, c, counts, displs, MPI_DOUBLE, 0,
                    MPI_COMM_WORLD);
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
    }

    int ok = 1;
    if (rank == 0) {
        /* Freivalds: compare C r with A (B r), O(n^2) instead of another O(n^3) product. */
        double *x = app_malloc(sizeof(double) * (size_t)n), *y = app_malloc(sizeof(double) * (size_t)n);
        double *z = app_malloc(sizeof(double) * (size_t)n), *w = app_malloc(sizeof(double) * (size_t)n);
        for (int j = 0; j < n; j++) x[j] = app_entry(3, 0, (uint64_t)j);
        matvec(b, x, y, n);
        matvec(a, y, z, n);
        matvec(c, x, w, n);
        double err = 0.0, scale = 0.0;
        for (int i = 0; i < n; i++) {
            err = fmax(err, fabs(w[i] - z[i]));
            scale = fmax(scale, fabs(z[i]));
        }
        /* Rounding of random-signed sums grows like sqrt(n) eps |z| (a few 1e-12 at n = 1500):
         * an entry of C off by 1e-7 or more shows up. */
        ok = err <= 16.0 * DBL_EPSILON * sqrt((double)n) * scale && scale > 0.0;
        printf("mm n=%d ranks=%d time_s=%.6f error=%.2e %s\n", n, ranks, best, err,
               ok ? "ok" : "WRONG");
        fflush(stdout);
        free(x), free(y), free(z), free(w);
    }
    MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(a), free(b), free(c), free(a_mine), free(c_mine), free(counts), free(displs);
    MPI_Finalize();
    return ok ? 0 : 1;
}
