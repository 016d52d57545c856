/* Endpoints: opening channels, the send path (routes to rings) and the
 * zero-copy receive path (held messages released oldest first). */
#include "ctx.h"

#include "log.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

/* Sends between two checks of the peers' liveness on a path that never
 * has to retry (the check itself is rate-limited by FM_PEER_CHECK_MS). */
#define SENDS_PER_CHECK 4096

/* Polls that find a ring of the ready set empty before it leaves the set. */
#define LINGER_POLLS 64

/* ---- opening and closing ------------------------------------------------ */

static void drop_route(fm_ep *ep, struct fm_route *rt, int closing)
{
    if (rt->link && rt->link->drop)
        rt->link->drop(ep, rt, closing);
    rt->link = NULL;
    rt->gen_word = NULL;
}

/* Frees an endpoint nothing names any more: unpublished, and every link's
 * ep_close has run (core_api.h), so no other thread can reach it. */
static void ep_free(fm_ep *ep)
{
    if (ep->epfd >= 0)
        close(ep->epfd);
    if (ep->bell_rd >= 0) {
        close(ep->bell_rd);
        close(ep->bell_wr);
    }
    free(ep->attached); /* the rings are their links' */
    for (size_t i = 0; i < ep->routes_cap; i++)
        free(ep->routes[i]);
    free(ep->routes);
    free(ep->want_space);
    free(ep->held);
    free(ep->active);
    free(ep);
}

/* Every link that opened something for ep lets go of it. */
static void links_ep_close(fm_ep *ep)
{
    fm_ctx *ctx = ep->ctx;
    for (int i = fm_nlinks - 1; i >= 0; i--)
        if (ep->link_state[i])
            fm_links[i]->ep_close(ctx, ctx->link_state[i], ep, ep->link_state[i]);
}

int fm_ep_open(fm_ctx *ctx, uint32_t channel, fm_ep **out)
{
    if (!ctx || !out)
        return FM_EINVAL;
    fm_ep *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return FM_ENOMEM;
    ep->ctx = ctx;
    ep->channel = channel;
    ep->bell_rd = ep->bell_wr = ep->epfd = -1;
    ep->sleeping = &ep->own_sleeping;
    ep->sends_to_check = SENDS_PER_CHECK;
    ep->held_cap = 64;
    ep->held = calloc(ep->held_cap, sizeof(*ep->held));
    if (!ep->held) {
        ep_free(ep);
        return FM_ENOMEM;
    }
    int rc = 0, slot = -1;
    pthread_mutex_lock(&ctx->lock);
    for (int s = 0; s < ctx->cfg.ep_max; s++) {
        if (ctx->eps[s] && ctx->eps[s]->channel == channel) {
            rc = FM_EBUSY;
            break;
        }
        if (!ctx->eps[s] && slot < 0)
            slot = s;
    }
    if (!rc && slot < 0)
        rc = FM_ELIMIT;
    if (!rc) {
        ep->slot = slot;
        ctx->eps[slot] = ep; /* holds the slot and channel; not published yet */
    }
    pthread_mutex_unlock(&ctx->lock);
    if (rc) {
        ep_free(ep);
        return rc;
    }
    for (int i = 0; i < fm_nlinks && !rc; i++)
        if (ctx->link_state[i])
            rc = fm_links[i]->ep_open(ctx, ctx->link_state[i], ep, &ep->link_state[i]);
    pthread_mutex_lock(&ctx->lock);
    if (rc) {
        ctx->eps[slot] = NULL;
    } else {
        /* Losses before the endpoint existed are not its news. */
        ep->lost_seen = __atomic_load_n(&ctx->nlost, __ATOMIC_ACQUIRE);
        ep->published = 1;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (rc) {
        links_ep_close(ep);
        ep_free(ep);
        return rc;
    }
    /* Rings that links hold for this channel (they came before it opened)
     * can be attached now; those that cannot yet (no memory) at a later
     * call, which a news word unlike the one seen brings. */
    for (int i = 0; i < fm_nlinks; i++)
        if (ep->link_state[i] && fm_links[i]->refresh &&
            fm_links[i]->refresh(ctx, ctx->link_state[i], ep, ep->link_state[i]) != 0 &&
            ep->news && i == ep->news_link)
            ep->news_seen = ~__atomic_load_n(ep->news, __ATOMIC_ACQUIRE);
    *out = ep;
    return 0;
}

/* An uncommitted grant is given up: the link lets go of what it holds
 * (over the network, a pin that kept its flow from growing for good). */
static void abandon_grant(fm_ep *ep)
{
    struct fm_route *rt = ep->grant;
    ep->grant = NULL;
    if (rt && !rt->direct && rt->link->abandon)
        rt->link->abandon(ep, rt);
}

/*
 * One owner for an endpoint's lifetime (core_api.h): unpublish it under
 * ctx->lock first, so that no link can attach a ring to it any more, then
 * end its routes and let each link forget it, then give its slot back and
 * free it.
 */
int fm_ep_close(fm_ep *ep)
{
    if (!ep)
        return FM_EINVAL;
    fm_ctx *ctx = ep->ctx;
    fm_names_ep_closed(ep);
    abandon_grant(ep);
    pthread_mutex_lock(&ctx->lock);
    ep->published = 0;
    pthread_mutex_unlock(&ctx->lock);
    for (size_t i = 0; i < ep->routes_cap; i++)
        if (ep->routes[i])
            drop_route(ep, ep->routes[i], 1);
    links_ep_close(ep);
    /* Only now may another thread's fm_ep_open take the slot: the links
     * have finished with it. */
    pthread_mutex_lock(&ctx->lock);
    ctx->eps[ep->slot] = NULL;
    pthread_mutex_unlock(&ctx->lock);
    ep_free(ep);
    return 0;
}

/* ---- the core API of links (core_api.h) ----------------------------------- */

/* Appends rx to ep's attached rings; ctx->lock held. */
static int attach_locked(fm_ep *ep, struct fm_rx *rx)
{
    if (ep->nattached == ep->attached_cap) {
        int cap = ep->attached_cap ? ep->attached_cap * 2 : 8;
        struct fm_rx **a = realloc(ep->attached, sizeof(*a) * (size_t)cap);
        if (!a)
            return FM_ENOMEM;
        ep->attached = a;
        ep->attached_cap = cap;
    }
    /* Its link's state, for releasing and retiring without a search. */
    rx->link_state = ep->ctx->link_state[fm_link_index(rx->link)];
    rx->slot = ep->nattached;
    ep->attached[ep->nattached] = rx;
    __atomic_store_n(&ep->nattached, ep->nattached + 1, __ATOMIC_RELEASE);
    return 0;
}

fm_ep *fm_core_ep_on(fm_ctx *ctx, uint32_t channel)
{
    fm_ep *ep = NULL;
    pthread_mutex_lock(&ctx->lock);
    for (int s = 0; s < ctx->cfg.ep_max && !ep; s++)
        if (ctx->eps[s] && ctx->eps[s]->published && ctx->eps[s]->channel == channel)
            ep = ctx->eps[s];
    pthread_mutex_unlock(&ctx->lock);
    return ep;
}

int fm_core_ep_attach_rx(fm_ep *ep, struct fm_rx *rx)
{
    pthread_mutex_lock(&ep->ctx->lock);
    int rc = attach_locked(ep, rx);
    pthread_mutex_unlock(&ep->ctx->lock);
    return rc;
}

void fm_core_rx_end(struct fm_rx *rx) { __atomic_store_n(&rx->ended, 1, __ATOMIC_RELEASE); }

/*
 * The ready set's mark: the link publishes records, then sets the mark; the
 * reader clears it, then reads the ring once more (settle). Both are
 * exchanges, so one of them reads the other's value: the link's 0 (it puts
 * the ring in the set), or the reader's 1, and with it the records.
 */
void fm_core_rx_ready(fm_ep *ep, struct fm_rx *rx)
{
    if (!__atomic_exchange_n(&rx->queued, 1, __ATOMIC_ACQ_REL)) {
        struct fm_rx *head = __atomic_load_n(&ep->ready_in, __ATOMIC_RELAXED);
        do
            rx->ready_next = head;
        while (!__atomic_compare_exchange_n(&ep->ready_in, &head, rx, 1, __ATOMIC_RELEASE,
                                            __ATOMIC_RELAXED));
    }
    fm_core_wake(ep);
}

fm_ctx *fm_core_ep_ctx(const fm_ep *ep) { return ep->ctx; }
uint32_t fm_core_ep_channel(const fm_ep *ep) { return ep->channel; }
int fm_core_ep_slot(const fm_ep *ep) { return ep->slot; }

void *fm_core_ep_state(const fm_ep *ep, const struct fm_link *link)
{
    return ep->link_state[fm_link_index(link)];
}

/* Atomic: a peer's loss wakes every endpoint in the table, one still
 * opening (its link setting this) included, from another thread. */
void fm_core_ep_sleep_word(fm_ep *ep, uint32_t *word)
{
    __atomic_store_n(&ep->sleeping, word, __ATOMIC_RELEASE);
}

void fm_core_ep_news(fm_ep *ep, const struct fm_link *link, const uint32_t *word)
{
    ep->news = word;
    ep->news_link = fm_link_index(link);
    ep->news_seen = __atomic_load_n(word, __ATOMIC_ACQUIRE); /* fm_ep_open refreshes anyway */
}

void fm_core_wake(fm_ep *ep)
{
    /* Pairs with the fence fm_wait makes between setting `sleeping` and
     * looking at the rings once more. */
    fm_fence_fast(ep->ctx);
    if (!__atomic_load_n(__atomic_load_n(&ep->sleeping, __ATOMIC_ACQUIRE), __ATOMIC_RELAXED))
        return;
    /* Made before `sleeping` is first set, closed only by ep_free. A full
     * pipe already holds a wake-up: EAGAIN is fine. */
    int fd = __atomic_load_n(&ep->bell_wr, __ATOMIC_ACQUIRE);
    if (fd >= 0) {
        ssize_t n = write(fd, "", 1);
        (void)n;
    }
}

/* ---- the ready set of announced rings (only the reader's thread) ---- */

static void hot_append(fm_ep *ep, struct fm_rx *rx)
{
    rx->hot_next = NULL;
    if (ep->hot_tail)
        ep->hot_tail->hot_next = rx;
    else
        ep->hot_head = rx;
    ep->hot_tail = rx;
}

static struct fm_rx *hot_pop(fm_ep *ep)
{
    struct fm_rx *rx = ep->hot_head;
    ep->hot_head = rx->hot_next;
    if (!ep->hot_head)
        ep->hot_tail = NULL;
    return rx;
}

/* What links pushed joins the reader's FIFO, oldest news first. */
static void take_ready_in(fm_ep *ep)
{
    struct fm_rx *rx = __atomic_exchange_n(&ep->ready_in, NULL, __ATOMIC_ACQUIRE), *fifo = NULL;
    while (rx) {
        struct fm_rx *next = rx->ready_next;
        rx->ready_next = fifo;
        fifo = rx;
        rx = next;
    }
    for (; fifo; fifo = fifo->ready_next)
        hot_append(ep, fifo);
}

/* Rings attached since the last call join ep's polling, or its ready set
 * (they may hold messages the link announced before they were adopted). */
static void adopt_attached(fm_ep *ep)
{
    fm_ctx *ctx = ep->ctx;
    pthread_mutex_lock(&ctx->lock);
    int want = ep->nactive + (ep->nattached - ep->nadopted);
    if (want > ep->active_cap) {
        struct fm_rx **a = realloc(ep->active, sizeof(*a) * (size_t)want);
        if (!a) {
            pthread_mutex_unlock(&ctx->lock);
            return; /* tried again at the next poll */
        }
        ep->active = a;
        ep->active_cap = want;
    }
    while (ep->nadopted < ep->nattached) {
        struct fm_rx *rx = ep->attached[ep->nadopted++];
        if (!rx->announced)
            ep->active[ep->nactive++] = rx;
        else if (!__atomic_exchange_n(&rx->queued, 1, __ATOMIC_ACQUIRE))
            hot_append(ep, rx);
    }
    pthread_mutex_unlock(&ctx->lock);
}

/* An attached ring that ended and was read to its end leaves (its link
 * frees it afterwards). */
static void detach(fm_ep *ep, struct fm_rx *rx)
{
    fm_ctx *ctx = ep->ctx;
    pthread_mutex_lock(&ctx->lock);
    /* If rx is among the adopted ones, [0, nadopted), the last adopted one
     * takes its place; the last attached one fills the hole left, so that
     * both parts stay whole. */
    int hole = rx->slot;
    if (hole < ep->nadopted) {
        int last = --ep->nadopted;
        if (last != hole) {
            ep->attached[hole] = ep->attached[last];
            ep->attached[hole]->slot = hole;
        }
        hole = last;
    }
    /* (Not adopted yet: an announced ring that a failed adoption left
     * out can be read, and retired, from the ready set.) */
    int last = --ep->nattached;
    if (last != hole) {
        ep->attached[hole] = ep->attached[last];
        ep->attached[hole]->slot = hole;
    }
    pthread_mutex_unlock(&ctx->lock);
}

fm_addr fm_ep_addr(const fm_ep *ep)
{
    return ep ? fm_addr_make(ep->ctx->rank, ep->channel) : FM_ADDR_NONE;
}

/* ---- routes: destination address -> ring --------------------------------- */

static size_t route_hash(fm_addr a, size_t cap)
{
    return (size_t)((a * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

static struct fm_route **route_slot(fm_ep *ep, fm_addr dst)
{
    size_t i = route_hash(dst, ep->routes_cap);
    while (ep->routes[i] && ep->routes[i]->dst != dst)
        i = (i + 1) & (ep->routes_cap - 1);
    return &ep->routes[i];
}

static int routes_grow(fm_ep *ep)
{
    size_t old_cap = ep->routes_cap, cap = old_cap ? old_cap * 2 : 16;
    struct fm_route **old = ep->routes;
    ep->routes = calloc(cap, sizeof(*ep->routes));
    if (!ep->routes) {
        ep->routes = old;
        return FM_ENOMEM;
    }
    ep->routes_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i])
            *route_slot(ep, old[i]->dst) = old[i];
    free(old);
    return 0;
}

static int route_valid(const struct fm_route *rt)
{
    return rt->gen_word && __atomic_load_n(rt->gen_word, __ATOMIC_ACQUIRE) == rt->gen;
}

/* Routes at which the table is swept of stale ones before it grows (a
 * server that answers thousands of short-lived endpoints would otherwise
 * keep a route, and its ended flow, for each). */
#define ROUTES_SWEEP 1024

static void routes_sweep(fm_ep *ep)
{
    size_t cap = ep->routes_cap;
    struct fm_route **old = ep->routes;
    ep->routes = calloc(cap, sizeof(*ep->routes));
    if (!ep->routes) {
        ep->routes = old;
        return;
    }
    ep->nroutes = 0;
    for (size_t i = 0; i < cap; i++) {
        struct fm_route *rt = old[i];
        if (!rt)
            continue;
        if (route_valid(rt) || rt == ep->grant) {
            *route_slot(ep, rt->dst) = rt;
            ep->nroutes++;
            continue;
        }
        drop_route(ep, rt, 0);
        for (int w = 0; w < ep->nwant; w++)
            if (ep->want_space[w].rt == rt)
                ep->want_space[w] = ep->want_space[--ep->nwant];
        if (ep->last == rt)
            ep->last = NULL;
        free(rt);
    }
    free(old);
}

/* The first link from `from` on, in the registry's order, that reaches
 * `peer`, or -1. */
static int link_for(fm_ctx *ctx, int peer, int from)
{
    for (int i = from; i < fm_nlinks; i++)
        if (ctx->link_state[i] && fm_links[i]->reaches(ctx, ctx->link_state[i], peer))
            return i;
    return -1;
}

/* The route to dst, resolved (again) if the receiving endpoint changed. */
static int route_get(fm_ep *ep, fm_addr dst, struct fm_route **out)
{
    fm_ctx *ctx = ep->ctx;
    int rank = fm_addr_rank_of(dst);
    if (dst == FM_ADDR_NONE || !fm_peer_valid(ctx, rank))
        return FM_EINVAL;
    uint8_t state = __atomic_load_n(&fm_peer_at(ctx, rank)->state, __ATOMIC_ACQUIRE);
    if (state != FM_PEER_UP)
        return state & FM_PEER_REMOVED ? FM_EINVAL : FM_EPEERLOST;
    int li = link_for(ctx, rank, 0);
    if (li < 0)
        return FM_EUNREACH;
    if (ep->nroutes >= ROUTES_SWEEP && ep->nroutes * 2 >= ep->routes_cap)
        routes_sweep(ep);
    if (ep->nroutes * 2 >= ep->routes_cap && routes_grow(ep))
        return FM_ENOMEM;
    struct fm_route **slot = route_slot(ep, dst);
    struct fm_route *rt = *slot;
    if (!rt) {
        rt = calloc(1, sizeof(*rt));
        if (!rt)
            return FM_ENOMEM;
        rt->dst = dst;
        *slot = rt;
        ep->nroutes++;
    }
    if (!route_valid(rt)) {
        drop_route(ep, rt, 0);
        const struct fm_link *l;
        int rc;
        /* A link that reaches the peer but has no room for us (FM_EUNREACH:
         * say, a full sender table) leaves it to the next one. */
        do {
            l = fm_links[li];
            rc = l->resolve(ctx, ctx->link_state[li], ep, ep->link_state[li], rank,
                            fm_addr_channel(dst), rt);
        } while (rc == FM_EUNREACH && (li = link_for(ctx, rank, li + 1)) >= 0);
        if (rc) {
            rt->gen_word = NULL;
            if (rc == FM_EAGAIN)
                ep->want_open = 1;
            return rc;
        }
        rt->link = l;
        rt->max_msg = l->max_msg(ctx);
    }
    ep->last = rt;
    *out = rt;
    return 0;
}

/* The smallest part of a `len`-byte send that a link takes: a send that
 * found too little room waits until this much fits. A ring that cannot
 * grow takes parts of a quarter of itself: waiting for more would wait for
 * ever on a small one (a 64 KiB message, a 32 KiB ring). */
static size_t smallest_part(const struct fm_route *rt, size_t len)
{
    return FM_MIN(len, FM_MIN(rt->max_msg, rt->ring.size) / 4);
}

/* Remembers that a send to rt found its ring full, for fm_wait. */
static void want_space(fm_ep *ep, struct fm_route *rt, uint64_t need)
{
    for (int i = 0; i < ep->nwant; i++)
        if (ep->want_space[i].rt == rt) {
            ep->want_space[i].need = FM_MIN(ep->want_space[i].need, need);
            return;
        }
    if (ep->nwant == ep->want_cap) {
        int cap = ep->want_cap ? ep->want_cap * 2 : 8;
        struct fm_want *w = realloc(ep->want_space, (size_t)cap * sizeof(*w));
        if (!w)
            return; /* fm_wait then only learns of space by polling */
        ep->want_space = w;
        ep->want_cap = cap;
    }
    ep->want_space[ep->nwant++] = (struct fm_want){rt, need};
}

static inline int peer_up(const fm_ctx *ctx, fm_addr dst)
{
    return __atomic_load_n(&fm_peer_at(ctx, fm_addr_rank_of(dst))->state, __ATOMIC_RELAXED) ==
           FM_PEER_UP;
}

/* Why a send to a peer that is not up fails. */
static int peer_down(const fm_ctx *ctx, fm_addr dst)
{
    uint8_t state = __atomic_load_n(&fm_peer_at(ctx, fm_addr_rank_of(dst))->state,
                                    __ATOMIC_ACQUIRE);
    return state & FM_PEER_REMOVED ? FM_EINVAL : FM_EPEERLOST;
}

/* A send that cannot go now: was it because the peer is gone? */
static ssize_t send_again(fm_ep *ep, fm_addr dst, struct fm_route *rt, int rc, uint64_t need)
{
    fm_ctx *ctx = ep->ctx;
    if (rt)
        want_space(ep, rt, need);
    fm_ctx_check_peers(ctx, 0);
    int rank = fm_addr_rank_of(dst);
    if (__atomic_load_n(&fm_peer_at(ctx, rank)->state, __ATOMIC_ACQUIRE) != FM_PEER_UP)
        return peer_down(ctx, dst);
    return rc;
}

/* Finds the route for a send: the last one if it still holds. */
static inline int route_for_send(fm_ep *ep, fm_addr dst, struct fm_route **rt)
{
    struct fm_route *last = ep->last;
    if (fm_likely(last && last->dst == dst && route_valid(last))) {
        *rt = last;
        return 0;
    }
    return route_get(ep, dst, rt);
}

static inline void count_send(fm_ep *ep)
{
    ep->sent_since_wait = 1;
    if (fm_unlikely(--ep->sends_to_check == 0)) {
        ep->sends_to_check = SENDS_PER_CHECK;
        fm_ctx_check_peers(ep->ctx, 0);
    }
}

/* ---- direct routes: the receiver reads the route's ring itself ----------- *
 *
 * The shared-memory link's send is a copy into the receiver's ring, one
 * release store, and a system call only if the receiver sleeps. The core
 * does it here, inline, instead of through the link's ops: an indirect call
 * per message costs what a whole 8-byte send does (docs/ARCHITECTURE.md).
 */

/* After a record is published: wake the receiver if it sleeps. The fence
 * pairs with the one in fm_wait between setting `sleeping` and rechecking
 * the rings, so that one of the two sides always sees the other. */
static inline void direct_notify(fm_ep *ep, struct fm_route *rt)
{
    fm_fence_fast(ep->ctx);
    if (fm_unlikely(__atomic_load_n(rt->sleeping, __ATOMIC_RELAXED)))
        rt->link->notify(ep, rt);
}

/* Writes the FM_REC_SRC record that tells the receiver our channel. */
static int direct_tell_src(fm_ep *ep, struct fm_route *rt)
{
    if (fm_ring_room(&rt->ring, 4) < 4)
        return FM_EAGAIN;
    struct iovec v = {&ep->channel, 4};
    fm_ring_write(&rt->ring, FM_REC_SRC, &v, 1, 4);
    rt->ring.ctl->src_channel = ep->channel;
    rt->ring.ctl->src_told = 1;
    rt->need_src = 0;
    return 0;
}

static inline ssize_t direct_send(fm_ep *ep, struct fm_route *rt, const struct iovec *iov,
                                  int iovcnt, size_t total)
{
    if (fm_unlikely(rt->need_src) && direct_tell_src(ep, rt) < 0)
        return FM_EAGAIN;
    int64_t n = fm_ring_take(&rt->ring, total, rt->max_msg);
    if (fm_unlikely(n < 0))
        return FM_EAGAIN;
    fm_ring_write(&rt->ring, FM_REC_DATA, iov, iovcnt, (size_t)n);
    direct_notify(ep, rt);
    return (ssize_t)n;
}

static ssize_t direct_grant(fm_ep *ep, struct fm_route *rt, size_t len, void **buf)
{
    if (rt->need_src && direct_tell_src(ep, rt) < 0)
        return FM_EAGAIN;
    int64_t n = fm_ring_take_grant(&rt->ring, len, rt->max_msg, buf);
    return n < 0 ? FM_EAGAIN : (ssize_t)n;
}

static void direct_commit(fm_ep *ep, struct fm_route *rt, size_t len)
{
    fm_ring_publish(&rt->ring, FM_REC_DATA, (uint32_t)len);
    direct_notify(ep, rt);
}

/* ---- sending ------------------------------------------------------------- */

ssize_t fm_send(fm_ep *ep, fm_addr dst, const struct iovec *iov, int iovcnt)
{
    if (fm_unlikely(!ep || iovcnt < 0 || iovcnt > IOV_MAX || (iovcnt > 0 && !iov)))
        return FM_EINVAL;
    size_t total = 0;
    for (int i = 0; i < iovcnt; i++) {
        if (fm_unlikely(iov[i].iov_len && !iov[i].iov_base))
            return FM_EINVAL;
        total += iov[i].iov_len;
        if (fm_unlikely(total < iov[i].iov_len || total > SSIZE_MAX))
            return FM_EMSGSIZE;
    }
    if (fm_unlikely(ep->grant))
        abandon_grant(ep);
    struct fm_route *rt;
    int rc = route_for_send(ep, dst, &rt);
    if (fm_unlikely(rc))
        return rc == FM_EAGAIN ? send_again(ep, dst, NULL, rc, 0) : rc;
    if (fm_unlikely(!peer_up(ep->ctx, dst)))
        return peer_down(ep->ctx, dst);
    ssize_t n = fm_likely(rt->direct) ? direct_send(ep, rt, iov, iovcnt, total)
                                      : rt->link->send(ep, rt, iov, iovcnt, total);
    if (fm_unlikely(n < 0))
        return send_again(ep, dst, rt, (int)n,
                          FM_REC_SIZE(smallest_part(rt, total)) + FM_REC_HDR);
    count_send(ep);
    return n;
}

ssize_t fm_send_prepare(fm_ep *ep, fm_addr dst, size_t len, void **buf)
{
    if (!ep || !buf)
        return FM_EINVAL;
    abandon_grant(ep);
    struct fm_route *rt;
    int rc = route_for_send(ep, dst, &rt);
    if (rc)
        return rc == FM_EAGAIN ? send_again(ep, dst, NULL, rc, 0) : rc;
    if (!peer_up(ep->ctx, dst))
        return peer_down(ep->ctx, dst);
    void *p;
    ssize_t n = rt->direct ? direct_grant(ep, rt, len, &p) : rt->link->grant(ep, rt, len, &p);
    if (n < 0)
        return send_again(ep, dst, rt, (int)n,
                          fm_ring_grant_need(&rt->ring, smallest_part(rt, len)));
    ep->grant = rt;
    ep->granted = (size_t)n;
    *buf = p;
    return n;
}

int fm_send_commit(fm_ep *ep, size_t len)
{
    if (!ep || !ep->grant || len > ep->granted)
        return FM_EINVAL;
    struct fm_route *rt = ep->grant;
    ep->grant = NULL;
    if (rt->direct)
        direct_commit(ep, rt, len);
    else if (rt->link->commit(ep, rt, len) < 0 && !peer_up(ep->ctx, rt->dst))
        return peer_down(ep->ctx, rt->dst); /* dropped: its peer was lost meanwhile */
    count_send(ep);
    return 0;
}

/* ---- receiving ----------------------------------------------------------- */

static int held_grow(fm_ep *ep)
{
    size_t cap = ep->held_cap * 2;
    struct fm_held *h = malloc(cap * sizeof(*h));
    if (!h)
        return FM_ENOMEM;
    for (size_t i = 0; i < ep->nheld; i++)
        h[i] = ep->held[(ep->held_head + i) & (ep->held_cap - 1)];
    free(ep->held);
    ep->held = h;
    ep->held_cap = cap;
    ep->held_head = 0;
    return 0;
}

/*
 * Frees ring space up to pos. The producer is told (head is written) only
 * once an eighth of the ring has gathered: a head that changed with every
 * message would bounce its cache line between the cores whenever the ring
 * runs full. The producer can still always go on, since at most an eighth
 * of the ring is withheld and a message is at most half of it.
 */
static void rx_release(fm_ctx *ctx, struct fm_rx *rx, uint64_t pos)
{
    if (pos - rx->published < rx->ring.size / 8)
        return;
    rx->published = pos;
    fm_ring_release(&rx->ring, pos);
    /* The link tells the producer: a credit, or a wake-up if it waits. */
    rx->link->released(ctx, rx->link_state, rx);
}

/* Moves the read position past a record that carries no message. */
static void rx_skip(fm_ctx *ctx, struct fm_rx *rx, uint64_t rec)
{
    rx->rd += rec;
    if (rx->nheld == 0)
        rx_release(ctx, rx, rx->rd);
}

/* Takes the next message of one ring: its length, or -1 if none. */
static ssize_t rx_take(fm_ep *ep, struct fm_rx *rx, struct iovec *seg, int *nseg, fm_addr *src)
{
    for (;;) {
        uint64_t h = fm_ring_peek(&rx->ring, rx->rd);
        if (!h || rx->broken)
            return -1;
        if (fm_unlikely(!fm_ring_hdr_valid(&rx->ring, h))) {
            rx->broken = 1;
            fm_log_limited(FM_LOG_ERROR, "shm", 5,
                           "a ring to channel %u holds a bad header %#llx: no longer read",
                           ep->channel, (unsigned long long)h);
            return -1;
        }
        uint32_t len = FM_REC_LEN(h);
        switch (FM_REC_TYPE(h)) {
        case FM_REC_DATA:
            if (fm_unlikely(ep->nheld == ep->held_cap) && held_grow(ep))
                return -1;
            *nseg = fm_ring_segments(&rx->ring, rx->rd, len, seg);
            if (src)
                *src = rx->src;
            rx->rd += FM_REC_SIZE(len);
            rx->nheld++;
            ep->held[(ep->held_head + ep->nheld) & (ep->held_cap - 1)] =
                (struct fm_held){rx, rx->rd};
            ep->nheld++;
            return len;
        case FM_REC_SRC: {
            uint32_t channel;
            memcpy(&channel, (unsigned char *)fm_ring_word(&rx->ring, rx->rd + FM_REC_HDR), 4);
            rx->src = fm_addr_make(rx->src_rank, channel);
            rx_skip(ep->ctx, rx, FM_REC_SIZE(len));
            break;
        }
        default: /* FM_REC_PAD */
            rx_skip(ep->ctx, rx, FM_REC_SIZE(len));
            break;
        }
    }
}

/* Whether a link has rings for ep that it has not attached yet. */
static inline int news_waiting(const fm_ep *ep)
{
    return ep->news && __atomic_load_n(ep->news, __ATOMIC_ACQUIRE) != ep->news_seen;
}

static void take_news(fm_ep *ep)
{
    fm_ctx *ctx = ep->ctx;
    int i = ep->news_link;
    /* Read first: news that comes during the refresh brings another. What
     * the link could not attach (no memory) is not seen yet either. */
    uint32_t news = __atomic_load_n(ep->news, __ATOMIC_ACQUIRE);
    if (fm_links[i]->refresh(ctx, ctx->link_state[i], ep, ep->link_state[i]) == 0)
        ep->news_seen = news;
}

/* An ended ring read to its end leaves the endpoint; its link frees it. */
static int retire(fm_ep *ep, struct fm_rx *rx)
{
    if (!__atomic_load_n(&rx->ended, __ATOMIC_ACQUIRE) || fm_ring_peek(&rx->ring, rx->rd) ||
        rx->nheld)
        return 0;
    detach(ep, rx);
    const struct fm_link *l = rx->link;
    l->retire(ep->ctx, rx->link_state, rx);
    return 1;
}

/* The next message of the polled rings, round-robin from where the last
 * one came; sets *retired if a ring left. */
static ssize_t take_polled(fm_ep *ep, struct iovec *seg, int *nseg, fm_addr *src, int *retired)
{
    int n = ep->nactive;
    for (int k = 0, idx = ep->next; k < n; k++, idx = idx + 1 == n ? 0 : idx + 1) {
        struct fm_rx *rx = ep->active[idx];
        ssize_t len = rx_take(ep, rx, seg, nseg, src);
        if (len >= 0) {
            ep->next = idx + 1 == n ? 0 : idx + 1;
            return len;
        }
        if (fm_unlikely(__atomic_load_n(&rx->ended, __ATOMIC_RELAXED)) && retire(ep, rx)) {
            ep->active[idx] = ep->active[--ep->nactive];
            ep->next = 0;
            *retired = 1;
            return -1;
        }
    }
    return -1;
}

/*
 * A ring of the ready set found empty leaves it, unless news came
 * meanwhile: it clears its mark first and then looks once more (see
 * fm_core_rx_ready). An ended ring gets no more news: it is retired now,
 * or once what is held of it is released.
 */
static void settle(fm_ep *ep, struct fm_rx *rx, int *retired)
{
    if (__atomic_load_n(&rx->ended, __ATOMIC_ACQUIRE)) {
        if (fm_ring_peek(&rx->ring, rx->rd))
            hot_append(ep, rx); /* not taken for want of memory: later */
        else if (rx->nheld)
            rx->await_release = 1;
        else
            *retired |= retire(ep, rx);
        return;
    }
    __atomic_exchange_n(&rx->queued, 0, __ATOMIC_ACQ_REL);
    if ((fm_ring_peek(&rx->ring, rx->rd) || __atomic_load_n(&rx->ended, __ATOMIC_ACQUIRE)) &&
        !__atomic_exchange_n(&rx->queued, 1, __ATOMIC_ACQUIRE))
        hot_append(ep, rx);
}

/* The next message of the ready set: its rings in turn, at most one visit
 * each. A ring stays while it yields messages and for a few polls after
 * (a peer that sends again soon costs no marking and settling). */
static ssize_t take_announced(fm_ep *ep, struct iovec *seg, int *nseg, fm_addr *src,
                              int *retired)
{
    struct fm_rx *last = ep->hot_tail;
    while (ep->hot_head) {
        struct fm_rx *rx = hot_pop(ep);
        ssize_t len = rx_take(ep, rx, seg, nseg, src);
        if (len >= 0) {
            rx->idle_polls = 0;
            hot_append(ep, rx);
            return len;
        }
        int was_last = rx == last; /* (settle may retire it: freed) */
        if (rx->broken) {
            /* stays marked, and out */
        } else if (++rx->idle_polls < LINGER_POLLS &&
                   !__atomic_load_n(&rx->ended, __ATOMIC_RELAXED)) {
            hot_append(ep, rx);
        } else {
            rx->idle_polls = 0;
            settle(ep, rx, retired);
        }
        if (was_last)
            break;
    }
    return -1;
}

/* The next message of any ring; the polled rings and the ready set take
 * turns, message by message. */
static ssize_t poll_rings(fm_ep *ep, struct iovec *seg, int *nseg, fm_addr *src)
{
    if (fm_unlikely(news_waiting(ep)))
        take_news(ep);
    for (;;) {
        /* Before adopting: a ring may be announced as soon as attached. */
        if (__atomic_load_n(&ep->ready_in, __ATOMIC_RELAXED))
            take_ready_in(ep);
        if (fm_unlikely(ep->nadopted != __atomic_load_n(&ep->nattached, __ATOMIC_ACQUIRE)))
            adopt_attached(ep);
        int retired = 0, first = ep->hot_first;
        for (int k = 0; k < 2; k++) {
            int announced = first ^ k;
            ssize_t len = announced ? take_announced(ep, seg, nseg, src, &retired)
                                    : take_polled(ep, seg, nseg, src, &retired);
            if (len >= 0) {
                ep->hot_first = !announced;
                return len;
            }
        }
        if (!retired)
            return -1;
        /* The link may have attached the retired ring's successor (a grown
         * flow): look again, or a caller told "nothing" would report the
         * sender's loss before its last messages. */
    }
}

/* Whatever the node's name agent sends comes from FM_ADDR_NAMES. */
static inline ssize_t from_agent(const fm_ctx *ctx, fm_addr *src, ssize_t rc)
{
    int agent = __atomic_load_n(&ctx->names_peer, __ATOMIC_RELAXED);
    if (fm_unlikely(agent >= 0) && src && fm_addr_rank_of(*src) == agent)
        *src = FM_ADDR_NAMES;
    return rc;
}

ssize_t fm_recv(fm_ep *ep, struct iovec seg[FM_SEGS_MAX], int *nseg, fm_addr *src)
{
    if (fm_unlikely(!ep || !seg || !nseg))
        return FM_EINVAL;
    fm_ctx *ctx = ep->ctx;
    /* Read before the rings: a peer's last messages are delivered before
     * its loss is reported. */
    uint32_t nlost = __atomic_load_n(&ctx->nlost, __ATOMIC_ACQUIRE);
    ssize_t len = poll_rings(ep, seg, nseg, src);
    if (len >= 0)
        return from_agent(ctx, src, len);
    /* Nothing in memory: see what the network brought, then look again. */
    if (ctx->polled && fm_links_progress(ctx, 1) > 0 &&
        (len = poll_rings(ep, seg, nseg, src)) >= 0)
        return from_agent(ctx, src, len);
    if (ep->lost_seen < nlost) {
        int rank = fm_lost_at(ctx, ep->lost_seen++);
        if (src)
            *src = fm_addr_make(rank, ep->channel);
        return from_agent(ctx, src, FM_EPEERLOST);
    }
    fm_ctx_check_peers(ctx, 0);
    return FM_EAGAIN;
}

int fm_recv_done(fm_ep *ep)
{
    if (!ep || ep->nheld == 0)
        return FM_EINVAL;
    struct fm_held h = ep->held[ep->held_head];
    ep->held_head = (ep->held_head + 1) & (ep->held_cap - 1);
    ep->nheld--;
    struct fm_rx *rx = h.rx;
    rx->nheld--;
    /* With nothing else held in this ring, skipped records go too. */
    rx_release(ep->ctx, rx, rx->nheld ? h.end : rx->rd);
    if (fm_unlikely(rx->await_release) && !rx->nheld) {
        rx->await_release = 0;
        hot_append(ep, rx); /* to be retired at the next poll */
    }
    return 0;
}

/* ---- readiness, for fm_wait ------------------------------------------------ */

int fm_ep_ready(fm_ep *ep)
{
    if (news_waiting(ep) || ep->nadopted != __atomic_load_n(&ep->nattached, __ATOMIC_ACQUIRE) ||
        ep->lost_seen < __atomic_load_n(&ep->ctx->nlost, __ATOMIC_ACQUIRE) ||
        __atomic_load_n(&ep->ready_in, __ATOMIC_ACQUIRE))
        return 1;
    /* Of the ready set, rings that yielded a message may be empty now. An
     * ended one read to its end leaves, as a polled one does below. */
    for (struct fm_rx *rx = ep->hot_head, *prev = NULL, *next; rx; rx = next) {
        next = rx->hot_next;
        if (!rx->broken && fm_ring_peek(&rx->ring, rx->rd))
            return 1;
        int tail = ep->hot_tail == rx; /* (retire frees it) */
        if (!__atomic_load_n(&rx->ended, __ATOMIC_ACQUIRE) || !retire(ep, rx)) {
            prev = rx;
            continue;
        }
        *(prev ? &prev->hot_next : &ep->hot_head) = next;
        if (tail)
            ep->hot_tail = prev;
    }
    for (int i = 0; i < ep->nactive; i++) {
        struct fm_rx *rx = ep->active[i];
        if (!rx->broken && fm_ring_peek(&rx->ring, rx->rd))
            return 1;
        /* An ended ring read to its end leaves now, so that whoever is to
         * take its place (a sender slot on this node) need not wait for a
         * poll. */
        if (__atomic_load_n(&rx->ended, __ATOMIC_ACQUIRE) && retire(ep, rx)) {
            ep->active[i--] = ep->active[--ep->nactive];
            ep->next = 0;
        }
    }
    for (int i = 0; i < ep->nwant; i++) {
        struct fm_route *rt = ep->want_space[i].rt;
        uint64_t need = ep->want_space[i].need;
        if (!route_valid(rt) || fm_ring_free(&rt->ring, need) >= need) {
            ep->nwant = 0; /* the caller retries its sends */
            return 1;
        }
    }
    return 0;
}
