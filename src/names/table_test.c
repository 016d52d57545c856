/* The name table replica in one process: the writer's bookkeeping, lookups
 * against a brute-force scan through random changes and commits, and a
 * reader racing a writer that must only ever see committed snapshots. */
#include "core/util.h"
#include "names/table.h"
#include "testing/fmtest.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define MATCH_MAX 256 /* room for every match of one lookup in these tests */

static uint64_t rng = 0x243F6A8885A308D3ull;

static uint64_t rnd(void) { return fmt_rand(&rng); }

static uint32_t below(uint32_t n) { return (uint32_t)(rnd() % n); }

static struct nt_entry make(uint32_t type, uint32_t lower, uint32_t upper, uint32_t node,
                            uint64_t id)
{
    struct nt_entry e = {.type = type, .lower = lower, .upper = upper, .node = node, .id = id,
                         .scope = FM_SCOPE_CLUSTER, .namelen = NT_NAME_MAX};
    for (size_t i = 0; i < NT_NAME_MAX; i++)
        e.name[i] = fmt_pattern(id * 31 + node, i);
    return e;
}

static struct nt_shm *new_shm(uint32_t cap)
{
    struct nt_shm *shm = calloc(1, nt_shm_size(cap));
    CHECK(shm);
    return shm;
}

static int cmp_u64(uint64_t a, uint64_t b) { return (a > b) - (a < b); }

static int cmp_key(const struct nt_entry *a, const struct nt_entry *b)
{
    int c = cmp_u64(a->type, b->type);
    if (!c)
        c = cmp_u64(a->lower, b->lower);
    if (!c)
        c = cmp_u64(a->upper, b->upper);
    if (!c)
        c = cmp_u64(a->node, b->node);
    return c ? c : cmp_u64(a->id, b->id);
}

static int cmp_entry(const void *a, const void *b) { return cmp_key(a, b); }

/* Equal in everything but maxupper, which only the commit sets. */
static int same(const struct nt_entry *a, const struct nt_entry *b)
{
    struct nt_entry x = *a, y = *b;
    x.maxupper = y.maxupper = 0;
    return memcmp(&x, &y, sizeof(x)) == 0;
}

static void test_writer(void)
{
    enum { CAP = 8 };
    struct nt_shm *shm = new_shm(CAP);
    struct nt_writer *w = nt_writer_new(shm, CAP, 5);
    CHECK(w);
    CHECK_EQ(shm->magic, NT_MAGIC);
    CHECK_EQ(shm->version, NT_VERSION);
    CHECK_EQ(shm->cap, CAP);
    CHECK_EQ(shm->node, 5);
    CHECK_EQ(shm->seq, 0);

    struct nt_entry e = make(1, 10, 20, 5, 100), out;
    CHECK_EQ(nt_add(w, &e), 0);
    CHECK_EQ(nt_add(w, &e), -EEXIST);
    struct nt_entry other = make(2, 0, 0, 5, 100);
    CHECK_EQ(nt_add(w, &other), -EEXIST); /* the key is (node, id), not the range */
    other.node = 6;
    CHECK_EQ(nt_add(w, &other), 0);
    CHECK(same(nt_find(w, 5, 100), &e));
    CHECK(same(nt_find(w, 6, 100), &other));
    CHECK(!nt_find(w, 7, 100));
    CHECK(!nt_find(w, 5, 101));
    CHECK_EQ(nt_remove(w, 7, 100, NULL), -ENOENT);
    CHECK_EQ(nt_remove(w, 5, 101, &out), -ENOENT);
    struct nt_entry bad = make(1, 21, 20, 5, 1);
    CHECK_EQ(nt_add(w, &bad), -EINVAL);

    for (uint64_t id = 1; nt_count(w) < CAP; id++) {
        struct nt_entry f = make(3, (uint32_t)id, (uint32_t)id, 5, id);
        CHECK_EQ(nt_add(w, &f), 0);
    }
    struct nt_entry more = make(3, 0, 0, 9, 9);
    CHECK_EQ(nt_add(w, &more), -ENOSPC);
    CHECK_EQ(nt_add(w, &e), -EEXIST);
    CHECK_EQ(nt_count(w), CAP);

    CHECK_EQ(nt_remove(w, 5, 100, &out), 0);
    CHECK(same(&out, &e));
    CHECK(!nt_find(w, 5, 100));
    CHECK_EQ(nt_remove(w, 5, 100, NULL), -ENOENT);
    CHECK(same(nt_find(w, 6, 100), &other)); /* moved into the hole, still found */
    CHECK_EQ(nt_add(w, &more), 0);
    CHECK_EQ(nt_count(w), CAP);
    nt_writer_free(w);
    free(shm);
}

static void test_visibility(void)
{
    enum { CAP = 16 };
    struct nt_shm *shm = new_shm(CAP);
    struct nt_writer *w = nt_writer_new(shm, CAP, 1);
    struct nt_entry out[4];
    CHECK_EQ(nt_lookup(shm, 3, 150, 0, 0, out, 4), 0);

    struct nt_entry a = make(3, 100, 200, 1, 1), b = make(3, 150, 150, 2, 1);
    CHECK_EQ(nt_add(w, &a), 0);
    CHECK_EQ(nt_lookup(shm, 3, 150, 0, 0, out, 4), 0);
    CHECK_EQ(nt_lookup_range(shm, 3, 0, 1000, out, 4), 0);
    nt_commit(w);
    CHECK_EQ(shm->commits, 1);
    CHECK_EQ(nt_lookup(shm, 3, 150, 0, 0, out, 4), 1);
    CHECK(same(&out[0], &a));
    CHECK_EQ(out[0].maxupper, 200);

    uint32_t seq = shm->seq;
    nt_commit(w); /* nothing changed: nothing to publish */
    CHECK_EQ(shm->commits, 1);
    CHECK_EQ(shm->seq, seq);

    CHECK_EQ(nt_add(w, &b), 0);
    CHECK_EQ(nt_remove(w, 1, 1, NULL), 0);
    CHECK_EQ(nt_lookup(shm, 3, 150, 0, 0, out, 4), 1);
    CHECK(same(&out[0], &a));
    nt_commit(w);
    CHECK_EQ(shm->commits, 2);
    CHECK_EQ(nt_lookup(shm, 3, 150, 0, 0, out, 4), 1);
    CHECK(same(&out[0], &b));
    CHECK_EQ(nt_lookup(shm, 3, 120, 0, 0, out, 4), 0);

    /* A count past the area (a corrupt replica) is clamped, not followed. */
    shm->n[shm->active] = 10 * CAP;
    nt_lookup(shm, 0, 0, 0, 0, out, 4);
    nt_lookup_range(shm, 0, 0, UINT32_MAX, out, 4);
    nt_writer_free(w);
    free(shm);
}

static void test_maxupper_and_filters(void)
{
    enum { CAP = 64 };
    struct nt_shm *shm = new_shm(CAP);
    struct nt_writer *w = nt_writer_new(shm, CAP, 1);
    struct nt_entry e[] = {make(1, 0, 100, 1, 1), make(1, 10, 20, 1, 2), make(1, 30, 40, 1, 3),
                           make(1, 50, 60, 1, 4), make(2, 0, 5, 1, 5),   make(0, 7, 7, 1, 6)};
    for (size_t i = 0; i < FM_ARRAY_LEN(e); i++)
        CHECK_EQ(nt_add(w, &e[i]), 0);
    nt_commit(w);
    const struct nt_entry *area = shm->area + (size_t)shm->active * CAP;
    CHECK_EQ(shm->n[shm->active], 6);
    static const uint32_t want[][3] = {{0, 7, 7},    {1, 0, 100},  {1, 10, 100},
                                       {1, 30, 100}, {1, 50, 100}, {2, 0, 5}};
    for (size_t i = 0; i < FM_ARRAY_LEN(want); i++) {
        CHECK_EQ(area[i].type, want[i][0]);
        CHECK_EQ(area[i].lower, want[i][1]);
        CHECK_EQ(area[i].maxupper, want[i][2]);
    }
    struct nt_entry out[MATCH_MAX];
    CHECK_EQ(nt_lookup(shm, 1, 55, 0, 0, out, MATCH_MAX), 2);
    CHECK_EQ(out[0].id, 1);
    CHECK_EQ(out[1].id, 4);
    CHECK_EQ(nt_lookup(shm, 1, 25, 0, 0, out, MATCH_MAX), 1);
    CHECK_EQ(nt_lookup(shm, 1, 101, 0, 0, out, MATCH_MAX), 0);
    CHECK_EQ(nt_lookup(shm, 2, 6, 0, 0, out, MATCH_MAX), 0);
    CHECK_EQ(nt_lookup(shm, 3, 6, 0, 0, out, MATCH_MAX), 0);

    /* Ten publishers of instance 5 of type 7, on nodes 1 and 2 in turn. */
    for (uint32_t i = 0; i < 10; i++) {
        struct nt_entry p = make(7, i, 5 + i, 1 + i % 2, 100 + i);
        CHECK_EQ(nt_add(w, &p), 0);
    }
    nt_commit(w);
    CHECK_EQ(nt_lookup(shm, 7, 5, 0, 0, out, MATCH_MAX), 6);
    CHECK_EQ(nt_lookup(shm, 7, 5, 1, 2, out, MATCH_MAX), 3);
    for (size_t i = 0; i < 3; i++)
        CHECK_EQ(out[i].node, 2);
    CHECK_EQ(nt_lookup(shm, 7, 5, 1, 3, out, MATCH_MAX), 0);
    CHECK_EQ(nt_lookup(shm, 7, 5, 0, 0, out, 2), 2);
    CHECK(cmp_key(&out[0], &out[1]) < 0);
    CHECK_EQ(nt_lookup(shm, 7, 5, 0, 0, NULL, 0), 0);
    /* The range lookup fills what fits and counts everything. */
    CHECK_EQ(nt_lookup_range(shm, 7, 0, UINT32_MAX, out, 3), 10);
    for (size_t i = 0; i < 3; i++)
        CHECK_EQ(out[i].id, 100 + i);
    CHECK_EQ(nt_lookup_range(shm, 7, 12, 20, NULL, 0), 3);
    CHECK_EQ(nt_lookup_range(shm, 7, 15, 15, out, 3), 0);
    nt_writer_free(w);
    free(shm);
}

/* ---- Random changes against a reference copy ---- */

enum { RCAP = 3000 };

struct ref {
    struct nt_entry e[RCAP];
    uint32_t n;
};

static struct ref cur, snap; /* the writer's table; the last commit, sorted */
static struct nt_entry brute[RCAP], got[RCAP];

static const uint32_t types[] = {0, 1, 2, 9, UINT32_MAX};

static struct nt_entry random_entry(void)
{
    uint32_t type = types[below(FM_ARRAY_LEN(types))], lower = below(2000), upper;
    uint32_t shape = below(100);
    if (shape < 80) {
        upper = lower + below(50);
    } else if (shape < 95) {
        upper = lower + below(2000);
    } else {
        lower = below(2) ? 0 : lower;
        upper = UINT32_MAX - below(2);
    }
    return make(type, lower, upper, 1 + below(3), below(5000));
}

static int ref_find(uint32_t node, uint64_t id)
{
    for (uint32_t i = 0; i < cur.n; i++)
        if (cur.e[i].node == node && cur.e[i].id == id)
            return (int)i;
    return -1;
}

static void take_snapshot(void)
{
    snap = cur;
    qsort(snap.e, snap.n, sizeof(snap.e[0]), cmp_entry);
    for (uint32_t i = 0; i < snap.n; i++) {
        struct nt_entry *e = &snap.e[i];
        e->maxupper = e->upper;
        if (i > 0 && e[-1].type == e->type && e[-1].maxupper > e->upper)
            e->maxupper = e[-1].maxupper;
    }
}

static uint32_t random_instance(void)
{
    uint32_t r = below(100);
    return r == 0 ? 0 : r == 1 ? UINT32_MAX : below(4100);
}

static void check_lookup(const struct nt_shm *shm)
{
    uint32_t type = types[below(FM_ARRAY_LEN(types))], inst = random_instance();
    int only = below(3) == 0;
    uint32_t node = 1 + below(3);
    size_t total = 0;
    for (uint32_t i = 0; i < snap.n; i++) {
        const struct nt_entry *e = &snap.e[i];
        if (e->type == type && e->lower <= inst && inst <= e->upper && (!only || e->node == node))
            brute[total++] = *e;
    }
    size_t max = below(4) ? MATCH_MAX : below(4);
    size_t n = nt_lookup(shm, type, inst, only, node, got, max);
    CHECK_EQ(n, FM_MIN(total, max));
    /* Ascending, and a subsequence of the matches (all of them if they fit). */
    size_t j = 0;
    for (size_t i = 0; i < n; i++, j++) {
        while (j < total && cmp_key(&brute[j], &got[i]) < 0)
            j++;
        CHECK(j < total);
        CHECK(memcmp(&brute[j], &got[i], sizeof(got[i])) == 0);
    }
}

static void check_range(const struct nt_shm *shm)
{
    uint32_t type = types[below(FM_ARRAY_LEN(types))], lower = random_instance(), upper;
    upper = lower == UINT32_MAX ? lower : lower + below(FM_MIN(300u, UINT32_MAX - lower));
    if (below(20) == 0) {
        lower = 0;
        upper = UINT32_MAX;
    }
    size_t total = 0;
    for (uint32_t i = 0; i < snap.n; i++) {
        const struct nt_entry *e = &snap.e[i];
        if (e->type == type && e->lower <= upper && e->upper >= lower)
            brute[total++] = *e;
    }
    size_t max = below(4) ? RCAP : below(8);
    CHECK_EQ(nt_lookup_range(shm, type, lower, upper, got, max), total);
    CHECK(memcmp(brute, got, FM_MIN(total, max) * sizeof(got[0])) == 0);
}

static void check_queries(const struct nt_shm *shm)
{
    for (int q = 0; q < 40; q++)
        check_lookup(shm);
    for (int q = 0; q < 15; q++)
        check_range(shm);
}

static void collect(void *arg, const struct nt_entry *e)
{
    struct ref *r = arg;
    CHECK(r->n < RCAP);
    r->e[r->n++] = *e;
}

static void check_writer(const struct nt_writer *w)
{
    CHECK_EQ(nt_count(w), cur.n);
    for (uint32_t i = 0; i < cur.n; i++)
        CHECK(same(nt_find(w, cur.e[i].node, cur.e[i].id), &cur.e[i]));
    static struct ref seen, want;
    seen.n = 0;
    nt_each(w, collect, &seen);
    want = cur;
    qsort(seen.e, seen.n, sizeof(seen.e[0]), cmp_entry);
    qsort(want.e, want.n, sizeof(want.e[0]), cmp_entry);
    CHECK_EQ(seen.n, want.n);
    CHECK(memcmp(seen.e, want.e, want.n * sizeof(want.e[0])) == 0);
}

static void test_random(void)
{
    struct nt_shm *shm = new_shm(RCAP);
    struct nt_writer *w = nt_writer_new(shm, RCAP, 1);
    cur.n = snap.n = 0;
    int full = 0;
    for (int round = 0; round < 400; round++) {
        /* Phases of growth (up to the cap) and of shrinking. */
        uint32_t add_pct = (round / 70) % 2 ? 30 : 75;
        for (uint32_t ops = below(200); ops > 0; ops--) {
            if (below(100) < add_pct) {
                struct nt_entry e = random_entry();
                int want = ref_find(e.node, e.id) >= 0 ? -EEXIST : cur.n == RCAP ? -ENOSPC : 0;
                CHECK_EQ(nt_add(w, &e), want);
                if (want == 0)
                    cur.e[cur.n++] = e;
                full += want == -ENOSPC;
            } else if (cur.n && below(10)) {
                uint32_t i = below(cur.n);
                struct nt_entry out;
                CHECK_EQ(nt_remove(w, cur.e[i].node, cur.e[i].id, &out), 0);
                CHECK(same(&out, &cur.e[i]));
                cur.e[i] = cur.e[--cur.n];
            } else {
                uint32_t node = 1 + below(3);
                uint64_t id = below(5000);
                int i = ref_find(node, id);
                CHECK_EQ(nt_remove(w, node, id, NULL), i < 0 ? -ENOENT : 0);
                if (i >= 0)
                    cur.e[i] = cur.e[--cur.n];
            }
        }
        check_queries(shm); /* the changes are not visible yet */
        if (below(10)) {
            nt_commit(w);
            take_snapshot();
            check_queries(shm);
        }
        if (round % 10 == 0)
            check_writer(w);
    }
    CHECK(full > 0);
    nt_writer_free(w);
    free(shm);
}

/* ---- A reader racing the writer ---- */

/* Entries come in pairs (ids 2k and 2k+1, the same range), added and removed
 * between the same two commits: a snapshot holds both or neither. */
enum { PAIRS = 200, TCAP = 2 * PAIRS };

static struct nt_entry pair_entry(uint64_t id)
{
    uint64_t h = (id / 2 + 1) * 0x9E3779B97F4A7C15ull;
    uint32_t lower = (uint32_t)(h >> 20) % 1000;
    return make((uint32_t)(h >> 60) % 3, lower, lower + (uint32_t)(h >> 8) % 64, 1, id);
}

static void check_pairs(const struct nt_entry *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct nt_entry want = pair_entry(out[i].id);
        CHECK(same(&out[i], &want));
        CHECK(out[i].maxupper >= out[i].upper);
        CHECK(i == 0 || cmp_key(&out[i - 1], &out[i]) < 0);
        CHECK(out[i].id % 2 == i % 2);
        CHECK(i % 2 == 0 || out[i].id == out[i - 1].id + 1);
    }
    CHECK(n % 2 == 0);
}

struct race {
    const struct nt_shm *shm;
    int stop;
    uint64_t lookups, hits;
};

static void *reader(void *arg)
{
    struct race *r = arg;
    uint64_t x = 7;
    struct nt_entry out[MATCH_MAX];
    while (!__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE)) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        uint32_t type = (uint32_t)(x >> 62) % 3, inst = (uint32_t)(x >> 32) % 1100;
        size_t n = nt_lookup(r->shm, type, inst, 0, 0, out, MATCH_MAX);
        CHECK(n < MATCH_MAX);
        for (size_t i = 0; i < n; i++)
            CHECK(out[i].type == type && out[i].lower <= inst && inst <= out[i].upper);
        check_pairs(out, n);
        size_t total = nt_lookup_range(r->shm, type, inst, inst + 20, out, MATCH_MAX);
        CHECK(total < MATCH_MAX);
        for (size_t i = 0; i < total; i++)
            CHECK(out[i].type == type && out[i].lower <= inst + 20 && out[i].upper >= inst);
        check_pairs(out, total);
        r->lookups++;
        r->hits += n > 0;
    }
    return NULL;
}

static void test_race(void)
{
    struct nt_shm *shm = new_shm(TCAP);
    struct nt_writer *w = nt_writer_new(shm, TCAP, 1);
    struct race r = {.shm = shm};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, reader, &r), 0);
    uint8_t present[PAIRS] = {0};
    uint64_t end = fm_now_ns() + 300000000;
    while (fm_now_ns() < end) {
        for (uint32_t changes = 1 + below(4); changes > 0; changes--) {
            uint32_t k = below(PAIRS);
            for (uint64_t id = 2 * k; id < 2 * k + 2; id++) {
                struct nt_entry e = pair_entry(id);
                CHECK_EQ(present[k] ? nt_remove(w, 1, id, NULL) : nt_add(w, &e), 0);
            }
            present[k] ^= 1;
        }
        nt_commit(w);
    }
    __atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
    CHECK_EQ(pthread_join(t, NULL), 0);
    CHECK(shm->commits > 100);
    CHECK(r.lookups > 100 && r.hits > 0);
    nt_writer_free(w);
    free(shm);
}

int main(void)
{
    fmt_watchdog(120);
    test_writer();
    test_visibility();
    test_maxupper_and_filters();
    test_random();
    test_race();
    return 0;
}
