/*
 * fmperf: the fastmsg benchmark. Runs a pattern over fastmsg and, with
 * --peer, the same pattern over kernel sockets in the same job, size by
 * size, and prints both with their ratio. With --name-file, two programs
 * started by hand join by name instead (named.c), to compare sends to an
 * inserted address with sends to a rank. The names tests measure service
 * addresses (fm_name_*): lookup, events, multicast.
 *
 *   fmrun -n 2 fmperf latency --peer tcp
 *   fmrun -n 10 fmperf incast --peer tcp      (8 senders, a ping-pong beside)
 *   fmperf latency --name-file /tmp/fm.name --side 0 &
 *   fmperf latency --name-file /tmp/fm.name --side 1
 *   fmperf names-lookup
 */
#include "patterns.h"
#include "xport.h"

#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum test {
    T_LATENCY, T_BW, T_MSGRATE, T_RING, T_IDLE, T_CONNECT, T_SWEEP, T_MULTIPLEX, T_RAILS,
    T_NAMES_LOOKUP, T_NAMES_EVENT, T_MCAST, T_INCAST
};
static const char *const test_names[] = {"latency", "bw",           "msgrate",     "ring",
                                         "idle",    "connect",      "sweep",       "multiplex",
                                         "rails",   "names-lookup", "names-event", "mcast",
                                         "incast"};
static const char *const units[] = {"us",   "MB/s", "Mmsg/s", "us", "%cpu", "us",
                                    "MB/s", "MB/s", "-",      "ns", "us",   "us",
                                    "MB/s"};
/* Lower is better for times, higher for rates. */
static const int lower_better[] = {1, 0, 0, 1, 1, 1, 0, 0, 0, 1, 1, 1, 0};
/* The names tests: a row holds a figure per op, and is for a count of
 * names, a message size, or nothing. */
static const struct {
    const char *key;
    int nops;
    const char *ops[3];
} names_row[] = {
    [T_NAMES_LOOKUP] = {"pubs", 3, {"lookup-hit", "lookup-miss", "lookup-all"}},
    [T_NAMES_EVENT] = {NULL, 2, {"published", "withdrawn"}},
    [T_MCAST] = {"size", 2, {"mcast", "sends"}},
    [T_INCAST] = {NULL, 0, {NULL}},
};
/* multiplex: ranks 0 and 1 on one host, 2 and 3 on the other (fmrun --hosts
 * places blocks); the second pair streams the same way or back. */
static const int pairs_same[2][2] = {{0, 2}, {1, 3}};
static const int pairs_opposite[2][2] = {{0, 2}, {3, 1}};
static const int pair_01[1][2] = {{0, 1}};

struct opts {
    enum test test;
    size_t sizes[64];
    int nsizes;
    size_t windows[16]; /* sweep */
    int nwindows;
    size_t pubs[16]; /* names-lookup: names published, ascending */
    int npubs;
    int by_name; /* connect: look the server up by name in each exchange */
    long iters; /* 0: scaled by size */
    int window;
    int reps;
    int in_place;
    int opposite; /* multiplex: the second pair streams the other way */
    double seconds; /* incast: how long the senders stream */
    const char *trace; /* bw: per-window trace file; incast: measured intervals (rank 0) */
    const char *peer;
    const char *label;
    const char *name_file; /* joined by name through this file, not by a launcher */
    int side;              /* with name_file: 0 or 1, the rank this program plays */
    enum { OUT_TABLE, OUT_JSON, OUT_CSV } out;
};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: fmrun -n N fmperf TEST [options]\n"
            "       fmperf TEST --name-file PATH --side 0|1 [options]   (twice, no launcher)\n"
            "TEST: latency  ping-pong between ranks 0 and 1 (one-way = round trip / 2)\n"
            "      bw       windows of messages from rank 0 to rank 1, acknowledged\n"
            "      msgrate  rank 0 only sends, rank 1 only receives (MsgRate)\n"
            "      ring     every rank sends to the next, receives from the previous\n"
            "      idle     CPU share of a rank waiting in fm_wait\n"
            "      connect  rank 0 opens a connection per exchange: send, receive, close\n"
            "               (fastmsg: an endpoint on a fresh channel; tcp: connect/close)\n"
            "      sweep    bandwidth for each message length and window (iperf -l x -w)\n"
            "      rails    latency and bw over the job's rails (FM_RAILS), a row of each\n"
            "               per size, labelled with the number of rails\n"
            "      multiplex  two pairs stream at once over one link (seed 000, fig. 2):\n"
            "               ranks 0->2 and 1->3, or 3->1 with --opposite; 4 ranks, two per\n"
            "               host; the bandwidth of each pair\n"
            "      names-lookup  ns per fm_name_lookup of a published instance (hit) and of\n"
            "               an absent one (miss), and per fm_name_lookup_all of one instance,\n"
            "               with --pubs names published; one process, no launcher needed\n"
            "      names-event  rank 1 publishes and withdraws a name that rank 0 subscribes\n"
            "               to: time from the call to the event; both on one kernel\n"
            "      mcast    ranks 1..N each publish a name (fmrun -n N+1); rank 0's time of\n"
            "               one fm_name_mcast to them against N fm_send calls (to 64 KiB)\n"
            "      incast   ranks 1..N-2 stream windows (--window) of --sizes messages (default\n"
            "               64 KiB) into rank 0 for --seconds, each acknowledged per window,\n"
            "               while rank N-1 ping-pongs 8 B with rank 0 (fmrun -n N, N >= 3):\n"
            "               total goodput, Jain's fairness index and min/max share of the\n"
            "               senders, the ping-pong's p50 and p99 one-way latency; the first\n"
            "               fifth (at most 1 s) is warmup. --peer tcp only. Through a shaped\n"
            "               port in namespaces: bench/incast.sh\n"
            "options:\n"
            "  --sizes LIST   bytes, comma-separated, K/M suffixes (default per test)\n"
            "  --iters N      iterations per size (default: scaled by size); names-lookup:\n"
            "                 lookups of each kind per count of names (default 1000000)\n"
            "  --window W     messages in flight for bw and each incast sender (default 64)\n"
            "  --windows LIST windows for sweep (default 1,4,16,64)\n"
            "  --reps R       repetitions for msgrate and ring (default 5)\n"
            "  --in-place     receiver reads data where it lies instead of copying it\n"
            "  --opposite     multiplex: the second pair streams in the other direction\n"
            "  --seconds S    incast: how long the senders stream (default 3)\n"
            "  --pubs LIST    names-lookup: counts of names, ascending (default 1,1000,100000;\n"
            "                 they are published one by one through the node agent)\n"
            "  --names        connect: rank 1's server publishes {0x4e414d45, 1} and each\n"
            "                 exchange finds it with fm_name_lookup instead of by rank\n"
            "  --trace FILE   bw: rank 0 writes each window's end time (ns, CLOCK_REALTIME)\n"
            "                 and MB/s to FILE; incast: the times each transport's measured\n"
            "                 interval begins and ends (\"NS TRANSPORT measure|end\")\n"
            "  --peer KIND    also run over kernel sockets: tcp, udp, or mptcp (multipath\n"
            "                 TCP; its paths are the kernel's: ip mptcp endpoint). Sets\n"
            "                 FM_PROGRESS_THREAD=2 unless it is set: the kernel runs block\n"
            "                 outside fastmsg\n"
            "  --name-file PATH  join two programs started by hand, without a launcher, by\n"
            "                 name: side 0 writes its endpoint's name to PATH (and removes it\n"
            "                 once joined), side 1 reads it; every send then goes to an\n"
            "                 inserted address. Two-party tests only (not multiplex); the\n"
            "                 domain key is FM_KEY or $HOME/.fastmsg/key, the same on both\n"
            "  --side S       with --name-file: 0 or 1, the rank this program plays; side 0\n"
            "                 prints the results\n"
            "  --label NAME   transport name in the output (default: fastmsg, fastmsg-named\n"
            "                 with --name-file, fastmsg-lookup with --names)\n"
            "  --json         one JSON object per result line\n"
            "  --csv          comma-separated values\n"
            "environment: FMPERF_TCP_CC=NAME  congestion control of --peer tcp's streams\n"
            "                 (setsockopt TCP_CONGESTION, e.g. cubic)\n");
}

static void die_usage(const char *msg, const char *arg)
{
    fprintf(stderr, "fmperf: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    fprintf(stderr, "Try 'fmperf --help'.\n");
    exit(2);
}

static int parse_sizes(const char *s, size_t *out, int max)
{
    int n = 0;
    while (*s) {
        char *end;
        unsigned long long v = strtoull(s, &end, 10);
        if (end == s)
            return -1;
        switch (toupper((unsigned char)*end)) {
        case 'K': v <<= 10; end++; break;
        case 'M': v <<= 20; end++; break;
        case 'G': v <<= 30; end++; break;
        }
        if ((*end && *end != ',') || n == max || v > (1ull << 31))
            return -1;
        out[n++] = (size_t)v;
        s = *end ? end + 1 : end;
    }
    return n;
}

static void default_sizes(struct opts *o)
{
    switch (o->test) {
    case T_LATENCY:
        o->sizes[o->nsizes++] = 0;
        for (size_t s = 1; s <= (4u << 20); s *= 2)
            o->sizes[o->nsizes++] = s;
        break;
    case T_BW: {
        static const size_t bw[] = {8, 64, 512, 4096, 32768, 262144, 1 << 20, 4 << 20};
        for (size_t i = 0; i < sizeof(bw) / sizeof(bw[0]); i++)
            o->sizes[o->nsizes++] = bw[i];
        break;
    }
    case T_CONNECT: {
        static const size_t c[] = {128, 256, 512, 1024, 2048, 4096};
        for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
            o->sizes[o->nsizes++] = c[i];
        break;
    }
    case T_MULTIPLEX: o->sizes[o->nsizes++] = 1 << 20; break;
    case T_INCAST: o->sizes[o->nsizes++] = 64 << 10; break;
    case T_RAILS: {
        static const size_t r[] = {8, 65536, 1 << 20};
        for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++)
            o->sizes[o->nsizes++] = r[i];
        break;
    }
    case T_SWEEP: {
        static const size_t l[] = {1024, 4096, 16384, 65536};
        for (size_t i = 0; i < sizeof(l) / sizeof(l[0]); i++)
            o->sizes[o->nsizes++] = l[i];
        break;
    }
    default:
        o->sizes[o->nsizes++] = 8;
    }
}

/* The tests whose rows are message sizes. */
static int sized(enum test t) { return t != T_NAMES_LOOKUP && t != T_NAMES_EVENT; }

static void parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"sizes", required_argument, NULL, 's'}, {"iters", required_argument, NULL, 'i'},
        {"window", required_argument, NULL, 'w'}, {"reps", required_argument, NULL, 'r'},
        {"in-place", no_argument, NULL, 'p'},    {"peer", required_argument, NULL, 'P'},
        {"label", required_argument, NULL, 'l'}, {"json", no_argument, NULL, 'j'},
        {"csv", no_argument, NULL, 'c'},         {"help", no_argument, NULL, 'h'},
        {"windows", required_argument, NULL, 'W'}, {"opposite", no_argument, NULL, 'o'},
        {"trace", required_argument, NULL, 't'}, {"name-file", required_argument, NULL, 'n'},
        {"side", required_argument, NULL, 'S'}, {"pubs", required_argument, NULL, 'u'},
        {"names", no_argument, NULL, 'N'},      {"seconds", required_argument, NULL, 'T'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct opts){.window = 64, .reps = 5, .side = -1, .seconds = 3};
    if (argc < 2 || argv[1][0] == '-') {
        if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
            usage(stdout);
            exit(0);
        }
        die_usage("the test to run is missing", NULL);
    }
    int found = 0;
    for (int t = 0; t < (int)(sizeof(test_names) / sizeof(test_names[0])); t++)
        if (strcmp(argv[1], test_names[t]) == 0) {
            o->test = (enum test)t;
            found = 1;
        }
    if (!found)
        die_usage("unknown test (latency, bw, msgrate, ring, idle, connect, sweep, multiplex, "
                  "rails, names-lookup, names-event, mcast, incast)",
                  argv[1]);
    optind = 2;
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            o->nsizes = parse_sizes(optarg, o->sizes, 64);
            if (o->nsizes <= 0)
                die_usage("--sizes needs byte counts like 0,8,64K,1M (at most 2G)", optarg);
            break;
        case 'i':
            o->iters = strtol(optarg, &end, 10);
            if (*end || o->iters < 1)
                die_usage("--iters needs a positive number", optarg);
            break;
        case 'w':
            o->window = (int)strtol(optarg, &end, 10);
            if (*end || o->window < 1 || o->window > 65536)
                die_usage("--window needs a number from 1 to 65536", optarg);
            break;
        case 'r':
            o->reps = (int)strtol(optarg, &end, 10);
            if (*end || o->reps < 1 || o->reps > 64)
                die_usage("--reps needs a number from 1 to 64", optarg);
            break;
        case 'W':
            o->nwindows = parse_sizes(optarg, o->windows, 16);
            if (o->nwindows <= 0)
                die_usage("--windows needs message counts like 1,4,16", optarg);
            for (int i = 0; i < o->nwindows; i++)
                if (o->windows[i] < 1 || o->windows[i] > 65536)
                    die_usage("--windows takes counts from 1 to 65536", optarg);
            break;
        case 'u':
            o->npubs = parse_sizes(optarg, o->pubs, 16);
            if (o->npubs <= 0)
                die_usage("--pubs needs counts like 1,1000,100000", optarg);
            for (int i = 0; i < o->npubs; i++)
                if (o->pubs[i] < 1 || o->pubs[i] > (1u << 24) ||
                    (i > 0 && o->pubs[i] <= o->pubs[i - 1]))
                    die_usage("--pubs takes ascending counts from 1 to 16M", optarg);
            break;
        case 'N': o->by_name = 1; break;
        case 'T':
            o->seconds = strtod(optarg, &end);
            if (*end || !(o->seconds >= 0.1 && o->seconds <= 3600))
                die_usage("--seconds needs a time from 0.1 to 3600", optarg);
            break;
        case 'p': o->in_place = 1; break;
        case 'o': o->opposite = 1; break;
        case 't': o->trace = optarg; break;
        case 'P':
            if (strcmp(optarg, "tcp") && strcmp(optarg, "udp") && strcmp(optarg, "mptcp"))
                die_usage("--peer takes tcp, udp or mptcp", optarg);
            o->peer = optarg;
            break;
        case 'n': o->name_file = optarg; break;
        case 'S':
            if (strcmp(optarg, "0") && strcmp(optarg, "1"))
                die_usage("--side takes 0 or 1", optarg);
            o->side = optarg[0] - '0';
            break;
        case 'l': o->label = optarg; break;
        case 'j': o->out = OUT_JSON; break;
        case 'c': o->out = OUT_CSV; break;
        case 'h': usage(stdout); exit(0);
        default: die_usage("unknown option", NULL);
        }
    }
    if (optind < argc)
        die_usage("unexpected argument", argv[optind]);
    if (!o->name_file != (o->side < 0))
        die_usage("--name-file and --side go together", NULL);
    if (o->name_file && o->test == T_MULTIPLEX)
        die_usage("multiplex needs 4 ranks: run it under fmrun, not --name-file", NULL);
    if (o->name_file && o->test == T_INCAST)
        die_usage("incast needs 3 ranks or more: run it under fmrun, not --name-file", NULL);
    if (o->test == T_INCAST && o->peer && strcmp(o->peer, "udp") == 0)
        die_usage("incast compares with stream sockets: --peer tcp or mptcp", NULL);
    if (o->name_file && o->test == T_NAMES_LOOKUP)
        die_usage("names-lookup is one program: run it alone, without --name-file", NULL);
    if (o->by_name && o->test != T_CONNECT)
        die_usage("--names goes with connect", NULL);
    if (o->peer && names_row[o->test].nops)
        die_usage("the names tests are fastmsg's only: no --peer", NULL);
    if (o->nsizes && !sized(o->test))
        die_usage("names-lookup and names-event have no sizes (names-lookup takes --pubs)",
                  NULL);
    if (!o->label)
        o->label = o->by_name ? "fastmsg-lookup" : o->name_file ? "fastmsg-named" : "fastmsg";
    if (o->nsizes == 0 && sized(o->test))
        default_sizes(o);
    if (o->npubs == 0) {
        static const size_t p[] = {1, 1000, 100000};
        for (int i = 0; i < 3; i++)
            o->pubs[o->npubs++] = p[i];
    }
    if (o->nwindows == 0) {
        static const size_t w[] = {1, 4, 16, 64};
        for (int i = 0; i < 4; i++)
            o->windows[o->nwindows++] = w[i];
    }
}

/* Iterations for a size: the given count, or enough to take well under a
 * second per size (fewer for large messages). */
static long iters_for(const struct opts *o, size_t size)
{
    if (o->iters)
        return o->iters;
    switch (o->test) {
    case T_LATENCY: {
        long n = (long)((256u << 20) / (size + 256));
        return n > 20000 ? 20000 : n < 50 ? 50 : n;
    }
    case T_BW:
    case T_SWEEP:
    case T_MULTIPLEX: {
        long n = (long)((1024ull << 20) / (size + 64));
        n = n > 64000 ? 64000 : n;
        return n < 10L * o->window ? 10L * o->window : n;
    }
    case T_CONNECT: return 2000; /* TCP leaves a TIME_WAIT socket per exchange */
    case T_MSGRATE: return 1000000;
    case T_RING: return 20000;
    case T_NAMES_LOOKUP: return 1000000; /* of each kind, per count of names */
    case T_NAMES_EVENT: return 1000;
    case T_MCAST: {
        long n = (long)((64u << 20) / (size + 64));
        return n > 10000 ? 10000 : n < 100 ? 100 : n;
    }
    default: return 1;
    }
}

static const char *human_size(size_t s, char *buf, size_t len)
{
    if (s >= (1u << 20) && s % (1u << 20) == 0)
        snprintf(buf, len, "%zu MiB", s >> 20);
    else if (s >= 1024 && s % 1024 == 0)
        snprintf(buf, len, "%zu KiB", s >> 10);
    else
        snprintf(buf, len, "%zu B", s);
    return buf;
}

static int has_p99(enum test t) { return t == T_LATENCY || t == T_CONNECT; }

static int ranks_of(const struct opts *o, const struct job *j)
{
    if (o->test == T_RING || o->test == T_MCAST || o->test == T_INCAST)
        return j->size;
    return o->test == T_MULTIPLEX ? 4 : o->test == T_NAMES_LOOKUP ? 1 : 2;
}

/* The names tests' lines under the header's first. */
static void names_header(const struct opts *o, const struct job *j)
{
    const char *who = j->named ? "programs joined by name" : "ranks";
    if (o->test == T_NAMES_LOOKUP)
        printf("# 1 process: one endpoint publishes node-scope names {type, 16 k}, k < pubs; "
               "batches of %d calls\n", NAMES_LOOKUP_BATCH);
    else if (o->test == T_NAMES_EVENT)
        printf("# 2 %s, cluster scope, one event in flight\n", who);
    else
        printf("# %d %s: rank 0 sends to ranks 1..%d, each publishing {type, its rank}\n",
               j->size, who, j->size - 1);
    if (names_row[o->test].key)
        printf("%10s", names_row[o->test].key);
    for (int k = 0; k < names_row[o->test].nops; k++)
        printf("  %14s %10s", names_row[o->test].ops[k], "p99");
    if (o->test == T_MCAST)
        printf("  %10s", "vs sends");
    printf("\n");
}

/* incast: who does what, then a row per metric. */
static void incast_header(const struct opts *o, const struct job *j)
{
    double warm = o->seconds / 5 < 1 ? o->seconds / 5 : 1;
    printf("# %d ranks: rank 0 receives; ranks 1..%d send, %d messages in flight each; rank %d "
           "ping-pongs 8 B\n", j->size, j->size - 2, o->window, j->size - 1);
    printf("# %.1f s, of which the first %.2f s are not counted; %s receiver%s%s; vs peer > 1: "
           "fastmsg better\n", o->seconds, warm, o->in_place ? "in-place" : "copying",
           o->peer ? ", peer: kernel " : "", o->peer ? o->peer : "");
    printf("%10s  %-10s  %18s", "size", "metric", o->label);
    if (o->peer)
        printf("  %18s  %10s", o->peer, "vs peer");
    printf("\n");
}

static void print_header(const struct opts *o, const struct job *j)
{
    if (o->out == OUT_JSON)
        return;
    if (o->out == OUT_CSV && names_row[o->test].nops) {
        const char *key = names_row[o->test].key;
        printf("test,transport,op,%s%svalue,unit,p99,iters,ranks\n", key ? key : "",
               key ? "," : "");
        return;
    }
    if (o->out == OUT_CSV && o->test == T_INCAST) {
        printf("test,transport,peer,size,senders,metric,value,unit,seconds,window,ranks,recv\n");
        return;
    }
    if (o->out == OUT_CSV) {
        printf("test,transport,peer,size,value,unit,p99,iters,ranks,window,recv\n");
        return;
    }
    static const char *const what[] = {
        "one-way latency (round trip / 2), median and p99",
        "application bandwidth, median of acknowledged windows",
        "message rate, rank 0 only sends and rank 1 only receives (MsgRate)",
        "time per round of a ring exchange (send to next, receive from previous)",
        "CPU share of a rank blocked in fm_wait for a second",
        "time per exchange with a connection per message (open, send, receive, close)",
        "bandwidth for each message length and window of messages in flight",
        "bandwidth of each of two pairs streaming at once (seed 000, figure 2)",
        "one-way latency and bandwidth over the rails FM_RAILS names",
        "ns per fm_name_lookup (hit, miss) and fm_name_lookup_all, median and p99 of batches",
        "time from fm_name_publish (withdraw) on rank 1 to the event on rank 0",
        "time of one fm_name_mcast to N publishers and of N fm_send calls to them",
        "N senders streaming into one receiver, beside a ping-pong with it",
    };
    printf("# fmperf %s: %s\n", test_names[o->test], what[o->test]);
    if (names_row[o->test].nops) {
        names_header(o, j);
        return;
    }
    if (o->test == T_INCAST) {
        incast_header(o, j);
        return;
    }
    printf("# %d %s, %s receiver%s%s%s\n", ranks_of(o, j),
           j->named ? "programs joined by name" : "ranks",
           o->in_place ? "in-place" : "copying", o->peer ? ", peer: kernel " : "",
           o->peer ? o->peer : "", o->by_name ? ", fastmsg looks the server up each time" : "");
    printf("%10s", "size");
    if (o->test == T_SWEEP)
        printf(" %7s", "window");
    printf("  %14s", o->label);
    if (has_p99(o->test))
        printf(" %10s", "p99");
    if (o->peer) {
        printf("  %14s", o->peer);
        if (has_p99(o->test))
            printf(" %10s", "p99");
        printf("  %10s", "vs peer");
    }
    printf("\n");
}

static void json_line(const struct opts *o, const struct job *j, const char *transport,
                      const char *peer, size_t size, struct figure f, long iters)
{
    printf("{\"test\": \"%s\", \"transport\": \"%s\", ", test_names[o->test], transport);
    if (peer)
        printf("\"peer\": \"%s\", ", peer);
    printf("\"size\": %zu, \"value\": %.4f, \"unit\": \"%s\", \"stat\": \"median\"", size,
           f.median, units[o->test]);
    if (has_p99(o->test))
        printf(", \"p99\": %.4f", f.p99);
    printf(", \"iters\": %ld, \"ranks\": %d", iters, ranks_of(o, j));
    if (j->named)
        printf(", \"joined\": \"name\"");
    if (o->by_name && !peer)
        printf(", \"server\": \"name\"");
    if (o->test == T_BW || o->test == T_SWEEP || o->test == T_MULTIPLEX)
        printf(", \"window\": %d", o->window);
    if (o->test == T_MULTIPLEX)
        printf(", \"direction\": \"%s\"", o->opposite ? "opposite" : "same");
    printf(", \"recv\": \"%s\"}\n", o->in_place ? "in-place" : "copy");
}

static void csv_line(const struct opts *o, const struct job *j, const char *transport,
                     const char *peer, size_t size, struct figure f, long iters)
{
    printf("%s,%s,%s,%zu,%.4f,%s,", test_names[o->test], transport, peer ? peer : "", size,
           f.median, units[o->test]);
    if (has_p99(o->test))
        printf("%.4f", f.p99);
    printf(",%ld,%d,", iters, ranks_of(o, j));
    if (o->test == T_BW || o->test == T_SWEEP || o->test == T_MULTIPLEX)
        printf("%d", o->window);
    printf(",%s\n", o->in_place ? "in-place" : "copy");
}

static void report(const struct opts *o, const struct job *j, size_t size, struct figure fm,
                   const struct figure *peer, long iters)
{
    if (o->out == OUT_JSON || o->out == OUT_CSV) {
        void (*line)(const struct opts *, const struct job *, const char *, const char *,
                     size_t, struct figure, long) = o->out == OUT_JSON ? json_line : csv_line;
        line(o, j, o->label, NULL, size, fm, iters);
        if (peer && peer->median > 0) /* else the peer has no such pattern */
            line(o, j, o->peer, o->peer, size, *peer, iters);
        fflush(stdout);
        return;
    }
    char sz[32], v[32];
    printf("%10s", human_size(size, sz, sizeof(sz)));
    if (o->test == T_SWEEP)
        printf(" %7d", o->window);
    snprintf(v, sizeof(v), "%.3f %s", fm.median, units[o->test]);
    printf("  %14s", v);
    if (has_p99(o->test))
        printf(" %7.3f us", fm.p99);
    if (peer && peer->median <= 0) {
        printf("  %14s", "-"); /* the peer has no such pattern */
    } else if (peer) {
        snprintf(v, sizeof(v), "%.3f %s", peer->median, units[o->test]);
        printf("  %14s", v);
        if (has_p99(o->test))
            printf(" %7.3f us", peer->p99);
        double ratio = lower_better[o->test] ? peer->median / fm.median
                                             : fm.median / peer->median;
        printf("  %9.2fx", ratio);
    }
    printf("\n");
    fflush(stdout);
}

/* A row of a names test: f[k] is the figure of names_row[test].ops[k]; key
 * the count of names or the size, when the row has one. */
static void report_ops(const struct opts *o, const struct job *j, size_t key,
                       const struct figure *f, long iters)
{
    const char *keyname = names_row[o->test].key, *unit = units[o->test];
    int n = names_row[o->test].nops;
    if (o->out == OUT_JSON || o->out == OUT_CSV) {
        for (int k = 0; k < n; k++) {
            const char *op = names_row[o->test].ops[k];
            if (o->out == OUT_CSV) {
                printf("%s,%s,%s,", test_names[o->test], o->label, op);
                if (keyname)
                    printf("%zu,", key);
                printf("%.4f,%s,%.4f,%ld,%d\n", f[k].median, unit, f[k].p99, iters,
                       ranks_of(o, j));
                continue;
            }
            printf("{\"test\": \"%s\", \"transport\": \"%s\", \"op\": \"%s\", ",
                   test_names[o->test], o->label, op);
            if (keyname)
                printf("\"%s\": %zu, ", keyname, key);
            printf("\"value\": %.4f, \"unit\": \"%s\", \"stat\": \"median\", \"p99\": %.4f, "
                   "\"iters\": %ld, \"ranks\": %d",
                   f[k].median, unit, f[k].p99, iters, ranks_of(o, j));
            if (j->named)
                printf(", \"joined\": \"name\"");
            printf("}\n");
        }
        fflush(stdout);
        return;
    }
    char v[32], p[32];
    if (o->test == T_MCAST)
        printf("%10s", human_size(key, v, sizeof(v)));
    else if (keyname)
        printf("%10zu", key);
    for (int k = 0; k < n; k++) {
        snprintf(v, sizeof(v), "%.3f %s", f[k].median, unit);
        snprintf(p, sizeof(p), "%.3f %s", f[k].p99, unit);
        printf("  %14s %10s", v, p);
    }
    if (o->test == T_MCAST)
        printf("  %9.2fx", f[1].median / f[0].median);
    printf("\n");
    fflush(stdout);
}

static struct figure run_pattern(const struct opts *o, struct xport *x, struct job *j,
                                 void *buf, size_t size, long iters)
{
    /* A socket peer writes 0 bytes as nothing: its "0 B ping-pong" would
     * time two returns from write and read (10 ns), not a message. (A
     * connection per message still connects and closes.) */
    if (size == 0 && x->stream && o->test != T_CONNECT)
        return (struct figure){0, 0};
    switch (o->test) {
    case T_LATENCY: return pat_latency(x, j, buf, size, iters);
    case T_BW: return pat_bw(x, j, buf, size, iters, o->window);
    case T_MSGRATE: return pat_msgrate(x, j, buf, size, iters, o->reps);
    case T_RING: return pat_ring(x, j, buf, size, iters, o->reps);
    case T_CONNECT:
        if (!x->exchange)
            return (struct figure){0, 0};
        return pat_connect(x, j, buf, size, iters);
    case T_SWEEP: return pat_bw(x, j, buf, size, iters, o->window);
    default: return pat_idle(j);
    }
}

/* The rails FM_RAILS lists (one when unset), for labels. */
static int rails_listed(void)
{
    const char *r = getenv("FM_RAILS");
    int n = 1;
    for (; r && *r; r++)
        n += *r == ',';
    return n;
}

/* rails: latency, then bandwidth, each reported as its own test under a
 * label that says how many rails carried it. */
static void run_rails(const struct opts *o, struct job *j, struct xport *fm, struct xport *peer,
                      void *buf, size_t size)
{
    char label[64];
    int n = rails_listed();
    snprintf(label, sizeof(label), "%s, %d rail%s", o->label, n, n > 1 ? "s" : "");
    static const enum test parts[] = {T_LATENCY, T_BW};
    for (int k = 0; k < 2; k++) {
        struct opts each = *o;
        each.test = parts[k];
        each.label = label;
        each.iters = 0;
        long iters = iters_for(&each, size);
        if (parts[k] == T_BW && !o->iters) /* rails are slower than memory */
            iters = iters / 16 > 10L * each.window ? iters / 16 : 10L * each.window;
        struct figure f = run_pattern(&each, fm, j, buf, size, iters), p = {0, 0};
        if (peer)
            p = run_pattern(&each, peer, j, buf, size, iters);
        if (j->rank == 0)
            report(&each, j, size, f, peer ? &p : NULL, iters);
    }
}

/* Both pairs' figures, a row each (the transport names the pair). */
static void run_multiplex(const struct opts *o, struct job *j, struct xport *fm,
                          struct xport *peer, const int (*pairs)[2], void *buf, size_t size,
                          long iters)
{
    struct figure f[2] = {{0, 0}, {0, 0}}, p[2] = {{0, 0}, {0, 0}};
    pat_multiplex(fm, j, pairs, buf, size, iters, o->window, f);
    if (peer)
        pat_multiplex(peer, j, pairs, buf, size, iters, o->window, p);
    if (j->rank != 0)
        return;
    for (int k = 0; k < 2; k++) {
        char label[64], plabel[64];
        struct opts each = *o;
        snprintf(label, sizeof(label), "%s %d->%d", o->label, pairs[k][0], pairs[k][1]);
        each.label = label;
        if (o->peer) {
            snprintf(plabel, sizeof(plabel), "%s %d->%d", o->peer, pairs[k][0], pairs[k][1]);
            each.peer = plabel;
        }
        if (o->out == OUT_TABLE)
            printf("# pair %d->%d\n", pairs[k][0], pairs[k][1]);
        report(&each, j, size, f[k], peer ? &p[k] : NULL, iters);
    }
}

/* incast's metrics: the names a report script picks rows by. */
enum { IM_GOODPUT, IM_FAIRNESS, IM_MINMAX, IM_P50, IM_P99, IM_COUNT };
static const struct {
    const char *name, *unit;
    int lower_better;
} incast_metric[IM_COUNT] = {
    {"goodput", "MB/s", 0},  {"fairness", "jain", 0},   {"minmax", "min/max", 0},
    {"victim_p50", "us", 1}, {"victim_p99", "us", 1},
};

static double incast_value(const struct incast_result *r, int m)
{
    switch (m) {
    case IM_GOODPUT: return r->goodput;
    case IM_FAIRNESS: return r->jain;
    case IM_MINMAX: return r->max > 0 ? r->min / r->max : 0;
    case IM_P50: return r->victim.median;
    default: return r->victim.p99;
    }
}

/* One metric of one transport as a JSON or CSV line; peer is NULL for
 * fastmsg's (JSON null: every row has the key). */
static void incast_line(const struct opts *o, const struct job *j, const char *transport,
                        const char *peer, size_t size, const struct incast_result *r, int m)
{
    int senders = j->size - 2;
    double v = incast_value(r, m);
    if (o->out == OUT_CSV) {
        printf("incast,%s,%s,%zu,%d,%s,%.4f,%s,%.2f,%d,%d,%s\n", transport, peer ? peer : "",
               size, senders, incast_metric[m].name, v, incast_metric[m].unit, o->seconds,
               o->window, j->size, o->in_place ? "in-place" : "copy");
        return;
    }
    printf("{\"test\": \"incast\", \"transport\": \"%s\", \"peer\": ", transport);
    printf(peer ? "\"%s\"" : "null", peer);
    printf(", \"size\": %zu, \"senders\": %d, \"metric\": \"%s\", \"value\": %.4f, "
           "\"unit\": \"%s\"", size, senders, incast_metric[m].name, v, incast_metric[m].unit);
    if (m == IM_MINMAX)
        printf(", \"min\": %.4f, \"max\": %.4f", r->min, r->max);
    if (m == IM_P50 || m == IM_P99)
        printf(", \"pings\": %ld", r->pings);
    printf(", \"seconds\": %.2f, \"window\": %d, \"ranks\": %d, \"recv\": \"%s\"}\n", o->seconds,
           o->window, j->size, o->in_place ? "in-place" : "copy");
}

/* incast's rows on rank 0: a line per metric and transport, or a table row
 * per metric with the ratio (> 1: fastmsg better). */
static void report_incast(const struct opts *o, const struct job *j, size_t size,
                          const struct incast_result *fm, const struct incast_result *peer)
{
    if (o->out != OUT_TABLE) {
        for (int m = 0; m < IM_COUNT; m++) {
            incast_line(o, j, o->label, NULL, size, fm, m);
            if (peer)
                incast_line(o, j, o->peer, o->peer, size, peer, m);
        }
        fflush(stdout);
        return;
    }
    char sz[32], v[32];
    human_size(size, sz, sizeof(sz));
    for (int m = 0; m < IM_COUNT; m++) {
        double f = incast_value(fm, m);
        snprintf(v, sizeof(v), "%.3f %s", f, incast_metric[m].unit);
        printf("%10s  %-10s  %18s", sz, incast_metric[m].name, v);
        if (peer) {
            double p = incast_value(peer, m);
            snprintf(v, sizeof(v), "%.3f %s", p, incast_metric[m].unit);
            printf("  %18s", v);
            if (f > 0 && p > 0)
                printf("  %9.2fx", incast_metric[m].lower_better ? p / f : f / p);
        }
        printf("\n");
    }
    /* The shares' extremes, for the eye. */
    snprintf(v, sizeof(v), "%.1f-%.1f MB/s", fm->min, fm->max);
    printf("%10s  %-10s  %18s", sz, "min-max", v);
    if (peer) {
        snprintf(v, sizeof(v), "%.1f-%.1f MB/s", peer->min, peer->max);
        printf("  %18s", v);
    }
    printf("\n");
    fflush(stdout);
}

/* incast over fastmsg, then over the peer, reported together. */
static void run_incast(const struct opts *o, struct job *j, struct xport *fm, struct xport *peer,
                       void *buf, size_t size)
{
    struct incast_result f, p;
    pat_incast(fm, j, buf, size, o->window, o->seconds, &f);
    if (peer)
        pat_incast(peer, j, buf, size, o->window, o->seconds, &p);
    if (j->rank == 0)
        report_incast(o, j, size, &f, peer ? &p : NULL);
}

/* names-lookup: a row per count of names, each adding to the last's. */
static void run_names_lookup(const struct opts *o, struct job *j, fm_ep *ep)
{
    long iters = iters_for(o, 0);
    for (int i = 0; i < o->npubs; i++) {
        struct figure f[3] = {{0, 0}, {0, 0}, {0, 0}};
        uint32_t from = i > 0 ? (uint32_t)o->pubs[i - 1] : 0;
        pat_names_lookup(j, ep, from, (uint32_t)o->pubs[i], iters, f);
        if (j->rank == 0)
            report_ops(o, j, o->pubs[i], f, iters);
    }
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_opts(argc, argv, &o);
    struct job j = {0};
    /* A kernel peer's run blocks in socket calls (accept, recv) for its
     * whole length, and the other rank may still need an answer to a
     * control message this one sent before it: a lost datagram is sent
     * again only while something runs the network (docs/udp.md,
     * "Progress"). Seen as a hang under 0.1 % loss on the link: rank 1 in
     * accept, rank 0 waiting for the card that says where to connect. It
     * also answers heartbeats while incast's kernel run keeps fastmsg
     * silent for longer than FM_NET_TIMEOUT_MS. The thread costs fastmsg
     * more than the kernel peer (docs/udp.md): set FM_PROGRESS_THREAD=0 to
     * measure without it. */
    if (o.peer && !getenv("FM_PROGRESS_THREAD"))
        setenv("FM_PROGRESS_THREAD", "2", 1);
    int rc = fm_init(&j.ctx);
    if (rc) {
        fprintf(stderr, "fmperf: fm_init: %s\n", fm_strerror(rc));
        return 1;
    }
    j.rank = fm_rank(j.ctx);
    j.size = fm_size(j.ctx);
    if (o.name_file && j.size > 1) {
        fprintf(stderr, "fmperf: --name-file joins programs started by hand, not by fmrun\n");
        return 2;
    }
    int need = o.test == T_MULTIPLEX ? 4
               : o.test == T_INCAST  ? 3
               : o.test == T_NAMES_LOOKUP ? 1
                                          : 2;
    if (!o.name_file && j.size < need) {
        fprintf(stderr, "fmperf: needs at least %d ranks: fmrun -n %d fmperf %s\n", need, need,
                test_names[o.test]);
        return 2;
    }
    const int (*pairs)[2] = o.test != T_MULTIPLEX ? pair_01
                            : o.opposite           ? pairs_opposite
                                                   : pairs_same;
    int npairs = o.test == T_MULTIPLEX ? 2 : 1;
    int (*incast_pairs)[2] = NULL;
    if (o.test == T_INCAST) { /* every other rank, sender or victim, streams to rank 0 */
        incast_pairs = malloc(sizeof(*incast_pairs) * (size_t)(j.size - 1));
        for (int r = 1; r < j.size; r++) {
            incast_pairs[r - 1][0] = r;
            incast_pairs[r - 1][1] = 0;
        }
        pairs = (const int (*)[2])incast_pairs;
        npairs = j.size - 1;
    }
    if ((rc = fm_ep_open(j.ctx, 1, &j.ctl)) != 0) {
        fprintf(stderr, "fmperf: fm_ep_open: %s\n", fm_strerror(rc));
        return 1;
    }
    if (o.name_file)
        job_join_by_name(&j, o.name_file, o.side);
    fm_ep *names = NULL;
    if (names_row[o.test].nops && (rc = fm_ep_open(j.ctx, NAMES_CHANNEL, &names)) != 0) {
        fprintf(stderr, "fmperf: fm_ep_open: %s\n", fm_strerror(rc));
        return 1;
    }
    size_t max = 1;
    for (int i = 0; i < o.nsizes; i++)
        max = o.sizes[i] > max ? o.sizes[i] : max;
    char *buf = malloc(max);
    if (!buf) {
        fprintf(stderr, "fmperf: cannot allocate %zu bytes\n", max);
        return 1;
    }
    memset(buf, 0x5a, max);
    if (o.trace && j.rank == 0 && !(pat_trace = fopen(o.trace, "w"))) {
        fprintf(stderr, "fmperf: cannot write %s\n", o.trace);
        return 1;
    }
    struct xport *fm = xport_fm_open(&j, o.in_place, o.by_name);
    struct xport *peer = NULL;
    if (o.peer && o.test != T_IDLE) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        peer = xport_sock_open(&j, o.peer, o.test == T_RING, pairs, npairs,
                               ranks_of(&o, &j) <= cpus, o.in_place);
    }
    if (j.rank == 0)
        print_header(&o, &j);
    if (o.test == T_NAMES_LOOKUP) {
        run_names_lookup(&o, &j, names);
    } else if (o.test == T_NAMES_EVENT) {
        struct figure f[2] = {{0, 0}, {0, 0}};
        long iters = iters_for(&o, 0);
        pat_names_event(&j, names, iters, f);
        if (j.rank == 0)
            report_ops(&o, &j, 0, f, iters);
    } else if (o.test == T_MCAST) {
        pat_mcast_join(&j, names);
    }
    time_t start = time(NULL), last = start;
    int nw = o.test == T_SWEEP ? o.nwindows : 1;
    int rows = sized(o.test) ? o.nsizes * nw : 0;
    for (int i = 0; i < rows; i++) {
        size_t size = o.sizes[i / nw];
        if (o.test == T_SWEEP)
            o.window = (int)o.windows[i % nw];
        long iters = iters_for(&o, size);
        if (o.test == T_MCAST) {
            struct figure f[2] = {{0, 0}, {0, 0}};
            pat_mcast(&j, names, buf, size, iters, f);
            if (j.rank == 0)
                report_ops(&o, &j, size, f, iters);
            continue;
        }
        if (o.test == T_MULTIPLEX) {
            run_multiplex(&o, &j, fm, peer, pairs, buf, size, iters);
            continue;
        }
        if (o.test == T_RAILS) {
            run_rails(&o, &j, fm, peer, buf, size);
            continue;
        }
        if (o.test == T_INCAST) {
            run_incast(&o, &j, fm, peer, buf, size);
            continue;
        }
        struct figure f = run_pattern(&o, fm, &j, buf, size, iters);
        struct figure p;
        if (peer)
            p = run_pattern(&o, peer, &j, buf, size, iters);
        if (j.rank == 0) {
            report(&o, &j, size, f, peer ? &p : NULL, iters);
            time_t now = time(NULL);
            if (now - last >= 2 && i + 1 < rows) {
                fprintf(stderr, "fmperf: %s: %d of %d done (%lds)\n", test_names[o.test],
                        i + 1, rows, (long)(now - start));
                last = now;
            }
        }
    }
    if (peer)
        peer->close(peer);
    free(incast_pairs);
    fm->close(fm);
    if (pat_trace)
        fclose(pat_trace);
    free(buf);
    if (names)
        fm_ep_close(names);
    fm_ep_close(j.ctl);
    fm_finalize(j.ctx);
    return 0;
}
