#include "netlink.h"

#include "core/log.h"
#include "engine.h"
#include "fault.h"
#include "rails.h"
#include "shm/shm.h"
#include "udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

struct fm_netlink {
    struct fm_net *engine;
    struct fm_udp rail[FM_RAILS_MAX]; /* a socket per rail */
    int nrails;
    struct fm_fault fault;
    pthread_mutex_t lock;
    struct fm_pkt_out out[FM_UDP_SEND_MAX];
    struct fm_pkt_out by_rail[FM_UDP_SEND_MAX]; /* out, one rail's packets at a time */
    struct fm_rxflow **parked; /* flows whose channel is not open (yet) */
    int nparked, parked_cap;
    pthread_t thread;
    int thread_on;
    int stop_fd;               /* eventfd that ends the progress thread */
    int stop;
};

/* ---- progress ------------------------------------------------------------------ */

/* Receives, runs timers, sends. Called with the net lock held. */
/* Receive batches between which acknowledgements go out: a sender learns
 * of its data soon even while a long queue is being read. */
#define RECV_ROUNDS 4

/* Sends n packets of nl->out, each on its rail's socket; one rail's packets
 * stay together so that runs of them go as one GSO send. */
static void send_out(struct fm_netlink *nl, int n)
{
    if (nl->nrails == 1) {
        fm_udp_send(&nl->rail[0], nl->engine, nl->out, n);
        return;
    }
    for (int r = 0; r < nl->nrails; r++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (nl->out[i].rail == r)
                nl->by_rail[m++] = nl->out[i];
        if (m)
            fm_udp_send(&nl->rail[r], nl->engine, nl->by_rail, m);
    }
}

/* Sends what the engine has, in batches. */
static void output(struct fm_netlink *nl, int flush, uint64_t now)
{
    int n;
    do {
        n = fm_net_output(nl->engine, nl->out, FM_UDP_SEND_MAX, flush, now);
        if (n)
            send_out(nl, n);
    } while (n == FM_UDP_SEND_MAX);
}

static int run(struct fm_netlink *nl, int flush)
{
    int got = 0;
    for (int round = 0; round < RECV_ROUNDS; round++) {
        uint64_t now = fm_now_ns();
        uint32_t busy = 0;
        for (int r = 0; r < nl->nrails; r++) {
            got += fm_udp_recv(&nl->rail[r], nl->engine, now);
            busy |= (uint32_t)nl->rail[r].busy << r;
        }
        fm_net_set_rails_busy(nl->engine, busy);
        output(nl, flush, now);
        if (!busy)
            break;
    }
    return got;
}

int fm_netlink_progress(fm_ctx *ctx, int flush)
{
    struct fm_netlink *nl = ctx->net;
    if (!nl || pthread_mutex_trylock(&nl->lock) != 0)
        return 0;
    int got = run(nl, flush);
    pthread_mutex_unlock(&nl->lock);
    return got;
}

uint64_t fm_netlink_deadline(fm_ctx *ctx)
{
    struct fm_netlink *nl = ctx->net;
    pthread_mutex_lock(&nl->lock);
    uint64_t d = fm_net_deadline(nl->engine);
    pthread_mutex_unlock(&nl->lock);
    return d;
}

static void *progress_thread(void *arg)
{
    fm_ctx *ctx = arg;
    struct fm_netlink *nl = ctx->net;
    struct pollfd pfd[FM_RAILS_MAX + 1];
    for (int r = 0; r < nl->nrails; r++)
        pfd[r] = (struct pollfd){.fd = nl->rail[r].fd, .events = POLLIN};
    pfd[nl->nrails] = (struct pollfd){.fd = nl->stop_fd, .events = POLLIN};
    while (!__atomic_load_n(&nl->stop, __ATOMIC_ACQUIRE)) {
        uint64_t d = fm_netlink_deadline(ctx), now = fm_now_ns();
        int ms = d == UINT64_MAX ? 100 : d <= now ? 0 : (int)FM_MIN((d - now) / 1000000 + 1, 100);
        poll(pfd, (nfds_t)nl->nrails + 1, ms);
        pthread_mutex_lock(&nl->lock);
        run(nl, 1);
        pthread_mutex_unlock(&nl->lock);
    }
    return NULL;
}

/* ---- upcalls from the engine (net lock held) ---------------------------------- */

/* Offers a flow's ring to the endpoint open on its channel; without one,
 * the flow is parked until the channel opens, like a ULFM port's
 * unexpected messages. */
static void offer(fm_ctx *ctx, struct fm_rxflow *f)
{
    struct fm_netlink *nl = ctx->net;
    struct fm_rx *rx = calloc(1, sizeof(*rx));
    if (rx) {
        rx->ring = f->ring;
        rx->net = f;
        rx->src = fm_addr_make(f->src_rank, f->src_channel);
        f->owner = fm_core_attach_rx(ctx, f->dst_channel, rx);
        if (f->owner)
            return;
        free(rx);
    }
    if (nl->nparked == nl->parked_cap) {
        int cap = nl->parked_cap ? nl->parked_cap * 2 : 8;
        struct fm_rxflow **a = realloc(nl->parked, sizeof(*a) * (size_t)cap);
        if (!a) {
            fm_error("net", "out of memory: a flow to channel %u is dropped", f->dst_channel);
            fm_net_orphan(nl->engine, f);
            return;
        }
        nl->parked = a;
        nl->parked_cap = cap;
    }
    nl->parked[nl->nparked++] = f;
    fm_debug("net", "a flow from rank %d waits for channel %u to open", f->src_rank,
             f->dst_channel);
}

static void up_flow_new(void *core, struct fm_rxflow *f, int src_rank)
{
    (void)src_rank; /* f->src_rank */
    offer(core, f);
}

static void up_flow_end(void *core, struct fm_rxflow *f)
{
    (void)core;
    if (f->orphan) {
        fm_net_rxflow_free(f); /* nobody reads it */
        return;
    }
    /* Read to its end by its endpoint (or the one that adopts it from the
     * parked list), then freed there. */
    if (f->owner)
        fm_core_wake(f->owner);
}

static void up_delivered(void *core, struct fm_rxflow *f)
{
    (void)core;
    if (f->owner)
        fm_core_wake(f->owner);
}

static void up_peer_gone(void *core, int rank, int state)
{
    fm_core_peer_gone(core, rank, state);
}

static int up_address_of(void *core, int rank, struct sockaddr_in out[FM_RAILS_MAX])
{
    fm_ctx *ctx = core;
    struct fm_netlink *nl = ctx->net;
    char card[FM_BOOT_VAL_MAX];
    if (ctx->boot.ops->get(&ctx->boot, rank, "net", card, sizeof(card)) != 0) {
        fm_error("net", "rank %d published no network address (is udp in its FM_TRANSPORTS?)",
                 rank);
        return FM_EUNREACH;
    }
    int matched = fm_rails_match(nl->rail, nl->nrails, card, out);
    if (matched < 0) {
        fm_error("net", "rank %d published a malformed address card '%s'", rank, card);
        return FM_EUNREACH;
    }
    /* A rail that cannot reach the peer is said once, not silently used. */
    for (int r = 0; r < nl->nrails; r++)
        if (!out[r].sin_family)
            fm_log_limited(FM_LOG_WARN, "net", 8,
                           "rail %d (%s, %s) reaches none of rank %d's rails (%s): not used "
                           "towards it",
                           r, nl->rail[r].ifname, inet_ntoa(nl->rail[r].addr.sin_addr), rank,
                           card);
    for (int r = 0; r < nl->nrails; r++)
        if (out[r].sin_family)
            fm_info("net", "rank %d: rail %d (%s %s) pairs with %s:%u", rank, r,
                    nl->rail[r].ifname, inet_ntoa(nl->rail[r].addr.sin_addr),
                    inet_ntoa(out[r].sin_addr), ntohs(out[r].sin_port));
    if (!matched) {
        fm_error("net", "none of this process's rails (FM_RAILS=%s) shares a subnet with "
                        "rank %d's (%s)",
                 ctx->cfg.rails, rank, card);
        return FM_EUNREACH;
    }
    return 0;
}

/* ---- endpoints ------------------------------------------------------------------- */

void fm_netlink_ep_opened(fm_ep *ep)
{
    fm_ctx *ctx = ep->ctx;
    struct fm_netlink *nl = ctx->net;
    pthread_mutex_lock(&nl->lock);
    int n = nl->nparked;
    struct fm_rxflow **parked = nl->parked;
    /* offer() may park a flow again (the endpoint closed meanwhile on
     * another thread): start from an empty list. */
    nl->parked = NULL;
    nl->nparked = nl->parked_cap = 0;
    for (int i = 0; i < n; i++)
        offer(ctx, parked[i]);
    free(parked);
    pthread_mutex_unlock(&nl->lock);
}

void fm_netlink_ep_closed(fm_ep *ep)
{
    struct fm_netlink *nl = ep->ctx->net;
    pthread_mutex_lock(&nl->lock);
    /* Flows it received: the senders are told to stop; ended ones are ours.
     * The endpoint is unpublished, so the list no longer grows. */
    for (int i = 0; i < ep->nattached; i++) {
        struct fm_rxflow *f = ep->attached[i]->net;
        if (f->ended)
            fm_net_rxflow_free(f);
        else
            fm_net_orphan(nl->engine, f);
    }
    /* Flows it sent on end after their data; its routes let go of them. */
    for (size_t i = 0; i < ep->routes_cap; i++) {
        struct fm_route *rt = ep->routes[i];
        if (!rt || rt->link != &fm_net_link || !rt->flow)
            continue;
        fm_net_flow_end(nl->engine, rt->flow);
        fm_net_flow_put(nl->engine, rt->flow);
        rt->flow = NULL;
        rt->gen_word = NULL;
    }
    pthread_mutex_unlock(&nl->lock);
}

static void net_drop(fm_ep *ep, struct fm_route *rt)
{
    struct fm_netlink *nl = ep->ctx->net;
    if (!rt->flow)
        return;
    pthread_mutex_lock(&nl->lock);
    fm_net_flow_put(nl->engine, rt->flow);
    pthread_mutex_unlock(&nl->lock);
    rt->flow = NULL;
    rt->gen_word = NULL;
}

int fm_netlink_retire(fm_ep *ep, struct fm_rx *rx)
{
    struct fm_rxflow *f = rx->net;
    if (!__atomic_load_n(&f->ended, __ATOMIC_ACQUIRE) || fm_ring_peek(&rx->ring, rx->rd) ||
        rx->nheld)
        return 0;
    struct fm_netlink *nl = ep->ctx->net;
    pthread_mutex_lock(&nl->lock);
    fm_net_rxflow_free(f); /* its ring goes back to the engine's spares */
    pthread_mutex_unlock(&nl->lock);
    return 1;
}

void fm_netlink_released(fm_ctx *ctx, struct fm_rx *rx)
{
    struct fm_netlink *nl = ctx->net;
    pthread_mutex_lock(&nl->lock);
    fm_net_released(nl->engine, rx->net);
    run(nl, 0);
    pthread_mutex_unlock(&nl->lock);
}

/* ---- sending: the link ops ------------------------------------------------------ */

static size_t net_max_msg(const fm_ep *ep) { return (size_t)ep->ctx->cfg.net_ring_size / 4; }

/*
 * The engine may end a flow at any time from another thread (its receiver
 * closed, FLOW_STOP) and then frees its ring: a route checked before that is
 * stale. So the ring is written under the net lock, after looking at the
 * flow's generation once more; a stale route answers FM_EAGAIN, and the
 * core resolves it again at the next try (fm_ep_ready sees it invalid).
 */
static int route_current(const struct fm_route *rt)
{
    return __atomic_load_n(rt->gen_word, __ATOMIC_ACQUIRE) == rt->gen;
}

/* Hands new records to the engine and lets what can go, go (net lock held). */
static void kick(struct fm_netlink *nl, struct fm_txflow *f)
{
    fm_net_kick(nl->engine, f);
    output(nl, 0, fm_now_ns());
}

static ssize_t net_send(fm_ep *ep, struct fm_route *rt, const struct iovec *iov, int iovcnt,
                        size_t total)
{
    struct fm_netlink *nl = ep->ctx->net;
    pthread_mutex_lock(&nl->lock);
    int64_t n = route_current(rt) ? fm_ring_take(&rt->ring, total, net_max_msg(ep)) : -1;
    if (n >= 0) {
        fm_ring_write(&rt->ring, FM_REC_DATA, iov, iovcnt, (size_t)n);
        fm_txflow_wrote(rt->flow, fm_now_ns(), (uint64_t)ep->ctx->cfg.net_gather_us * 1000u);
        kick(nl, rt->flow);
    }
    pthread_mutex_unlock(&nl->lock);
    return n < 0 ? FM_EAGAIN : (ssize_t)n;
}

/* A grant pins the ring until its commit (or the route lets go of the
 * flow): the caller writes into it without the lock. */
static ssize_t net_grant(fm_ep *ep, struct fm_route *rt, size_t len, void **buf)
{
    struct fm_netlink *nl = ep->ctx->net;
    pthread_mutex_lock(&nl->lock);
    int64_t n = route_current(rt) ? fm_ring_take_grant(&rt->ring, len, net_max_msg(ep), buf)
                                  : -1;
    if (n >= 0)
        fm_net_flow_pin(nl->engine, rt->flow, 1);
    pthread_mutex_unlock(&nl->lock);
    return n < 0 ? FM_EAGAIN : (ssize_t)n;
}

static void net_commit(fm_ep *ep, struct fm_route *rt, size_t len)
{
    struct fm_netlink *nl = ep->ctx->net;
    pthread_mutex_lock(&nl->lock);
    /* A flow that ended meanwhile has no receiver: the message is dropped,
     * as what comes for a closed endpoint is. */
    if (route_current(rt)) {
        fm_ring_publish(&rt->ring, FM_REC_DATA, (uint32_t)len);
        fm_txflow_wrote(rt->flow, fm_now_ns(), (uint64_t)ep->ctx->cfg.net_gather_us * 1000u);
        kick(nl, rt->flow);
    }
    fm_net_flow_pin(nl->engine, rt->flow, 0);
    pthread_mutex_unlock(&nl->lock);
}

const struct fm_link fm_net_link = {
    .name = "udp",
    .send = net_send,
    .grant = net_grant,
    .commit = net_commit,
    .max_msg = net_max_msg,
    .drop = net_drop,
};

int fm_netlink_resolve(fm_ep *ep, int rank, uint32_t channel, struct fm_route *rt)
{
    fm_ctx *ctx = ep->ctx;
    struct fm_netlink *nl = ctx->net;
    struct fm_txflow *f;
    pthread_mutex_lock(&nl->lock);
    int rc = fm_net_flow(nl->engine, rank, ep->channel, channel, &f);
    if (!rc) {
        /* Under the lock: the engine may end the flow as soon as it is let go. */
        rt->dst = fm_addr_make(rank, channel);
        rt->link = &fm_net_link;
        rt->flow = f;
        rt->gen_word = &f->gen;
        rt->gen = f->gen;
        rt->dir = NULL;
        rt->ring = f->ring;
        rt->need_src = 0;
    }
    pthread_mutex_unlock(&nl->lock);
    return rc;
}

/* ---- setup --------------------------------------------------------------------- */

/* Whether any rank of the job talks over the network: the same answer on
 * every rank, since all read the same node map and configuration. */
static int job_needs_net(const fm_ctx *ctx)
{
    if (!(ctx->cfg.transports & FM_TRANSPORT_SHM))
        return 1;
    for (int r = 1; r < ctx->size; r++)
        if (ctx->boot.node_of[r] != ctx->boot.node_of[0])
            return 1;
    return 0;
}

int fm_netlink_setup(fm_ctx *ctx, char *err, size_t errlen)
{
    if (!job_needs_net(ctx))
        return 0;
    if (ctx->rank == 0) {
        uint8_t key[16];
        char hex[33];
        if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key)) {
            snprintf(err, errlen, "net: no randomness for the job key: %s", strerror(errno));
            return FM_ESYS;
        }
        for (int i = 0; i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", key[i]);
        int rc = ctx->boot.ops->put(&ctx->boot, "key", hex);
        if (rc) {
            snprintf(err, errlen, "net: cannot publish the job key");
            return rc;
        }
    }
    struct fm_netlink *nl = calloc(1, sizeof(*nl));
    if (!nl)
        return FM_ENOMEM;
    nl->stop_fd = -1;
    pthread_mutex_init(&nl->lock, NULL);
    int rc = fm_rails_open(nl->rail, ctx->cfg.rails, err, errlen);
    if (rc < 0) {
        free(nl);
        return rc;
    }
    nl->nrails = rc;
    if (ctx->cfg.fault[0]) {
        if (fm_fault_parse(&nl->fault, ctx->cfg.fault, err, errlen) < 0) {
            fm_rails_close(nl->rail, nl->nrails);
            free(nl);
            return FM_EINVAL;
        }
        for (int r = 0; r < nl->nrails; r++)
            nl->rail[r].fault = &nl->fault;
        fm_warn("net", "fault injection on: FM_FAULT=%s", ctx->cfg.fault);
    }
    ctx->net = nl;
    char card[FM_BOOT_VAL_MAX];
    if (fm_rails_card(nl->rail, nl->nrails, card, sizeof(card)) < 0 ||
        (rc = ctx->boot.ops->put(&ctx->boot, "net", card)) != 0) {
        snprintf(err, errlen, "net: cannot publish this rank's address");
        return rc ? rc : FM_EINVAL;
    }
    for (int r = 0; r < nl->nrails; r++) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u32 = FM_EPOLL_NET};
        if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, nl->rail[r].fd, &ev) < 0) {
            snprintf(err, errlen, "net: epoll_ctl: %s", strerror(errno));
            return FM_ESYS;
        }
    }
    return 0;
}

/* One packet size for every rail: the smallest MTU's. */
static uint32_t min_payload(const struct fm_netlink *nl)
{
    uint32_t p = nl->rail[0].payload;
    for (int r = 1; r < nl->nrails; r++)
        p = FM_MIN(p, nl->rail[r].payload);
    return p;
}

int fm_netlink_start(fm_ctx *ctx, char *err, size_t errlen)
{
    struct fm_netlink *nl = ctx->net;
    char hex[64];
    struct fm_net_params p = {
        .rank = ctx->rank,
        .size = ctx->size,
        .ring_size = (uint32_t)ctx->cfg.net_ring_size,
        .payload = min_payload(nl),
        .nrails = nl->nrails,
        .rail_policy = (enum fm_rail_policy)ctx->cfg.rail_policy,
        .rail_query = ctx->cfg.rail_status == FM_RAIL_STATUS_QUERY,
        .rail_heartbeat_ns = (uint64_t)ctx->cfg.rail_heartbeat_ms * 1000000u,
        .timeout_ns = (uint64_t)ctx->cfg.net_timeout_ms * 1000000u,
        .rto_min_ns = (uint64_t)ctx->cfg.net_rto_min_us * 1000u,
        .rto_max_ns = (uint64_t)ctx->cfg.net_timeout_ms * 1000000u / 4,
        .ack_delay_ns = (uint64_t)ctx->cfg.net_ack_delay_us * 1000u,
        .up = {.core = ctx, .flow_new = up_flow_new, .delivered = up_delivered,
               .flow_end = up_flow_end, .peer_gone = up_peer_gone,
               .address_of = up_address_of},
    };
    if (ctx->boot.ops->get(&ctx->boot, 0, "key", hex, sizeof(hex)) != 0 || strlen(hex) != 32) {
        snprintf(err, errlen, "net: rank 0 published no job key");
        return FM_EBOOT;
    }
    for (int i = 0; i < 16; i++) {
        unsigned b;
        sscanf(hex + 2 * i, "%2x", &b);
        p.key[i] = (uint8_t)b;
    }
    do {
        if (getrandom(&p.epoch, sizeof(p.epoch), 0) != (ssize_t)sizeof(p.epoch)) {
            snprintf(err, errlen, "net: no randomness: %s", strerror(errno));
            return FM_ESYS;
        }
    } while (p.epoch == 0);
    nl->engine = fm_net_new(&p);
    if (!nl->engine)
        return FM_ENOMEM;
    if (ctx->cfg.progress_thread) {
        nl->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (nl->stop_fd < 0 || pthread_create(&nl->thread, NULL, progress_thread, ctx) != 0) {
            snprintf(err, errlen, "net: cannot start the progress thread");
            return FM_ESYS;
        }
        nl->thread_on = 1;
    }
    return 0;
}

/* Runs the engine until nothing is outstanding or the time is up. */
static int drain(fm_ctx *ctx, uint64_t until)
{
    struct fm_netlink *nl = ctx->net;
    for (;;) {
        pthread_mutex_lock(&nl->lock);
        run(nl, 1);
        uint64_t left = fm_net_unacked(nl->engine);
        uint64_t d = fm_net_deadline(nl->engine);
        pthread_mutex_unlock(&nl->lock);
        uint64_t now = fm_now_ns();
        if (!left)
            return 0;
        if (now >= until)
            return -1;
        struct pollfd pfd[FM_RAILS_MAX];
        for (int r = 0; r < nl->nrails; r++)
            pfd[r] = (struct pollfd){.fd = nl->rail[r].fd, .events = POLLIN};
        uint64_t wake = FM_MIN(until, d);
        poll(pfd, (nfds_t)nl->nrails,
             wake <= now ? 0 : (int)FM_MIN((wake - now) / 1000000 + 1, 100));
    }
}

void fm_netlink_counters(fm_ctx *ctx, uint64_t nc[FM_NC_COUNT], uint64_t drops[FM_DROP_COUNT])
{
    struct fm_netlink *nl = ctx->net;
    pthread_mutex_lock(&nl->lock);
    fm_net_counters(nl->engine, nc, drops);
    pthread_mutex_unlock(&nl->lock);
}

static void close_rails(fm_ctx *ctx, struct fm_netlink *nl)
{
    for (int r = 0; r < nl->nrails; r++)
        epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, nl->rail[r].fd, NULL);
    fm_rails_close(nl->rail, nl->nrails);
}

/* FM_STATS=1: one line of counters per rank when it leaves. */
static void print_stats(fm_ctx *ctx)
{
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    char line[1024];
    int n = snprintf(line, sizeof(line), "fastmsg[%d] net:", ctx->rank);
    fm_netlink_counters(ctx, nc, dr);
    for (int i = 0; i < FM_NC_COUNT && n < (int)sizeof(line); i++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%llu", fm_net_counter_names[i],
                      (unsigned long long)nc[i]);
    for (int i = 1; i < FM_DROP_COUNT && n < (int)sizeof(line); i++)
        if (dr[i])
            n += snprintf(line + n, sizeof(line) - (size_t)n, " drop_%s=%llu", fm_drop_names[i],
                          (unsigned long long)dr[i]);
    struct fm_netlink *nl = ctx->net;
    uint64_t rail_tx[FM_RAILS_MAX];
    pthread_mutex_lock(&nl->lock);
    fm_net_rail_counters(nl->engine, rail_tx);
    pthread_mutex_unlock(&nl->lock);
    for (int r = 0; r < nl->nrails && n < (int)sizeof(line); r++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " rail%d_tx_bytes=%llu", r,
                      (unsigned long long)rail_tx[r]);
    fprintf(stderr, "%s\n", line);
}

void fm_netlink_finalize(fm_ctx *ctx)
{
    struct fm_netlink *nl = ctx->net;
    if (nl->engine) {
        uint64_t until = fm_now_ns() + (uint64_t)ctx->cfg.net_timeout_ms * 1000000u;
        if (drain(ctx, until) < 0)
            fm_warn("net", "finalize: data to some peers was not acknowledged within "
                           "FM_NET_TIMEOUT_MS and may be lost");
        pthread_mutex_lock(&nl->lock);
        fm_net_bye(nl->engine);
        pthread_mutex_unlock(&nl->lock);
        drain(ctx, FM_MIN(until, fm_now_ns() + 200000000u));
    }
    if (nl->engine && ctx->cfg.stats)
        print_stats(ctx);
    if (nl->thread_on) {
        __atomic_store_n(&nl->stop, 1, __ATOMIC_RELEASE);
        uint64_t one = 1;
        ssize_t w = write(nl->stop_fd, &one, sizeof(one));
        (void)w;
        pthread_join(nl->thread, NULL);
    }
    if (nl->stop_fd >= 0)
        close(nl->stop_fd);
    close_rails(ctx, nl);
    /* Parked flows that ended are ours; the others the engine frees. */
    for (int i = 0; i < nl->nparked; i++)
        if (nl->parked[i]->ended)
            fm_net_rxflow_free(nl->parked[i]);
    fm_net_free(nl->engine);
    free(nl->parked);
    pthread_mutex_destroy(&nl->lock);
    free(nl);
    ctx->net = NULL;
}
