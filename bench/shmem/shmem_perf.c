/*
 * shmem_perf: OpenSHMEM latency and bandwidth, written to the standard API
 * only (OpenSHMEM 1.4, so the same source builds against Open MPI's oshmem
 * and against fastmsg's libfmshmem and the figures compare like for like).
 *
 *   shmem_perf [--reps N] [--rounds R] [--compute]
 *
 * PE 0 measures against the last PE (on another node when the job spans
 * two). Each figure is the median of R rounds of N repetitions, in
 * microseconds per operation, or MB/s for bandwidth (windows of 16 non-blocking
 * 1 MiB transfers, then a quiet). --compute: the target
 * computes (no OpenSHMEM calls) while PE 0 measures the remote operations.
 * Other PEs wait in the closing barrier.
 */
#include <shmem.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BW_SIZE (1 << 20)
#define BW_WINDOW 16 /* bandwidth: this many 1 MiB transfers, then one quiet (as OSU's) */
#define MAX_ROUNDS 64

static long static_word;
static long static_flag;
static char static_buf[BW_SIZE];

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

enum op { PUT8, GET8, FADD, PUTBW, GETBW };

/* One round of `reps` operations on `where` at `pe`; microseconds per op. */
static char *local; /* private memory, as a program's own buffers are */

static double round_of(enum op op, long *word, char *buf, int pe, int reps)
{
    long v = 1;
    double t0 = now_us();
    for (int i = 0; i < reps; i++) {
        switch (op) {
        case PUT8:
            shmem_long_put(word, &v, 1, pe);
            shmem_quiet();
            break;
        case GET8:
            v += shmem_long_g(word, pe);
            break;
        case FADD:
            v += shmem_long_atomic_fetch_add(word, 1, pe);
            break;
        case PUTBW:
            for (int k = 0; k < BW_WINDOW; k++)
                shmem_putmem_nbi(buf, local, BW_SIZE, pe);
            shmem_quiet();
            break;
        case GETBW:
            for (int k = 0; k < BW_WINDOW; k++)
                shmem_getmem_nbi(local, buf, BW_SIZE, pe);
            shmem_quiet();
            break;
        }
    }
    double us = (now_us() - t0) / reps;
    if (v == 42) /* keeps the loop from being optimized away */
        putchar(' ');
    return us;
}

static void report(const char *name, enum op op, long *word, char *buf, int pe, int reps,
                   int rounds)
{
    double r[MAX_ROUNDS];
    round_of(op, word, buf, pe, reps / 10 + 1); /* warm up */
    for (int i = 0; i < rounds; i++)
        r[i] = round_of(op, word, buf, pe, reps);
    double m = median(r, rounds);
    if (op == PUTBW || op == GETBW)
        printf("%-28s %12.1f MB/s\n", name, (double)BW_SIZE * BW_WINDOW / m);
    else
        printf("%-28s %12.3f us\n", name, m);
    fflush(stdout);
}

/* p + wait_until ping-pong between PE 0 and `pe`: one way, in us. */
static double pingpong(long *flag, int pe, int me, int reps)
{
    double t0 = now_us();
    for (long i = 1; i <= reps; i++) {
        if (me == 0) {
            shmem_long_p(flag, i, pe);
            shmem_long_wait_until(flag, SHMEM_CMP_EQ, -i);
        } else {
            shmem_long_wait_until(flag, SHMEM_CMP_EQ, i);
            shmem_long_p(flag, -i, 0);
        }
    }
    return (now_us() - t0) / reps / 2;
}

int main(int argc, char **argv)
{
    int reps = 20000, rounds = 9, compute = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--compute"))
            compute = 1;
        else {
            fprintf(stderr, "usage: %s [--reps N] [--rounds R] [--compute]\n", argv[0]);
            return 2;
        }
    }
    if (rounds < 1 || rounds > MAX_ROUNDS || reps < 1)
        return 2;
    shmem_init();
    local = calloc(1, BW_SIZE);
    int me = shmem_my_pe(), n = shmem_n_pes(), peer = n - 1;
    long *heap_word = shmem_malloc(sizeof(long));
    long *heap_flag = shmem_malloc(sizeof(long));
    char *heap_buf = shmem_malloc(BW_SIZE);
    *heap_word = *heap_flag = 0;
    static long done;
    shmem_barrier_all();
    if (n < 2) {
        if (me == 0)
            fprintf(stderr, "shmem_perf needs 2 PEs or more\n");
        shmem_finalize();
        return 2;
    }
    if (compute) {
        /* The target computes until PE 0 says it is done; others idle. */
        if (me == 0) {
            printf("# target computes: PE 0 -> PE %d, %d PEs\n", peer, n);
            report("get 8 B heap", GET8, heap_word, heap_buf, peer, reps, rounds);
            report("fetch-add heap", FADD, heap_word, heap_buf, peer, reps, rounds);
            shmem_long_p(&done, 1, peer);
            shmem_quiet();
        } else if (me == peer) {
            volatile double x = 1;
            while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE))
                for (int i = 0; i < 1000; i++)
                    x = x * 1.0000001 + 1e-9;
        }
    } else if (me == 0) {
        printf("# PE 0 -> PE %d, %d PEs, median of %d rounds x %d\n", peer, n, rounds, reps);
        report("put 8 B + quiet, heap", PUT8, heap_word, heap_buf, peer, reps, rounds);
        report("put 8 B + quiet, static", PUT8, &static_word, static_buf, peer, reps, rounds);
        report("get 8 B, heap", GET8, heap_word, heap_buf, peer, reps, rounds);
        report("get 8 B, static", GET8, &static_word, static_buf, peer, reps, rounds);
        report("fetch-add, heap", FADD, heap_word, heap_buf, peer, reps, rounds);
        report("fetch-add, static", FADD, &static_word, static_buf, peer, reps, rounds);
        int bw_reps = reps / 1000 + 2;
        report("put 1 MiB, heap", PUTBW, heap_word, heap_buf, peer, bw_reps, rounds);
        report("put 1 MiB, static", PUTBW, &static_word, static_buf, peer, bw_reps,
               rounds);
        report("get 1 MiB, heap", GETBW, heap_word, heap_buf, peer, bw_reps, rounds);
        report("get 1 MiB, static", GETBW, &static_word, static_buf, peer, bw_reps, rounds);
    }
    shmem_barrier_all();
    if (!compute) {
        /* The figures that move data between PEs: ping-pong and barrier. */
        double r[MAX_ROUNDS];
        for (int k = 0; k < 2; k++) {
            long *flag = k ? &static_flag : heap_flag;
            for (int i = 0; i < rounds; i++) {
                *flag = 0;
                shmem_barrier_all();
                if (me == 0 || me == peer)
                    r[i] = pingpong(flag, peer, me, reps / 10 + 1);
                shmem_barrier_all();
            }
            if (me == 0)
                printf("%-28s %12.3f us\n", k ? "p + wait_until, static" : "p + wait_until, heap",
                       median(r, rounds));
        }
        for (int i = 0; i < rounds; i++) {
            double t0 = now_us();
            for (int j = 0; j < reps / 10 + 1; j++)
                shmem_barrier_all();
            r[i] = (now_us() - t0) / (reps / 10 + 1);
        }
        if (me == 0)
            printf("%-28s %12.3f us\n", "barrier_all", median(r, rounds));
    }
    shmem_free(heap_buf);
    shmem_free(heap_flag);
    shmem_free(heap_word);
    shmem_finalize();
    return 0;
}
