/* The node's replica of the name table: the agent's private copy with its
 * (node, id) index, the commit into shared memory, and the lock-free lookups. */
#include "table.h"

#include "core/util.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* Shared entries move a word at a time with relaxed atomics: a reader may
 * read an area while the agent rewrites it (it then retries), which in C11
 * terms is only defined for atomic accesses. */
typedef uint64_t __attribute__((may_alias)) nt_word;
#define ENTRY_WORDS (sizeof(struct nt_entry) / sizeof(nt_word))
_Static_assert(sizeof(struct nt_entry) % sizeof(nt_word) == 0, "entries are whole words");

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

struct nt_writer {
    struct nt_shm *shm;
    uint32_t cap;
    uint32_t n, alloc;             /* entries in e, room in e and order */
    struct nt_entry *e;            /* the table, in no order */
    uint32_t *order;               /* positions in e, sorted: kept so at each change */
    uint32_t *index;               /* open addressing on (node, id): position + 1, 0 free */
    uint32_t mask;                 /* index slots - 1 */
    bool dirty;
};

size_t nt_shm_size(uint32_t cap)
{
    return sizeof(struct nt_shm) + 2 * (size_t)cap * (sizeof(struct nt_entry) + sizeof(uint64_t));
}

/* Area a's search keys. */
static uint64_t *keys_of(const struct nt_shm *shm, uint32_t cap, uint32_t a)
{
    return (uint64_t *)(shm->area + 2 * (size_t)cap) + (size_t)a * cap;
}

static uint64_t key_of(uint32_t type, uint32_t lower) { return (uint64_t)type << 32 | lower; }

static uint32_t home(const struct nt_writer *w, uint32_t node, uint64_t id)
{
    uint64_t h = (id ^ (uint64_t)node << 32 ^ node) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return (uint32_t)(h >> 32) & w->mask;
}

/* The index slot of (node, id), or the free slot where it would go. */
static uint32_t probe(const struct nt_writer *w, uint32_t node, uint64_t id)
{
    uint32_t s = home(w, node, id);
    for (;;) {
        uint32_t p = w->index[s];
        if (!p || (w->e[p - 1].node == node && w->e[p - 1].id == id))
            return s;
        s = (s + 1) & w->mask;
    }
}

/* Frees slot s by shifting back the entries after it that probed past it. */
static void unindex(struct nt_writer *w, uint32_t s)
{
    for (uint32_t j = s;;) {
        j = (j + 1) & w->mask;
        uint32_t p = w->index[j];
        if (!p)
            break;
        const struct nt_entry *e = &w->e[p - 1];
        uint32_t h = home(w, e->node, e->id);
        if (((j - h) & w->mask) >= ((j - s) & w->mask)) {
            w->index[s] = p;
            s = j;
        }
    }
    w->index[s] = 0;
}

struct nt_writer *nt_writer_new(struct nt_shm *shm, uint32_t cap, uint32_t node)
{
    if (!shm || cap > (1u << 30))
        return NULL;
    struct nt_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return NULL;
    uint32_t slots = 16;
    while (slots < 2 * cap)
        slots *= 2;
    w->index = calloc(slots, sizeof(*w->index));
    if (!w->index) {
        free(w);
        return NULL;
    }
    w->mask = slots - 1;
    w->shm = shm;
    w->cap = cap;
    shm->version = NT_VERSION;
    shm->cap = cap;
    shm->node = node;
    shm->seq = shm->active = 0;
    shm->n[0] = shm->n[1] = 0;
    shm->commits = 0;
    /* Last: a reader that sees the magic sees the rest of the header. */
    __atomic_store_n(&shm->magic, NT_MAGIC, __ATOMIC_RELEASE);
    return w;
}

void nt_writer_free(struct nt_writer *w)
{
    if (!w)
        return;
    free(w->e);
    free(w->order);
    free(w->index);
    free(w);
}

static int grow(struct nt_writer *w)
{
    uint32_t alloc = FM_MIN(FM_MAX(2 * w->alloc, 64u), w->cap);
    struct nt_entry *e = realloc(w->e, alloc * sizeof(*e));
    if (!e)
        return -ENOMEM;
    w->e = e;
    uint32_t *order = realloc(w->order, alloc * sizeof(*order));
    if (!order)
        return -ENOMEM;
    w->order = order;
    w->alloc = alloc;
    return 0;
}

static int cmp_u64(uint64_t a, uint64_t b) { return (a > b) - (a < b); }

static int cmp_entry(const struct nt_entry *a, const struct nt_entry *b)
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

/* Where e is, or would go, in the sorted order (entries are unique). */
static uint32_t order_pos(const struct nt_writer *w, const struct nt_entry *e)
{
    uint32_t lo = 0, hi = w->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (cmp_entry(&w->e[w->order[mid]], e) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

int nt_add(struct nt_writer *w, const struct nt_entry *e)
{
    if (e->lower > e->upper || e->namelen > NT_NAME_MAX)
        return -EINVAL;
    uint32_t s = probe(w, e->node, e->id);
    if (w->index[s])
        return -EEXIST;
    if (w->n == w->cap)
        return -ENOSPC;
    if (w->n == w->alloc) {
        int rc = grow(w);
        if (rc < 0)
            return rc;
    }
    uint32_t at = order_pos(w, e);
    memmove(w->order + at + 1, w->order + at, (w->n - at) * sizeof(*w->order));
    w->order[at] = w->n;
    w->e[w->n] = *e;
    w->index[s] = ++w->n;
    w->dirty = true;
    return 0;
}

int nt_remove(struct nt_writer *w, uint32_t node, uint64_t id, struct nt_entry *out)
{
    uint32_t s = probe(w, node, id);
    uint32_t p = w->index[s];
    if (!p)
        return -ENOENT;
    if (out)
        *out = w->e[p - 1];
    unindex(w, s);
    uint32_t at = order_pos(w, &w->e[p - 1]);
    memmove(w->order + at, w->order + at + 1, (w->n - at - 1) * sizeof(*w->order));
    uint32_t last = --w->n;
    if (p - 1 != last) { /* the last entry fills the hole: its place in the order follows it */
        const struct nt_entry *moved = &w->e[last];
        w->index[probe(w, moved->node, moved->id)] = p;
        w->order[order_pos(w, moved)] = p - 1;
        w->e[p - 1] = *moved;
    }
    w->dirty = true;
    return 0;
}

const struct nt_entry *nt_find(const struct nt_writer *w, uint32_t node, uint64_t id)
{
    uint32_t p = w->index[probe(w, node, id)];
    return p ? &w->e[p - 1] : NULL;
}

size_t nt_count(const struct nt_writer *w) { return w->n; }

void nt_each(const struct nt_writer *w, void (*fn)(void *arg, const struct nt_entry *e), void *arg)
{
    for (uint32_t i = 0; i < w->n; i++)
        fn(arg, &w->e[i]);
}

static void store_entry(struct nt_entry *dst, const struct nt_entry *src)
{
    const nt_word *s = (const nt_word *)src;
    nt_word *d = (nt_word *)dst;
    for (size_t i = 0; i < ENTRY_WORDS; i++)
        __atomic_store_n(&d[i], s[i], __ATOMIC_RELAXED);
}

static void load_entry(struct nt_entry *dst, const struct nt_entry *src)
{
    const nt_word *s = (const nt_word *)src;
    nt_word *d = (nt_word *)dst;
    for (size_t i = 0; i < ENTRY_WORDS; i++)
        d[i] = __atomic_load_n(&s[i], __ATOMIC_RELAXED);
}

void nt_commit(struct nt_writer *w)
{
    if (!w->dirty)
        return;
    struct nt_shm *shm = w->shm;
    uint32_t next = 1 - shm->active, n = w->n;
    /* Readers still in this area (they read `active` before the last flip)
     * must find seq moved once they can see any of the stores below. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    struct nt_entry *area = shm->area + (size_t)next * w->cap;
    uint64_t *keys = keys_of(shm, w->cap, next);
    for (uint32_t i = 0, maxupper = 0; i < n; i++) {
        struct nt_entry e = w->e[w->order[i]];
        bool same_type = i > 0 && e.type == w->e[w->order[i - 1]].type;
        maxupper = same_type ? FM_MAX(maxupper, e.upper) : e.upper;
        e.maxupper = maxupper;
        store_entry(&area[i], &e);
        __atomic_store_n(&keys[i], key_of(e.type, e.lower), __ATOMIC_RELAXED);
    }
    __atomic_store_n(&shm->n[next], n, __ATOMIC_RELAXED);
    uint32_t seq = shm->seq;
    __atomic_store_n(&shm->seq, seq + 1, __ATOMIC_RELEASE);
    /* A reader that sees the new `active` must also see the odd seq. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&shm->active, next, __ATOMIC_RELAXED);
    __atomic_store_n(&shm->seq, seq + 2, __ATOMIC_RELEASE);
    __atomic_store_n(&shm->commits, shm->commits + 1, __ATOMIC_RELAXED);
    w->dirty = false;
}

/* ---- Readers ---- */

/* Opens a read of the active area: its entries, their keys (if asked) and
 * their count (clamped: nothing read before the final seq check may take
 * an index out of the area). */
static uint32_t read_begin(const struct nt_shm *shm, const struct nt_entry **area,
                           const uint64_t **keys, uint32_t *n)
{
    uint32_t seq;
    while ((seq = __atomic_load_n(&shm->seq, __ATOMIC_ACQUIRE)) & 1)
        fm_cpu_relax();
    uint32_t cap = shm->cap, a = LOAD(shm->active) & 1;
    *n = FM_MIN(LOAD(shm->n[a]), cap);
    *area = shm->area + (size_t)a * cap;
    if (keys)
        *keys = keys_of(shm, cap, a);
    return seq;
}

static bool read_end(const struct nt_shm *shm, uint32_t seq)
{
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return LOAD(shm->seq) == seq;
}

size_t nt_lookup(const struct nt_shm *shm, uint32_t type, uint32_t instance, int only_node,
                 uint32_t local_node, struct nt_entry *out, size_t max)
{
    for (;;) {
        const struct nt_entry *area;
        const uint64_t *keys;
        uint32_t n, seq = read_begin(shm, &area, &keys, &n);
        /* The first entry after (type, instance) in the order. */
        uint32_t lo = 0, hi = n;
        uint64_t want = key_of(type, instance);
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (LOAD(keys[mid]) <= want)
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t got = 0;
        for (uint32_t j = lo; j-- > 0 && got < max;) {
            const struct nt_entry *e = &area[j];
            if (LOAD(e->type) != type || LOAD(e->maxupper) < instance)
                break;
            if (LOAD(e->upper) >= instance && (!only_node || LOAD(e->node) == local_node))
                load_entry(&out[got++], e);
        }
        if (!read_end(shm, seq))
            continue;
        for (size_t i = 0; i < got / 2; i++) {
            struct nt_entry t = out[i];
            out[i] = out[got - 1 - i];
            out[got - 1 - i] = t;
        }
        return got;
    }
}

size_t nt_lookup_range(const struct nt_shm *shm, uint32_t type, uint32_t lower, uint32_t upper,
                       struct nt_entry *out, size_t max)
{
    for (;;) {
        const struct nt_entry *area;
        uint32_t n, seq = read_begin(shm, &area, NULL, &n);
        /* The first entry of the type whose maxupper reaches lower: none
         * before it overlaps, and maxupper never decreases within a type. */
        uint32_t lo = 0, hi = n;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2, t = LOAD(area[mid].type);
            if (t < type || (t == type && LOAD(area[mid].maxupper) < lower))
                lo = mid + 1;
            else
                hi = mid;
        }
        size_t total = 0;
        for (uint32_t j = lo; j < n; j++) {
            const struct nt_entry *e = &area[j];
            if (LOAD(e->type) != type || LOAD(e->lower) > upper)
                break;
            if (LOAD(e->upper) < lower)
                continue;
            if (total < max)
                load_entry(&out[total], e);
            total++;
        }
        if (read_end(shm, seq))
            return total;
    }
}
