/*
 * The UDP link: the session engine (engine.h) on one UDP socket per rail
 * (udp.h, rails.h), plugged into the core through the link interface.
 * Routes to ranks that shared memory does not reach (or all of them, with
 * FM_TRANSPORTS=udp) go through here.
 *
 * Progress happens inside fastmsg calls: a send hands its records to the
 * engine at once; receiving, waiting and fm_progress read the sockets, run
 * timers and flush. With FM_PROGRESS_THREAD=1 a thread does it as well.
 * Everything that touches the engine holds the link's lock; the engine's
 * upcalls run under it and call the core (core_api.h), which takes
 * ctx->lock after it: the lock order of core_api.h.
 */
#include "udp_link.h"

#include "core/core_api.h"
#include "core/hex.h"
#include "core/log.h"
#include "core/name.h"
#include "engine.h"
#include "fault.h"
#include "rails.h"
#include "core/crc32c.h"
#include "udp.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <unistd.h>

struct udp_link {
    fm_ctx *ctx;
    struct fm_net *engine;
    struct fm_udp rail[FM_RAILS_MAX]; /* a socket per rail */
    int nrails;
    struct fm_fault fault;
    pthread_mutex_t lock;
    struct fm_pkt_out out[FM_UDP_SEND_MAX];
    struct fm_rxflow **parked; /* flows whose channel is not open (yet) */
    int nparked, parked_cap;
    uint64_t parked_gone_bytes; /* rings of the parked flows whose sender is gone */
    uint8_t parked_retry;      /* one was parked at an open channel (no memory) */
    pthread_t thread;
    int thread_on;
    int stop_fd;               /* eventfd that ends the progress thread */
    int stop;
    uint64_t last_traffic_ns;  /* atomic: when a packet last came or went */
    uint32_t idle;             /* atomic: no packet for IDLE_AFTER_NS at the last read */
    uint64_t last_read;        /* atomic: fm_ticks() at the last read */
    uint32_t calls;            /* atomic: progress calls, for the watchdog thread */
    /* During a send from the caller's memory (send_from_caller): the ring's
     * stream bytes [lo, hi) are not copied in yet, and are at src there. */
    struct {
        const struct fm_ring *ring;
        uint64_t lo, hi;
        const unsigned char *src;
    } caller;
};

/* A flow's ring as an endpoint reads it: the core's fm_rx, and its place
 * in the list of its endpoint's rings (under the link's lock). */
struct udp_rx {
    struct fm_rx rx;
    fm_ep *ep;
    struct udp_rx *next, **pprev;
    struct udp_rx *hnext, **hpprev; /* its bucket of udp_ep's index */
    /* Later flows of the same sending endpoint (rings that grew or shrank),
     * chained by successor: each is read after the one before it ends. */
    struct fm_rxflow *waiting;
};

/* What an endpoint has here: the rings of the flows it receives, and an
 * index of them by sending endpoint, one ring each (a later flow of the
 * same sender waits behind it): walking the list to find a new flow's
 * predecessor cost 20 us a flow at a thousand peers. */
struct udp_ep {
    struct udp_rx *rings;
    struct udp_rx **bucket;
    uint32_t nbuckets; /* a power of two, more than nrings; 0 before the first */
    uint32_t nrings;
};

static struct udp_rx **bucket_of(const struct udp_ep *ue, fm_addr src)
{
    uint64_t h = (uint64_t)src * 0x9E3779B97F4A7C15ull;
    return &ue->bucket[(h >> 32) & (ue->nbuckets - 1)];
}

static void index_put(struct udp_ep *ue, struct udp_rx *u)
{
    struct udp_rx **b = bucket_of(ue, u->rx.src);
    u->hnext = *b;
    u->hpprev = b;
    if (*b)
        (*b)->hpprev = &u->hnext;
    *b = u;
}

static void index_del(struct udp_rx *u)
{
    *u->hpprev = u->hnext;
    if (u->hnext)
        u->hnext->hpprev = u->hpprev;
}

/* Room in the index for one more ring: 0, or FM_ENOMEM. */
static int index_reserve(struct udp_ep *ue)
{
    if (ue->nrings + 1 < ue->nbuckets)
        return 0;
    uint32_t n = ue->nbuckets ? 2 * ue->nbuckets : 16;
    struct udp_rx **b = calloc(n, sizeof(*b));
    if (!b)
        return FM_ENOMEM;
    free(ue->bucket);
    ue->bucket = b;
    ue->nbuckets = n;
    for (struct udp_rx *u = ue->rings; u; u = u->next)
        index_put(ue, u);
    return 0;
}

static struct udp_rx *udp_rx_of(struct fm_rx *rx)
{
    return (struct udp_rx *)((char *)rx - offsetof(struct udp_rx, rx));
}

/* ---- progress ------------------------------------------------------------------ */

/* Receive batches between which acknowledgements go out: a sender learns
 * of its data soon even while a long queue is being read. */
#define RECV_ROUNDS 4

/* Sends n packets of nl->out, each on its rail's socket; one rail's packets
 * stay together so that runs of them go as one GSO send. */
/* Reads of a rail's socket, a batch each, before a peer found unreachable
 * is taken for gone. */
#define SETTLE_READS 8

/*
 * What sends and receives learned of unreachable peers is acted on only
 * after every rail's socket was read to its end: a peer refused is gone,
 * but what it sent before waits there, and its last messages must come
 * before its loss (they were dropped as from no session, on one rail and
 * more so on several, each rail ending the session before the next was
 * read). Called after whole outputs: the session's end frees rings that
 * an output's packets point into.
 */
static void settle(struct udp_link *nl)
{
    int any = 0;
    for (int r = 0; r < nl->nrails; r++)
        any |= fm_udp_unsettled(&nl->rail[r]);
    if (!any)
        return;
    uint64_t now = fm_now_ns();
    for (int r = 0; r < nl->nrails; r++)
        for (int k = 0; k < SETTLE_READS; k++)
            if (fm_udp_recv(&nl->rail[r], nl->engine, now) == 0 || !nl->rail[r].busy)
                break;
    for (int r = 0; r < nl->nrails; r++)
        fm_udp_settle(&nl->rail[r], nl->engine);
}

static void send_out(struct udp_link *nl, int n)
{
    struct fm_pkt_out *batch[FM_UDP_SEND_MAX];
    for (int r = 0; r < nl->nrails; r++) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (nl->out[i].rail == r)
                batch[m++] = &nl->out[i];
        if (m)
            fm_udp_send(&nl->rail[r], nl->engine, batch, m);
    }
    settle(nl);
}

/*
 * Where a piece of a packet that points into the ring lies in the caller's
 * memory, or NULL if it holds none of the bytes not copied in yet. A piece
 * that holds some of them and some other bytes (the first packet holds the
 * record's header, the last one its padding, and a packet the engine did
 * not start where the message does holds earlier data) has its part of
 * them copied into the ring: the range not copied in yet shrinks at that
 * end, and the piece stays in the ring.
 *
 * A piece lies at most a ring's size before the message's end, so its
 * ring offset tells its stream position: counted from lo, offsets below
 * the range's length are in it, the others lie before it.
 */
static const void *caller_bytes(struct udp_link *nl, const void *piece, size_t len)
{
    const struct fm_ring *r = nl->caller.ring;
    const unsigned char *p = piece;
    if (!len || p < r->data || p >= r->data + r->size)
        return NULL;
    uint64_t rel = ((uint64_t)(p - r->data) - nl->caller.lo) & (r->size - 1);
    uint64_t span = nl->caller.hi - nl->caller.lo;
    if (rel >= span) { /* starts r->size - rel bytes before lo */
        uint64_t before = r->size - rel;
        if (len > before) { /* and reaches into the range */
            uint64_t k = FM_MIN(len - before, span);
            fm_ring_put(r, nl->caller.lo, nl->caller.src, k);
            nl->caller.lo += k;
            nl->caller.src += k;
        }
        return NULL;
    }
    if (rel + len > span) { /* reaches past hi */
        fm_ring_put(r, nl->caller.lo + rel, nl->caller.src + rel, span - rel);
        nl->caller.hi = nl->caller.lo + rel;
        return NULL;
    }
    return nl->caller.src + rel;
}

/* Points the batch's packets at the caller's memory for the bytes not in
 * the ring yet. Pieces pointed there stay right when the range shrinks:
 * what leaves it is copied into the ring, the same bytes. */
static void from_caller(struct udp_link *nl, struct fm_pkt_out *pkts, int n)
{
    for (int i = 0; i < n && nl->caller.lo < nl->caller.hi; i++)
        for (int k = 0; k < 2 && pkts[i].hdr.op == FM_OP_DATA && !pkts[i].raw; k++) {
            const void *b = caller_bytes(nl, pkts[i].bytes[k], pkts[i].nbytes[k]);
            if (b)
                pkts[i].bytes[k] = b;
        }
}

/* Sends what the engine has, in batches. */
static void output(struct udp_link *nl, int flush, uint64_t now)
{
    int n;
    do {
        n = fm_net_output(nl->engine, nl->out, FM_UDP_SEND_MAX, flush, now);
        if (n && nl->caller.ring)
            from_caller(nl, nl->out, n);
        if (n) {
            send_out(nl, n);
            __atomic_store_n(&nl->last_traffic_ns, now, __ATOMIC_RELAXED);
        }
    } while (n == FM_UDP_SEND_MAX);
}

/* Receives, runs timers, sends. Called with the link's lock held, and
 * the clock just read (a reading costs about 24 ns in this VM, a sixth of
 * a poll of an empty socket's own work). */
static void offer_parked(struct udp_link *nl);

static int run(struct udp_link *nl, int flush, uint64_t now)
{
    int got = 0;
    if (nl->parked_retry)
        offer_parked(nl);
    for (int round = 0; round < RECV_ROUNDS; round++) {
        if (round)
            now = fm_now_ns();
        uint32_t busy = 0;
        for (int r = 0; r < nl->nrails; r++) {
            got += fm_udp_recv(&nl->rail[r], nl->engine, now);
            busy |= (uint32_t)nl->rail[r].busy << r;
        }
        if (got)
            __atomic_store_n(&nl->last_traffic_ns, now, __ATOMIC_RELAXED);
        settle(nl);
        fm_net_set_rails_busy(nl->engine, busy);
        output(nl, flush, now);
        if (!busy)
            break;
    }
    return got;
}

/* After this long without a packet the network is idle (every peer in
 * use is on this node, or the job computes), and the sockets are read at
 * most every IDLE_READ_TICKS (4-16 us): reading an empty socket is a
 * system call, which would otherwise be most of the time of a loop
 * spinning on shared memory. The first packet after a quiet spell waits
 * that much longer at most. (Counting calls instead of time fails when
 * calls are slow: ranks that yield the CPU in their progress loop.) */
#define IDLE_AFTER_NS 1000000u
#define IDLE_READ_TICKS 16384u

static int udp_progress(fm_ctx *ctx, void *state, int flush)
{
    (void)ctx;
    struct udp_link *nl = state;
    uint32_t calls = __atomic_load_n(&nl->calls, __ATOMIC_RELAXED) + 1;
    __atomic_store_n(&nl->calls, calls, __ATOMIC_RELAXED);
    /* Idle: even the TSC is slow to read in a VM, so it is read on one call
     * in 8 (slow calls, that yield the CPU, then wait 8 calls at most). */
    uint64_t ticks = 0;
    if (__atomic_load_n(&nl->idle, __ATOMIC_RELAXED) &&
        ((calls & 7) || (ticks = fm_ticks()) - __atomic_load_n(&nl->last_read, __ATOMIC_RELAXED) <
                            IDLE_READ_TICKS))
        return 0;
    if (!ticks)
        ticks = fm_ticks();
    if (pthread_mutex_trylock(&nl->lock) != 0)
        return 0; /* another thread is at it */
    __atomic_store_n(&nl->last_read, ticks, __ATOMIC_RELAXED);
    uint64_t now = fm_now_ns();
    __atomic_store_n(&nl->idle,
                     now - __atomic_load_n(&nl->last_traffic_ns, __ATOMIC_RELAXED) > IDLE_AFTER_NS,
                     __ATOMIC_RELAXED);
    int got = run(nl, flush, now);
    pthread_mutex_unlock(&nl->lock);
    return got;
}

static uint64_t udp_deadline(fm_ctx *ctx, void *state)
{
    (void)ctx;
    struct udp_link *nl = state;
    pthread_mutex_lock(&nl->lock);
    uint64_t d = fm_net_deadline(nl->engine);
    pthread_mutex_unlock(&nl->lock);
    return d;
}

/* FM_PROGRESS_THREAD=2: every half heartbeat (a session's, or a rail's if
 * shorter), runs the network if no call did since the last look. It keeps
 * a computing process's sessions alive (acks, heartbeat answers,
 * retransmissions) and never competes with the calls of a process that
 * communicates. (It took the rails' heartbeat alone: with
 * FM_RAIL_HEARTBEAT_MS=8000 a computing rank was lost at 3 s.) */
static void *watchdog_thread(void *arg)
{
    struct udp_link *nl = arg;
    struct pollfd stop = {.fd = nl->stop_fd, .events = POLLIN};
    uint64_t beat = FM_MIN((uint64_t)fm_core_cfg(nl->ctx)->rail_heartbeat_ms * 1000000u,
                           fm_net_heartbeat_ns(nl->engine));
    int tick_ms = (int)(beat / 2000000u) + 1;
    uint32_t seen = 0;
    while (!__atomic_load_n(&nl->stop, __ATOMIC_ACQUIRE)) {
        poll(&stop, 1, tick_ms);
        uint32_t calls = __atomic_load_n(&nl->calls, __ATOMIC_RELAXED);
        if (calls != seen) {
            seen = calls;
            continue;
        }
        pthread_mutex_lock(&nl->lock);
        run(nl, 1, fm_now_ns());
        pthread_mutex_unlock(&nl->lock);
    }
    return NULL;
}

static void *progress_thread(void *arg)
{
    struct udp_link *nl = arg;
    struct pollfd pfd[FM_RAILS_MAX + 1];
    for (int r = 0; r < nl->nrails; r++)
        pfd[r] = (struct pollfd){.fd = nl->rail[r].fd, .events = POLLIN};
    pfd[nl->nrails] = (struct pollfd){.fd = nl->stop_fd, .events = POLLIN};
    while (!__atomic_load_n(&nl->stop, __ATOMIC_ACQUIRE)) {
        uint64_t d = udp_deadline(nl->ctx, nl), now = fm_now_ns();
        int ms = d == UINT64_MAX ? 100 : d <= now ? 0 : (int)FM_MIN((d - now) / 1000000 + 1, 100);
        poll(pfd, (nfds_t)nl->nrails + 1, ms);
        pthread_mutex_lock(&nl->lock);
        run(nl, 1, fm_now_ns());
        pthread_mutex_unlock(&nl->lock);
    }
    return NULL;
}

/* ---- upcalls from the engine (the link's lock held) ---------------------------- */

/* Flows nobody will read: the ended ones are ours to free, the others are
 * orphaned (their senders told to stop). */
static void drop_chain(struct udp_link *nl, struct fm_rxflow *f)
{
    while (f) {
        struct fm_rxflow *next = f->successor;
        f->successor = NULL;
        f->owner = NULL;
        if (f->ended)
            fm_net_rxflow_free(f);
        else
            fm_net_orphan(nl->engine, f);
        f = next;
    }
}

/* Gives f's ring to ep (which cannot close while we hold the lock: its
 * ep_close takes it). Returns 0 or FM_ENOMEM. */
static int attach(fm_ep *ep, struct fm_rxflow *f)
{
    struct udp_ep *ue = fm_core_ep_state(ep, &fm_udp_link);
    struct udp_rx *u = index_reserve(ue) == 0 ? calloc(1, sizeof(*u)) : NULL;
    if (!u)
        return FM_ENOMEM;
    u->rx.ring = f->ring;
    u->rx.link = &fm_udp_link;
    u->rx.link_rx = f;
    u->rx.src_rank = f->src_rank;
    u->rx.src = fm_addr_make(f->src_rank, f->src_channel);
    u->rx.ended = __atomic_load_n(&f->ended, __ATOMIC_ACQUIRE);
    u->rx.announced = 1; /* up_delivered and up_flow_end */
    if (fm_core_ep_attach_rx(ep, &u->rx) != 0) {
        free(u);
        return FM_ENOMEM;
    }
    u->ep = ep;
    u->waiting = f->successor;
    f->successor = NULL;
    u->next = ue->rings;
    u->pprev = &ue->rings;
    if (ue->rings)
        ue->rings->pprev = &u->next;
    ue->rings = u;
    index_put(ue, u);
    ue->nrings++;
    f->owner = u;
    /* It may hold messages already (a flow that was parked, or waited for
     * its predecessor), and the attaching thread may not be the reader's. */
    fm_core_rx_ready(ep, &u->rx);
    return 0;
}

/* Where a flow from the same sending endpoint as f, still read by ue,
 * keeps its successor, or NULL. */
static struct fm_rxflow **predecessor(struct udp_ep *ue, const struct fm_rxflow *f)
{
    fm_addr src = fm_addr_make(f->src_rank, f->src_channel);
    if (!ue->nbuckets)
        return NULL;
    for (struct udp_rx *u = *bucket_of(ue, src); u; u = u->hnext)
        if (u->rx.src == src) {
            struct fm_rxflow **p = &u->waiting;
            while (*p)
                p = &(*p)->successor;
            return p;
        }
    return NULL;
}

/* Whether a flow of the same sender to the same channel is parked: f must
 * wait behind it. (The endpoint is published before its refresh offers
 * the parked flows, and another thread's progress may deliver a grown
 * flow's successor in between; or a flow was parked because attaching it
 * failed. Either way the successor was read first.) */
static int parked_before(const struct udp_link *nl, const struct fm_rxflow *f)
{
    for (int i = 0; i < nl->nparked; i++) {
        const struct fm_rxflow *p = nl->parked[i];
        if (p->src_rank == f->src_rank && p->src_channel == f->src_channel &&
            p->dst_channel == f->dst_channel)
            return 1;
    }
    return 0;
}

/* Offers a flow's ring to the endpoint open on its channel, after the flows
 * of the same sender it holds; without one, the flow is parked until the
 * channel opens, like a ULFM port's unexpected messages. */
static void offer(struct udp_link *nl, struct fm_rxflow *f)
{
    f->owner = NULL;
    fm_ep *ep = parked_before(nl, f) ? NULL : fm_core_ep_on(nl->ctx, f->dst_channel);
    if (ep) {
        struct fm_rxflow **after = predecessor(fm_core_ep_state(ep, &fm_udp_link), f);
        if (after) {
            *after = f; /* read once the ones before it are */
            return;
        }
        if (attach(ep, f) == 0)
            return;
        nl->parked_retry = 1; /* the next run offers it again */
    }
    if (nl->nparked == nl->parked_cap) {
        int cap = nl->parked_cap ? nl->parked_cap * 2 : 8;
        struct fm_rxflow **a = realloc(nl->parked, sizeof(*a) * (size_t)cap);
        if (!a) {
            fm_error("net", "out of memory: a flow to channel %u is dropped", f->dst_channel);
            if (f->ended)
                fm_net_rxflow_free(f);
            else
                fm_net_orphan(nl->engine, f);
            return;
        }
        nl->parked = a;
        nl->parked_cap = cap;
    }
    nl->parked[nl->nparked++] = f;
    if (f->sender_gone)
        nl->parked_gone_bytes += f->ring.size;
    fm_debug("net", "a flow from rank %d waits for channel %u to open", f->src_rank,
             f->dst_channel);
}

/* Whether parked flow f may be dropped: its sender is gone, and its
 * channel is not open (one parked at an open channel waits for memory). */
static int parked_droppable(struct udp_link *nl, const struct fm_rxflow *f)
{
    return f->sender_gone == 1 && f->ended && !fm_core_ep_on(nl->ctx, f->dst_channel);
}

/*
 * Flows parked for a channel nobody has opened, from senders gone for
 * good, hold at most a quarter of FM_NET_RX_MEM: past it the oldest go
 * until an eighth is left, each with the later flows of its sender to that
 * channel, so that what stays of a sender has no hole. A server whose
 * short-lived clients wrote to a channel it never opens kept every such
 * ring (a review: 500 clients, 16 MB), and the rings counted against the
 * bound, halving what its live peers' flows could grow to.
 */
static void parked_trim(struct udp_link *nl)
{
    uint64_t bound = (uint64_t)fm_core_cfg(nl->ctx)->net_rx_mem / 4;
    if (!bound || nl->parked_gone_bytes <= bound)
        return;
    for (int i = 0; i < nl->nparked && nl->parked_gone_bytes > bound / 2; i++) {
        const struct fm_rxflow *f = nl->parked[i];
        if (!parked_droppable(nl, f))
            continue;
        for (int j = i; j < nl->nparked; j++) { /* sender_gone 2: to be dropped */
            struct fm_rxflow *g = nl->parked[j];
            if (g->src_rank == f->src_rank && g->src_channel == f->src_channel &&
                g->dst_channel == f->dst_channel && parked_droppable(nl, g)) {
                g->sender_gone = 2;
                nl->parked_gone_bytes -= g->ring.size;
            }
        }
    }
    int keep = 0;
    unsigned long long dropped = 0;
    for (int i = 0; i < nl->nparked; i++) {
        struct fm_rxflow *f = nl->parked[i];
        if (f->sender_gone == 2) {
            fm_net_rxflow_free(f);
            dropped++;
        } else {
            nl->parked[keep++] = f;
        }
    }
    nl->nparked = keep;
    if (dropped)
        fm_log_limited(FM_LOG_WARN, "net", 5,
                       "%llu flows of departed peers, waiting for channels never opened, "
                       "dropped (they held more than FM_NET_RX_MEM / 4)", dropped);
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
     * parked list), then freed by retire. */
    struct udp_rx *u = f->owner;
    if (u) {
        fm_core_rx_end(&u->rx);
        fm_core_rx_ready(u->ep, &u->rx);
    }
}

static void up_delivered(void *core, struct fm_rxflow *f)
{
    (void)core;
    struct udp_rx *u = f->owner;
    if (u)
        fm_core_rx_ready(u->ep, &u->rx);
}

static void up_peer_gone(void *core, int rank, int how)
{
    struct udp_link *nl = core;
    for (int i = 0; i < nl->nparked; i++) {
        struct fm_rxflow *f = nl->parked[i];
        if (f->src_rank == rank && !f->sender_gone) {
            f->sender_gone = 1;
            nl->parked_gone_bytes += f->ring.size;
        }
    }
    parked_trim(nl);
    fm_core_peer_gone(nl->ctx, rank,
                      how == FM_NET_PEER_LEFT ? FM_PEER_FINALIZED : FM_PEER_FAILED);
}

/* A named peer's rails, from its name, paired with ours by subnet. */
static int named_address(struct udp_link *nl, int peer, struct sockaddr_in out[FM_RAILS_MAX])
{
    struct fm_name n;
    struct sockaddr_in theirs[FM_NAME_RAILS];
    if (fm_core_peer_name(nl->ctx, peer, &n) != 0)
        return FM_EUNREACH;
    for (int i = 0; i < n.nrails; i++)
        theirs[i] = (struct sockaddr_in){.sin_family = AF_INET, .sin_port = n.rail[i].port,
                                         .sin_addr.s_addr = n.rail[i].ip};
    if (fm_rails_pair(nl->rail, nl->nrails, theirs, n.nrails, out) <= 0) {
        fm_error("net", "peer %d (pid %u) names no network rail this process reaches", peer,
                 n.pid);
        return FM_EUNREACH;
    }
    return 0;
}

static int up_address_of(void *core, int rank, struct sockaddr_in out[FM_RAILS_MAX])
{
    struct udp_link *nl = core;
    fm_ctx *ctx = nl->ctx;
    if (rank >= fm_core_size(ctx))
        return named_address(nl, rank, out);
    char card[FM_BOOT_VAL_MAX];
    if (fm_core_boot_get(ctx, rank, "net", card, sizeof(card)) != 0) {
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
                 fm_core_cfg(ctx)->rails, rank, card);
        return FM_EUNREACH;
    }
    return 0;
}

static int up_peer_named(void *core, const void *card, size_t len, uint32_t epoch)
{
    struct udp_link *nl = core;
    return fm_core_peer_by_name(nl->ctx, card, len, epoch);
}

static uint32_t up_named_epoch(void *core, int peer)
{
    struct udp_link *nl = core;
    struct fm_name n;
    return fm_core_peer_name(nl->ctx, peer, &n) == 0 ? n.epoch : 0;
}

/* ---- names ----------------------------------------------------------------------- */

/* Our rails go into the process's name. */
static void udp_describe(fm_ctx *ctx, void *state, struct fm_name *n)
{
    (void)ctx;
    struct udp_link *nl = state;
    n->nrails = nl->nrails;
    for (int r = 0; r < nl->nrails; r++) {
        n->rail[r].ip = nl->rail[r].addr.sin_addr.s_addr;
        n->rail[r].port = nl->rail[r].addr.sin_port;
    }
}

static void udp_named(fm_ctx *ctx, void *state, const uint8_t key[16], const void *card,
                      size_t len)
{
    (void)ctx;
    struct udp_link *nl = state;
    pthread_mutex_lock(&nl->lock);
    fm_net_named(nl->engine, key, card, len);
    pthread_mutex_unlock(&nl->lock);
}

/* ---- endpoints ------------------------------------------------------------------- */

static int udp_ep_open(fm_ctx *ctx, void *state, fm_ep *ep, void **ep_state)
{
    (void)ctx, (void)state, (void)ep;
    struct udp_ep *ue = calloc(1, sizeof(*ue));
    if (!ue)
        return FM_ENOMEM;
    *ep_state = ue;
    return 0;
}

/* The endpoint is published: the flows parked for its channel join it. */
/* Offers the parked flows again, in their order. (Lock held.) */
static void offer_parked(struct udp_link *nl)
{
    int n = nl->nparked;
    struct fm_rxflow **parked = nl->parked;
    /* offer() parks again what finds no endpoint: start from an empty list. */
    nl->parked = NULL;
    nl->nparked = nl->parked_cap = 0;
    nl->parked_retry = 0;
    nl->parked_gone_bytes = 0;
    for (int i = 0; i < n; i++)
        offer(nl, parked[i]);
    free(parked);
}

static int udp_refresh(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state)
{
    (void)ctx, (void)ep, (void)ep_state;
    struct udp_link *nl = state;
    pthread_mutex_lock(&nl->lock);
    offer_parked(nl);
    pthread_mutex_unlock(&nl->lock);
    return 0;
}

/* The endpoint closed: the senders of its flows are told to stop; ended
 * flows are ours to free. */
static void udp_ep_close(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state)
{
    (void)ctx, (void)ep;
    struct udp_link *nl = state;
    struct udp_ep *ue = ep_state;
    pthread_mutex_lock(&nl->lock);
    for (struct udp_rx *u = ue->rings, *next; u; u = next) {
        next = u->next;
        struct fm_rxflow *f = u->rx.link_rx;
        f->successor = u->waiting;
        drop_chain(nl, f);
        free(u);
    }
    pthread_mutex_unlock(&nl->lock);
    free(ue->bucket);
    free(ue);
}

/* An ended flow's ring, read to its end and detached, goes away; the next
 * flow of its sender takes its place, unless it was cut. */
static void udp_retire(fm_ctx *ctx, void *state, struct fm_rx *rx)
{
    (void)ctx;
    struct udp_link *nl = state;
    struct udp_rx *u = udp_rx_of(rx);
    pthread_mutex_lock(&nl->lock);
    *u->pprev = u->next;
    if (u->next)
        u->next->pprev = u->pprev;
    struct udp_ep *ue = fm_core_ep_state(u->ep, &fm_udp_link);
    index_del(u);
    ue->nrings--;
    struct fm_rxflow *f = rx->link_rx;
    if (f->cut) {
        drop_chain(nl, u->waiting);
        u->waiting = NULL;
    }
    fm_net_rxflow_free(f); /* its ring goes back to the engine's spares */
    if (u->waiting && attach(u->ep, u->waiting) != 0)
        drop_chain(nl, u->waiting);
    pthread_mutex_unlock(&nl->lock);
    free(u);
}

/* Released bytes go back to the sender as credit. */
static void udp_released(fm_ctx *ctx, void *state, struct fm_rx *rx)
{
    (void)ctx;
    struct udp_link *nl = state;
    pthread_mutex_lock(&nl->lock);
    if (fm_net_released(nl->engine, rx->link_rx))
        run(nl, 0, fm_now_ns());
    pthread_mutex_unlock(&nl->lock);
}

/* ---- sending ---------------------------------------------------------------------- */

static size_t udp_max_msg(const fm_ctx *ctx)
{
    return (size_t)fm_core_cfg(ctx)->net_ring_size / 4;
}

/*
 * The engine may end a flow at any time from another thread (its receiver
 * closed, FLOW_STOP) and then frees its ring: a route checked before that is
 * stale. So the ring is written under the link's lock, after looking at the
 * flow's generation once more; a stale route answers FM_EAGAIN, and the
 * core resolves it again at the next try (fm_ep_ready sees it invalid).
 */
static int route_current(const struct fm_route *rt)
{
    return __atomic_load_n(rt->gen_word, __ATOMIC_ACQUIRE) == rt->gen;
}

/* Whether the sockets are due for a read from a send: not read for
 * IDLE_READ_TICKS (then they count as read). */
static int read_due(struct udp_link *nl)
{
    uint64_t ticks = fm_ticks();
    if (ticks - __atomic_load_n(&nl->last_read, __ATOMIC_RELAXED) < IDLE_READ_TICKS)
        return 0;
    __atomic_store_n(&nl->last_read, ticks, __ATOMIC_RELAXED);
    return 1;
}

/*
 * Hands new records to the engine and lets what can go, go (lock held).
 * What cannot go yet waits for acknowledgements or credit, which only a
 * read of the sockets brings: a program that sends in a loop and rarely
 * waits would otherwise fill its ring without hearing its peers (their
 * ACKs, credits, FLOW_STOP or goodbye). So such a send reads the sockets
 * too, at most every IDLE_READ_TICKS, as a progress call would. So does
 * one that finds timers due, before they run: they judge peers by what
 * came from them, and a program that only sent, its messages all leaving
 * at once, took a live peer for silent while its ACKs waited unread (lost
 * after 3.6 s in a review's program).
 */
static void kick(struct udp_link *nl, struct fm_txflow *f, fm_ctx *ctx)
{
    uint64_t now = fm_now_ns();
    fm_txflow_wrote(f, now, (uint64_t)fm_core_cfg(ctx)->net_gather_us * 1000u);
    fm_net_kick(nl->engine, f);
    if (fm_net_deadline(nl->engine) <= now && read_due(nl)) {
        run(nl, 0, now);
        return;
    }
    output(nl, 0, now);
    if (f->sent != f->ring.ctl->tail && read_due(nl))
        run(nl, 0, fm_now_ns());
}

/*
 * Room in the flow's ring for a send of `len` bytes (contiguous in *buf for
 * a grant), or -1. A flow's ring starts small: a message larger than a
 * quarter of it goes whole into a bigger ring instead of in parts (the
 * route resolves again, to the successor flow), and a full ring makes way
 * for a bigger one. Only a ring that cannot grow (FM_NET_RING_SIZE, the
 * receiver's FM_NET_RX_MEM, a pending grant) takes parts of a quarter of
 * itself.
 */
static int64_t take(struct udp_link *nl, struct fm_route *rt, size_t len, void **buf)
{
    size_t whole = FM_MIN(len, rt->max_msg), max = rt->max_msg;
    if (whole > rt->ring.size / 4) {
        if (fm_net_flow_full(nl->engine, rt->link_rt, whole))
            return -1;
        max = rt->ring.size / 4;
    }
    int64_t n = buf ? fm_ring_take_grant(&rt->ring, len, max, buf)
                    : fm_ring_take(&rt->ring, len, max);
    if (n < 0)
        fm_net_flow_full(nl->engine, rt->link_rt, whole);
    return n;
}

static uint32_t min_payload(const struct udp_link *nl);

/*
 * Sends a message of n bytes at src from the caller's memory: its packets
 * go out first, and then its bytes are copied into the ring, where a
 * retransmission or a packet sent later finds them. The copy is then no
 * longer on the message's way to the receiver; it overlaps the receiver's
 * work instead. Only the parts of packets that hold other bytes as well
 * (from_caller) are copied before they go. (Lock held.)
 */
static void send_from_caller(struct udp_link *nl, struct fm_route *rt, const unsigned char *src,
                             size_t n, fm_ctx *ctx)
{
    struct fm_txflow *f = rt->link_rt;
    struct fm_ring *r = &rt->ring;
    uint64_t start = r->ctl->tail + FM_REC_HDR;
    fm_ring_publish(r, FM_REC_DATA, (uint32_t)n);
    /* The flow may end while its packets go (its peer refused them): the
     * pin keeps its ring until the copy below, as for a grant. */
    int pin = !f->pinned;
    if (pin)
        fm_net_flow_pin(nl->engine, f, 1);
    nl->caller.ring = r;
    nl->caller.lo = start;
    nl->caller.hi = start + n;
    nl->caller.src = src;
    kick(nl, f, ctx);
    fm_ring_put(r, nl->caller.lo, nl->caller.src, nl->caller.hi - nl->caller.lo);
    nl->caller.ring = NULL;
    if (pin)
        fm_net_flow_pin(nl->engine, f, 0);
}

static ssize_t udp_send(fm_ep *ep, struct fm_route *rt, const struct iovec *iov, int iovcnt,
                        size_t total)
{
    fm_ctx *ctx = fm_core_ep_ctx(ep);
    struct udp_link *nl = fm_core_link_state(ctx, &fm_udp_link);
    pthread_mutex_lock(&nl->lock);
    int64_t n = route_current(rt) ? take(nl, rt, total, NULL) : -1;
    /* A message of more than a packet leaves from the caller's memory (2-8
     * KiB ping-pongs were 4-9 % faster than after a copy into the ring). */
    if (n > (int64_t)min_payload(nl) && iov[0].iov_len >= (size_t)n) {
        send_from_caller(nl, rt, iov[0].iov_base, (size_t)n, ctx);
    } else if (n >= 0) {
        fm_ring_write(&rt->ring, FM_REC_DATA, iov, iovcnt, (size_t)n);
        kick(nl, rt->link_rt, ctx);
    }
    pthread_mutex_unlock(&nl->lock);
    return n < 0 ? FM_EAGAIN : (ssize_t)n;
}

/* A grant pins the ring until its commit (or the route lets go of the
 * flow): the caller writes into it without the lock. */
static ssize_t udp_grant(fm_ep *ep, struct fm_route *rt, size_t len, void **buf)
{
    struct udp_link *nl = fm_core_link_state(fm_core_ep_ctx(ep), &fm_udp_link);
    pthread_mutex_lock(&nl->lock);
    int64_t n = route_current(rt) ? take(nl, rt, len, buf) : -1;
    if (n >= 0)
        fm_net_flow_pin(nl->engine, rt->link_rt, 1);
    pthread_mutex_unlock(&nl->lock);
    return n < 0 ? FM_EAGAIN : (ssize_t)n;
}

static int udp_commit(fm_ep *ep, struct fm_route *rt, size_t len)
{
    fm_ctx *ctx = fm_core_ep_ctx(ep);
    struct udp_link *nl = fm_core_link_state(ctx, &fm_udp_link);
    pthread_mutex_lock(&nl->lock);
    /* A flow that ended meanwhile has no receiver: the message is dropped,
     * as what comes for a closed endpoint is. */
    int current = route_current(rt);
    if (current) {
        fm_ring_publish(&rt->ring, FM_REC_DATA, (uint32_t)len);
        kick(nl, rt->link_rt, ctx);
    }
    fm_net_flow_pin(nl->engine, rt->link_rt, 0);
    pthread_mutex_unlock(&nl->lock);
    return current ? 0 : -1;
}

/* An uncommitted grant's pin goes: the flow may grow or end again. */
static void udp_abandon(fm_ep *ep, struct fm_route *rt)
{
    struct udp_link *nl = fm_core_link_state(fm_core_ep_ctx(ep), &fm_udp_link);
    pthread_mutex_lock(&nl->lock);
    fm_net_flow_pin(nl->engine, rt->link_rt, 0);
    pthread_mutex_unlock(&nl->lock);
}

/* The route lets go of its flow; when its endpoint closes, the flow ends
 * after its data. */
static void udp_drop(fm_ep *ep, struct fm_route *rt, int closing)
{
    struct fm_txflow *f = rt->link_rt;
    if (!f)
        return;
    struct udp_link *nl = fm_core_link_state(fm_core_ep_ctx(ep), &fm_udp_link);
    pthread_mutex_lock(&nl->lock);
    if (closing)
        fm_net_flow_end(nl->engine, f);
    fm_net_flow_put(nl->engine, f);
    pthread_mutex_unlock(&nl->lock);
    rt->link_rt = NULL;
}

static int udp_reaches(fm_ctx *ctx, void *state, int peer)
{
    (void)ctx, (void)state, (void)peer;
    return 1; /* asked after shm: whatever it does not reach */
}

static int udp_resolve(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state, int rank,
                       uint32_t channel, struct fm_route *rt)
{
    (void)ctx, (void)ep_state;
    struct udp_link *nl = state;
    struct fm_txflow *f;
    pthread_mutex_lock(&nl->lock);
    int rc = fm_net_flow(nl->engine, rank, fm_core_ep_channel(ep), channel, &f);
    if (!rc) {
        /* Under the lock: the engine may end the flow as soon as it is let go. */
        rt->link_rt = f;
        rt->gen_word = &f->gen;
        rt->gen = f->gen;
        rt->ring = f->ring;
        rt->direct = 0;
        rt->sleeping = NULL;
        rt->need_src = 0;
    }
    pthread_mutex_unlock(&nl->lock);
    return rc;
}

/* ---- setup ------------------------------------------------------------------------- */

/* Whether ranks of the job talk to each other over the network: the same
 * answer on every rank, since all read the same node map and configuration. */
static int job_needs_net(fm_ctx *ctx)
{
    if (!(fm_core_cfg(ctx)->transports & FM_TRANSPORT_SHM))
        return 1;
    const int *node_of = fm_core_node_of(ctx);
    for (int r = 1; r < fm_core_size(ctx); r++)
        if (node_of[r] != node_of[0])
            return 1;
    return 0;
}

/* Whether this process may be reached by name from other nodes: started by
 * no launcher, or given a domain key. (A rank may decide this alone: its job's
 * ranks reach each other without the network.) */
static int may_be_named(fm_ctx *ctx)
{
    const char *key = getenv("FM_KEY");
    return fm_core_size(ctx) == 1 || (key && *key);
}

/* Rank 0 makes the job key and publishes it for the others. */
static int publish_job_key(struct fm_boot *boot, char *err, size_t errlen)
{
    uint8_t key[16];
    char hex[33];
    if (getrandom(key, sizeof(key), 0) != (ssize_t)sizeof(key)) {
        snprintf(err, errlen, "net: no randomness for the job key: %s", strerror(errno));
        return FM_ESYS;
    }
    fm_hex_encode(key, sizeof(key), hex);
    int rc = boot->ops->put(boot, "key", hex);
    if (rc)
        snprintf(err, errlen, "net: cannot publish the job key");
    return rc;
}

/* Before the bootstrap fence: opens the sockets, publishes their address
 * (and, on rank 0, the job key). */
static int udp_setup(fm_ctx *ctx, void **state, char *err, size_t errlen)
{
    const struct fm_config *cfg = fm_core_cfg(ctx);
    struct fm_boot *boot = fm_core_boot(ctx);
    int needed = job_needs_net(ctx), rc;
    /* FM_FAULT is checked even where no packet will meet it: a job on one
     * node would otherwise ignore a typo in it silently. */
    struct fm_fault fault = {0};
    if (cfg->fault[0] && fm_fault_parse(&fault, cfg->fault, err, errlen) < 0)
        return FM_EINVAL;
    /* Rank 0 publishes the job key whatever it decides for itself, so that
     * ranks that open the link alone (may_be_named) find one. */
    if (fm_core_rank(ctx) == 0 && (rc = publish_job_key(boot, err, errlen)) != 0)
        return rc;
    if (!needed && !may_be_named(ctx))
        return 0;
    struct udp_link *nl = calloc(1, sizeof(*nl));
    if (!nl)
        return FM_ENOMEM;
    nl->ctx = ctx;
    nl->stop_fd = -1;
    pthread_mutex_init(&nl->lock, NULL);
    rc = fm_rails_open(nl->rail, cfg->rails, err, errlen);
    if (rc < 0) {
        pthread_mutex_destroy(&nl->lock);
        free(nl);
        if (needed)
            return rc;
        /* Only names from other nodes would have needed it. */
        fm_warn("net", "no network link (%s): peers by name on other nodes are unreachable",
                err);
        err[0] = '\0';
        return 0;
    }
    nl->nrails = rc;
    *state = nl; /* from here on, teardown cleans up */
    if (cfg->fault[0]) {
        nl->fault = fault;
        for (int r = 0; r < nl->nrails; r++)
            nl->rail[r].fault = &nl->fault;
        fm_warn("net", "fault injection on: FM_FAULT=%s", cfg->fault);
    }
    char card[FM_BOOT_VAL_MAX];
    if (fm_rails_card(nl->rail, nl->nrails, card, sizeof(card)) < 0 ||
        (rc = boot->ops->put(boot, "net", card)) != 0) {
        snprintf(err, errlen, "net: cannot publish this rank's address");
        return rc ? rc : FM_EINVAL;
    }
    /* fm_wait wakes for datagrams; its progress calls then read them. */
    for (int r = 0; r < nl->nrails; r++)
        if (fm_core_watch(ctx, &fm_udp_link, nl->rail[r].fd, 0) != 0) {
            snprintf(err, errlen, "net: epoll_ctl: %s", strerror(errno));
            return FM_ESYS;
        }
    return 0;
}

/* One packet size for every rail: the smallest MTU's. */
static uint32_t min_payload(const struct udp_link *nl)
{
    uint32_t p = nl->rail[0].payload;
    for (int r = 1; r < nl->nrails; r++)
        p = FM_MIN(p, nl->rail[r].payload);
    return p;
}

/* Full packets every rail's datagram carries. */
static uint32_t min_send_packets(const struct udp_link *nl)
{
    uint32_t k = nl->rail[0].send_packets;
    for (int r = 1; r < nl->nrails; r++)
        k = FM_MIN(k, nl->rail[r].send_packets);
    return k;
}

/* After the fence: reads the job key, starts the engine (and the progress
 * thread). */
static int udp_start(fm_ctx *ctx, void *state, char *err, size_t errlen)
{
    struct udp_link *nl = state;
    const struct fm_config *cfg = fm_core_cfg(ctx);
    struct fm_boot *boot = fm_core_boot(ctx);
    char hex[64];
    struct fm_net_params p = {
        .rank = fm_core_rank(ctx),
        .size = fm_core_size(ctx),
        .ring_size = (uint32_t)cfg->net_ring_size,
        .ring_min = (uint32_t)cfg->net_ring_min,
        .rx_mem = (uint64_t)cfg->net_rx_mem,
        .flow_idle_ns = (uint64_t)cfg->net_flow_idle_ms * 1000000u,
        .payload = min_payload(nl),
        .gather_packets = min_send_packets(nl),
        .nrails = nl->nrails,
        .rail_policy = (enum fm_rail_policy)cfg->rail_policy,
        .rail_query = cfg->rail_status == FM_RAIL_STATUS_QUERY,
        .rail_heartbeat_ns = (uint64_t)cfg->rail_heartbeat_ms * 1000000u,
        .timeout_ns = (uint64_t)cfg->net_timeout_ms * 1000000u,
        .rto_min_ns = (uint64_t)cfg->net_rto_min_us * 1000u,
        .rto_max_ns = (uint64_t)cfg->net_timeout_ms * 1000000u / 4,
        .ack_delay_ns = (uint64_t)cfg->net_ack_delay_us * 1000u,
        .up = {.core = nl, .flow_new = up_flow_new, .delivered = up_delivered,
               .flow_end = up_flow_end, .peer_gone = up_peer_gone,
               .address_of = up_address_of, .peer_named = up_peer_named,
               .named_epoch = up_named_epoch},
    };
    if (boot->ops->get(boot, 0, "key", hex, sizeof(hex)) != 0 || strlen(hex) != 32) {
        snprintf(err, errlen, "net: rank 0 published no job key");
        return FM_EBOOT;
    }
    if (fm_hex_decode(hex, p.key, sizeof(p.key)) != 0) {
        snprintf(err, errlen, "net: rank 0 published a malformed job key");
        return FM_EBOOT;
    }
    p.epoch = fm_core_epoch(ctx);
    nl->engine = fm_net_new(&p);
    if (!nl->engine)
        return FM_ENOMEM;
    if (cfg->progress_thread) {
        nl->stop_fd = eventfd(0, EFD_CLOEXEC);
        void *(*body)(void *) = cfg->progress_thread == 2 ? watchdog_thread : progress_thread;
        if (nl->stop_fd < 0 || pthread_create(&nl->thread, NULL, body, nl) != 0) {
            snprintf(err, errlen, "net: cannot start the progress thread");
            return FM_ESYS;
        }
        nl->thread_on = 1;
    }
    return 0;
}

/*
 * Runs the engine until nothing is outstanding, or until nothing more was
 * acknowledged for quiet_ns. A peer that still acknowledges, however
 * slowly (a loaded host, a lossy path), gets everything; only the silence
 * that would declare it lost ends the wait. (A bound on the whole drain
 * left the end of a stream behind whenever repairs took that long.)
 */
static int drain(struct udp_link *nl, uint64_t quiet_ns)
{
    uint64_t last = UINT64_MAX, until = fm_now_ns() + quiet_ns;
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    pthread_mutex_lock(&nl->lock);
    fm_net_counters(nl->engine, nc, dr);
    pthread_mutex_unlock(&nl->lock);
    uint64_t lost_before = nc[FM_NC_PEERS_LOST];
    for (;;) {
        pthread_mutex_lock(&nl->lock);
        run(nl, 1, fm_now_ns());
        uint64_t left = fm_net_unacked(nl->engine);
        uint64_t d = fm_net_deadline(nl->engine);
        fm_net_counters(nl->engine, nc, dr);
        pthread_mutex_unlock(&nl->lock);
        uint64_t now = fm_now_ns();
        /* A peer lost while we wait takes its unacknowledged data with it,
         * and counts no more: said, or the wait ends as if all had gone. */
        if (nc[FM_NC_PEERS_LOST] != lost_before) {
            fm_warn("net", "%llu peer(s) lost while finalizing: what they had not acknowledged "
                    "may not have arrived",
                    (unsigned long long)(nc[FM_NC_PEERS_LOST] - lost_before));
            lost_before = nc[FM_NC_PEERS_LOST];
        }
        if (!left)
            return 0;
        if (left < last) {
            last = left;
            until = now + quiet_ns;
        } else if (now >= until) {
            return -1;
        }
        struct pollfd pfd[FM_RAILS_MAX];
        for (int r = 0; r < nl->nrails; r++)
            pfd[r] = (struct pollfd){.fd = nl->rail[r].fd, .events = POLLIN};
        uint64_t wake = FM_MIN(until, d);
        poll(pfd, (nfds_t)nl->nrails,
             wake <= now ? 0 : (int)FM_MIN((wake - now) / 1000000 + 1, 100));
    }
}

int fm_udp_link_counters(const fm_ctx *ctx, uint64_t nc[FM_NC_COUNT],
                         uint64_t drops[FM_DROP_COUNT])
{
    struct udp_link *nl = fm_core_link_state(ctx, &fm_udp_link);
    if (!nl || !nl->engine)
        return FM_EINVAL;
    pthread_mutex_lock(&nl->lock);
    fm_net_counters(nl->engine, nc, drops);
    pthread_mutex_unlock(&nl->lock);
    return 0;
}

/* FM_STATS=1: one line of counters per rank when it leaves. */
static void udp_stats(fm_ctx *ctx, void *state, FILE *out)
{
    struct udp_link *nl = state;
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    char line[1024];
    if (fm_udp_link_counters(ctx, nc, dr) != 0)
        return;
    int n = fm_log_label(line, sizeof(line));
    n += snprintf(line + n, sizeof(line) - (size_t)n, " net:");
    for (int i = 0; i < FM_NC_COUNT && n < (int)sizeof(line); i++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " %s=%llu", fm_net_counter_names[i],
                      (unsigned long long)nc[i]);
    for (int i = 1; i < FM_DROP_COUNT && n < (int)sizeof(line); i++)
        if (dr[i])
            n += snprintf(line + n, sizeof(line) - (size_t)n, " drop_%s=%llu", fm_drop_names[i],
                          (unsigned long long)dr[i]);
    uint64_t rail_tx[FM_RAILS_MAX];
    pthread_mutex_lock(&nl->lock);
    fm_net_rail_counters(nl->engine, rail_tx);
    pthread_mutex_unlock(&nl->lock);
    for (int r = 0; r < nl->nrails && n < (int)sizeof(line); r++)
        n += snprintf(line + n, sizeof(line) - (size_t)n, " rail%d_tx_bytes=%llu", r,
                      (unsigned long long)rail_tx[r]);
    fprintf(out, "%s\n", line);
}

/* Sends what is outstanding (while the peers acknowledge it, and for
 * FM_NET_TIMEOUT_MS after they stop), says goodbye, and frees everything. */
static void udp_teardown(fm_ctx *ctx, void *state)
{
    struct udp_link *nl = state;
    if (nl->engine) {
        uint64_t quiet = (uint64_t)fm_core_cfg(ctx)->net_timeout_ms * 1000000u;
        if (drain(nl, quiet) < 0)
            fm_warn("net", "finalize: some peers acknowledged nothing for FM_NET_TIMEOUT_MS; "
                           "data sent to them may be lost");
        pthread_mutex_lock(&nl->lock);
        fm_net_bye(nl->engine);
        pthread_mutex_unlock(&nl->lock);
        drain(nl, FM_MIN(quiet, 200000000u));
    }
    if (nl->thread_on) {
        __atomic_store_n(&nl->stop, 1, __ATOMIC_RELEASE);
        uint64_t one = 1;
        ssize_t w = write(nl->stop_fd, &one, sizeof(one));
        (void)w;
        pthread_join(nl->thread, NULL);
    }
    if (nl->stop_fd >= 0)
        close(nl->stop_fd);
    fm_rails_close(nl->rail, nl->nrails); /* closing leaves the core's epoll set too */
    /* Parked flows that ended are ours; the others the engine frees. */
    for (int i = 0; i < nl->nparked; i++)
        if (nl->parked[i]->ended)
            fm_net_rxflow_free(nl->parked[i]);
    if (nl->engine)
        fm_net_free(nl->engine);
    free(nl->parked);
    pthread_mutex_destroy(&nl->lock);
    free(nl);
}

/* ---- what fm_info shows ---------------------------------------------------------- */

static void udp_info(const struct fm_config *cfg, FILE *out)
{
    struct fm_udp *rails = calloc(FM_RAILS_MAX, sizeof(*rails));
    char uerr[256];
    int nrails = rails ? fm_rails_open(rails, cfg->rails, uerr, sizeof(uerr)) : FM_ENOMEM;
    if (nrails > 0) {
        char policy[32] = "";
        for (size_t i = 0; i < fm_cfg_count; i++)
            if (strcmp(fm_cfg_table[i].name, "FM_RAIL_POLICY") == 0)
                fm_config_format(&fm_cfg_table[i], cfg, policy, sizeof(policy));
        fprintf(out,
                "  udp   reliable session over UDP between nodes: available on %d rail%s "
                "(FM_RAILS=%s, policy %s)%s\n",
                nrails, nrails > 1 ? "s" : "", cfg->rails, policy,
                (cfg->transports & FM_TRANSPORT_UDP) ? "" : " (disabled by FM_TRANSPORTS)");
        for (int r = 0; r < nrails; r++) {
            const struct fm_udp *u = &rails[r];
            fprintf(out, "        rail %d: %s/%d on %s, MTU %d, %u bytes per packet%s%s\n", r,
                    inet_ntoa(u->addr.sin_addr), __builtin_popcount(u->netmask), u->ifname,
                    u->mtu, u->payload, u->gso ? ", GSO" : "", u->gro ? ", GRO" : "");
        }
        if (nrails > 1)
            fprintf(out, "        a peer's rail pairs with the local rail whose subnet holds "
                         "its address; a rail with no partner is not used towards that peer "
                         "(FM_LOG=info shows each pairing)\n");
        fm_rails_close(rails, nrails);
    } else {
        fprintf(out, "  udp   reliable session over UDP between nodes: unavailable: %s\n",
                rails ? uerr : "out of memory");
    }
    free(rails);
    fprintf(out, "        packet checksum CRC32C: %s\n", fm_crc32c_method());
}

static void udp_info_limits(const struct fm_config *cfg, FILE *out)
{
    long long min = cfg->net_ring_min, max = cfg->net_ring_size, bound = cfg->net_rx_mem;
    long long idle_ms = cfg->net_flow_idle_ms;
    fprintf(out, "  largest message per send (udp)  %lld bytes (FM_NET_RING_SIZE / 4; a "
                 "quarter of the flow's ring until it grew)\n", max / 4);
    fprintf(out,
            "  ring per network flow (udp)     %lld bytes (FM_NET_RING_MIN) to %lld "
            "(FM_NET_RING_SIZE), on both sides; a flow grows 4x when its sender finds the "
            "ring full and shrinks after 1 s unused; ", min, max);
    if (idle_ms)
        fprintf(out, "it ends after %lld ms unused (FM_NET_FLOW_IDLE_MS)\n", idle_ms);
    else
        fprintf(out, "it stays while its endpoints do (FM_NET_FLOW_IDLE_MS=0)\n");
    fprintf(out,
            "  receive memory (udp)            about flows x %lld + busy flows x %lld bytes, "
            "growth stopped at %lld bytes (FM_NET_RX_MEM%s); e.g. 1000 peers, 8 busy: "
            "%.1f MiB", min, max - min, bound, bound ? "" : "=0: none",
            (1000.0 * (double)min + 8.0 * (double)(max - min)) / 1048576.0);
    if (idle_ms)
        fprintf(out, ", %.1f MiB once the others were quiet for %lld ms",
                8.0 * (double)max / 1048576.0, idle_ms);
    fprintf(out, "\n");
}

const struct fm_link fm_udp_link = {
    .name = "udp",
    .transport = FM_TRANSPORT_UDP,
    .setup = udp_setup,
    .start = udp_start,
    .teardown = udp_teardown,
    .describe = udp_describe,
    .named = udp_named,
    .ep_open = udp_ep_open,
    .ep_close = udp_ep_close,
    .reaches = udp_reaches,
    .resolve = udp_resolve,
    .send = udp_send,
    .grant = udp_grant,
    .commit = udp_commit,
    .abandon = udp_abandon,
    .max_msg = udp_max_msg,
    .drop = udp_drop,
    .refresh = udp_refresh,
    .released = udp_released,
    .retire = udp_retire,
    .progress = udp_progress,
    .deadline = udp_deadline,
    .stats = udp_stats,
    .info = udp_info,
    .info_limits = udp_info_limits,
};
