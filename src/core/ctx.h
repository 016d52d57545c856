/*
 * Internal state of the core: the context (one per process), the table of
 * peers, and endpoints with their send routes and receive rings. Links do
 * not include this header (link.h, core_api.h).
 */
#ifndef FM_CTX_H
#define FM_CTX_H

#include "boot/boot.h"
#include "config.h"
#include "core_api.h"
#include "fastmsg.h"
#include "link.h"

#include <pthread.h>
#include <sys/types.h>

/* Endpoints one process may have open (FM_EP_MAX's upper bound). */
#define FM_EP_MAX_LIMIT 64

/*
 * A peer: a rank of the job (index = rank) or a process met by name (index
 * >= size: inserted with fm_addr_insert, or a sender that introduced itself).
 * Peers live in chunks that never move, so the send path reads a peer's
 * state without a lock while the table grows: O(peers met) per process.
 */
struct fm_name;
struct fm_peer {
    uint8_t state;       /* enum fm_peer_state, | FM_PEER_REMOVED; read anywhere */
    struct fm_name *name; /* a named peer's name (channel 0); NULL for ranks */
};

#define FM_PEER_REMOVED 0x80 /* fm_addr_remove: sends to it are refused */
#define FM_PEER_CHUNK 1024   /* peers per chunk */
#define FM_PEER_CHUNKS 4096  /* chunks: at most 4M peers */

struct fm_ctx {
    struct fm_config cfg;
    struct fm_boot boot;
    int rank;
    int size;
    struct fm_peer *peer_chunk[FM_PEER_CHUNKS]; /* peers, FM_PEER_CHUNK at a time */
    int npeers;                          /* (atomic) ranks, then named peers */
    int *lost_chunk[FM_PEER_CHUNKS];     /* lost peers in the order they were found */
    uint32_t epoch;                      /* this process's incarnation: random, not 0 */
    uint32_t job_hash, node_hash;        /* what names say of the job and the node */
    struct fm_named_index *named;        /* named peers by process, under ctx->lock */
    uint8_t domain_key[16];              /* sessions with named peers (key.h) */
    int have_domain;                     /* (atomic) loaded, and the links were told */
    pthread_mutex_t domain_lock;         /* loading it: before any link's lock */
    pthread_mutex_t boot_lock;           /* the bootstrap after fm_init (a leaf lock) */
    char key_source[256];
    void *link_state[FM_LINKS_MAX];       /* what each link's setup made, or NULL */
    fm_ep *eps[FM_EP_MAX_LIMIT];
    pthread_mutex_t lock; /* slow paths only: endpoints, liveness */
    pthread_mutex_t events_lock; /* one thread at a time reads epfd's events */
    int epfd;             /* descriptors the links watch (fm_core_watch) */
    uint32_t nlost;       /* entries of the lost list (atomic) */
    uint64_t next_check_ns; /* when a retry path next checks liveness (atomic) */
    uint32_t check_calls;   /* unforced liveness checks asked for (atomic) */
    int node_procs;         /* processes of the job on this node */
    int oversubscribed;     /* more ranks on this node than CPUs we may use */
    long cpus;              /* online CPUs of the machine */
    /* (atomic) wait.c: whether the machine had more tasks ready to run than
     * CPUs when last looked at, and when that was */
    int crowded;
    uint64_t crowd_checked_ns;
    int polled;             /* some link needs progress calls (the network) */
    /* Fences between publishing and checking a peer's sleep flag: with
     * membarrier, the fast paths need only a compiler barrier and the rare
     * sleeper pays for both sides (see fm_fence_fast). */
    int sleeper_membarrier; /* sleepers issue membarrier (fm_fence_slow) */
    int light_fence;        /* this process is registered for it */
    const uint32_t *named_writers; /* (atomic) fm_core_set_named_writers */
    /* Names (src/names/client.c): made on first use, under `lock`. */
    struct fm_names *names;
    int names_peer; /* (atomic) the node agent's peer index, or -1 */
};

struct fm_held {
    struct fm_rx *rx;
    uint64_t end; /* ring position after the message */
};

/* A route whose ring was too full for a send, and the free bytes it needs. */
struct fm_want {
    struct fm_route *rt;
    uint64_t need;
};

struct fm_ep {
    fm_ctx *ctx;
    uint32_t channel;
    int slot;
    int published; /* links may attach rings to it (under ctx->lock) */
    void *link_state[FM_LINKS_MAX]; /* what each link's ep_open made */
    /* A word a link changes when it has rings for the endpoint to attach
     * (fm_core_ep_news): read at every poll, so one, not one per link. */
    const uint32_t *news;
    uint32_t news_seen;
    int news_link;

    /* receive */
    struct fm_rx **active; /* polled rings (not announced), round-robin */
    int nactive, active_cap;
    int next;              /* where the next poll starts */
    /* The ready set of announced rings: links push onto `ready_in` (atomic,
     * a stack); the reader moves it to its own FIFO, `hot`, and visits
     * those round-robin, each until found empty some polls in a row. */
    struct fm_rx *ready_in;
    struct fm_rx *hot_head, *hot_tail;
    uint8_t hot_first;     /* the next poll starts with the ready set */
    struct fm_rx **attached; /* rings links attached (fm_core_ep_attach_rx): changed
                                under ctx->lock, count published last */
    int nattached, attached_cap;
    int nadopted;          /* of those, already in active */
    struct fm_held *held;  /* FIFO of messages read but not released */
    size_t held_cap, held_head, nheld;
    uint32_t lost_seen;    /* entries of ctx->lost already reported */

    /* send */
    struct fm_route *last;    /* route of the last send: the fast path */
    struct fm_route **routes; /* open-addressing table by destination */
    size_t routes_cap, nroutes;
    struct fm_route *grant;   /* route of an uncommitted fm_send_prepare */
    size_t granted;           /* bytes it granted */
    uint32_t sends_to_check;  /* sends left before the next liveness check */
    struct fm_want *want_space; /* rings that were too full, for fm_wait */
    int nwant, want_cap;
    int want_open;             /* a send waits for an endpoint not yet open */

    /* wait */
    uint64_t wait_typical_ns; /* recent waits, averaged: how long fm_wait spins */
    uint8_t sent_since_wait;  /* a send since the last fm_wait: the next may await its answer */
    /* made at the first sleep in fm_wait: */
    uint32_t *sleeping; /* set while it blocks: peers then ring the doorbell */
    uint32_t own_sleeping; /* where that flag is when no link shares it */
    int epfd;    /* doorbell and ctx->epfd, or -1 */
    int bell_rd; /* doorbell pipe, or -1 */
    int bell_wr;
};

/*
 * The store-load fence of the wake-up protocol. A sender publishes a record
 * and then reads the receiver's `sleeping` flag; a receiver going to sleep
 * sets the flag and then rechecks its rings. Both sides need a full fence,
 * or both may miss the other. With membarrier(GLOBAL_EXPEDITED) the sleeper
 * makes every running registered process execute that fence for it, so the
 * per-message side needs none: fm_fence_fast is then a compiler barrier and
 * fm_fence_slow the system call. The same holds with roles swapped for a
 * sender waiting for ring space. A process whose rings only its own
 * threads write (alone on its node, or all its peers remote) and that
 * waits for no other process's ring sleeps with PRIVATE_EXPEDITED instead:
 * it interrupts only CPUs running this process, not every process of the
 * machine that registered.
 */
static inline void fm_fence_fast(const struct fm_ctx *ctx)
{
    if (__builtin_expect(ctx->light_fence, 1))
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    else
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
/* others_read: the sleeper waits for space in a ring another process reads. */
void fm_fence_slow(const struct fm_ctx *ctx, int others_read);

/* Liveness: checks the local peers' pidfds if the last check is older than
 * FM_PEER_CHECK_MS (or now if force); marks exited ranks. */
void fm_ctx_check_peers(fm_ctx *ctx, int force);

/* Marks rank as gone for `state`; called with ctx->lock held. */
void fm_ctx_peer_gone(fm_ctx *ctx, int rank, int state);

static inline struct fm_peer *fm_peer_at(const struct fm_ctx *ctx, int i)
{
    return &ctx->peer_chunk[i / FM_PEER_CHUNK][i % FM_PEER_CHUNK];
}

/* Whether i names a peer (an address's peer part may be anything). */
static inline int fm_peer_valid(const struct fm_ctx *ctx, int i)
{
    return i >= 0 && i < __atomic_load_n(&ctx->npeers, __ATOMIC_ACQUIRE);
}

/* The n-th lost peer. */
static inline int fm_lost_at(const struct fm_ctx *ctx, uint32_t n)
{
    return ctx->lost_chunk[n / FM_PEER_CHUNK][n % FM_PEER_CHUNK];
}

/* The peer table (peers.c): the ranks' entries, made by fm_init. */
int fm_peers_init(fm_ctx *ctx);
/* Publishes this rank's name (channel 0) for fm_addr_name in the others. */
int fm_peers_publish(fm_ctx *ctx);
void fm_peers_free(fm_ctx *ctx);
/* Loads the domain key once (FM_E* if none can be had) and tells the links. */
int fm_domain_ready(fm_ctx *ctx);
/* fm_init as a singleton whatever the environment says: for a process
 * whose launcher connection belongs to someone else (the libfabric
 * provider inside an MPI process), which meets its peers by name.
 * `defaults` as fm_config_load_with's. */
int fm_init_singleton(fm_ctx **ctx, const char *const *defaults);

/* Names (src/names/client.c). An endpoint closes: its publications and
 * subscriptions end. The context ends: the agent connection closes. */
void fm_names_ep_closed(fm_ep *ep);
void fm_names_free(fm_ctx *ctx);

/* Progress of every link that needs the CPU; the events they handled. */
int fm_links_progress(fm_ctx *ctx, int flush);
/* The earliest time a link needs progress, or UINT64_MAX. */
uint64_t fm_links_deadline(fm_ctx *ctx);

/* Whether fm_recv or a send on ep can make progress now (used by fm_wait). */
int fm_ep_ready(fm_ep *ep);

#endif
