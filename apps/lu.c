/* lu — seed 004's third application: LU decomposition of a dense matrix, as an MPI program.
 *
 *   lu [N] [REPS]        N x N system (default 2000), REPS timed repetitions (default 1)
 *
 * The paper factors A Q = L U (Q a column permutation) and times the factorization.  Here the
 * rows are distributed cyclically (row i on rank i mod M).  At step k the owner of row k picks
 * the pivot column (the largest entry of the row), and broadcasts the pivot's index together
 * with the row; every rank swaps those two columns in its rows and eliminates its rows below k.
 * So every step is one broadcast from a different root on the critical path: the network matters.
 *
 * The right-hand side b = A x0 rides along as column N.  After the timed factorization the ranks
 * solve U y = b' (one 8-byte broadcast per row), undo Q, and check the scaled residual
 * ||A x - b|| / (eps (||A|| ||x|| + ||b||) N) as HPL does.  Rank 0 prints one line:
 *
 *   lu n=N ranks=M time_s=T residual=R ok
 *
 * and the program exits 1 if the residual is above 16 or a pivot is zero.  The time is the best
 * of REPS (each repetition factors a freshly generated A).
 */
#define _POSIX_C_SOURCE 200809L
#include "app.h"

#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A rank's rows, each n+1 doubles (A's row, then b's entry); local row l is global l*ranks+rank. */
struct sys {
    int n, rank, ranks, rows;
    double *m;   /* rows x (n+1) */
    int *perm;   /* perm[j] = original column now at position j; the same on every rank */
};

#define ROW(s, l) ((s)->m + (size_t)(l) * (size_t)((s)->n + 1))

static void generate(struct sys *s, const double *x0)
{
    for (int l = 0; l < s->rows; l++) {
        double *row = ROW(s, l), b = 0.0;
        uint64_t i = (uint64_t)l * (uint64_t)s->ranks + (uint64_t)s->rank;
        for (int j = 0; j < s->n; j++) {
            row[j] = app_entry(1, i, (uint64_t)j);
            b += row[j] * x0[j];
        }
        row[s->n] = b;
    }
    for (int j = 0; j < s->n; j++) s->perm[j] = j;
}

/* The timed part: A Q = L U in place (L below the diagonal, unit diagonal implied), b -> L^-1 b.
 * Returns 0, or -1 on a zero pivot (the same verdict on every rank). */
static int factor(struct sys *s, double *buf)
{
    const int n = s->n;
    for (int k = 0; k < n; k++) {
        const int owner = k % s->ranks, len = n + 1 - k; /* row k's columns k..n */
        if (s->rank == owner) {
            const double *row = ROW(s, k / s->ranks);
            int p = k;
            for (int j = k + 1; j < n; j++)
                if (fabs(row[j]) > fabs(row[p])) p = j;
            buf[0] = (double)p;
            buf[1] = row[p]; /* row k after the swap of columns k and p */
            memcpy(buf + 2, row + k + 1, sizeof(double) * (size_t)(len - 1));
            if (p != k) buf[1 + p - k] = row[k];
        }
        MPI_Bcast(buf, len + 1, MPI_DOUBLE, owner, MPI_COMM_WORLD);
        const int p = (int)buf[0];
        const double *pr = buf + 1; /* pr[j - k] = row k's column j, for j >= k */
        if (pr[0] == 0.0) return -1;
        if (p != k) { /* swap columns k and p everywhere, L and U alike (the owner's row too) */
            int t = s->perm[k];
            s->perm[k] = s->perm[p], s->perm[p] = t;
            for (int l = 0; l < s->rows; l++) {
                double *row = ROW(s, l), v = row[k];
                row[k] = row[p], row[p] = v;
            }
        }
        /* Eliminate the local rows below k: the first is the first l with l*ranks+rank > k. */
        int first = k / s->ranks + (s->rank <= k % s->ranks);
        const double inv = 1.0 / pr[0];
        for (int l = first; l < s->rows; l++) {
            double *rk = ROW(s, l) + k;
            const double f = rk[0] * inv;
            rk[0] = f;
            for (int j = 1; j < len; j++) rk[j] -= f * pr[j];
        }
    }
    return 0;
}

/* Back substitution U y = b' column by column; returns x = Q y on every rank. */
static void solve(struct sys *s, double *x)
{
    const int n = s->n;
    double *y = app_malloc(sizeof(double) * (size_t)n);
    for (int k = n - 1; k >= 0; k--) {
        const int owner = k % s->ranks;
        double yk = 0.0;
        if (s->rank == owner) {
            const double *row = ROW(s, k / s->ranks);
            yk = row[n] / row[k];
        }
        MPI_Bcast(&yk, 1, MPI_DOUBLE, owner, MPI_COMM_WORLD);
        y[k] = yk;
        for (int l = 0; l < s->rows && l * s->ranks + s->rank < k; l++)
            ROW(s, l)[n] -= ROW(s, l)[k] * yk;
    }
    for (int j = 0; j < n; j++) x[s->perm[j]] = y[j];
    free(y);
}

int main(int argc, char **argv)
{
    int rank, ranks;
    app_start(&argc, &argv, "lu", "", &rank, &ranks);
    const int n = argc > 1 ? (int)app_count(argv[1], 30000, "N", rank) : 2000;
    const int reps = argc > 2 ? (int)app_count(argv[2], 1000, "REPS", rank) : 1;

    struct sys s = {n, rank, ranks, n / ranks + (rank < n % ranks), NULL, NULL};
    s.m = app_malloc(sizeof(double) * (size_t)s.rows * (size_t)(n + 1));
    s.perm = app_malloc(sizeof(int) * (size_t)n);
    double *buf = app_malloc(sizeof(double) * (size_t)(n + 2));
    double *x0 = app_malloc(sizeof(double) * (size_t)n), *x = app_malloc(sizeof(double) * (size_t)n);
    for (int j = 0; j < n; j++) x0[j] = app_entry(4, 0, (uint64_t)j);

    double best = INFINITY;
    int bad = 0;
    for (int r = 0; r < reps && !bad; r++) {
        generate(&s, x0);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        bad = factor(&s, buf);
        MPI_Barrier(MPI_COMM_WORLD); /* the last rank to finish ends the step */
        double t = MPI_Wtime() - t0;
        if (t < best) best = t;
    }

    /* Check: solve, then the residual of the original rows (regenerated) on each rank. */
    double resid = INFINITY;
    if (!bad) {
        solve(&s, x);
        double loc[3] = {0.0, 0.0, 0.0}, glob[3]; /* max |r_i|, ||A||_inf, ||b||_inf */
        for (int l = 0; l < s.rows; l++) {
            uint64_t i = (uint64_t)l * (uint64_t)ranks + (uint64_t)rank;
            double ax = 0.0, b = 0.0, norm = 0.0;
            for (int j = 0; j < n; j++) {
                double a = app_entry(1, i, (uint64_t)j);
                ax += a * x[j], b += a * x0[j], norm += fabs(a);
            }
            loc[0] = fmax(loc[0], fabs(ax - b));
            loc[1] = fmax(loc[1], norm);
            loc[2] = fmax(loc[2], fabs(b));
        }
        MPI_Allreduce(loc, glob, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
        double xnorm = 0.0;
        for (int j = 0; j < n; j++) xnorm = fmax(xnorm, fabs(x[j]));
        resid = glob[0] / (DBL_EPSILON * (glob[1] * xnorm + glob[2]) * n);
    }
    int ok = !bad && resid < 16.0;
    if (rank == 0) {
        printf("lu n=%d ranks=%d time_s=%.6f residual=%.3g %s\n", n, ranks, best, resid,
               ok ? "ok" : bad ? "WRONG (zero pivot)" : "WRONG");
        fflush(stdout);
    }
    free(s.m), free(s.perm), free(buf), free(x0), free(x);
    MPI_Finalize();
    return ok ? 0 : 1;
}
