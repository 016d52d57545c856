#include "patterns.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

/* The names tests' types (a private FM_KEY keeps other runs out). */
#define LOOKUP_TYPE 0x4c4f4f4bu /* "LOOK" */
#define EVENT_TYPE 0x45564e54u  /* "EVNT" */
#define MCAST_TYPE 0x4d434153u  /* "MCAS" */
#define LOOKUP_STRIDE 16        /* names are {type, 16 k}: the instances between are absent */
#define NAMES_WAIT_S 30         /* for a name or an event to reach another host */

FILE *pat_trace;

static void die(const char *what, long rc)
{
    fprintf(stderr, "fmperf: %s: %s\n", what, fm_strerror((int)rc));
    exit(1);
}

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

/* splitmix64: the instances a batch looks up, drawn before it is timed. */
static uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Publishes {LOOKUP_TYPE, 16 k} for k in [from, to), one agent round trip
 * each; says how far it got every few seconds. */
static void publish_range(struct job *j, fm_ep *ep, uint32_t from, uint32_t to)
{
    ssize_t there = fm_name_lookup_all(j->ctx, LOOKUP_TYPE, 0, UINT32_MAX, NULL, 0);
    if (there < 0)
        die("fm_name_lookup_all", there);
    if ((uint32_t)there != from) {
        fprintf(stderr, "fmperf: %zd names of type 0x%x where this run published %u "
                "(another run in this domain? set FM_KEY)\n", there, LOOKUP_TYPE, from);
        exit(1);
    }
    double t0 = now_us(), last = t0;
    uint32_t last_k = from;
    for (uint32_t k = from; k < to; k++) {
        int rc = fm_name_publish(ep, LOOKUP_TYPE, k * LOOKUP_STRIDE, k * LOOKUP_STRIDE,
                                 FM_SCOPE_NODE);
        if (rc == FM_ENOMEM) {
            fprintf(stderr, "fmperf: the node's name table is full after %u names (a new "
                    "agent reads FM_NAMES_MAX)\n", k);
            exit(1);
        }
        if (rc)
            die("fm_name_publish", rc);
        double t = now_us();
        if (t - last >= 2e6) {
            fprintf(stderr, "fmperf: names-lookup: %u of %u names published (%.0f us each "
                    "lately, %.0f s)\n", k + 1, to, (t - last) / (k + 1 - last_k),
                    (t - t0) / 1e6);
            last = t;
            last_k = k + 1;
        }
    }
}

void pat_names_lookup(struct job *j, fm_ep *ep, uint32_t from, uint32_t to, long iters,
                      struct figure out[3])
{
    if (j->rank != 0)
        return;
    publish_range(j, ep, from, to);
    long batch = iters < NAMES_LOOKUP_BATCH ? iters : NAMES_LOOKUP_BATCH;
    long batches = iters / batch;
    uint32_t *inst = malloc(sizeof(uint32_t) * (size_t)batch);
    double *s = malloc(sizeof(double) * (size_t)batches);
    uint64_t rnd = 1;
    for (int kind = 0; kind < 3; kind++) {
        for (long b = -1; b < batches; b++) { /* b = -1 warms up */
            for (long i = 0; i < batch; i++) {
                uint32_t k = (uint32_t)(next_random(&rnd) % to), off = 0;
                if (kind == 1)
                    off = 1 + (uint32_t)(next_random(&rnd) % (LOOKUP_STRIDE - 1));
                inst[i] = k * LOOKUP_STRIDE + off;
            }
            long bad = 0;
            fm_addr a;
            struct fm_name_entry e;
            double t0 = now_us();
            if (kind == 0)
                for (long i = 0; i < batch; i++)
                    bad += fm_name_lookup(j->ctx, LOOKUP_TYPE, inst[i], 0, &a) != 0;
            else if (kind == 1)
                for (long i = 0; i < batch; i++)
                    bad += fm_name_lookup(j->ctx, LOOKUP_TYPE, inst[i], 0, &a) != FM_ENONAME;
            else
                for (long i = 0; i < batch; i++)
                    bad += fm_name_lookup_all(j->ctx, LOOKUP_TYPE, inst[i], inst[i], &e, 1) != 1;
            double t = now_us() - t0;
            if (bad) {
                fprintf(stderr, "fmperf: %ld of %ld lookups found %s\n", bad, batch,
                        kind == 1 ? "a name that was not published" : "no name");
                exit(1);
            }
            if (b >= 0)
                s[b] = t * 1e3 / (double)batch;
        }
        out[kind] = summarize(s, batches);
    }
    free(s);
    free(inst);
}

/* The kernel's boot id: processes that share it share CLOCK_MONOTONIC. */
static void boot_id(char id[37])
{
    memset(id, 0, 37);
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f)
        return;
    if (!fgets(id, 37, f))
        id[0] = '\0';
    fclose(f);
}

/* Waits for the event `what` of {EVENT_TYPE, inst} on ep; returns when
 * fm_recv gave it (us). Anything else is dropped. */
static double await_event(struct job *j, fm_ep *ep, int what, uint32_t inst)
{
    double until = now_us() + NAMES_WAIT_S * 1e6;
    for (;;) {
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        fm_addr src;
        ssize_t n = fm_recv(ep, seg, &nseg, &src);
        double t = now_us();
        if (n == FM_EAGAIN) {
            if (t > until) {
                fprintf(stderr, "fmperf: no name event for %d s (do the agents of the two "
                        "hosts see each other?)\n", NAMES_WAIT_S);
                exit(1);
            }
            fm_wait(ep, 100);
            continue;
        }
        if (n == FM_EPEERLOST)
            continue;
        if (n < 0)
            die("fm_recv", n);
        struct fm_name_event ev;
        int found = src == FM_ADDR_NAMES &&
                    fm_name_event(j->ctx, seg, nseg, (size_t)n, &ev) == 0 &&
                    ev.event == what && ev.lower == inst;
        fm_recv_done(ep);
        if (found)
            return t;
    }
}

void pat_names_event(struct job *j, fm_ep *ep, long iters, struct figure out[2])
{
    long warm = warmup_of(iters);
    char id[2][37], go = 0;
    uint32_t inst;
    job_barrier(j);
    if (j->rank == 0) {
        boot_id(id[0]);
        job_ctl_recv(j, 1, id[1], sizeof(id[1]));
        if (strcmp(id[0], id[1]) != 0) {
            fprintf(stderr, "fmperf: names-event compares CLOCK_MONOTONIC times: both sides "
                    "must run on one kernel\n");
            exit(1);
        }
        inst = (uint32_t)getpid(); /* apart from other runs' */
        int rc = fm_name_subscribe(ep, EVENT_TYPE, inst, inst, FM_SUB_NO_STATUS, 1);
        if (rc)
            die("fm_name_subscribe", rc);
        job_ctl_send(j, 1, &inst, sizeof(inst));
        double *s[2] = {malloc(sizeof(double) * (size_t)iters),
                        malloc(sizeof(double) * (size_t)iters)};
        for (long i = -warm; i < iters; i++) {
            for (int k = 0; k < 2; k++) {
                double sent;
                job_ctl_send(j, 1, &go, 1); /* one event in flight */
                double t = await_event(j, ep, k ? FM_NAME_WITHDRAWN : FM_NAME_PUBLISHED, inst);
                job_ctl_recv(j, 1, &sent, sizeof(sent));
                if (i >= 0)
                    s[k][i] = t - sent;
            }
        }
        out[0] = summarize(s[0], iters);
        out[1] = summarize(s[1], iters);
        free(s[0]);
        free(s[1]);
        fm_name_unsubscribe(ep, 1);
    } else if (j->rank == 1) {
        boot_id(id[1]);
        job_ctl_send(j, 0, id[1], sizeof(id[1]));
        job_ctl_recv(j, 0, &inst, sizeof(inst));
        for (long i = -warm; i < iters; i++) {
            for (int k = 0; k < 2; k++) {
                job_ctl_recv(j, 0, &go, 1);
                double t = now_us();
                int rc = k ? fm_name_withdraw(ep, EVENT_TYPE, inst, inst, FM_SCOPE_CLUSTER)
                           : fm_name_publish(ep, EVENT_TYPE, inst, inst, FM_SCOPE_CLUSTER);
                if (rc)
                    die(k ? "fm_name_withdraw" : "fm_name_publish", rc);
                job_ctl_send(j, 0, &t, sizeof(t));
            }
        }
    }
    job_barrier(j);
}

void pat_mcast_join(struct job *j, fm_ep *ep)
{
    uint32_t n = (uint32_t)j->size - 1;
    if (j->rank > 0) {
        int rc = fm_name_publish(ep, MCAST_TYPE, (uint32_t)j->rank, (uint32_t)j->rank,
                                 FM_SCOPE_CLUSTER);
        if (rc)
            die("fm_name_publish", rc);
    } else {
        /* Replication takes a moment between hosts. */
        ssize_t seen = 0;
        for (int tries = 0; tries < NAMES_WAIT_S * 1000; tries++) {
            seen = fm_name_lookup_all(j->ctx, MCAST_TYPE, 1, n, NULL, 0);
            if (seen < 0)
                die("fm_name_lookup_all", seen);
            if (seen == (ssize_t)n)
                break;
            usleep(1000);
        }
        if (seen != (ssize_t)n) {
            fprintf(stderr, "fmperf: after %d s, %zd publishers of {0x%x, 1..%u} instead of "
                    "%u (another run in this domain? set FM_KEY)\n", NAMES_WAIT_S, seen,
                    MCAST_TYPE, n, n);
            exit(1);
        }
    }
    job_barrier(j);
}

void pat_mcast(struct job *j, fm_ep *ep, void *buf, size_t size, long iters,
               struct figure out[2])
{
    uint32_t n = (uint32_t)j->size - 1;
    long warm = warmup_of(iters);
    struct iovec v = {buf, size};
    fm_addr *dst = NULL;
    double *s = NULL;
    if (j->rank == 0) {
        struct fm_name_entry *e = malloc(sizeof(*e) * n);
        dst = malloc(sizeof(*dst) * n);
        s = malloc(sizeof(double) * (size_t)iters);
        ssize_t got = fm_name_lookup_all(j->ctx, MCAST_TYPE, 1, n, e, n);
        if (got != (ssize_t)n)
            die("fm_name_lookup_all", got < 0 ? got : FM_ENONAME);
        for (uint32_t k = 0; k < n; k++)
            dst[k] = e[k].addr;
        free(e);
    }
    for (int phase = 0; phase < 2; phase++) { /* 0: fm_name_mcast, 1: n fm_send */
        job_barrier(j);
        if (j->rank == 0) {
            for (long i = -warm; i < iters; i++) {
                double t0 = now_us();
                if (phase == 0) {
                    ssize_t rc = fm_name_mcast(ep, MCAST_TYPE, 1, n, &v, 1);
                    if (rc < 0)
                        die("fm_name_mcast", rc);
                    if (rc != (ssize_t)n) {
                        fprintf(stderr, "fmperf: fm_name_mcast reached %zd of %u\n", rc, n);
                        exit(1);
                    }
                } else {
                    for (uint32_t k = 0; k < n; k++)
                        xport_fm_send(ep, dst[k], buf, size);
                }
                if (i >= 0)
                    s[i] = now_us() - t0;
            }
            out[phase] = summarize(s, iters);
        } else {
            for (long i = -warm; i < iters; i++)
                xport_fm_recv(ep, NULL, size);
        }
    }
    free(s);
    free(dst);
    job_barrier(j);
}

/* incast: rank 0's answer to a window (1 byte) or a ping (8 bytes) says
 * which phase it is in; senders and victim stop at the first "stop". */
enum { INCAST_WARM, INCAST_MEASURE, INCAST_STOP };
#define INCAST_SILENCE_S 10 /* nothing from any rank for this long: a hang */
#define INCAST_PING 8       /* the victim's message size */

/* A sender: windows of `window` messages, each acknowledged, until told. */
static void incast_send(struct xport *x, void *buf, size_t size, int window)
{
    unsigned char ack = INCAST_WARM;
    while (ack != INCAST_STOP) {
        for (int k = 0; k < window; k++)
            x->send(x, 0, buf, size);
        x->recv(x, 0, &ack, 1);
    }
}

/* The victim: back-to-back 8-byte ping-pongs with rank 0 until told to
 * stop; round trips rank 0 answered while measuring count. Sends its figure
 * and count to rank 0 on the control endpoint. */
static void incast_ping(struct xport *x, struct job *j)
{
    size_t cap = 1 << 14, n = 0;
    double *s = malloc(sizeof(double) * cap);
    uint64_t ping = 0, pong = INCAST_WARM;
    while (pong != INCAST_STOP) {
        double t0 = now_us();
        x->send(x, 0, &ping, INCAST_PING);
        x->recv(x, 0, &pong, INCAST_PING);
        if (pong != INCAST_MEASURE)
            continue;
        if (n == cap && !(s = realloc(s, sizeof(double) * (cap *= 2))))
            die("realloc", FM_ENOMEM);
        s[n++] = (now_us() - t0) / 2;
    }
    struct {
        struct figure f;
        long n;
    } r = {summarize(s, (long)n), (long)n};
    free(s);
    job_ctl_send(j, 0, &r, sizeof(r));
}

/* With --trace: when the measured interval of a transport begins and ends
 * (ns of CLOCK_REALTIME), to match samples of a port's queue to it. */
static void incast_trace(const struct xport *x, const char *what)
{
    if (!pat_trace)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    fprintf(pat_trace, "%lld %s %s\n", (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec,
            x->name, what);
    fflush(pat_trace);
}

/* Rank 0's figures from the bytes each sender had delivered when the
 * measurement began and ended, dt us apart (the victim is not a sender). */
static void incast_figures(const uint64_t *from, const uint64_t *to, int senders, double dt,
                           struct incast_result *out)
{
    double sum = 0, sq = 0;
    out->min = out->max = -1;
    for (int r = 1; r <= senders; r++) {
        double g = (double)(to[r] - from[r]) / dt; /* bytes per us = MB/s */
        sum += g;
        sq += g * g;
        out->min = out->min < 0 || g < out->min ? g : out->min;
        out->max = g > out->max ? g : out->max;
    }
    out->goodput = sum;
    out->jain = sq > 0 ? sum * sum / (senders * sq) : 0;
}

/* The receiver: takes whatever arrives from any rank, acknowledges each
 * sender's windows and answers the victim's pings; after the warmup it
 * notes every sender's bytes, again at the end, then answers "stop" to each
 * until all have stopped (what arrives after the end is not counted). */
static void incast_receive(struct xport *x, struct job *j, void *buf, size_t size, int window,
                           double seconds, struct incast_result *out)
{
    int n = j->size, victim = n - 1, left = n - 1, phase = INCAST_WARM;
    uint64_t *got = calloc((size_t)n, sizeof(uint64_t));
    uint64_t *pending = calloc((size_t)n, sizeof(uint64_t)); /* not yet acknowledged */
    uint64_t *at_warm = calloc((size_t)n, sizeof(uint64_t));
    uint64_t *at_end = calloc((size_t)n, sizeof(uint64_t));
    uint64_t per_ack = (uint64_t)size * (uint64_t)window;
    double warm_s = seconds / 5 < 1 ? seconds / 5 : 1;
    double start = now_us(), t_warm = start, t_end = start, last = start;
    while (left > 0) {
        int from = -1;
        size_t got_n = x->recv_any(x, buf, size, &from, 100);
        double t = now_us();
        if (phase == INCAST_WARM && t - start >= warm_s * 1e6) {
            memcpy(at_warm, got, sizeof(uint64_t) * (size_t)n);
            t_warm = t;
            phase = INCAST_MEASURE;
            incast_trace(x, "measure");
        }
        if (phase == INCAST_MEASURE && t - start >= seconds * 1e6) {
            memcpy(at_end, got, sizeof(uint64_t) * (size_t)n);
            t_end = t;
            phase = INCAST_STOP;
            incast_trace(x, "end");
        }
        if (got_n == 0) {
            if (t - last > INCAST_SILENCE_S * 1e6) {
                fprintf(stderr, "fmperf: incast over %s: nothing from %d rank%s for %d s\n",
                        x->name, left, left > 1 ? "s" : "", INCAST_SILENCE_S);
                exit(1);
            }
            continue;
        }
        last = t;
        if (from <= 0 || from >= n) {
            fprintf(stderr, "fmperf: incast: data from rank %d\n", from);
            exit(1);
        }
        pending[from] += got_n;
        if (from != victim)
            got[from] += got_n;
        uint64_t unit = from == victim ? INCAST_PING : per_ack;
        for (; pending[from] >= unit; pending[from] -= unit) {
            uint64_t pong = (uint64_t)phase;
            unsigned char ack = (unsigned char)phase;
            if (from == victim)
                x->send(x, from, &pong, INCAST_PING);
            else
                x->send(x, from, &ack, 1);
            left -= phase == INCAST_STOP;
        }
    }
    incast_figures(at_warm, at_end, n - 2, t_end - t_warm, out);
    free(got);
    free(pending);
    free(at_warm);
    free(at_end);
}

void pat_incast(struct xport *x, struct job *j, void *buf, size_t size, int window,
                double seconds, struct incast_result *out)
{
    struct incast_result r = {0};
    /* Senders and victim read rank 0's answers: never in place. */
    int in_place = x->in_place;
    job_barrier(j);
    if (j->rank == 0) {
        incast_receive(x, j, buf, size, window, seconds, &r);
        struct {
            struct figure f;
            long n;
        } v;
        job_ctl_recv(j, j->size - 1, &v, sizeof(v));
        r.victim = v.f;
        r.pings = v.n;
    } else if (j->rank == j->size - 1) {
        x->in_place = 0;
        incast_ping(x, j);
    } else {
        x->in_place = 0;
        incast_send(x, buf, size, window);
    }
    x->in_place = in_place;
    *out = r;
    job_barrier(j);
}
