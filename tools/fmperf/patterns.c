#include "patterns.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

FILE *pat_trace;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median and p99 of n samples (sorts them). */
static struct figure summarize(double *s, long n)
{
    struct figure f = {0, 0};
    if (n <= 0)
        return f;
    qsort(s, (size_t)n, sizeof(double), cmp_double);
    f.median = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
    long k = (long)((double)n * 0.99 + 0.999999) - 1;
    f.p99 = s[k < 0 ? 0 : k];
    return f;
}

static long warmup_of(long iters) { return iters / 10 > 2 ? iters / 10 : 2; }

struct figure pat_latency(struct xport *x, struct job *j, void *buf, size_t size, long iters)
{
    struct figure f = {0, 0};
    double *s = j->rank == 0 ? malloc(sizeof(double) * (size_t)iters) : NULL;
    long warm = warmup_of(iters);
    job_barrier(j);
    if (j->rank == 0) {
        for (long i = -warm; i < iters; i++) {
            double t0 = now_us();
            x->send(x, 1, buf, size);
            x->recv(x, 1, buf, size);
            if (i >= 0)
                s[i] = (now_us() - t0) / 2;
        }
        f = summarize(s, iters);
    } else if (j->rank == 1) {
        for (long i = -warm; i < iters; i++) {
            x->recv(x, 0, buf, size);
            x->send(x, 0, buf, size);
        }
    }
    free(s);
    job_barrier(j);
    return f;
}

struct figure pat_bw(struct xport *x, struct job *j, void *buf, size_t size, long iters,
                     int window)
{
    struct figure f = {0, 0};
    long windows = iters / window > 0 ? iters / window : 1;
    long warm = windows / 10 > 1 ? windows / 10 : 1;
    double *s = j->rank == 0 ? malloc(sizeof(double) * (size_t)windows) : NULL;
    char ack = 0;
    job_barrier(j);
    if (j->rank == 0) {
        for (long w = -warm; w < windows; w++) {
            double t0 = now_us();
            for (int k = 0; k < window; k++)
                x->send(x, 1, buf, size);
            x->recv(x, 1, &ack, 1);
            double t = now_us() - t0;
            if (w >= 0)
                s[w] = (double)size * window / t; /* bytes per us = MB/s */
            if (pat_trace) {
                struct timespec ts;
                clock_gettime(CLOCK_REALTIME, &ts);
                fprintf(pat_trace, "%lld %.3f\n",
                        (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec,
                        (double)size * window / t);
            }
        }
        f = summarize(s, windows);
    } else if (j->rank == 1) {
        for (long w = -warm; w < windows; w++) {
            for (int k = 0; k < window; k++)
                x->recv(x, 0, buf, size);
            x->send(x, 0, &ack, 1);
        }
    }
    free(s);
    job_barrier(j);
    return f;
}

struct figure pat_msgrate(struct xport *x, struct job *j, void *buf, size_t size, long iters,
                          int reps)
{
    struct figure f = {0, 0};
    double s[64];
    char ack = 0;
    reps = reps > 64 ? 64 : reps;
    for (int r = -1; r < reps; r++) { /* r = -1 warms up */
        long n = r < 0 ? warmup_of(iters) : iters;
        job_barrier(j);
        double t0 = now_us();
        if (j->rank == 0) {
            for (long i = 0; i < n; i++)
                x->send(x, 1, buf, size);
            x->recv(x, 1, &ack, 1);
            if (r >= 0)
                s[r] = (double)n / (now_us() - t0); /* messages per us = Mmsg/s */
        } else if (j->rank == 1) {
            for (long i = 0; i < n; i++)
                x->recv(x, 0, buf, size);
            x->send(x, 0, &ack, 1);
        }
    }
    if (j->rank == 0)
        f = summarize(s, reps);
    job_barrier(j);
    return f;
}

struct figure pat_ring(struct xport *x, struct job *j, void *buf, size_t size, long iters,
                       int reps)
{
    struct figure f = {0, 0};
    double s[64];
    int next = (j->rank + 1) % j->size, prev = (j->rank + j->size - 1) % j->size;
    reps = reps > 64 ? 64 : reps;
    for (int r = -1; r < reps; r++) {
        long n = r < 0 ? warmup_of(iters) : iters;
        job_barrier(j);
        double t0 = now_us();
        for (long i = 0; i < n; i++) {
            x->send(x, next, buf, size);
            x->recv(x, prev, buf, size);
        }
        if (r >= 0)
            s[r] = (now_us() - t0) / (double)n;
    }
    if (j->rank == 0)
        f = summarize(s, reps);
    job_barrier(j);
    return f;
}

struct figure pat_connect(struct xport *x, struct job *j, void *buf, size_t size, long iters)
{
    struct figure f = {0, 0};
    double *s = j->rank == 0 ? malloc(sizeof(double) * (size_t)iters) : NULL;
    long warm = warmup_of(iters);
    job_barrier(j);
    for (long i = -warm; i < iters; i++) {
        if (j->rank == 0) {
            double t0 = now_us();
            x->exchange(x, 1, buf, size);
            if (i >= 0)
                s[i] = now_us() - t0;
        } else if (j->rank == 1) {
            x->serve(x, 0, buf, size);
        }
    }
    if (j->rank == 0)
        f = summarize(s, iters);
    free(s);
    job_barrier(j);
    return f;
}

struct figure pat_idle(struct job *j)
{
    struct figure f = {0, 0};
    fm_ep *ep;
    if (fm_ep_open(j->ctx, 2, &ep) != 0)
        return f;
    job_barrier(j);
    if (j->rank == 1) {
        struct rusage a, b;
        getrusage(RUSAGE_SELF, &a);
        double t0 = now_us();
        while (fm_wait(ep, 1000) == 0) /* nothing ever arrives on channel 2 */
            ;
        double wall = now_us() - t0;
        getrusage(RUSAGE_SELF, &b);
        double cpu = (double)(b.ru_utime.tv_sec - a.ru_utime.tv_sec) * 1e6 +
                     (double)(b.ru_utime.tv_usec - a.ru_utime.tv_usec) +
                     (double)(b.ru_stime.tv_sec - a.ru_stime.tv_sec) * 1e6 +
                     (double)(b.ru_stime.tv_usec - a.ru_stime.tv_usec);
        f.median = f.p99 = 100.0 * cpu / wall;
        job_ctl_send(j, 0, &f.median, sizeof(f.median));
    } else if (j->rank == 0) {
        job_ctl_recv(j, 1, &f.median, sizeof(f.median));
        f.p99 = f.median;
    }
    job_barrier(j);
    fm_ep_close(ep);
    return f;
}

void pat_multiplex(struct xport *x, struct job *j, const int (*pairs)[2], void *buf, size_t size,
                   long iters, int window, struct figure out[2])
{
    long windows = iters / window > 0 ? iters / window : 1;
    long warm = windows / 10 > 1 ? windows / 10 : 1;
    double *s = malloc(sizeof(double) * (size_t)windows);
    struct figure mine = {0, 0};
    char ack = 0;
    job_barrier(j);
    for (int p = 0; p < 2; p++) {
        int from = pairs[p][0], to = pairs[p][1];
        if (j->rank == from) {
            for (long w = -warm; w < windows; w++) {
                double t0 = now_us();
                for (int k = 0; k < window; k++)
                    x->send(x, to, buf, size);
                x->recv(x, to, &ack, 1);
                if (w >= 0)
                    s[w] = (double)size * window / (now_us() - t0);
            }
            mine = summarize(s, windows);
        } else if (j->rank == to) {
            for (long w = -warm; w < windows; w++) {
                for (int k = 0; k < window; k++)
                    x->recv(x, from, buf, size);
                x->send(x, from, &ack, 1);
            }
        }
    }
    free(s);
    /* The senders' figures go to rank 0. */
    for (int p = 0; p < 2; p++) {
        int from = pairs[p][0];
        if (from == 0 && j->rank == 0)
            out[p] = mine;
        else if (j->rank == from)
            job_ctl_send(j, 0, &mine, sizeof(mine));
        else if (j->rank == 0)
            job_ctl_recv(j, from, &out[p], sizeof(out[p]));
    }
    job_barrier(j);
}
