/* raw_shm — what two cores can do through shared memory with no library at all.
 *
 * The floor under every shared-memory transport (fastmsg's shm link, Open MPI vader, UCX, MPICH):
 *   raw-2lines  ping-pong, each direction's flag on its own cache line       -> one-way latency
 *   raw-1line   ping-pong, both flags on one cache line                       -> one-way latency
 *   raw-spsc    single-producer single-consumer ring of 8-byte messages       -> message rate
 *
 * Two processes (parent and a forked child) pinned to CPUs 0 and 1 share an anonymous MAP_SHARED
 * mapping and talk through C11 atomics.  Build: gcc -std=c11 -O2 -Wall -Wextra raw_shm.c
 *
 *   raw_shm [--json] [--iters N]
 *
 * --iters N sets both the ping-pong round trips (default 100000) and the messages per ring
 * repetition (default 50000000).  Output keys match bench/mpi_perf.c and fmperf --json.
 */
#define _GNU_SOURCE /* sched_setaffinity, CPU_SET */
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Things meant to sit on different cache lines are 128 bytes apart, not 64: adjacent-line
 * prefetchers fetch lines in 128-byte pairs, which would let "separate" lines interfere. */
#define SEP 128
#define RING_SLOTS 4096 /* 32 KiB of 8-byte slots: fits L1 on both sides */
#define RING_MASK (RING_SLOTS - 1)
#define SPSC_REPS 5
#define TIME_LIMIT_S 120 /* per child run: a lost peer must not leave us spinning for ever */

struct shared {
    _Alignas(SEP) _Atomic uint64_t ping2; /* raw-2lines: line A, written by the parent */
    _Alignas(SEP) _Atomic uint64_t pong2; /* raw-2lines: line B, written by the child */
    _Alignas(SEP) struct {                /* raw-1line: one 64-byte line holds both flags */
        _Atomic uint64_t ping, pong;
    } one;
    _Alignas(SEP) _Atomic uint64_t head; /* spsc: next slot to fill; written by the producer */
    _Alignas(SEP) _Atomic uint64_t tail; /* spsc: next slot to drain; written by the consumer */
    _Alignas(SEP) _Atomic int ready;     /* child is pinned and about to start */
    _Atomic int bad;                     /* consumer saw a wrong payload */
    _Alignas(SEP) uint64_t slots[RING_SLOTS];
};

static struct shared *sh;
static int json;

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield");
#endif
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

static double median_sorted(const double *v, long n)
{
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

static double p99_sorted(const double *v, long n)
{
    long k = (long)(0.99 * (double)n + 0.999999) - 1; /* nearest rank: ceil(0.99 n) - 1 */
    return v[k < 0 ? 0 : k >= n ? n - 1 : k];
}

static void pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set))
        fprintf(stderr, "raw_shm: warning: cannot pin to CPU %d: %s\n", cpu, strerror(errno));
}

/* fork a child pinned to CPU 1 that runs fn and exits; the parent stays on CPU 0 and returns
 * once the child is running. */
static pid_t start_child(int (*fn)(long), long arg)
{
    pid_t parent = getpid();
    atomic_store(&sh->ready, 0);
    pid_t pid = fork();
    if (pid < 0) {
        perror("raw_shm: fork");
        exit(1);
    }
    if (pid == 0) {
        /* Die with the parent, or an orphan would spin on CPU 1 for ever. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent) _exit(1);
        pin(1);
        atomic_store_explicit(&sh->ready, 1, memory_order_release);
        _exit(fn(arg));
    }
    /* SIGALRM's default action ends the parent, and PDEATHSIG then ends the child. */
    alarm(TIME_LIMIT_S);
    while (!atomic_load_explicit(&sh->ready, memory_order_acquire)) cpu_relax();
    return pid;
}

static void finish_child(pid_t pid, const char *what)
{
    int st;
    alarm(0);
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "raw_shm: %s: child failed\n", what);
        exit(1);
    }
}

static void report(const char *test, const char *name, double value, const char *unit,
                   double p99, long iters)
{
    if (json) {
        printf("{\"test\": \"%s\", \"transport\": \"%s\", \"peer\": \"%s\", \"size\": 8, "
               "\"value\": %.4f, \"unit\": \"%s\", \"stat\": \"median\"",
               test, name, name, value, unit);
        if (p99 >= 0) printf(", \"p99\": %.4f", p99);
        printf(", \"iters\": %ld, \"ranks\": 2}\n", iters);
    } else {
        char p99s[32] = "";
        if (p99 >= 0) snprintf(p99s, sizeof p99s, "%.3f", p99);
        printf("%-10s %-14s %10d %12.3f %-7s %12s %10ld\n", test, name, 8, value, unit, p99s,
               iters);
    }
    fflush(stdout);
}

/* ---------------------------------------------------------------- ping-pong */

static _Atomic uint64_t *pp_ping, *pp_pong; /* the pair of flags under test */

static int pong_side(long rounds)
{
    for (uint64_t i = 1; i <= (uint64_t)rounds; i++) {
        while (atomic_load_explicit(pp_ping, memory_order_acquire) != i) cpu_relax();
        atomic_store_explicit(pp_pong, i, memory_order_release);
    }
    return 0;
}

static void run_pingpong(const char *name, _Atomic uint64_t *ping, _Atomic uint64_t *pong,
                         long iters)
{
    long warm = iters / 10 > 100 ? iters / 10 : 100;
    double *s = malloc(sizeof(double) * (size_t)iters);
    if (!s) {
        fprintf(stderr, "raw_shm: out of memory\n");
        exit(1);
    }
    pp_ping = ping;
    pp_pong = pong;
    atomic_store(ping, 0);
    atomic_store(pong, 0);
    pid_t pid = start_child(pong_side, warm + iters);

    for (uint64_t i = 1; i <= (uint64_t)(warm + iters); i++) {
        double t0 = now_us();
        atomic_store_explicit(ping, i, memory_order_release);
        while (atomic_load_explicit(pong, memory_order_acquire) != i) cpu_relax();
        double t1 = now_us();
        if (i > (uint64_t)warm) s[i - (uint64_t)warm - 1] = (t1 - t0) / 2.0;
    }
    finish_child(pid, name);
    qsort(s, (size_t)iters, sizeof *s, cmp_double);
    report("latency", name, median_sorted(s, iters), "us", p99_sorted(s, iters), iters);
    free(s);
}

/* ---------------------------------------------------------------- SPSC ring */

/* Consumer: reads the producer's head only when it has drained everything it last saw. */
static int consumer_side(long n)
{
    uint64_t tail = 0, seen_head = 0;
    while (tail < (uint64_t)n) {
        if (tail == seen_head)
            while ((seen_head = atomic_load_explicit(&sh->head, memory_order_acquire)) == tail)
                cpu_relax();
        if (sh->slots[tail & RING_MASK] != tail + 1) { /* cheap check that nothing was lost */
            atomic_store(&sh->bad, 1);
            return 1;
        }
        tail++;
        atomic_store_explicit(&sh->tail, tail, memory_order_release);
    }
    return 0;
}

/* Producer: reads the consumer's tail only when the ring looks full.  Returns Mmsg/s. */
static double spsc_once(long n)
{
    atomic_store(&sh->head, 0);
    atomic_store(&sh->tail, 0);
    pid_t pid = start_child(consumer_side, n);

    double t0 = now_us();
    uint64_t head = 0, seen_tail = 0;
    for (; head < (uint64_t)n; head++) {
        if (head - seen_tail == RING_SLOTS) {
            while (head - (seen_tail = atomic_load_explicit(&sh->tail, memory_order_acquire)) ==
                   RING_SLOTS) {
                if (atomic_load_explicit(&sh->bad, memory_order_relaxed)) goto drained;
                cpu_relax();
            }
        }
        sh->slots[head & RING_MASK] = head + 1;
        atomic_store_explicit(&sh->head, head + 1, memory_order_release);
    }
    /* Count a message once it is consumed, not when it is queued. */
    while (atomic_load_explicit(&sh->tail, memory_order_acquire) != (uint64_t)n &&
           !atomic_load(&sh->bad))
        cpu_relax();
drained:;
    double t1 = now_us();
    finish_child(pid, "raw-spsc");
    return (double)n / (t1 - t0); /* messages per us == Mmsg/s */
}

static void run_spsc(long n)
{
    double r[SPSC_REPS];
    spsc_once(n / 10 > 1000 ? n / 10 : 1000); /* warm-up */
    for (int k = 0; k < SPSC_REPS; k++) r[k] = spsc_once(n);
    qsort(r, SPSC_REPS, sizeof r[0], cmp_double);
    report("msgrate", "raw-spsc", median_sorted(r, SPSC_REPS), "Mmsg/s", -1, n);
}

/* ---------------------------------------------------------------- main */

static void usage(FILE *f)
{
    fprintf(f, "usage: raw_shm [--json] [--iters N]\n"
               "  --json     one JSON object per result line instead of a table\n"
               "  --iters N  ping-pong round trips and ring messages per repetition\n"
               "             (default 100000 and 50000000)\n");
}

int main(int argc, char **argv)
{
    long pp_iters = 100000, spsc_msgs = 50000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--iters")) {
            char *end;
            long v;
            if (i + 1 >= argc) {
                fprintf(stderr, "raw_shm: --iters needs a value\n");
                return 2;
            }
            errno = 0;
            v = strtol(argv[++i], &end, 10);
            if (errno || end == argv[i] || *end || v < 1 || v > 1000000000L) {
                fprintf(stderr, "raw_shm: --iters: '%s' is not an integer in [1, 1e9]\n",
                        argv[i]);
                return 2;
            }
            pp_iters = spsc_msgs = v;
        } else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "raw_shm: unknown argument '%s'\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }

    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("raw_shm: mmap");
        return 1;
    }
    memset(sh, 0, sizeof *sh); /* fault the pages in before anything is timed */
    pin(0);

    if (!json)
        printf("%-10s %-14s %10s %12s %-7s %12s %10s\n", "test", "transport", "size", "median",
               "unit", "p99", "iters");
    run_pingpong("raw-2lines", &sh->ping2, &sh->pong2, pp_iters);
    run_pingpong("raw-1line", &sh->one.ping, &sh->one.pong, pp_iters);
    run_spsc(spsc_msgs);
    if (atomic_load(&sh->bad)) {
        fprintf(stderr, "raw_shm: raw-spsc: consumer saw a wrong payload\n");
        return 1;
    }
    return 0;
}
