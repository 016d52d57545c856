/*
 * The name-table replication protocol (src/names/distr.h) with a thousand
 * agents in one process: a discrete-event simulation over an in-memory
 * datagram network (one-way latency 50 us + 0..50 us, faults from
 * src/net/fault.h, partitions) on a fake clock. Phases: a) cold start,
 * a2) single joins into the converged cluster, b) steady updates, c) silent
 * failures, c2) a silent failure while nodes keep joining, d) graceful
 * leaves, e) 1% loss, f) a partition and its heal,
 * h) updates under --faults, g) memory. Each phase must converge within a
 * bound: every live agent holds exactly the live publications of the live
 * nodes (a count and an order-independent hash of origin and content kept
 * up to date by the table callbacks), all digests are equal and every agent
 * counts every live node as a member. Messages are tagged with their cause
 * (an update, a timer, a join) outside their bytes, so update traffic and
 * probe traffic are counted apart.
 *
 *   names_sim [--nodes N] [--pubs P] [--seed S] [--quick] [--partition SECONDS]
 *             [--faults SPEC]   (an extra phase of updates under these faults)
 *   names_sim --dump-corpus DIR   (seeds for tests/fuzz/fuzz_names.c, named by
 *                                  an FNV-1a hash of their bytes)
 *
 * --quick (N=64, P=20, shorter phases) is the ctest run. Exits 1 if a phase
 * does not converge, 2 on bad usage.
 */
#include "names/distr.h"
#include "net/fault.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define TICK_US 50000u /* nd_tick period of every agent */
#define LAT_US 50u     /* one-way latency, plus 0..LAT_JITTER_US */
#define LAT_JITTER_US 50u
#define CHECK_US 100u /* convergence is checked this often */
#define T0_US 1000000u

/* What caused a message: an update (its index, >= 0), a timer, or neither
 * (joins, leaves). A message caused by a message inherits its cause. */
enum { C_NONE = -1, C_TICK = -2 };

enum { A_OFF, A_LIVE, A_DEAD };

struct agent {
    struct nd *d;
    uint32_t id, idx;
    int state;
    int side;           /* partition group */
    uint64_t cnt, hash; /* publications held, own included: count and sum of pub_hash */
    uint64_t msgs, bytes, mark;
    struct nd_pub *own; /* its own publications */
    uint32_t nown, capown;
};

/* A message in flight, or a tick (msg NULL). */
struct ev {
    uint64_t t, seq;
    uint32_t to, from;
    int32_t cause;
    uint32_t len;
    unsigned char *msg;
};

/* One tracked update: when it started and when the last live agent got it
 * (only agents below `below` count: a join is news to those before it). */
struct upd {
    uint64_t t0, done;
    uint32_t need, have, below;
};

static struct agent *ag;
static uint32_t nag, nlive;
static uint64_t now = T0_US, rng_state;
static struct ev *heap;
static size_t nheap, capheap;
static uint64_t evseq;
static int32_t cur_cause = C_NONE;
static struct fm_fault flt;
static int use_faults, partitioned;
static uint64_t truth_cnt, truth_hash;
static uint64_t next_id = 1;
static uint64_t bad_cards, misrouted, lost_removals;
static struct nd_params prm;

/* Phase c: per node killed, removals still due and when the last one came. */
#define VICTIMS_MAX 64
static struct victim {
    uint32_t id;
    uint64_t due, first, done;
} victims[VICTIMS_MAX];
static uint32_t nvictims;

/* Per-update tracking (phases b and e): pub id -> update index. */
static int32_t *upd_of_add, *upd_of_del;
static uint64_t cap_ids;
static struct upd *upds;
static uint32_t nupds;
static uint16_t *upd_sends;       /* [update * nag + agent]: messages it caused at that agent */
static uint64_t msgs_by_cause[3]; /* none, tick, update */

/* --dump-corpus: distinct messages to agent 0, at most three of each length
 * (probes all have one), so that every kind of record shows up; and each
 * stage's first messages to agent 0 in one file, a sequence. */
#define DUMP_MAX 36
#define DUMP_SEQ_MAX 8192
static const char *dump_dir;
static uint64_t dump_hash[DUMP_MAX];
static uint32_t dump_len[DUMP_MAX];
static int ndump, nseqs;
static unsigned char dump_seq[DUMP_SEQ_MAX];
static size_t dump_seq_len;

static void fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "names_sim: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    exit(1);
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        fail("out of memory (%zu bytes)", n);
    return p;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static uint64_t rnd(void)
{
    rng_state += 0x9E3779B97F4A7C15ULL; /* splitmix64 */
    return mix(rng_state);
}

static uint32_t rnd_below(uint32_t n)
{
    return (uint32_t)(rnd() % n);
}

/* Content and origin, so that a corrupted copy counts as a different pub. */
static uint64_t pub_hash(uint32_t origin, const struct nd_pub *p)
{
    uint64_t h = mix((uint64_t)origin << 32 ^ p->id);
    h = mix(h ^ ((uint64_t)p->type << 32 | p->lower));
    h = mix(h ^ ((uint64_t)p->upper << 8 | p->namelen));
    for (unsigned i = 0; i < p->namelen; i += 8) {
        uint64_t w = 0;
        unsigned n = p->namelen - i < 8 ? p->namelen - i : 8;
        memcpy(&w, p->name + i, n);
        h = mix(h ^ w);
    }
    return h;
}

/* ---- the event queue: a min-heap by (time, sequence) ---- */

static int ev_less(const struct ev *a, const struct ev *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static void push(uint64_t t, uint32_t to, uint32_t from, int32_t cause, unsigned char *msg,
                 uint32_t len)
{
    if (nheap == capheap) {
        capheap = capheap ? capheap * 2 : 4096;
        heap = realloc(heap, capheap * sizeof(*heap));
        if (!heap)
            fail("out of memory");
    }
    struct ev e = {t, evseq++, to, from, cause, len, msg};
    size_t i = nheap++;
    while (i) {
        size_t up = (i - 1) / 2;
        if (!ev_less(&e, &heap[up]))
            break;
        heap[i] = heap[up];
        i = up;
    }
    heap[i] = e;
}

static struct ev pop(void)
{
    struct ev top = heap[0], last = heap[--nheap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= nheap)
            break;
        if (c + 1 < nheap && ev_less(&heap[c + 1], &heap[c]))
            c++;
        if (!ev_less(&heap[c], &last))
            break;
        heap[i] = heap[c];
        i = c;
    }
    if (nheap)
        heap[i] = last;
    return top;
}

/* ---- the network and the callbacks ---- */

static uint64_t fnv(const void *p, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ULL;
    return h;
}

static void dump_file(const void *p, size_t len)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%016" PRIx64, dump_dir, fnv(p, len));
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, len, f) != len || fclose(f))
        fail("cannot write %s: %s", path, strerror(errno));
}

static void dump_message(const void *msg, size_t len)
{
    if (dump_seq_len + len <= DUMP_SEQ_MAX) {
        memcpy(dump_seq + dump_seq_len, msg, len);
        dump_seq_len += len;
    }
    if (ndump == DUMP_MAX)
        return;
    uint64_t h = fnv(msg, len);
    int same_len = 0;
    for (int i = 0; i < ndump; i++) {
        if (dump_hash[i] == h)
            return;
        same_len += dump_len[i] == len;
    }
    if (same_len >= 3)
        return;
    dump_hash[ndump] = h;
    dump_len[ndump++] = (uint32_t)len;
    dump_file(msg, len);
}

/* The end of a stage: its sequence goes to a file of its own. */
static void dump_stage(void)
{
    if (dump_seq_len) {
        dump_file(dump_seq, dump_seq_len);
        nseqs++;
    }
    dump_seq_len = 0;
}

static void net_send(void *arg, uint32_t to, const void *card, size_t cardlen, const void *msg,
                     size_t len)
{
    struct agent *a = arg;
    if (len > ND_MSG_MAX)
        fail("agent %u sent %zu bytes, more than ND_MSG_MAX", a->idx, len);
    a->msgs++;
    a->bytes += len;
    msgs_by_cause[cur_cause >= 0 ? 2 : cur_cause == C_TICK ? 1 : 0]++;
    if (cur_cause >= 0 && upd_sends && (uint32_t)cur_cause < nupds) {
        uint16_t *c = &upd_sends[(size_t)cur_cause * nag + a->idx];
        if (*c < UINT16_MAX)
            (*c)++;
    }
    uint32_t idx;
    if (cardlen != 4 || (memcpy(&idx, card, 4), idx >= nag)) {
        bad_cards++; /* only a corrupted card can do this */
        return;
    }
    struct agent *b = &ag[idx];
    if (to && to != b->id)
        misrouted++;
    if (b->state != A_LIVE || (partitioned && a->side != b->side))
        return;
    if (idx == 0 && dump_dir)
        dump_message(msg, len);
    unsigned char *copy = xmalloc(len);
    memcpy(copy, msg, len);
    enum fm_fault_action act = use_faults ? fm_fault_next(&flt, copy, len) : FM_FAULT_PASS;
    if (act == FM_FAULT_DROP) {
        free(copy);
        return;
    }
    uint64_t t = now + LAT_US + rnd_below(LAT_JITTER_US + 1);
    if (act == FM_FAULT_REORDER)
        t += 2 * LAT_US + rnd_below(4 * LAT_US); /* overtaken by what is sent next */
    push(t, idx, a->idx, cur_cause, copy, (uint32_t)len);
    if (act == FM_FAULT_DUP) {
        unsigned char *again = xmalloc(len);
        memcpy(again, copy, len);
        push(t + rnd_below(LAT_JITTER_US + 1), idx, a->idx, cur_cause, again, (uint32_t)len);
    }
}

static void track(const struct agent *a, int32_t *map, uint64_t id)
{
    if (!map || id >= cap_ids || map[id] < 0)
        return;
    struct upd *u = &upds[map[id]];
    if (a->idx < u->below && ++u->have == u->need)
        u->done = now;
}

static void on_added(void *arg, uint32_t origin, const struct nd_pub *p)
{
    struct agent *a = arg;
    a->cnt++;
    a->hash += pub_hash(origin, p);
    track(a, upd_of_add, p->id);
}

static void on_removed(void *arg, uint32_t origin, const struct nd_pub *p, int lost)
{
    struct agent *a = arg;
    a->cnt--;
    a->hash -= pub_hash(origin, p);
    if (lost) {
        lost_removals++;
        for (uint32_t k = 0; k < nvictims; k++)
            if (victims[k].id == origin) {
                if (!victims[k].first)
                    victims[k].first = now;
                if (victims[k].due && --victims[k].due == 0)
                    victims[k].done = now;
            }
    } else {
        track(a, upd_of_del, p->id);
    }
}

/* ---- agents ---- */

static void own_add(struct agent *a, const struct nd_pub *p)
{
    if (a->nown == a->capown) {
        a->capown = a->capown ? a->capown * 2 : 16;
        a->own = realloc(a->own, a->capown * sizeof(*a->own));
        if (!a->own)
            fail("out of memory");
    }
    a->own[a->nown++] = *p;
    uint64_t h = pub_hash(a->id, p);
    a->cnt++, a->hash += h;
    truth_cnt++, truth_hash += h;
}

static void ids_reserve(uint64_t id)
{
    if (id < cap_ids)
        return;
    uint64_t c = cap_ids ? cap_ids : 1024;
    while (c <= id)
        c *= 2;
    upd_of_add = realloc(upd_of_add, c * sizeof(*upd_of_add));
    upd_of_del = realloc(upd_of_del, c * sizeof(*upd_of_del));
    if (!upd_of_add || !upd_of_del)
        fail("out of memory");
    memset(upd_of_add + cap_ids, 0xff, (c - cap_ids) * sizeof(*upd_of_add));
    memset(upd_of_del + cap_ids, 0xff, (c - cap_ids) * sizeof(*upd_of_del));
    cap_ids = c;
}

/* A new publication of agent a; returns its id. */
static uint64_t publish(struct agent *a)
{
    struct nd_pub p;
    memset(&p, 0, sizeof(p));
    p.id = next_id++;
    p.type = 64 + rnd_below(1000);
    p.lower = rnd_below(1u << 30);
    p.upper = p.lower + rnd_below(100);
    p.namelen = (uint8_t)snprintf((char *)p.name, sizeof(p.name), "svc-%u-%" PRIu64 "%.*s", a->idx,
                                  p.id, (int)rnd_below(12), "/abcdefghijk");
    int rc = nd_publish(a->d, &p);
    if (rc)
        fail("nd_publish: %d", rc);
    nd_flush(a->d);
    own_add(a, &p);
    return p.id;
}

static void withdraw(struct agent *a, uint32_t k)
{
    struct nd_pub p = a->own[k];
    a->own[k] = a->own[--a->nown];
    int rc = nd_withdraw(a->d, p.id, 0);
    if (rc)
        fail("nd_withdraw: %d", rc);
    nd_flush(a->d);
    uint64_t h = pub_hash(a->id, &p);
    a->cnt--, a->hash -= h;
    truth_cnt--, truth_hash -= h;
}

static void start(struct agent *a, uint32_t npubs, struct agent *contact)
{
    static const struct nd_ops ops0 = {NULL, net_send, on_added, on_removed};
    struct nd_ops ops = ops0;
    ops.arg = a;
    a->d = nd_new(a->id, 1, &a->idx, 4, &ops, &prm, now);
    if (!a->d)
        fail("nd_new");
    a->state = A_LIVE;
    nlive++;
    cur_cause = C_NONE;
    for (uint32_t i = 0; i < npubs; i++)
        publish(a);
    if (contact) {
        nd_contact(a->d, &contact->idx, 4, now);
        nd_flush(a->d);
    }
    /* Ticks staggered over the period by index. */
    uint64_t first = now + (uint64_t)a->idx * TICK_US / nag % TICK_US + 1;
    push(first, a->idx, a->idx, C_TICK, NULL, 0);
}

/* Stops silently: no more input, ticks or sends. */
static void kill_agent(struct agent *a)
{
    a->state = A_DEAD;
    nlive--;
    for (uint32_t i = 0; i < a->nown; i++) {
        truth_cnt--;
        truth_hash -= pub_hash(a->id, &a->own[i]);
    }
}

static void run_until(uint64_t t)
{
    while (nheap && heap[0].t <= t) {
        struct ev e = pop();
        now = e.t;
        struct agent *a = &ag[e.to];
        if (!e.msg) {
            if (a->state != A_LIVE)
                continue;
            cur_cause = C_TICK;
            nd_tick(a->d, now);
            nd_flush(a->d);
            push(now + TICK_US, e.to, e.to, C_TICK, NULL, 0);
            continue;
        }
        if (a->state == A_LIVE && !(partitioned && ag[e.from].side != a->side)) {
            cur_cause = e.cause;
            nd_input(a->d, e.msg, e.len, now);
            nd_flush(a->d);
        }
        free(e.msg);
    }
    now = t;
    cur_cause = C_NONE;
}

/* ---- convergence ---- */

static uint32_t scan_from; /* where the last check failed: it likely fails there again */

static int converged(void)
{
    for (uint32_t k = 0; k < nag; k++) {
        struct agent *a = &ag[(scan_from + k) % nag];
        if (a->state == A_LIVE && (a->cnt != truth_cnt || a->hash != truth_hash)) {
            scan_from = a->idx;
            return 0;
        }
    }
    uint64_t digest = 0;
    int first = 1;
    for (uint32_t k = 0; k < nag; k++) {
        struct agent *a = &ag[(scan_from + k) % nag];
        if (a->state != A_LIVE)
            continue;
        if (first)
            digest = nd_digest(a->d), first = 0;
        else if (nd_digest(a->d) != digest) {
            scan_from = a->idx;
            return 0;
        }
    }
    for (uint32_t k = 0; k < nag; k++) {
        struct agent *a = &ag[(scan_from + k) % nag];
        if (a->state == A_LIVE && nd_members(a->d) != nlive) {
            scan_from = a->idx;
            return 0;
        }
    }
    return 1;
}

/* What is wrong, for a phase that did not converge. */
static void diagnose(void)
{
    uint32_t badcnt = 0, badmem = 0, shown = 0;
    for (uint32_t i = 0; i < nag; i++) {
        struct agent *a = &ag[i];
        if (a->state != A_LIVE)
            continue;
        int wrong = a->cnt != truth_cnt || a->hash != truth_hash;
        badcnt += wrong;
        badmem += nd_members(a->d) != nlive;
        if ((wrong || nd_members(a->d) != nlive) && shown++ < 5) {
            const struct nd_stats *s = nd_stats(a->d);
            fprintf(stderr,
                    "  agent %u (node %08x inc %u): holds %" PRIu64 " (nd_pubs %zu) of %" PRIu64
                    ", members %zu of %u, digest %016" PRIx64 ", gaps %" PRIu64
                    ", malformed %" PRIu64 ", downs %" PRIu64 ", reincarnations %" PRIu64 "\n",
                    i, a->id, nd_incarnation(a->d), a->cnt, nd_pubs(a->d), truth_cnt,
                    nd_members(a->d), nlive, nd_digest(a->d), s->gaps, s->malformed,
                    s->downs_declared, s->reincarnations);
        }
    }
    fprintf(stderr, "  %u live agents with the wrong publications, %u with the wrong members\n",
            badcnt, badmem);
}

/* Runs until converged or `bound` after `from`; the time taken, or -1. */
static int64_t wait_converged(uint64_t from, uint64_t bound)
{
    for (uint64_t t = now;; t += CHECK_US) {
        run_until(t);
        if (converged())
            return (int64_t)(t - from);
        if (t >= from + bound)
            return -1;
    }
}

/* Every live agent's table, by the agent's own count too. */
static void check_tables(void)
{
    for (uint32_t i = 0; i < nag; i++)
        if (ag[i].state == A_LIVE && nd_pubs(ag[i].d) != truth_cnt)
            fail("agent %u: nd_pubs %zu, the callbacks say %" PRIu64, i, nd_pubs(ag[i].d),
                 ag[i].cnt);
}

/* ---- figures ---- */

struct phase {
    char name[32];
    int ok;
    double conv_ms;    /* time to converge, from the phase's reference point */
    double msgs, kb;   /* per live node over the phase */
    uint64_t max_msgs; /* sent by one node over the phase */
    char extra[512];
};
static struct phase phases[16];
static int nphases, failed;

static void mark(void)
{
    for (uint32_t i = 0; i < nag; i++)
        ag[i].mark = ag[i].msgs;
}

static uint64_t total_msgs(void)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < nag; i++)
        n += ag[i].msgs;
    return n;
}

static uint64_t total_bytes(void)
{
    uint64_t n = 0;
    for (uint32_t i = 0; i < nag; i++)
        n += ag[i].bytes;
    return n;
}

static uint64_t max_since_mark(void)
{
    uint64_t m = 0;
    for (uint32_t i = 0; i < nag; i++)
        if (ag[i].msgs - ag[i].mark > m)
            m = ag[i].msgs - ag[i].mark;
    return m;
}

static struct phase *phase_begin(const char *name)
{
    struct phase *p = &phases[nphases++];
    memset(p, 0, sizeof(*p));
    snprintf(p->name, sizeof(p->name), "%s", name);
    mark();
    return p;
}

static void phase_end(struct phase *p, int64_t conv, uint64_t msgs0, uint64_t bytes0)
{
    p->ok = conv >= 0;
    p->conv_ms = conv >= 0 ? (double)conv / 1000 : -1;
    p->msgs = (double)(total_msgs() - msgs0) / nlive;
    p->kb = (double)(total_bytes() - bytes0) / nlive / 1024;
    p->max_msgs = max_since_mark();
    if (p->ok)
        check_tables();
    printf("%-14s %s  converged %9.1f ms  msgs/node %9.1f  KB/node %9.1f  max msgs %7" PRIu64
           "  %s\n",
           p->name, p->ok ? "ok  " : "FAIL", p->conv_ms, p->msgs, p->kb, p->max_msgs, p->extra);
    fflush(stdout);
    if (!p->ok) {
        diagnose();
        failed = 1;
    }
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* p50, p99 and max of the propagation times of the tracked updates, in us. */
static void upd_percentiles(double *p50, double *p99, double *max, uint32_t *incomplete)
{
    uint64_t *v = xmalloc(nupds * sizeof(*v));
    uint32_t n = 0;
    *incomplete = 0;
    for (uint32_t i = 0; i < nupds; i++)
        if (upds[i].done)
            v[n++] = upds[i].done - upds[i].t0;
        else
            (*incomplete)++;
    qsort(v, n, sizeof(*v), cmp_u64);
    *p50 = n ? (double)v[n / 2] : -1;
    *p99 = n ? (double)v[(size_t)n * 99 / 100] : -1;
    *max = n ? (double)v[n - 1] : -1;
    free(v);
}

static uint32_t random_live(void)
{
    for (;;) {
        uint32_t i = rnd_below(nag);
        if (ag[i].state == A_LIVE)
            return i;
    }
}

/* ---- phases ---- */

struct config {
    uint32_t nodes, pubs, updates, kills, leaves, late, churn;
    uint64_t seed;
    uint64_t partition_us;
    const char *faults; /* an extra phase with these faults */
};

static void track_begin(uint32_t count, int sends)
{
    nupds = count;
    ids_reserve(next_id + (uint64_t)count * 2);
    upds = calloc(count, sizeof(*upds));
    upd_sends = sends ? calloc((size_t)count * nag, sizeof(*upd_sends)) : NULL;
    if (!upds || (sends && !upd_sends))
        fail("out of memory");
}

static void updates_done(void)
{
    free(upds);
    free(upd_sends);
    upds = NULL;
    upd_sends = NULL;
    nupds = 0;
    for (uint64_t i = 0; i < cap_ids; i++)
        upd_of_add[i] = upd_of_del[i] = -1;
}

static void phase_joins(const struct config *c)
{
    struct phase *p = phase_begin("a joins");
    uint64_t m0 = total_msgs(), b0 = total_bytes();
    /* Each join is tracked by its first publication, until every agent
     * started before it holds it. */
    track_begin(nag, 0);
    ids_reserve(next_id + (uint64_t)nag * c->pubs);
    for (uint32_t i = 0; i < nag; i++) {
        run_until(now + (i ? 2000 : 0));
        upds[i] = (struct upd){now, 0, i, 0, i};
        if (i && c->pubs)
            upd_of_add[next_id] = (int32_t)i;
        start(&ag[i], c->pubs, i ? &ag[rnd_below(i)] : NULL);
    }
    uint64_t last = now;
    int64_t conv = wait_converged(last, 60000000);
    double p50, p99, max;
    uint32_t incomplete;
    upds[0].done = upds[0].t0; /* the first has nobody to tell */
    upd_percentiles(&p50, &p99, &max, &incomplete);
    uint32_t slow = 0;
    for (uint32_t i = 0; i < nag; i++)
        slow += !upds[i].done || upds[i].done - upds[i].t0 > 10000;
    updates_done();
    snprintf(p->extra, sizeof(p->extra),
             "%u nodes joined 2 ms apart, %" PRIu64 " names; a join reached the earlier "
             "nodes in p50 %.0f us, p99 %.0f us, max %.0f us; %u joins took over 10 ms",
             nag, truth_cnt, p50, p99, max, slow);
    phase_end(p, conv, m0, b0);
}

/* Nodes joining a converged cluster one at a time, 100 ms apart, each
 * tracked until every live agent holds its first publication. The agents
 * past c->nodes were made for this. */
static void phase_late_joins(const struct config *c)
{
    struct phase *p = phase_begin("a2 late joins");
    uint64_t m0 = total_msgs(), b0 = total_bytes();
    track_begin(c->late, 0);
    ids_reserve(next_id + (uint64_t)c->late * c->pubs);
    for (uint32_t k = 0; k < c->late; k++) {
        if (k)
            run_until(now + 100000);
        struct agent *a = &ag[c->nodes + k];
        upds[k] = (struct upd){now, 0, nlive, 0, UINT32_MAX};
        if (c->pubs)
            upd_of_add[next_id] = (int32_t)k;
        start(a, c->pubs, &ag[random_live()]);
    }
    int64_t conv = wait_converged(now, 60000000);
    double p50, p99, max;
    uint32_t incomplete, slow = 0;
    upd_percentiles(&p50, &p99, &max, &incomplete);
    for (uint32_t k = 0; k < c->late; k++)
        slow += !upds[k].done || upds[k].done - upds[k].t0 > 10000;
    updates_done();
    snprintf(p->extra, sizeof(p->extra),
             "%u joins 100 ms apart: each reached every node in p50 %.0f us, p99 %.0f us, "
             "max %.0f us; %u took over 10 ms",
             c->late, p50, p99, max, slow);
    phase_end(p, conv, m0, b0);
}

/* Background traffic (probes, and nothing else when converged) per node per
 * second, over an idle window. */
static double idle_rate(uint64_t window)
{
    uint64_t m0 = total_msgs();
    run_until(now + window);
    return (double)(total_msgs() - m0) / nlive / ((double)window / 1e6);
}

/* `count` random publishes and withdrawals, 1 ms apart, each tracked until
 * every live agent has it. */
static void updates(uint32_t count)
{
    track_begin(count, 1);
    uint64_t first_new = next_id;
    for (uint32_t u = 0; u < count; u++) {
        if (u)
            run_until(now + 1000);
        struct agent *a = &ag[random_live()];
        upds[u].t0 = now;
        upds[u].need = nlive - 1;
        upds[u].below = UINT32_MAX;
        cur_cause = (int32_t)u;
        /* Withdraw only what was there before, so no update undoes one in flight. */
        uint32_t k = a->nown ? rnd_below(a->nown) : 0;
        if ((rnd() & 1) && a->nown && a->own[k].id < first_new) {
            upd_of_del[a->own[k].id] = (int32_t)u;
            withdraw(a, k);
        } else {
            ids_reserve(next_id);
            upd_of_add[next_id] = (int32_t)u;
            publish(a);
        }
        cur_cause = C_NONE;
    }
}

static uint16_t max_upd_sends(void)
{
    uint16_t m = 0;
    for (size_t i = 0; i < (size_t)nupds * nag; i++)
        if (upd_sends[i] > m)
            m = upd_sends[i];
    return m;
}

static void phase_updates(const struct config *c, const char *name, const char *faults)
{
    char err[128], spec[160];
    uint64_t window = (uint64_t)c->updates * 1000;
    double idle = idle_rate(window);
    if (faults) {
        snprintf(spec, sizeof(spec), "%s,seed=%" PRIu64, faults, c->seed);
        if (fm_fault_parse(&flt, spec, err, sizeof(err)))
            fail("%s", err);
        use_faults = 1;
    }
    struct phase *p = phase_begin(name);
    uint64_t m0 = total_msgs(), b0 = total_bytes(), t0 = now;
    uint64_t by0[3];
    memcpy(by0, msgs_by_cause, sizeof(by0));
    updates(c->updates);
    uint64_t last = now;
    int64_t conv = wait_converged(last, 60000000);
    use_faults = 0;
    double dur = (double)(now - t0) / 1e6;
    double p50, p99, max;
    uint32_t incomplete;
    upd_percentiles(&p50, &p99, &max, &incomplete);
    double upd_msgs = (double)(msgs_by_cause[2] - by0[2]);
    double all = (double)(total_msgs() - m0);
    double per = (double)c->updates * nlive;
    /* Beyond the tree (N-1 per update) and the idle probes: repairs. */
    double repair = all - idle * nlive * dur - (double)c->updates * (nlive - 1);
    snprintf(p->extra, sizeof(p->extra),
             "%u updates: msgs/update/node %.3f (update-caused %.3f, minus idle %.3f), "
             "max sends/node/update %u, idle %.1f msgs/node/s, repair msgs %.0f, "
             "propagation p50 %.0f us p99 %.0f us max %.0f us (%u incomplete)",
             c->updates, all / per, upd_msgs / per, (all - idle * nlive * dur) / per,
             max_upd_sends(), idle, repair > 0 ? repair : 0, p50, p99, max, incomplete);
    updates_done();
    phase_end(p, conv, m0, b0);
}

static void phase_kill(const struct config *c)
{
    struct phase *p = phase_begin("c failures");
    uint64_t m0 = total_msgs(), b0 = total_bytes(), lost0 = lost_removals, expect = 0;
    nvictims = 0;
    for (uint32_t k = 0; k < c->kills && k < VICTIMS_MAX; k++) {
        struct agent *a = &ag[random_live()];
        expect += a->nown;
        victims[nvictims++] = (struct victim){a->id, a->nown, 0, 0};
        kill_agent(a);
    }
    expect *= nlive;
    for (uint32_t k = 0; k < nvictims; k++)
        victims[k].due *= nlive;
    uint64_t t0 = now;
    int64_t conv = wait_converged(t0, 60000000);
    /* When each was purged everywhere: detection comes in waves if it does. */
    uint64_t first = UINT64_MAX, last = 0;
    for (uint32_t k = 0; k < nvictims; k++) {
        uint64_t t = victims[k].done ? victims[k].done - t0 : UINT64_MAX;
        first = t < first ? t : first;
        last = t > last ? t : last;
        if (getenv("NAMES_SIM_VERBOSE"))
            printf("  victim %08x: first purge %.3f s, purged everywhere %.3f s\n", victims[k].id,
                   (double)(victims[k].first - t0) / 1e6, (double)t / 1e6);
    }
    nvictims = 0;
    snprintf(p->extra, sizeof(p->extra),
             "%u killed silently; %" PRIu64 " of %" PRIu64 " expected removals had lost=1; "
             "each purged everywhere after %.2f to %.2f s (down_us %.1f s)",
             c->kills, lost_removals - lost0, expect, (double)first / 1e6, (double)last / 1e6,
             prm.down_us / 1e6);
    phase_end(p, conv, m0, b0);
}

/* One node dies silently while others keep joining, 100 ms apart: every
 * join changes every view, which must not keep restarting the watch on the
 * dead one. */
static void phase_churn_kill(const struct config *c)
{
    struct phase *p = phase_begin("c2 churn+fail");
    uint64_t m0 = total_msgs(), b0 = total_bytes(), t0 = now;
    struct agent *v = &ag[random_live()];
    nvictims = 1;
    victims[0] = (struct victim){v->id, v->nown, 0, 0};
    kill_agent(v);
    victims[0].due *= nlive;
    for (uint32_t k = 0; k < c->churn; k++) {
        if (k)
            run_until(now + 100000);
        start(&ag[c->nodes + c->late + k], c->pubs, &ag[random_live()]);
    }
    uint64_t joins_end = now;
    int64_t conv = wait_converged(t0, 60000000);
    double purged = victims[0].done ? (double)(victims[0].done - t0) / 1e6 : -1;
    nvictims = 0;
    snprintf(p->extra, sizeof(p->extra),
             "1 killed silently while %u nodes joined 100 ms apart (for %.1f s): purged "
             "everywhere after %.2f s",
             c->churn, (double)(joins_end - t0) / 1e6, purged);
    phase_end(p, conv, m0, b0);
}

static void phase_leave(const struct config *c)
{
    struct phase *p = phase_begin("d leaves");
    uint64_t m0 = total_msgs(), b0 = total_bytes(), lost0 = lost_removals;
    for (uint32_t k = 0; k < c->leaves; k++) {
        struct agent *a = &ag[random_live()];
        cur_cause = C_NONE;
        nd_leave(a->d);
        kill_agent(a);
    }
    uint64_t t0 = now;
    int64_t conv = wait_converged(t0, 60000000);
    snprintf(p->extra, sizeof(p->extra), "%u left with nd_leave; %" PRIu64 " removals", c->leaves,
             lost_removals - lost0);
    phase_end(p, conv, m0, b0);
}

static void phase_partition(const struct config *c)
{
    struct phase *p = phase_begin("f partition");
    uint32_t side_n[2] = {0, 0};
    for (uint32_t i = 0; i < nag; i++)
        if (ag[i].state == A_LIVE) {
            ag[i].side = (int)(rnd() & 1);
            side_n[ag[i].side]++;
        }
    uint64_t down0 = 0, inc0 = 0;
    for (uint32_t i = 0; i < nag; i++)
        if (ag[i].state == A_LIVE) {
            down0 += nd_stats(ag[i].d)->downs_declared;
            inc0 += nd_stats(ag[i].d)->reincarnations;
        }
    partitioned = 1;
    run_until(now + c->partition_us);
    uint32_t split = 0;
    for (uint32_t i = 0; i < nag; i++)
        if (ag[i].state == A_LIVE)
            split += nd_members(ag[i].d) == side_n[ag[i].side];
    partitioned = 0;
    mark();
    uint64_t m0 = total_msgs(), b0 = total_bytes(), t0 = now;
    int64_t conv = wait_converged(t0, 60000000);
    uint64_t downs = 0, incs = 0;
    for (uint32_t i = 0; i < nag; i++)
        if (ag[i].state == A_LIVE) {
            downs += nd_stats(ag[i].d)->downs_declared;
            incs += nd_stats(ag[i].d)->reincarnations;
        }
    snprintf(p->extra, sizeof(p->extra),
             "halves of %u and %u for %.1f s: %u of %u agents saw only their half; "
             "%" PRIu64 " downs declared, %" PRIu64 " reincarnations; figures are for the heal",
             side_n[0], side_n[1], (double)c->partition_us / 1e6, split, nlive, downs - down0,
             incs - inc0);
    phase_end(p, conv, m0, b0);
}

static size_t mem_median, mem_max, end_median, end_max;
static uint64_t mem_pubs;

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

static void measure_memory(size_t *median, size_t *max)
{
    size_t *v = xmalloc(nag * sizeof(*v));
    uint32_t n = 0;
    for (uint32_t i = 0; i < nag; i++)
        if (ag[i].state == A_LIVE)
            v[n++] = nd_memory(ag[i].d);
    qsort(v, n, sizeof(*v), cmp_size);
    *median = v[n / 2];
    *max = v[n - 1];
    free(v);
}

static void phase_memory(void)
{
    struct phase *p = phase_begin("g memory");
    p->ok = 1;
    p->conv_ms = 0;
    measure_memory(&end_median, &end_max);
    snprintf(p->extra, sizeof(p->extra),
             "after the joins, %" PRIu64 " names: nd_memory median %.1f MB, max %.1f MB, "
             "%.0f bytes per publication held; at the end: median %.1f MB, max %.1f MB",
             mem_pubs, mem_median / 1048576.0, mem_max / 1048576.0,
             (double)mem_median / (double)mem_pubs, end_median / 1048576.0, end_max / 1048576.0);
    printf("%-14s ok    %s\n", p->name, p->extra);
}

static void print_markdown(const struct config *c)
{
    printf("\n| Phase | Converged after (ms) | Msgs/node | KB/node | Max msgs, one node | "
           "Figures |\n|---|---:|---:|---:|---:|---|\n");
    for (int i = 0; i < nphases; i++) {
        struct phase *p = &phases[i];
        if (!strcmp(p->name, "g memory")) {
            printf("| %s | | | | | %s |\n", p->name, p->extra);
            continue;
        }
        char conv[32];
        if (p->ok)
            snprintf(conv, sizeof(conv), "%.1f", p->conv_ms);
        else
            snprintf(conv, sizeof(conv), "**no**");
        printf("| %s | %s | %.1f | %.1f | %" PRIu64 " | %s |\n", p->name, conv, p->msgs, p->kb,
               p->max_msgs, p->extra);
    }
    printf("\nN=%u, P=%u, seed %" PRIu64 "; probe %u ms, down %u ms, rejoin %u ms, fanout %u; "
           "latency %u-%u us, ticks every %u ms.\n",
           c->nodes, c->pubs, c->seed, prm.probe_us / 1000, prm.down_us / 1000,
           prm.rejoin_us / 1000, prm.fanout, LAT_US, LAT_US + LAT_JITTER_US, TICK_US / 1000);
}

/* Node ids: random and distinct, so the sorted view is not the index order.
 * 0 and UINT32_MAX are left out (0 is the contact's placeholder). */
static void make_agents(uint32_t n)
{
    nag = n;
    ag = calloc(n, sizeof(*ag));
    if (!ag)
        fail("out of memory");
    for (uint32_t i = 0; i < n; i++) {
        ag[i].idx = i;
        for (;;) {
            uint32_t id = (uint32_t)rnd();
            int taken = id == 0 || id == UINT32_MAX;
            for (uint32_t j = 0; j < i && !taken; j++)
                taken = ag[j].id == id;
            if (!taken) {
                ag[i].id = id;
                break;
            }
        }
    }
}

static void free_all(void)
{
    while (nheap)
        free(pop().msg);
    free(heap);
    for (uint32_t i = 0; i < nag; i++) {
        nd_free(ag[i].d);
        free(ag[i].own);
    }
    free(ag);
    free(upd_of_add);
    free(upd_of_del);
}

/* The seeds of tests/fuzz/fuzz_names.c: messages to agent 0 of a small run
 * whose node ids, cards and publication ids are the fuzz target's: joins,
 * peers reported lost (DOWN items), lossy updates (pulls), a failure unseen
 * by agent 0 (tombs), a partition and its heal (reincarnations, vectors). */
static int dump_corpus(void)
{
    static const uint32_t ids[] = {0x0a000203, 0x0a000001, 0x0a000102, 0x0a000304, 0x0a000405};
    char err[128];
    nag = 5;
    ag = calloc(nag, sizeof(*ag));
    if (!ag)
        fail("out of memory");
    for (uint32_t i = 0; i < nag; i++)
        ag[i].idx = i, ag[i].id = ids[i];
    for (uint32_t i = 0; i < nag; i++) {
        run_until(now + 2000);
        start(&ag[i], 3, i == 0 ? NULL : i < 3 ? &ag[0] : &ag[1]);
    }
    run_until(now + 1000000);
    dump_stage();
    /* Transports that give up on a peer: DOWN items, one of them about
     * agent 0 itself (it comes back with a new incarnation). */
    nd_peer_lost(ag[3].d, ag[4].id, now);
    nd_flush(ag[3].d);
    nd_peer_lost(ag[1].d, ag[0].id, now);
    nd_flush(ag[1].d);
    run_until(now + 1000000);
    dump_stage();
    if (fm_fault_parse(&flt, "drop=0.3,seed=7", err, sizeof(err)))
        fail("%s", err);
    use_faults = 1;
    for (uint32_t u = 0; u < 20; u++) {
        run_until(now + 1000);
        struct agent *a = &ag[u % 4];
        if ((u / 4) & 1 && a->nown)
            withdraw(a, 0);
        else
            publish(a);
    }
    use_faults = 0;
    run_until(now + 2000000);
    dump_stage();
    /* Agent 4 dies while agent 0 is cut off: after the heal, agent 0 may
     * still hold it live and be told it is down (a tomb); a join's answer
     * carries the tombs too. */
    ag[0].side = 0;
    ag[1].side = ag[2].side = ag[3].side = 1;
    partitioned = 1;
    kill_agent(&ag[4]);
    run_until(now + 3000000);
    partitioned = 0;
    run_until(now + 5000000);
    nd_contact(ag[0].d, &ag[1].idx, 4, now);
    nd_flush(ag[0].d);
    run_until(now + 1000000);
    dump_stage();
    ag[0].side = ag[1].side = 0;
    ag[2].side = ag[3].side = 1;
    partitioned = 1;
    run_until(now + 3000000);
    partitioned = 0;
    run_until(now + 5000000);
    dump_stage();
    printf("wrote %d messages and %d sequences to %s\n", ndump, nseqs, dump_dir);
    free_all();
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: names_sim [--nodes N] [--pubs P] [--seed S] [--quick] "
                    "[--partition SECONDS] [--faults SPEC] | --dump-corpus DIR\n");
    exit(2);
}

int main(int argc, char **argv)
{
    struct config c = {.nodes = 1000,
                       .pubs = 100,
                       .updates = 1000,
                       .kills = 10,
                       .leaves = 5,
                       .late = 32,
                       .churn = 40,
                       .seed = 1,
                       .partition_us = 5000000};
    int quick = 0, nodes_set = 0, pubs_set = 0;
    double partition_s = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--nodes") && v)
            c.nodes = (uint32_t)strtoul(v, NULL, 0), nodes_set = 1, i++;
        else if (!strcmp(argv[i], "--pubs") && v)
            c.pubs = (uint32_t)strtoul(v, NULL, 0), pubs_set = 1, i++;
        else if (!strcmp(argv[i], "--seed") && v)
            c.seed = strtoull(v, NULL, 0), i++;
        else if (!strcmp(argv[i], "--faults") && v)
            c.faults = v, i++;
        else if (!strcmp(argv[i], "--partition") && v)
            partition_s = strtod(v, NULL), i++;
        else if (!strcmp(argv[i], "--dump-corpus") && v)
            dump_dir = v, i++;
        else
            usage();
    }
    rng_state = c.seed;
    nd_params_default(&prm);
    /* A thousand tables grow and shrink in one heap: keep freed memory
     * rather than giving it back and faulting it in again. */
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
    mallopt(M_TOP_PAD, 16 << 20);
    if (dump_dir)
        return dump_corpus();
    if (quick) {
        if (!nodes_set)
            c.nodes = 64;
        if (!pubs_set)
            c.pubs = 20;
        c.updates = 200, c.kills = 3, c.leaves = 2, c.late = 8, c.churn = 20;
        c.partition_us = 3000000;
    }
    if (partition_s > 0)
        c.partition_us = (uint64_t)(partition_s * 1e6);
    if (c.nodes < 8)
        usage();
    if (c.kills + c.leaves + 2 > c.nodes / 2)
        c.kills = c.leaves = 1;
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    make_agents(c.nodes + c.late + c.churn);
    nag = c.nodes; /* the late joiners come in later */
    phase_joins(&c);
    measure_memory(&mem_median, &mem_max);
    mem_pubs = truth_cnt;
    nag = c.nodes + c.late + c.churn;
    phase_late_joins(&c);
    phase_updates(&c, "b updates", NULL);
    phase_kill(&c);
    phase_churn_kill(&c);
    phase_leave(&c);
    phase_updates(&c, "e loss 1%", "drop=0.01");
    phase_partition(&c);
    if (c.faults) {
        char name[32];
        snprintf(name, sizeof(name), "h %.20s", c.faults);
        phase_updates(&c, name, c.faults);
    }
    phase_memory();
    clock_gettime(CLOCK_MONOTONIC, &w1);
    print_markdown(&c);
    printf("Simulated %.1f s in %.1f s of wall time; %" PRIu64 " messages in all.\n",
           (double)(now - T0_US) / 1e6,
           (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) / 1e9, total_msgs());
    if (bad_cards || misrouted)
        printf("%" PRIu64 " messages to bad cards, %" PRIu64 " to a node other than the "
               "card's\n",
               bad_cards, misrouted);
    free_all();
    return failed;
}
