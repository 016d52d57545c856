/* mpi_perf — MPI baseline for fmperf.
 *
 * Runs the same measurement patterns as tools/fmperf (latency, bw, msgrate, ring, allreduce) over
 * plain MPI so that Open MPI and MPICH can be compared side by side with fastmsg.  Built once per
 * MPI library (see bench/peers.sh); only rank 0 prints.
 *
 *   mpi_perf TEST [--sizes LIST] [--iters N] [--window W] [--reps R] [--label NAME] [--json]
 *
 * All timing uses clock_gettime(CLOCK_MONOTONIC), as fmperf does, rather than MPI_Wtime, so both
 * sides use the same clock.
 */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum test { T_LATENCY, T_BW, T_MSGRATE, T_RING, T_ALLREDUCE };
static const char *const test_names[] = {"latency", "bw", "msgrate", "ring", "allreduce"};

#define MAX_SIZES 64
#define MAX_SIZE (1024L * 1024 * 1024) /* keep counts well inside MPI's int */

struct opts {
    enum test test;
    long sizes[MAX_SIZES];
    int nsizes;
    long iters;  /* 0 = scale with size */
    int window;
    int reps;
    const char *label;
    int json;
};

static int g_rank, g_nranks;

/* ---------------------------------------------------------------- small helpers */

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

/* Nearest-rank percentile of an array that is sorted in place. */
static double percentile(double *v, long n, double p)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    long k = (long)(p / 100.0 * (double)n + 0.999999) - 1; /* ceil(p*n) - 1 */
    if (k < 0) k = 0;
    if (k >= n) k = n - 1;
    return v[k];
}

static double median(double *v, long n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "mpi_perf: rank %d: out of memory (%zu bytes)\n", g_rank, n);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* A buffer that has been touched, so page faults are not measured. */
static char *buffer(long size)
{
    char *b = xmalloc((size_t)size);
    memset(b, 0x5a, (size_t)size);
    return b;
}

static long warmup_of(long iters)
{
    long w = iters / 10;
    return w < 5 ? 5 : w;
}

/* ---------------------------------------------------------------- default iteration counts
 * Chosen so that one size takes well under a second on a current machine. */

static long default_iters(const struct opts *o, long size)
{
    long it;
    switch (o->test) {
    case T_BW: /* messages, in whole windows: about 128 MiB per size, 8 to 1000 windows */
        it = (128L << 20) / ((long)o->window * (size ? size : 1));
        return (it < 8 ? 8 : it > 1000 ? 1000 : it) * o->window;
    case T_MSGRATE: /* messages per rep: 1M small, fewer for large */
        it = (512L << 20) / (size ? size : 1);
        return it < 100 ? 100 : it > 1000000 ? 1000000 : it;
    case T_LATENCY:
    case T_RING: /* ring and allreduce: an upper bound, see calibrate() */
    case T_ALLREDUCE:
    default: /* 10000 up to 8 KiB, then proportional to 1/size, at least 50 */
        if (size <= 8192) return 10000;
        it = 10000L * 8192 / size;
        return it < 50 ? 50 : it;
    }
}

/* ---------------------------------------------------------------- output */

static void print_header(const struct opts *o)
{
    if (o->json || g_rank != 0) return;
    printf("# mpi_perf %s  label=%s  ranks=%d", test_names[o->test], o->label, g_nranks);
    if (o->test == T_BW) printf("  window=%d", o->window);
    if (o->test == T_MSGRATE || o->test == T_RING || o->test == T_ALLREDUCE)
        printf("  reps=%d", o->reps);
    printf("\n%-10s %-14s %10s %12s %-7s %12s %10s\n", "test", "label", "size", "median", "unit",
           o->test == T_LATENCY ? "p99" : "", "iters");
    fflush(stdout);
}

/* p99 < 0 means "not reported". */
static void report(const struct opts *o, long size, double value, const char *unit, double p99,
                   long iters)
{
    if (g_rank != 0) return;
    if (o->json) {
        printf("{\"test\": \"%s\", \"transport\": \"%s\", \"peer\": \"%s\", \"size\": %ld, "
               "\"value\": %.4f, \"unit\": \"%s\", \"stat\": \"median\"",
               test_names[o->test], o->label, o->label, size, value, unit);
        if (p99 >= 0) printf(", \"p99\": %.4f", p99);
        printf(", \"iters\": %ld, \"ranks\": %d", iters, g_nranks);
        if (o->test == T_BW) printf(", \"window\": %d", o->window);
        printf("}\n");
    } else {
        char p99s[32] = "";
        if (p99 >= 0) snprintf(p99s, sizeof p99s, "%.3f", p99);
        printf("%-10s %-14s %10ld %12.3f %-7s %12s %10ld\n", test_names[o->test], o->label, size,
               value, unit, p99s, iters);
    }
    fflush(stdout); /* one whole line at a time, so a killed run leaves parseable output */
}

/* ---------------------------------------------------------------- tests */

/* Ping-pong between ranks 0 and 1; one sample per round trip, reported as one-way time. */
static void run_latency(const struct opts *o, long size, long iters)
{
    char *sbuf = buffer(size), *rbuf = buffer(size);
    double *samples = g_rank == 0 ? xmalloc(sizeof(double) * (size_t)iters) : NULL;
    long warm = warmup_of(iters);
    int n = (int)size;

    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = -warm; i < iters; i++) {
        if (g_rank == 0) {
            double t0 = now_us();
            MPI_Send(sbuf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD);
            MPI_Recv(rbuf, n, MPI_BYTE, 1, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double t1 = now_us();
            if (i >= 0) samples[i] = (t1 - t0) / 2.0;
        } else if (g_rank == 1) {
            MPI_Recv(rbuf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(sbuf, n, MPI_BYTE, 0, 1, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) {
        double p99 = percentile(samples, iters, 99.0); /* sorts; median below reuses the order */
        report(o, size, median(samples, iters), "us", p99, iters);
    }
    free(samples);
    free(sbuf);
    free(rbuf);
}

/* Windowed stream 0 -> 1: W nonblocking sends, then a 1-byte ack once all W have arrived.
 * `iters` counts messages, as in fmperf: iters / W windows, one sample per window.
 * All W receives of a window land in the same buffer, as in the OSU and fmperf bandwidth tests:
 * the data is never read, and a W x 4 MiB buffer would measure DRAM rather than the transport. */
static void run_bw(const struct opts *o, long size, long iters)
{
    int w = o->window, n = (int)size;
    long windows = iters / w > 0 ? iters / w : 1;
    char *buf = buffer(size), ack = 0;
    MPI_Request *reqs = xmalloc(sizeof(MPI_Request) * (size_t)w);
    /* A real status array: gcc 12 warns (-Wstringop-overflow) on MPICH's MPI_STATUSES_IGNORE. */
    MPI_Status *stats = xmalloc(sizeof(MPI_Status) * (size_t)w);
    double *samples = g_rank == 0 ? xmalloc(sizeof(double) * (size_t)windows) : NULL;
    long warm = warmup_of(windows);

    MPI_Barrier(MPI_COMM_WORLD);
    for (long i = -warm; i < windows; i++) {
        if (g_rank == 0) {
            double t0 = now_us();
            for (int k = 0; k < w; k++)
                MPI_Isend(buf, n, MPI_BYTE, 1, 2, MPI_COMM_WORLD, &reqs[k]);
            MPI_Waitall(w, reqs, stats);
            MPI_Recv(&ack, 1, MPI_BYTE, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            double t1 = now_us();
            /* bytes per microsecond == 10^6 bytes per second */
            if (i >= 0) samples[i] = (double)w * (double)size / (t1 - t0);
        } else if (g_rank == 1) {
            for (int k = 0; k < w; k++)
                MPI_Irecv(buf, n, MPI_BYTE, 0, 2, MPI_COMM_WORLD, &reqs[k]);
            MPI_Waitall(w, reqs, stats);
            MPI_Send(&ack, 1, MPI_BYTE, 0, 3, MPI_COMM_WORLD);
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    if (g_rank == 0) report(o, size, median(samples, windows), "MB/s", -1, windows * w);
    free(samples);
    free(stats);
    free(reqs);
    free(buf);
}

/* msgrate, ring and allreduce are timed the same way: one pass = `count` operations between a
 * barrier and the end of the pass, timed on rank 0; `reps` passes; the median is reported. */
struct pass {
    char *sbuf, *rbuf;
    long size;
};
typedef void (*pass_fn)(const struct pass *p, long count);

/* The seed paper's MsgRate: rank 0 sends blocking, rank 1 only receives.  The closing barrier is
 * inside the timed region so the rate counts delivered messages, not just buffered ones. */
static void pass_msgrate(const struct pass *p, long count)
{
    int n = (int)p->size;
    if (g_rank == 0)
        for (long i = 0; i < count; i++) MPI_Send(p->sbuf, n, MPI_BYTE, 1, 4, MPI_COMM_WORLD);
    else if (g_rank == 1)
        for (long i = 0; i < count; i++)
            MPI_Recv(p->rbuf, n, MPI_BYTE, 0, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Barrier(MPI_COMM_WORLD);
}

/* Every rank passes a message to its right neighbour; one round = one hop on every rank at once.
 * The rounds synchronise themselves, so no closing barrier. */
static void pass_ring(const struct pass *p, long count)
{
    int n = (int)p->size, right = (g_rank + 1) % g_nranks,
        left = (g_rank - 1 + g_nranks) % g_nranks;
    for (long i = 0; i < count; i++) {
        MPI_Request req;
        MPI_Isend(p->sbuf, n, MPI_BYTE, right, 5, MPI_COMM_WORLD, &req);
        MPI_Recv(p->rbuf, n, MPI_BYTE, left, 5, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
}

static void pass_allreduce(const struct pass *p, long count)
{
    int n = (int)(p->size / (long)sizeof(double));
    for (long i = 0; i < count; i++)
        MPI_Allreduce(p->sbuf, p->rbuf, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
}

static double timed_pass(pass_fn fn, const struct pass *p, long count)
{
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now_us();
    fn(p, count);
    return now_us() - t0;
}

/* Without --iters, size the passes by time rather than by a fixed count: with 4 ranks on 2 cores
 * a library that busy-polls without yielding (MPICH over UCX) needs a scheduler time slice per
 * round, about 1000x slower than Open MPI, and a fixed count would run for minutes.  Rank 0 times
 * a short probe and everyone takes its verdict, so all ranks run the same number of operations. */
#define PASS_TARGET_US 100000.0 /* about 0.1 s per pass */
#define PROBE_COUNT 20

static long calibrate(const struct opts *o, pass_fn fn, const struct pass *p, long size)
{
    long cap = default_iters(o, size), iters = cap;
    double t = timed_pass(fn, p, PROBE_COUNT);
    if (g_rank == 0) {
        double fit = PASS_TARGET_US / (t / PROBE_COUNT);
        if (fit < (double)cap) iters = fit < PROBE_COUNT ? PROBE_COUNT : (long)fit;
    }
    MPI_Bcast(&iters, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    return iters;
}

static void run_passes(const struct opts *o, long size, pass_fn fn, int per_second, int by_time)
{
    struct pass p = {buffer(size), buffer(size), size};
    double *v = xmalloc(sizeof(double) * (size_t)o->reps);
    if (fn == pass_allreduce) /* real numbers, not the 0x5a byte pattern */
        for (long k = 0; k < size / (long)sizeof(double); k++)
            ((double *)p.sbuf)[k] = (double)(g_rank + k);

    long iters = o->iters ? o->iters : by_time ? calibrate(o, fn, &p, size) : default_iters(o, size);
    timed_pass(fn, &p, warmup_of(iters));
    for (int r = 0; r < o->reps; r++) {
        double t = timed_pass(fn, &p, iters);
        /* operations per us == 10^6 per second; or us per operation */
        v[r] = per_second ? (double)iters / t : t / (double)iters;
    }
    report(o, size, median(v, o->reps), per_second ? "Mmsg/s" : "us", -1, iters);
    free(v);
    free(p.sbuf);
    free(p.rbuf);
}

/* ---------------------------------------------------------------- command line */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpi_perf TEST [options]\n"
            "  TEST           latency | bw | msgrate | ring | allreduce\n"
            "  --sizes LIST   comma-separated byte counts, K/M suffix = 1024/1024^2 (e.g. 0,8,4K,1M)\n"
            "  --iters N      timed operations per size (bw: messages, in windows of W;\n"
            "                 msgrate, ring, allreduce: per rep)\n"
            "                 default: scales with size (ring, allreduce: about 0.1 s per rep)\n"
            "  --window W     messages in flight per bw window (default 64)\n"
            "  --reps R       repetitions for msgrate, ring, allreduce (default 5)\n"
            "  --label NAME   value of \"transport\" and \"peer\" in the output (default mpi)\n"
            "  --json         one JSON object per result line instead of a table\n");
}

/* Only rank 0 talks; every rank reaches the same verdict because all parse the same argv. */
static int cli_error(const char *fmt, ...)
{
    if (g_rank == 0) {
        va_list ap;
        va_start(ap, fmt);
        fputs("mpi_perf: ", stderr);
        vfprintf(stderr, fmt, ap);
        fputs("\n", stderr);
        va_end(ap);
    }
    return -1;
}

static int parse_long(const char *s, long min, long max, long *out, const char *what)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return cli_error("%s: '%s' is not an integer in [%ld, %ld]", what, s, min, max);
    *out = v;
    return 0;
}

static int parse_sizes(const char *list, struct opts *o)
{
    const char *p = list;
    o->nsizes = 0;
    for (;;) {
        char *end;
        if (*p < '0' || *p > '9') return cli_error("--sizes: expected a number at '%s'", p);
        errno = 0;
        unsigned long long v = strtoull(p, &end, 10);
        if (*end == 'K' || *end == 'k') v *= 1024ULL, end++;
        else if (*end == 'M' || *end == 'm') v *= 1024ULL * 1024, end++;
        if (errno || v > (unsigned long long)MAX_SIZE)
            return cli_error("--sizes: '%s' is larger than %ld bytes", p, MAX_SIZE);
        if (*end != ',' && *end != '\0')
            return cli_error("--sizes: bad size at '%s' (use digits with optional K or M)", p);
        if (o->nsizes == MAX_SIZES) return cli_error("--sizes: at most %d sizes", MAX_SIZES);
        o->sizes[o->nsizes++] = (long)v;
        if (*end == '\0') break;
        p = end + 1;
    }
    return 0;
}

static void default_sizes(struct opts *o)
{
    static const long bw[] = {8, 64, 512, 4096, 32768, 262144, 1048576, 4194304};
    o->nsizes = 0;
    switch (o->test) {
    case T_LATENCY:
        o->sizes[o->nsizes++] = 0;
        for (long s = 1; s <= 4L << 20; s *= 2) o->sizes[o->nsizes++] = s;
        break;
    case T_BW:
        for (size_t i = 0; i < sizeof bw / sizeof bw[0]; i++) o->sizes[o->nsizes++] = bw[i];
        break;
    default: o->sizes[o->nsizes++] = 8; break;
    }
}

static int parse_args(int argc, char **argv, struct opts *o)
{
    long v;
    int have_sizes = 0;
    memset(o, 0, sizeof *o);
    o->window = 64;
    o->reps = 5;
    o->label = "mpi";

    if (argc < 2) {
        if (g_rank == 0) usage(stderr);
        return -1;
    }
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        if (g_rank == 0) usage(stdout);
        return 1;
    }
    size_t t;
    for (t = 0; t < sizeof test_names / sizeof test_names[0]; t++)
        if (!strcmp(argv[1], test_names[t])) break;
    if (t == sizeof test_names / sizeof test_names[0])
        return cli_error("unknown test '%s' (latency, bw, msgrate, ring, allreduce)", argv[1]);
    o->test = (enum test)t;

    for (int i = 2; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) { o->json = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            if (g_rank == 0) usage(stdout);
            return 1;
        }
        if (strncmp(a, "--", 2) || !(!strcmp(a, "--sizes") || !strcmp(a, "--iters") ||
                                     !strcmp(a, "--window") || !strcmp(a, "--reps") ||
                                     !strcmp(a, "--label")))
            return cli_error("unknown argument '%s' (try --help)", a);
        if (i + 1 >= argc) return cli_error("%s needs a value", a);
        const char *val = argv[++i];
        if (!strcmp(a, "--sizes")) {
            if (parse_sizes(val, o)) return -1;
            have_sizes = 1;
        } else if (!strcmp(a, "--iters")) {
            if (parse_long(val, 1, 1000000000L, &v, a)) return -1;
            o->iters = v;
        } else if (!strcmp(a, "--window")) {
            if (parse_long(val, 1, 100000, &v, a)) return -1;
            o->window = (int)v;
        } else if (!strcmp(a, "--reps")) {
            if (parse_long(val, 1, 1000, &v, a)) return -1;
            o->reps = (int)v;
        } else { /* --label: it goes into JSON unescaped, so keep it to a safe alphabet */
            if (!*val || strspn(val, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                     "0123456789-_.+:") != strlen(val))
                return cli_error("--label: '%s' must be non-empty [A-Za-z0-9-_.+:]", val);
            o->label = val;
        }
    }
    if (!have_sizes) default_sizes(o);

    if (o->test == T_ALLREDUCE)
        for (int k = 0; k < o->nsizes; k++)
            if (o->sizes[k] % (long)sizeof(double))
                return cli_error("allreduce: size %ld is not a multiple of %zu (doubles)",
                                 o->sizes[k], sizeof(double));
    int need = o->test == T_ALLREDUCE ? 1 : 2;
    if (g_nranks < need)
        return cli_error("%s needs at least %d ranks, have %d", test_names[o->test], need,
                         g_nranks);
    return 0;
}

int main(int argc, char **argv)
{
    struct opts o;
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_nranks);

    int rc = parse_args(argc, argv, &o);
    if (rc) {
        MPI_Finalize();
        return rc < 0 ? 2 : 0;
    }
    print_header(&o);
    for (int k = 0; k < o.nsizes; k++) {
        long size = o.sizes[k];
        long iters = o.iters ? o.iters : default_iters(&o, size);
        switch (o.test) {
        case T_LATENCY: run_latency(&o, size, iters); break;
        case T_BW: run_bw(&o, size, iters); break;
        /* MsgRate runs on 2 dedicated cores and its probe would mostly time the barrier, so it
         * keeps the fixed count; ring and allreduce may share cores and are sized by time. */
        case T_MSGRATE: run_passes(&o, size, pass_msgrate, 1, 0); break;
        case T_RING: run_passes(&o, size, pass_ring, 0, 1); break;
        case T_ALLREDUCE: run_passes(&o, size, pass_allreduce, 0, 1); break;
        }
    }
    MPI_Finalize();
    return 0;
}
