/*
 * Replication of the cluster-scope name table between node agents: the
 * protocol of distr.h. Messages are a header and a sequence of records, all
 * little-endian; every record is parsed by rd_* helpers that fail on a short
 * body, so a malformed message is dropped whole and counted
 * (tests/fuzz/fuzz_names.c).
 */
#include "names/distr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ND_MAGIC 0x444e4d46u /* "FMND" */
#define ND_VERSION 1
#define HDR 16  /* magic, version, reserved[3], from node, from incarnation */
#define RHDR 8  /* kind, flags, reserved[2], body length */
#define PUB_FIXED 21 /* id, type, lower, upper, name length */
#define VEC_ENTRY 13
#define NO_ROOT 0xffffffffu
#define FM_MIN_U64(a, b) ((a) < (b) ? (a) : (b))

enum { K_JOIN = 1, K_STATE, K_ITEM, K_PROBE, K_ACK, K_VECTOR, K_PULL, K_TOMB, K_SYNCED };
enum { OP_ADD = 1, OP_DEL, OP_DOWN };
/* K_STATE flags */
#define S_LAST 1u  /* the last part of this origin's state */
#define S_FLOOD 2u /* forward down the tree of `root` when it changed something */
#define S_INTRO 4u /* sent by the origin itself: the receiver floods it if new */
/* K_PROBE/K_ACK flags */
#define P_NOTLIVE 1u /* "you are not live in my view" (+ the incarnation I hold for you) */

struct origin {
    uint32_t node, inc, seq;
    int live;
    int monitored, was_monitored;
    uint64_t last_heard, last_probe, suspect_since, tomb_at, last_vector;
    unsigned mismatches; /* consecutive probe answers with another digest */
    int mentioned;       /* in the vector being compared */
    int joined;          /* this node asked it for a snapshot */
    uint8_t cardlen;
    uint8_t card[ND_CARD_MAX];
    struct nd_pub *pubs; /* sorted by id */
    uint32_t npubs, cappubs;
    struct nd_pub *stage; /* parts of a state being received */
    uint32_t nstage, capstage, stage_next;
    uint32_t stage_inc, stage_seq;
    unsigned char *out; /* records batched for this node */
    size_t outlen;
    int queued;
};

struct nd {
    uint32_t node;
    struct origin *self;
    struct nd_ops ops;
    struct nd_params prm;
    struct nd_stats st;
    uint64_t now, digest, next_rejoin, rng;
    int synced; /* a snapshot of the domain came in */
    struct origin **tab; /* open addressing by node id */
    size_t tabcap, norigins;
    uint32_t *view; /* live members sorted by node id, self included */
    size_t nview, capview;
    int view_dirty;
    struct origin **outq; /* origins with batched records */
    size_t noutq, capoutq;
    size_t mem;
};

/* ---- small helpers ---- */

static void *xrealloc(struct nd *d, void *p, size_t oldsz, size_t newsz)
{
    d->mem += newsz - oldsz;
    if (!newsz) {
        free(p);
        return NULL;
    }
    void *q = realloc(p, newsz);
    if (!q)
        abort(); /* the agent cannot keep a consistent table without memory */
    return q;
}

static void put16(unsigned char *p, uint16_t v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}
static void put64(unsigned char *p, uint64_t v)
{
    put32(p, (uint32_t)v);
    put32(p + 4, (uint32_t)(v >> 32));
}

/* A bounded reader: every get fails once the body is exhausted. */
struct rd {
    const unsigned char *p;
    size_t left;
    int bad;
};
static const unsigned char *rd_take(struct rd *r, size_t n)
{
    if (r->bad || r->left < n) {
        r->bad = 1;
        return NULL;
    }
    const unsigned char *p = r->p;
    r->p += n, r->left -= n;
    return p;
}
static uint8_t rd8(struct rd *r)
{
    const unsigned char *p = rd_take(r, 1);
    return p ? p[0] : 0;
}
static uint16_t rd16(struct rd *r)
{
    const unsigned char *p = rd_take(r, 2);
    return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}
static uint32_t rd32(struct rd *r)
{
    const unsigned char *p = rd_take(r, 4);
    return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                   (uint32_t)p[3] << 24
             : 0;
}
static uint64_t rd64(struct rd *r)
{
    uint64_t lo = rd32(r);
    return lo | (uint64_t)rd32(r) << 32;
}

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    return x ^ (x >> 33);
}

static uint64_t version_hash(const struct origin *o)
{
    return mix((uint64_t)o->node << 32 ^ mix((uint64_t)o->inc << 32 | o->seq));
}

static uint64_t rnd(struct nd *d)
{
    d->rng ^= d->rng << 13, d->rng ^= d->rng >> 7, d->rng ^= d->rng << 17;
    return d->rng;
}

/* ---- origins ---- */

static struct origin *find(const struct nd *d, uint32_t node)
{
    size_t m = d->tabcap - 1;
    for (size_t i = mix(node) & m;; i = (i + 1) & m) {
        struct origin *o = d->tab[i];
        if (!o || o->node == node)
            return o;
    }
}

static void tab_put(struct nd *d, struct origin *o)
{
    size_t m = d->tabcap - 1, i = mix(o->node) & m;
    while (d->tab[i])
        i = (i + 1) & m;
    d->tab[i] = o;
}

static struct origin *origin_new(struct nd *d, uint32_t node)
{
    if ((d->norigins + 1) * 2 > d->tabcap) {
        struct origin **old = d->tab;
        size_t oldcap = d->tabcap;
        d->tabcap = oldcap ? oldcap * 2 : 64;
        d->tab = xrealloc(d, NULL, 0, d->tabcap * sizeof(*d->tab));
        memset(d->tab, 0, d->tabcap * sizeof(*d->tab));
        for (size_t i = 0; i < oldcap; i++)
            if (old[i])
                tab_put(d, old[i]);
        xrealloc(d, old, oldcap * sizeof(*old), 0);
    }
    struct origin *o = xrealloc(d, NULL, 0, sizeof(*o));
    memset(o, 0, sizeof(*o));
    o->node = node;
    tab_put(d, o);
    d->norigins++;
    return o;
}

/* Backward-shift deletion keeps probe chains intact. */
static void origin_delete(struct nd *d, struct origin *o)
{
    size_t m = d->tabcap - 1, i = mix(o->node) & m;
    while (d->tab[i] != o)
        i = (i + 1) & m;
    d->tab[i] = NULL;
    for (size_t j = (i + 1) & m; d->tab[j]; j = (j + 1) & m) {
        size_t h = mix(d->tab[j]->node) & m;
        if (((j - h) & m) >= ((j - i) & m)) {
            d->tab[i] = d->tab[j];
            d->tab[j] = NULL;
            i = j;
        }
    }
    for (size_t k = 0; k < d->noutq; k++)
        if (d->outq[k] == o)
            d->outq[k] = d->outq[--d->noutq];
    xrealloc(d, o->pubs, o->cappubs * sizeof(*o->pubs), 0);
    xrealloc(d, o->stage, o->capstage * sizeof(*o->stage), 0);
    xrealloc(d, o->out, o->out ? ND_MSG_MAX : 0, 0);
    xrealloc(d, o, sizeof(*o), 0);
    d->norigins--;
}

/* Changes an origin's version, keeping the digest (XOR over live origins). */
static void set_version(struct nd *d, struct origin *o, uint32_t inc, uint32_t seq, int live)
{
    if (o->live)
        d->digest ^= version_hash(o);
    if (o->live != live)
        d->view_dirty = 1;
    o->inc = inc, o->seq = seq, o->live = live;
    if (live)
        d->digest ^= version_hash(o);
}

static int pub_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct nd_pub *)a)->id, y = ((const struct nd_pub *)b)->id;
    return x < y ? -1 : x > y;
}

static long pub_find(const struct origin *o, uint64_t id)
{
    size_t lo = 0, hi = o->npubs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (o->pubs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < o->npubs && o->pubs[lo].id == id ? (long)lo : -1 - (long)lo;
}

static void pubs_reserve(struct nd *d, struct nd_pub **v, uint32_t *cap, uint32_t need)
{
    if (need <= *cap)
        return;
    uint32_t c = *cap ? *cap : 4;
    while (c < need)
        c *= 2;
    *v = xrealloc(d, *v, *cap * sizeof(**v), c * sizeof(**v));
    *cap = c;
}

static int pub_insert(struct nd *d, struct origin *o, const struct nd_pub *p)
{
    long at = pub_find(o, p->id);
    if (at >= 0)
        return -EEXIST;
    size_t i = (size_t)(-1 - at);
    pubs_reserve(d, &o->pubs, &o->cappubs, o->npubs + 1);
    memmove(o->pubs + i + 1, o->pubs + i, (o->npubs - i) * sizeof(*o->pubs));
    o->pubs[i] = *p;
    o->npubs++;
    return 0;
}

static void notify_added(struct nd *d, struct origin *o, const struct nd_pub *p)
{
    if (o != d->self && d->ops.added)
        d->ops.added(d->ops.arg, o->node, p);
}
static void notify_removed(struct nd *d, struct origin *o, const struct nd_pub *p, int lost)
{
    if (o != d->self && d->ops.removed)
        d->ops.removed(d->ops.arg, o->node, p, lost);
}

/* Replaces o's publications by the sorted array v[n], reporting the
 * difference; takes ownership of v. */
static void pubs_replace(struct nd *d, struct origin *o, struct nd_pub *v, uint32_t n,
                         uint32_t capv)
{
    uint32_t i = 0, j = 0;
    while (i < o->npubs || j < n) {
        if (j == n || (i < o->npubs && o->pubs[i].id < v[j].id))
            notify_removed(d, o, &o->pubs[i++], 0);
        else if (i == o->npubs || v[j].id < o->pubs[i].id)
            notify_added(d, o, &v[j++]);
        else {
            if (memcmp(&o->pubs[i], &v[j], sizeof(v[j]))) {
                notify_removed(d, o, &o->pubs[i], 0);
                notify_added(d, o, &v[j]);
            }
            i++, j++;
        }
    }
    xrealloc(d, o->pubs, o->cappubs * sizeof(*o->pubs), 0);
    o->pubs = v, o->npubs = n, o->cappubs = capv;
}

static void purge(struct nd *d, struct origin *o, uint32_t inc)
{
    for (uint32_t i = 0; i < o->npubs; i++)
        notify_removed(d, o, &o->pubs[i], 1);
    o->npubs = 0;
    set_version(d, o, inc > o->inc ? inc : o->inc, 0, 0);
    o->tomb_at = d->now;
    o->suspect_since = 0;
    o->monitored = 0;
}

/* ---- the view: live members sorted by node id ---- */

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

static long view_index(const struct nd *d, uint32_t node)
{
    size_t lo = 0, hi = d->nview;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (d->view[mid] < node)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < d->nview && d->view[lo] == node ? (long)lo : -1;
}

/* Monitors the next ceil(sqrt(N)) - 1 members (at least one). */
static size_t monitor_count(size_t n)
{
    if (n < 2)
        return 0;
    size_t k = 1;
    while (k * k < n)
        k++;
    k = k > 1 ? k - 1 : 1;
    return k < n - 1 ? k : n - 1;
}

static void view_rebuild(struct nd *d)
{
    if (!d->view_dirty)
        return;
    d->view_dirty = 0;
    size_t n = 0;
    for (size_t i = 0; i < d->tabcap; i++)
        if (d->tab[i] && d->tab[i]->live)
            n++;
    if (n > d->capview) {
        d->view = xrealloc(d, d->view, d->capview * sizeof(*d->view), n * sizeof(*d->view));
        d->capview = n;
    }
    d->nview = 0;
    for (size_t i = 0; i < d->tabcap; i++)
        if (d->tab[i] && d->tab[i]->live)
            d->view[d->nview++] = d->tab[i]->node;
    qsort(d->view, d->nview, sizeof(*d->view), u32_cmp);
    for (size_t i = 0; i < d->tabcap; i++)
        if (d->tab[i])
            d->tab[i]->was_monitored = d->tab[i]->monitored, d->tab[i]->monitored = 0;
    long me = view_index(d, d->node);
    size_t k = monitor_count(d->nview);
    for (size_t i = 1; i <= k; i++) {
        struct origin *o = find(d, d->view[((size_t)me + i) % d->nview]);
        o->monitored = 1;
        /* A new watch gives the member two probes to answer, not a whole
         * timeout: when several members die at once, the watches that pass
         * to the next ones must not each wait down_us again. */
        uint64_t grace = d->prm.down_us > 2 * d->prm.probe_us ? d->prm.down_us - 2 * d->prm.probe_us : 0;
        if (!o->was_monitored && o->last_heard + grace < d->now)
            o->last_heard = d->now - grace;
    }
}

/* ---- output ---- */

static void send_now(struct nd *d, struct origin *to)
{
    if (to->outlen <= HDR)
        return;
    d->ops.send(d->ops.arg, to->node, to->card, to->cardlen, to->out, to->outlen);
    d->st.msgs_sent++;
    d->st.bytes_sent += to->outlen;
    to->outlen = 0;
}

static void header(struct nd *d, unsigned char *p)
{
    put32(p, ND_MAGIC);
    p[4] = ND_VERSION, p[5] = p[6] = p[7] = 0;
    put32(p + 8, d->node);
    put32(p + 12, d->self->inc);
}

/* Room for a record of `body` bytes in to's batch; flushes it if full. */
static unsigned char *record(struct nd *d, struct origin *to, int kind, unsigned flags,
                             size_t body)
{
    if (!to->out)
        to->out = xrealloc(d, NULL, 0, ND_MSG_MAX);
    if (to->outlen && to->outlen + RHDR + body > ND_MSG_MAX)
        send_now(d, to);
    if (!to->outlen) {
        header(d, to->out);
        to->outlen = HDR;
    }
    if (!to->queued) {
        if (d->noutq == d->capoutq) {
            size_t c = d->capoutq ? d->capoutq * 2 : 16;
            d->outq = xrealloc(d, d->outq, d->capoutq * sizeof(*d->outq), c * sizeof(*d->outq));
            d->capoutq = c;
        }
        d->outq[d->noutq++] = to;
        to->queued = 1;
    }
    unsigned char *r = to->out + to->outlen;
    r[0] = (unsigned char)kind, r[1] = (unsigned char)flags, r[2] = r[3] = 0;
    put32(r + 4, (uint32_t)body);
    to->outlen += RHDR + body;
    return r + RHDR;
}

static size_t pub_size(const struct nd_pub *p) { return PUB_FIXED + p->namelen; }

static unsigned char *put_pub(unsigned char *w, const struct nd_pub *p)
{
    put64(w, p->id);
    put32(w + 8, p->type);
    put32(w + 12, p->lower);
    put32(w + 16, p->upper);
    w[20] = p->namelen;
    memcpy(w + PUB_FIXED, p->name, p->namelen);
    return w + pub_size(p);
}

/* o's whole state to `to`, in as many parts as it takes. */
static void send_state(struct nd *d, struct origin *to, struct origin *o, unsigned flags,
                       uint32_t root)
{
    const size_t fixed = 4 * 4 + 2 + 1 + o->cardlen + 4;
    uint32_t i = 0;
    uint16_t part = 0;
    do {
        size_t body = fixed;
        uint32_t n = 0;
        while (i + n < o->npubs && body + pub_size(&o->pubs[i + n]) + RHDR + HDR <= ND_MSG_MAX)
            body += pub_size(&o->pubs[i + n++]);
        unsigned last = i + n == o->npubs ? S_LAST : 0;
        unsigned char *w = record(d, to, K_STATE, flags | last, body);
        put32(w, root);
        put32(w + 4, o->node);
        put32(w + 8, o->inc);
        put32(w + 12, o->seq);
        put16(w + 16, part++);
        w[18] = o->cardlen;
        memcpy(w + 19, o->card, o->cardlen);
        w += 19 + o->cardlen;
        put32(w, n);
        w += 4;
        for (uint32_t k = 0; k < n; k++)
            w = put_pub(w, &o->pubs[i + k]);
        i += n;
    } while (i < o->npubs);
}

static void send_tomb(struct nd *d, struct origin *to, const struct origin *o)
{
    unsigned char *w = record(d, to, K_TOMB, 0, 9 + o->cardlen);
    put32(w, o->node);
    put32(w + 4, o->inc);
    w[8] = o->cardlen;
    memcpy(w + 9, o->card, o->cardlen);
}

static void send_probe(struct nd *d, struct origin *to, int kind)
{
    unsigned char *w = record(d, to, kind, to->live ? 0 : P_NOTLIVE, 16);
    put64(w, d->digest);
    put32(w + 8, (uint32_t)d->nview);
    put32(w + 12, to->inc);
    if (kind == K_PROBE) {
        to->last_probe = d->now;
        d->st.probes_sent++;
    }
}

static void send_pull(struct nd *d, struct origin *to, uint32_t node)
{
    put32(record(d, to, K_PULL, 0, 4), node);
}

/* Children of `who` in the tree rooted at `root` over the view, leaving
 * out member `skip` (0: none): the member at ring distance i from the root
 * forwards to distances fanout*i+1 .. fanout*i+fanout. */
static size_t children_of(struct nd *d, uint32_t root, uint32_t who, uint32_t skip,
                          struct origin **out)
{
    view_rebuild(d);
    long r = view_index(d, root), me = view_index(d, who), x = skip ? view_index(d, skip) : -1;
    if (r < 0 || me < 0 || r == x || me == x)
        return 0;
    /* Indices in the view without x: those after it move down by one. */
    size_t n = d->nview - (x >= 0);
    size_t rv = (size_t)r - (x >= 0 && r > x), mv = (size_t)me - (x >= 0 && me > x);
    size_t dist = (mv + n - rv) % n, k = 0;
    for (size_t c = 1; c <= d->prm.fanout; c++) {
        size_t dc = dist * d->prm.fanout + c;
        if (dc >= n)
            break;
        size_t v = (rv + dc) % n;
        out[k++] = find(d, d->view[v + (x >= 0 && v >= (size_t)x)]);
    }
    return k;
}

static size_t children(struct nd *d, uint32_t root, struct origin **out)
{
    return children_of(d, root, d->node, 0, out);
}

/* o's state down root's tree from this node: o needs none, but its
 * children in the tree do. */
static void flood_to_kids(struct nd *d, uint32_t root, struct origin *o, struct origin *from)
{
    struct origin *kids[64], *grand[64];
    size_t nk = children(d, root, kids);
    for (size_t k = 0; k < nk; k++) {
        if (kids[k] == from)
            continue;
        if (kids[k] != o) {
            send_state(d, kids[k], o, S_FLOOD, root);
            continue;
        }
        size_t ng = children_of(d, root, o->node, 0, grand);
        for (size_t g = 0; g < ng; g++)
            if (grand[g] != from)
                send_state(d, grand[g], o, S_FLOOD, root);
    }
}

/* An item of this node's own stream, to its children. */
static void emit_item(struct nd *d, int op, const void *arg)
{
    struct origin *self = d->self;
    set_version(d, self, self->inc, self->seq + 1, 1);
    struct origin *kids[64];
    size_t nk = children(d, d->node, kids);
    for (size_t k = 0; k < nk; k++) {
        size_t body = 13 + (op == OP_ADD ? pub_size(arg) : op == OP_DEL ? 9 : 8);
        unsigned char *w = record(d, kids[k], K_ITEM, 0, body);
        put32(w, d->node);
        put32(w + 4, self->inc);
        put32(w + 8, self->seq);
        w[12] = (unsigned char)op;
        if (op == OP_ADD)
            put_pub(w + 13, arg);
        else if (op == OP_DEL)
            memcpy(w + 13, arg, 9); /* id, lost: already little-endian */
        else
            memcpy(w + 13, arg, 8); /* node, incarnation: already little-endian */
    }
}

static void flood_state(struct nd *d, struct origin *o)
{
    flood_to_kids(d, d->node, o, NULL);
}

static void reincarnate(struct nd *d, uint32_t seen_inc)
{
    struct origin *s = d->self;
    uint32_t inc = (seen_inc > s->inc ? seen_inc : s->inc) + 1;
    set_version(d, s, inc, s->seq + 1, 1);
    d->st.reincarnations++;
    flood_state(d, s);
}

static void declare_down(struct nd *d, struct origin *o)
{
    if (!o->live || o == d->self)
        return;
    unsigned char arg[8];
    put32(arg, o->node);
    put32(arg + 4, o->inc);
    purge(d, o, o->inc);
    d->st.downs_declared++;
    emit_item(d, OP_DOWN, arg);
}

/* ---- input ---- */

static int parse_pub(struct rd *r, struct nd_pub *p)
{
    memset(p, 0, sizeof(*p));
    p->id = rd64(r);
    p->type = rd32(r);
    p->lower = rd32(r);
    p->upper = rd32(r);
    p->namelen = rd8(r);
    const unsigned char *name = p->namelen <= ND_NAME_MAX ? rd_take(r, p->namelen) : NULL;
    if (!name || p->lower > p->upper)
        return -1;
    memcpy(p->name, name, p->namelen);
    return 0;
}

static int parse_card(struct rd *r, uint8_t *len, uint8_t *card)
{
    *len = rd8(r);
    const unsigned char *c = *len <= ND_CARD_MAX ? rd_take(r, *len) : NULL;
    if (!c)
        return -1;
    memcpy(card, c, *len);
    return 0;
}

static void stage_free(struct nd *d, struct origin *o)
{
    o->stage = xrealloc(d, o->stage, o->capstage * sizeof(*o->stage), 0);
    o->nstage = o->capstage = 0;
}

/* A STATE part: applied when its last part is in. Returns 1 if the table
 * changed, 0 if not, -1 if malformed. */
static int on_state(struct nd *d, struct rd *r, unsigned flags, struct origin *from)
{
    uint32_t root = rd32(r), node = rd32(r), inc = rd32(r), seq = rd32(r);
    uint16_t part = rd16(r);
    uint8_t cardlen, card[ND_CARD_MAX];
    if (parse_card(r, &cardlen, card))
        return -1;
    uint32_t n = rd32(r);
    if (r->bad || n > r->left / PUB_FIXED)
        return -1;
    if (node == d->node) { /* I know my own state best; a stale copy of me is news */
        for (uint32_t i = 0; i < n; i++) {
            struct nd_pub p;
            if (parse_pub(r, &p))
                return -1;
        }
        return 0;
    }
    struct origin *o = find(d, node);
    if (!o)
        o = origin_new(d, node);
    if (part == 0)
        o->nstage = 0, o->stage_next = 0, o->stage_inc = inc, o->stage_seq = seq;
    int in_sequence = part == o->stage_next && inc == o->stage_inc && seq == o->stage_seq;
    pubs_reserve(d, &o->stage, &o->capstage, o->nstage + n);
    for (uint32_t i = 0; i < n; i++) {
        struct nd_pub p;
        if (parse_pub(r, &p))
            return -1;
        if (in_sequence)
            o->stage[o->nstage++] = p;
    }
    if (!in_sequence) {
        o->stage_next = UINT32_MAX; /* wait for a new part 0 */
        stage_free(d, o);
        return 0;
    }
    o->stage_next++;
    if (!(flags & S_LAST))
        return 0;
    o->stage_next = UINT32_MAX;
    int newer = o->live ? (inc > o->inc || (inc == o->inc && seq > o->seq)) : inc > o->inc;
    if (!newer) {
        stage_free(d, o);
        if (!o->live && from && o->cardlen)
            send_tomb(d, from, o); /* the sender holds a member that is down here */
        return 0;
    }
    if (o->nstage)
        qsort(o->stage, o->nstage, sizeof(*o->stage), pub_cmp);
    struct nd_pub *v = o->stage;
    uint32_t nv = o->nstage, capv = o->capstage;
    o->stage = NULL, o->nstage = o->capstage = 0;
    pubs_replace(d, o, v, nv, capv);
    o->cardlen = cardlen;
    memcpy(o->card, card, cardlen);
    if (!o->live)
        o->last_heard = d->now, o->tomb_at = 0;
    set_version(d, o, inc, seq, 1);
    o->suspect_since = 0;
    d->st.states_applied++;
    if ((flags & S_INTRO) && from == o)
        flood_state(d, o);
    else if (flags & S_FLOOD)
        flood_to_kids(d, root, o, from);
    return 1;
}

/* A second-hand report that `o` is down at `inc`: about me, I come back
 * with a new incarnation; about another, I ask it directly and declare it
 * down myself if it stays silent. */
static void on_tomb_report(struct nd *d, struct origin *from, uint32_t node, uint32_t inc,
                           const uint8_t *card, uint8_t cardlen)
{
    if (node == d->node) {
        if (inc >= d->self->inc) {
            reincarnate(d, inc);
            send_state(d, from, d->self, S_INTRO, NO_ROOT);
        }
        return;
    }
    struct origin *o = find(d, node);
    if (!o) {
        o = origin_new(d, node);
        o->inc = inc, o->tomb_at = d->now;
        o->cardlen = cardlen;
        memcpy(o->card, card, cardlen);
        return;
    }
    if (o->live && o->inc <= inc && !o->suspect_since) {
        o->suspect_since = d->now;
        if (d->now - o->last_probe >= d->prm.probe_us) /* else nd_tick probes it */
            send_probe(d, o, K_PROBE);
    }
}

static int on_item(struct nd *d, struct rd *r, struct origin *from)
{
    uint32_t node = rd32(r), inc = rd32(r), seq = rd32(r);
    uint8_t op = rd8(r);
    struct nd_pub p;
    uint64_t id = 0;
    int lost = 0;
    uint32_t down_node = 0, down_inc = 0;
    const unsigned char *raw = r->p;
    if (op == OP_ADD) {
        if (parse_pub(r, &p))
            return -1;
    } else if (op == OP_DEL)
        id = rd64(r), lost = rd8(r) != 0;
    else if (op == OP_DOWN)
        down_node = rd32(r), down_inc = rd32(r);
    else
        return -1;
    if (r->bad)
        return -1;
    size_t rawlen = (size_t)(r->p - raw);
    if (node == d->node)
        return 0;
    struct origin *o = find(d, node);
    int apply = 0, forward = 1;
    if (!o || !o->live) {
        if (o && !o->live && o->inc >= inc)
            return 0; /* from an incarnation already down */
        if (from)
            send_pull(d, from, node);
    } else if (inc < o->inc) {
        return 0;
    } else if (inc > o->inc) {
        if (from)
            send_pull(d, from, node);
    } else if (seq <= o->seq) {
        d->st.items_dup++;
        return 0;
    } else if (seq > o->seq + 1) {
        d->st.gaps++;
        if (from)
            send_pull(d, from, node);
    } else {
        apply = 1;
    }
    if (forward) {
        struct origin *kids[64];
        /* A DOWN item travels the tree of a view without the node it
         * reports, as its origin built it after the purge (a leave, whose
         * origin is that node, keeps it). */
        uint32_t skip = op == OP_DOWN && down_node != node && down_node != d->node ? down_node : 0;
        size_t nk = children_of(d, node, d->node, skip, kids);
        for (size_t k = 0; k < nk; k++) {
            unsigned char *w = record(d, kids[k], K_ITEM, 0, 13 + rawlen);
            put32(w, node);
            put32(w + 4, inc);
            put32(w + 8, seq);
            w[12] = op;
            memcpy(w + 13, raw, rawlen);
        }
    }
    if (!apply)
        return 0;
    set_version(d, o, inc, seq, 1);
    d->st.items_applied++;
    if (op == OP_ADD) {
        if (pub_insert(d, o, &p) == 0)
            notify_added(d, o, &p);
    } else if (op == OP_DEL) {
        long at = pub_find(o, id);
        if (at >= 0) {
            struct nd_pub gone = o->pubs[at];
            memmove(o->pubs + at, o->pubs + at + 1, (o->npubs - (size_t)at - 1) * sizeof(gone));
            o->npubs--;
            notify_removed(d, o, &gone, lost);
        }
    } else if (down_node == d->node) {
        if (down_inc >= d->self->inc)
            reincarnate(d, down_inc);
    } else {
        struct origin *x = find(d, down_node);
        if (!x) {
            x = origin_new(d, down_node);
            x->inc = down_inc, x->tomb_at = d->now;
        } else if (x->live && x->inc <= down_inc)
            purge(d, x, down_inc);
    }
    return 1;
}

static void on_vector(struct nd *d, struct rd *r, struct origin *from)
{
    uint32_t n = rd32(r);
    if (r->bad || n > r->left / VEC_ENTRY)
        return;
    /* Mark what the peer mentions; send it every live origin it does not. */
    for (size_t i = 0; i < d->tabcap; i++)
        if (d->tab[i])
            d->tab[i]->mentioned = 0;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t node = rd32(r), inc = rd32(r), seq = rd32(r);
        int live = rd8(r);
        struct origin *o = find(d, node);
        if (o)
            o->mentioned = 1;
        if (node == d->node) {
            if (!live && inc >= d->self->inc)
                reincarnate(d, inc);
            else if (live && (inc < d->self->inc || seq < d->self->seq))
                send_state(d, from, d->self, 0, NO_ROOT);
            continue;
        }
        if (!live) {
            if (o && o->live && o->inc <= inc)
                on_tomb_report(d, from, node, inc, o->card, o->cardlen);
            continue;
        }
        if (!o || (!o->live && inc > o->inc) ||
            (o->live && (inc > o->inc || (inc == o->inc && seq > o->seq))))
            send_pull(d, from, node);
        else if (!o->live)
            send_tomb(d, from, o);
        else if (inc < o->inc || seq < o->seq)
            send_state(d, from, o, 0, NO_ROOT);
    }
    for (size_t i = 0; i < d->tabcap; i++) {
        struct origin *o = d->tab[i];
        if (o && o->live && o != from && !o->mentioned)
            send_state(d, from, o, 0, NO_ROOT);
    }
}

static void send_vector(struct nd *d, struct origin *to)
{
    size_t n = 0;
    for (size_t i = 0; i < d->tabcap; i++)
        if (d->tab[i] && (d->tab[i]->live || d->tab[i]->tomb_at))
            n++;
    size_t maxn = (ND_MSG_MAX - HDR - RHDR - 4) / VEC_ENTRY;
    if (n > maxn)
        n = maxn; /* beyond ~1,250 members the vector is truncated: see docs/names.md */
    unsigned char *w = record(d, to, K_VECTOR, 0, 4 + n * VEC_ENTRY);
    put32(w, (uint32_t)n);
    w += 4;
    size_t k = 0;
    for (size_t i = 0; i < d->tabcap && k < n; i++) {
        struct origin *o = d->tab[i];
        if (!o || !(o->live || o->tomb_at))
            continue;
        put32(w, o->node);
        put32(w + 4, o->inc);
        put32(w + 8, o->seq);
        w[12] = (unsigned char)o->live;
        w += VEC_ENTRY, k++;
    }
}

static void on_probe(struct nd *d, struct rd *r, int kind, unsigned flags, struct origin *from)
{
    uint64_t digest = rd64(r);
    (void)rd32(r); /* the sender's member count: for diagnosis */
    uint32_t my_inc_there = rd32(r);
    if (r->bad)
        return;
    if (flags & P_NOTLIVE) {
        /* Not live in the sender's view: come back if it holds this very
         * incarnation as down, and introduce myself so it floods me. */
        if (my_inc_there >= d->self->inc && my_inc_there != 0)
            reincarnate(d, my_inc_there);
        send_state(d, from, d->self, S_INTRO, NO_ROOT);
    }
    if (kind == K_PROBE) {
        send_probe(d, from, K_ACK);
        return;
    }
    if (digest == d->digest || !from->live) {
        from->mismatches = 0;
        return;
    }
    if (++from->mismatches >= 2 && d->now - from->last_vector >= d->prm.probe_us) {
        /* twice in a row: not just an item in flight; once a period at most */
        from->mismatches = 0;
        from->last_vector = d->now;
        send_vector(d, from);
    }
}

void nd_input(struct nd *d, const void *msg, size_t len, uint64_t now_us)
{
    d->now = now_us;
    struct rd r = {msg, len, 0};
    if (rd32(&r) != ND_MAGIC || rd8(&r) != ND_VERSION || (rd_take(&r, 3), r.bad)) {
        d->st.malformed++;
        return;
    }
    uint32_t from_node = rd32(&r), from_inc = rd32(&r);
    if (r.bad || from_node == d->node) {
        d->st.malformed++;
        return;
    }
    d->st.msgs_recv++;
    d->st.bytes_recv += len;
    struct origin *from = find(d, from_node);
    if (from && from->live && from->inc == from_inc) {
        from->last_heard = now_us;
        from->suspect_since = 0;
    }
    /* First pass: the whole message must parse. */
    struct rd all = r;
    while (all.left && !all.bad) {
        rd_take(&all, 4);
        uint32_t body = rd32(&all);
        rd_take(&all, body);
    }
    if (all.bad) {
        d->st.malformed++;
        return;
    }
    while (r.left) {
        const unsigned char *h = rd_take(&r, 4);
        uint32_t body = rd32(&r);
        struct rd b = {rd_take(&r, body), body, 0};
        int kind = h[0];
        unsigned flags = h[1];
        if (!from) { /* a stranger: it must introduce itself before anything else */
            if (kind != K_JOIN && kind != K_STATE && kind != K_PROBE)
                continue;
            from = origin_new(d, from_node);
            from->inc = 0;
        }
        switch (kind) {
        case K_JOIN: {
            uint8_t cardlen, card[ND_CARD_MAX];
            if (parse_card(&b, &cardlen, card))
                goto bad;
            from->cardlen = cardlen;
            memcpy(from->card, card, cardlen);
            for (size_t i = 0; i < d->tabcap; i++) {
                struct origin *o = d->tab[i];
                if (o && o != from && o->live)
                    send_state(d, from, o, 0, NO_ROOT);
                else if (o && o != from && o->tomb_at && o->cardlen)
                    send_tomb(d, from, o);
            }
            record(d, from, K_SYNCED, 0, 0); /* the snapshot ends here */
            if (!d->synced && !from->joined) { /* both alone so far: each needs the other's table */
                unsigned char *w = record(d, from, K_JOIN, 0, 1 + d->self->cardlen);
                w[0] = d->self->cardlen;
                memcpy(w + 1, d->self->card, d->self->cardlen);
                from->joined = 1;
            }
            break;
        }
        case K_SYNCED:
            d->synced = 1;
            break;
        case K_STATE:
            if (on_state(d, &b, flags, from) < 0)
                goto bad;
            break;
        case K_ITEM:
            if (on_item(d, &b, from) < 0)
                goto bad;
            break;
        case K_PROBE:
        case K_ACK:
            if (!from->cardlen)
                break; /* cannot answer a node I have no card for */
            on_probe(d, &b, kind, flags, from);
            break;
        case K_VECTOR:
            on_vector(d, &b, from);
            break;
        case K_PULL: {
            struct origin *o = find(d, rd32(&b));
            if (b.bad)
                goto bad;
            if (o && o->live)
                send_state(d, from, o, 0, NO_ROOT);
            else if (o && o->tomb_at)
                send_tomb(d, from, o);
            break;
        }
        case K_TOMB: {
            uint32_t node = rd32(&b), inc = rd32(&b);
            uint8_t cardlen, card[ND_CARD_MAX];
            if (parse_card(&b, &cardlen, card))
                goto bad;
            on_tomb_report(d, from, node, inc, card, cardlen);
            break;
        }
        default:
            goto bad;
        }
        if (b.bad)
            goto bad;
        continue;
    bad:
        d->st.malformed++;
        return;
    }
    /* A stranger that never introduced itself leaves no trace. */
    if (from && !from->live && !from->tomb_at && !from->inc && !from->cardlen)
        origin_delete(d, from);
}

/* ---- the rest of the interface ---- */

void nd_params_default(struct nd_params *p)
{
    p->probe_us = 200000;
    p->down_us = 1500000;
    p->rejoin_us = 1000000;
    p->tomb_us = 60000000;
    p->fanout = 16;
}

struct nd *nd_new(uint32_t node, uint32_t inc, const void *card, size_t cardlen,
                  const struct nd_ops *ops, const struct nd_params *params, uint64_t now_us)
{
    if (cardlen > ND_CARD_MAX || !ops || !ops->send)
        return NULL;
    struct nd *d = calloc(1, sizeof(*d));
    if (!d)
        return NULL;
    d->mem = sizeof(*d);
    d->node = node;
    d->ops = *ops;
    if (params)
        d->prm = *params;
    else
        nd_params_default(&d->prm);
    if (d->prm.fanout < 2 || d->prm.fanout > 64)
        d->prm.fanout = 16;
    d->now = now_us;
    d->rng = mix((uint64_t)node << 32 | inc) | 1;
    d->self = origin_new(d, node);
    d->self->cardlen = (uint8_t)cardlen;
    memcpy(d->self->card, card, cardlen);
    set_version(d, d->self, inc ? inc : 1, 0, 1);
    return d;
}

void nd_free(struct nd *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->tabcap; i++)
        if (d->tab[i]) {
            free(d->tab[i]->pubs);
            free(d->tab[i]->stage);
            free(d->tab[i]->out);
            free(d->tab[i]);
        }
    free(d->tab);
    free(d->view);
    free(d->outq);
    free(d);
}

void nd_contact(struct nd *d, const void *card, size_t cardlen, uint64_t now_us)
{
    if (cardlen > ND_CARD_MAX)
        return;
    d->now = now_us;
    /* A message of its own: the contact has no node id yet. */
    struct origin tmp;
    memset(&tmp, 0, sizeof(tmp));
    tmp.cardlen = (uint8_t)cardlen;
    memcpy(tmp.card, card, cardlen);
    unsigned char *w = record(d, &tmp, K_JOIN, 0, 1 + d->self->cardlen);
    w[0] = d->self->cardlen;
    memcpy(w + 1, d->self->card, d->self->cardlen);
    send_state(d, &tmp, d->self, S_INTRO, NO_ROOT);
    send_now(d, &tmp);
    d->noutq--; /* tmp was the last queued */
    d->mem -= ND_MSG_MAX;
    free(tmp.out);
}

int nd_publish(struct nd *d, const struct nd_pub *p)
{
    if (p->namelen > ND_NAME_MAX || p->lower > p->upper)
        return -EINVAL;
    int rc = pub_insert(d, d->self, p);
    if (!rc)
        emit_item(d, OP_ADD, p);
    return rc;
}

int nd_withdraw(struct nd *d, uint64_t id, int lost)
{
    struct origin *s = d->self;
    long at = pub_find(s, id);
    if (at < 0)
        return -ENOENT;
    memmove(s->pubs + at, s->pubs + at + 1, (s->npubs - (size_t)at - 1) * sizeof(*s->pubs));
    s->npubs--;
    unsigned char arg[9];
    put64(arg, id);
    arg[8] = lost != 0;
    emit_item(d, OP_DEL, arg);
    return 0;
}

void nd_tick(struct nd *d, uint64_t now_us)
{
    d->now = now_us;
    view_rebuild(d);
    size_t ntombs = 0;
    /* A live member answers a direct probe within a probe period or two. */
    uint64_t suspect_us = FM_MIN_U64(d->prm.down_us, 2 * (uint64_t)d->prm.probe_us + 1);
    for (size_t i = 0; i < d->tabcap; i++) {
        struct origin *o = d->tab[i];
        if (!o || o == d->self)
            continue;
        if (o->live) {
            int watched = o->monitored || o->suspect_since;
            if (watched && now_us - o->last_probe >= d->prm.probe_us)
                send_probe(d, o, K_PROBE);
            if (o->monitored && now_us - o->last_heard > d->prm.down_us)
                declare_down(d, o);
            else if (o->suspect_since && now_us - o->suspect_since > suspect_us)
                declare_down(d, o); /* reported down elsewhere, and silent to our probes */
        } else if (o->tomb_at && o->cardlen)
            ntombs++;
    }
    /* Forget members down for long; deleting moves entries, so rescan. */
    for (size_t i = 0; i < d->tabcap; i++) {
        struct origin *o = d->tab[i];
        if (o && !o->live && o->tomb_at && now_us - o->tomb_at > d->prm.tomb_us) {
            origin_delete(d, o);
            i = (size_t)-1;
        }
    }
    /* One ping per period to a member believed down, picked at random: it
     * heals a partition once the network does. */
    if (ntombs && now_us >= d->next_rejoin) {
        d->next_rejoin = now_us + d->prm.rejoin_us;
        size_t pick = rnd(d) % ntombs;
        for (size_t i = 0; i < d->tabcap; i++) {
            struct origin *o = d->tab[i];
            if (o && o != d->self && !o->live && o->tomb_at && o->cardlen && pick-- == 0) {
                send_probe(d, o, K_PROBE);
                break;
            }
        }
    }
}

void nd_flush(struct nd *d)
{
    /* Batches live only until the flush: a buffer per member kept for
     * good would make a node's memory grow with the cluster times 16 KiB. */
    for (size_t k = 0; k < d->noutq; k++) {
        struct origin *o = d->outq[k];
        send_now(d, o);
        o->queued = 0;
        o->out = xrealloc(d, o->out, ND_MSG_MAX, 0);
    }
    d->noutq = 0;
}

void nd_peer_lost(struct nd *d, uint32_t node, uint64_t now_us)
{
    d->now = now_us;
    struct origin *o = find(d, node);
    if (o && o->live)
        declare_down(d, o);
}

void nd_leave(struct nd *d)
{
    unsigned char arg[8];
    put32(arg, d->node);
    put32(arg + 4, d->self->inc);
    emit_item(d, OP_DOWN, arg);
    nd_flush(d);
}

uint32_t nd_incarnation(const struct nd *d) { return d->self->inc; }
int nd_synced(const struct nd *d) { return d->synced; }
size_t nd_members(const struct nd *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->tabcap; i++)
        n += d->tab[i] && d->tab[i]->live;
    return n;
}
uint64_t nd_digest(const struct nd *d) { return d->digest; }
size_t nd_pubs(const struct nd *d)
{
    size_t n = 0;
    for (size_t i = 0; i < d->tabcap; i++)
        if (d->tab[i])
            n += d->tab[i]->npubs;
    return n;
}
size_t nd_memory(const struct nd *d) { return d->mem; }
int nd_has_member(const struct nd *d, uint32_t node)
{
    const struct origin *o = find(d, node);
    return o && o->live;
}
const struct nd_stats *nd_stats(const struct nd *d) { return &d->st; }
