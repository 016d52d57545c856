/* What the three applications share: start-up with the usage check, their
 * two arguments, deterministic matrix entries, allocation that ends the job. */
#ifndef APP_H
#define APP_H

#include <mpi.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static const char *app_name;

/* MPI_Init, then "usage: NAME [N] [REPS]" and exit 2 on anything else. */
static void app_start(int *argc, char ***argv, const char *name, const char *n_is, int *rank,
                      int *ranks)
{
    app_name = name;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, ranks);
    if (*argc > 3 || (*argc > 1 && (*argv)[1][0] == '-')) {
        if (*rank == 0)
            fprintf(stderr, "usage: %s [N%s] [REPS]\n", name, n_is);
        MPI_Finalize();
        exit(2);
    }
}

/* A count in [1, max], written as 2000 or 2e9; exits with a message otherwise. */
static long long app_count(const char *s, long long max, const char *what, int rank)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || v < 1 || v > (double)max || v != floor(v)) {
        if (rank == 0)
            fprintf(stderr, "%s: %s must be an integer in [1, %lld], not '%s'\n", app_name, what,
                    max, s);
        MPI_Finalize();
        exit(2);
    }
    return (long long)v;
}

/* A deterministic value in [-1, 1) for (seed, i, j): splitmix64 of the three. */
static inline double app_entry(uint64_t seed, uint64_t i, uint64_t j)
{
    uint64_t z =
        seed * 0x9e3779b97f4a7c15ULL + i * 0xbf58476d1ce4e5b9ULL + j * 0x94d049bb133111ebULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0;
}

static inline void *app_malloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "%s: out of memory (%zu bytes)\n", app_name, n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

#endif
