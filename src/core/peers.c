/*
 * The peer table and peers by name: fm_ep_name, fm_addr_insert,
 * fm_addr_remove, fm_addr_name. A name (name.h) says which process an
 * endpoint belongs to; a process of this job maps to its rank, any other
 * becomes a named peer, one index per process however many of its
 * endpoints are inserted, so an address is (peer, channel) for both.
 */
#include "ctx.h"

#include "hex.h"
#include "key.h"
#include "log.h"
#include "name.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

/* Named peers by process (epoch, then pid and node), open addressing. */
struct fm_named_index {
    size_t cap, n;
    int *slot; /* peer index + 1, 0 empty */
};

static int chunk_ready(fm_ctx *ctx, int i)
{
    int c = i / FM_PEER_CHUNK;
    if (c >= FM_PEER_CHUNKS)
        return FM_ELIMIT;
    if (!ctx->peer_chunk[c]) {
        ctx->peer_chunk[c] = calloc(FM_PEER_CHUNK, sizeof(struct fm_peer));
        ctx->lost_chunk[c] = calloc(FM_PEER_CHUNK, sizeof(int));
        if (!ctx->peer_chunk[c] || !ctx->lost_chunk[c])
            return FM_ENOMEM;
    }
    return 0;
}

int fm_peers_init(fm_ctx *ctx)
{
    for (int i = 0; i < ctx->size; i += FM_PEER_CHUNK)
        if (chunk_ready(ctx, i))
            return FM_ENOMEM;
    if (chunk_ready(ctx, ctx->size)) /* the first named peer's, and a lost list's */
        return FM_ENOMEM;
    ctx->npeers = ctx->size;
    do {
        if (getrandom(&ctx->epoch, sizeof(ctx->epoch), 0) != (ssize_t)sizeof(ctx->epoch))
            return FM_ESYS;
    } while (ctx->epoch == 0);
    char id[128];
    fm_kernel_id(id, sizeof(id));
    ctx->node_hash = fm_name_hash(id);
    ctx->job_hash = fm_name_hash(ctx->boot.job);
    return 0;
}

void fm_peers_free(fm_ctx *ctx)
{
    for (int i = ctx->size; i < ctx->npeers; i++)
        free(fm_peer_at(ctx, i)->name);
    for (int c = 0; c < FM_PEER_CHUNKS; c++) {
        free(ctx->peer_chunk[c]);
        free(ctx->lost_chunk[c]);
    }
    if (ctx->named)
        free(ctx->named->slot);
    free(ctx->named);
}

/* ---- the named-peer index (ctx->lock held) -------------------------------------- */

static size_t named_hash(const struct fm_name *n, size_t cap)
{
    uint64_t h = ((uint64_t)n->epoch << 32 | n->pid) * 0x9E3779B97F4A7C15ull ^ n->node;
    return (size_t)(h >> 20) & (cap - 1);
}

static int named_find(const fm_ctx *ctx, const struct fm_name *n)
{
    const struct fm_named_index *x = ctx->named;
    if (!x || !x->cap)
        return -1;
    for (size_t i = named_hash(n, x->cap); x->slot[i]; i = (i + 1) & (x->cap - 1)) {
        int p = x->slot[i] - 1;
        if (fm_name_same_process(fm_peer_at(ctx, p)->name, n))
            return p;
    }
    return -1;
}

static int named_add(fm_ctx *ctx, int peer)
{
    struct fm_named_index *x = ctx->named;
    if (!x && !(x = ctx->named = calloc(1, sizeof(*x))))
        return FM_ENOMEM;
    if ((x->n + 1) * 2 > x->cap) {
        size_t cap = x->cap ? x->cap * 2 : 64;
        int *slot = calloc(cap, sizeof(*slot));
        if (!slot)
            return FM_ENOMEM;
        for (size_t i = 0; i < x->cap; i++)
            if (x->slot[i]) {
                size_t j = named_hash(fm_peer_at(ctx, x->slot[i] - 1)->name, cap);
                while (slot[j])
                    j = (j + 1) & (cap - 1);
                slot[j] = x->slot[i];
            }
        free(x->slot);
        x->slot = slot;
        x->cap = cap;
    }
    size_t j = named_hash(fm_peer_at(ctx, peer)->name, x->cap);
    while (x->slot[j])
        j = (j + 1) & (x->cap - 1);
    x->slot[j] = peer + 1;
    x->n++;
    return 0;
}

/* ---- the domain key ---------------------------------------------------------------- */

/*
 * Loads the domain key once and tells the links, which can then open and
 * accept sessions with named peers. Called with no lock held: it takes
 * domain_lock, and the links take their own after it (a link's upcall,
 * which holds the link's lock, never comes here).
 */
int fm_domain_ready(fm_ctx *ctx)
{
    if (__atomic_load_n(&ctx->have_domain, __ATOMIC_ACQUIRE))
        return 0;
    pthread_mutex_lock(&ctx->domain_lock);
    if (ctx->have_domain) {
        pthread_mutex_unlock(&ctx->domain_lock);
        return 0;
    }
    char err[512];
    int rc = fm_key_load(ctx->domain_key, ctx->key_source, sizeof(ctx->key_source), err,
                         sizeof(err));
    if (rc) {
        pthread_mutex_unlock(&ctx->domain_lock);
        fm_error("names", "%s", err);
        return rc;
    }
    struct fm_name self;
    fm_core_self_name(ctx, &self);
    uint8_t card[FM_NAME_MAX];
    size_t len = fm_name_encode(&self, card);
    for (int i = 0; i < fm_nlinks; i++)
        if (ctx->link_state[i] && fm_links[i]->named)
            fm_links[i]->named(ctx, ctx->link_state[i], ctx->domain_key, card, len);
    __atomic_store_n(&ctx->have_domain, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&ctx->domain_lock);
    fm_info("names", "domain key from %s", ctx->key_source);
    return 0;
}

/* ---- names ----------------------------------------------------------------------- */

void fm_core_self_name(fm_ctx *ctx, struct fm_name *n)
{
    memset(n, 0, sizeof(*n));
    n->job = ctx->job_hash;
    n->rank = (uint32_t)ctx->rank;
    n->epoch = ctx->epoch;
    n->node = ctx->node_hash;
    n->pid = (uint32_t)getpid();
    n->seg_fd = -1;
    for (int i = 0; i < fm_nlinks; i++)
        if (ctx->link_state[i] && fm_links[i]->describe)
            fm_links[i]->describe(ctx, ctx->link_state[i], n);
}

int fm_ep_name(const fm_ep *ep, void *name, size_t *len)
{
    if (!ep || !name || !len)
        return FM_EINVAL;
    fm_ctx *ctx = ep->ctx;
    struct fm_name n;
    int rc = fm_domain_ready(ctx);
    if (rc)
        return rc;
    fm_core_self_name(ctx, &n);
    n.channel = ep->channel;
    if (*len < fm_name_size(&n))
        return FM_EMSGSIZE;
    *len = fm_name_encode(&n, name);
    return 0;
}

/* Whether a name is of a rank of this job. */
static int of_this_job(const fm_ctx *ctx, const struct fm_name *n)
{
    return n->job == ctx->job_hash && (int)n->rank < ctx->size &&
           ((int)n->rank != ctx->rank || n->epoch == ctx->epoch);
}

/* The peer of a process's name: a rank of this job, or a named peer, made
 * on first sight (ctx->lock held). */
static int peer_of_name(fm_ctx *ctx, const struct fm_name *n, int *peer)
{
    if (of_this_job(ctx, n)) {
        *peer = (int)n->rank;
        return 0;
    }
    int p = named_find(ctx, n);
    if (p < 0) {
        p = ctx->npeers;
        struct fm_name *copy = malloc(sizeof(*copy));
        if (!copy || chunk_ready(ctx, p + 1)) {
            free(copy);
            return FM_ENOMEM;
        }
        *copy = *n;
        copy->channel = 0;
        struct fm_peer *e = fm_peer_at(ctx, p);
        e->name = copy;
        e->state = FM_PEER_UP;
        if (named_add(ctx, p)) {
            free(copy);
            e->name = NULL;
            return FM_ENOMEM;
        }
        __atomic_store_n(&ctx->npeers, p + 1, __ATOMIC_RELEASE);
        fm_info("names", "peer %d is pid %u on node %08x (epoch %08x)", p, n->pid, n->node,
                n->epoch);
    }
    __atomic_and_fetch(&fm_peer_at(ctx, p)->state, (uint8_t)~FM_PEER_REMOVED, __ATOMIC_RELEASE);
    *peer = p;
    return 0;
}

int fm_addr_insert(fm_ctx *ctx, const void *name, size_t len, fm_addr *addr)
{
    struct fm_name n;
    if (!ctx || !addr || fm_name_decode(name, len, &n) != 0)
        return FM_EINVAL;
    int peer, rc;
    /* Sessions with it run under the domain key. */
    if (!of_this_job(ctx, &n) && (rc = fm_domain_ready(ctx)) != 0)
        return rc;
    pthread_mutex_lock(&ctx->lock);
    rc = peer_of_name(ctx, &n, &peer);
    pthread_mutex_unlock(&ctx->lock);
    if (!rc)
        *addr = fm_addr_make(peer, n.channel);
    return rc;
}

int fm_core_peer_by_name(fm_ctx *ctx, const void *card, size_t len, uint32_t epoch)
{
    struct fm_name n;
    if (fm_name_decode(card, len, &n) != 0 || n.epoch != epoch)
        return FM_EINVAL;
    int peer;
    pthread_mutex_lock(&ctx->lock);
    int rc = peer_of_name(ctx, &n, &peer);
    pthread_mutex_unlock(&ctx->lock);
    return rc ? rc : peer;
}

int fm_addr_remove(fm_ctx *ctx, fm_addr addr)
{
    int p = fm_addr_rank_of(addr);
    if (!ctx || addr == FM_ADDR_NONE || !fm_peer_valid(ctx, p) || p < ctx->size)
        return FM_EINVAL;
    __atomic_or_fetch(&fm_peer_at(ctx, p)->state, FM_PEER_REMOVED, __ATOMIC_RELEASE);
    return 0;
}

/* The name a rank of this job published at fm_init (fm_peers_publish). */
static int rank_name(fm_ctx *ctx, int rank, struct fm_name *n)
{
    char hex[2 * FM_NAME_MAX + 1];
    uint8_t card[FM_NAME_MAX];
    if (fm_core_boot_get(ctx, rank, "name", hex, sizeof(hex)) != 0)
        return FM_EINVAL;
    size_t len = strlen(hex) / 2;
    if (len > sizeof(card) || fm_hex_decode(hex, card, len) != 0)
        return FM_EINVAL;
    return fm_name_decode(card, len, n);
}

int fm_peers_publish(fm_ctx *ctx)
{
    struct fm_name self;
    uint8_t card[FM_NAME_MAX];
    char hex[2 * FM_NAME_MAX + 1];
    fm_core_self_name(ctx, &self);
    fm_hex_encode(card, fm_name_encode(&self, card), hex);
    return ctx->boot.ops->put(&ctx->boot, "name", hex);
}

int fm_addr_name(const fm_ctx *ctx, fm_addr addr, void *name, size_t *len)
{
    int p = fm_addr_rank_of(addr);
    if (!ctx || !name || !len || addr == FM_ADDR_NONE || !fm_peer_valid(ctx, p))
        return FM_EINVAL;
    struct fm_name n;
    if (p == ctx->rank) {
        fm_core_self_name((fm_ctx *)ctx, &n);
    } else if (p >= ctx->size) {
        n = *fm_peer_at(ctx, p)->name;
    } else if (rank_name((fm_ctx *)ctx, p, &n) != 0) {
        return FM_EINVAL;
    }
    n.channel = fm_addr_channel(addr);
    if (*len < fm_name_size(&n))
        return FM_EMSGSIZE;
    *len = fm_name_encode(&n, name);
    return 0;
}

int fm_core_peer_name(const fm_ctx *ctx, int peer, struct fm_name *n)
{
    if (!fm_peer_valid(ctx, peer) || peer < ctx->size)
        return FM_EINVAL;
    *n = *fm_peer_at(ctx, peer)->name;
    return 0;
}

uint32_t fm_core_epoch(const fm_ctx *ctx) { return ctx->epoch; }
