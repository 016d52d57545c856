/*
 * Internal state of the core: the context (one per process), the table of
 * peers, the processes of this node, and endpoints with their send routes
 * and receive rings.
 */
#ifndef FM_CTX_H
#define FM_CTX_H

#include "boot/boot.h"
#include "config.h"
#include "core_api.h"
#include "fastmsg.h"
#include "link.h"
#include "shm/board.h"
#include "shm/segment.h"

#include <pthread.h>
#include <sys/types.h>

/* Why a rank can no longer be reached. */
enum fm_peer_state {
    FM_PEER_UP = 0,
    FM_PEER_FINALIZED = 1, /* left the job through fm_finalize */
    FM_PEER_FAILED = 2,    /* died or stopped answering */
};

/* One per rank of the job: the only per-rank state, so O(N) per process. */
struct fm_peer {
    int32_t proc;  /* index in ctx->procs if on this node, else -1 */
    uint8_t state; /* enum fm_peer_state; written under ctx->lock, read anywhere */
};

/* An opened doorbell of an endpoint of a local process. */
struct fm_bell {
    int fd;       /* our descriptor for its pipe, -1 if not opened */
    uint32_t gen; /* endpoint generation it belongs to */
};

/* A process of the job on this node (including this one). */
struct fm_proc {
    int rank;
    pid_t pid;
    int pidfd;              /* readable once it exits; -1 after that was handled */
    int memfd;              /* its segment */
    struct fm_seg_hdr *seg; /* our mapping of its segment */
    struct fm_bell *bells;  /* [ep_max], under ctx->lock */
};

struct fm_ctx {
    struct fm_config cfg;
    struct fm_boot boot;
    int rank;
    int size;
    struct fm_peer *peers; /* [size] */
    struct fm_proc *procs; /* [nprocs], in rank order */
    int nprocs;
    int my_proc;
    struct fm_seg_hdr *seg; /* own segment */
    struct fm_board board;  /* during fm_init: where local segments are */
    fm_ep *eps[FM_EP_MAX_LIMIT];
    uint8_t area_ready[FM_EP_MAX_LIMIT]; /* slot's ring controls committed and zero */
    pthread_mutex_t lock; /* slow paths only: endpoints, liveness, doorbells */
    int epfd;             /* pidfds of the local peers */
    int *lost;            /* failed ranks in the order they were found: [size] */
    uint32_t nlost;       /* entries of lost[] (atomic) */
    uint64_t next_check_ns; /* when a retry path next checks liveness (atomic) */
    int oversubscribed;     /* more ranks on this node than CPUs we may use */
    struct fm_netlink *net; /* the network path, or NULL */
    /* Fences between publishing and checking a peer's sleep flag: with
     * membarrier, the fast paths need only a compiler barrier and the rare
     * sleeper pays for both sides (see fm_fence_fast). */
    int sleeper_membarrier; /* sleepers issue membarrier(GLOBAL_EXPEDITED) */
    int light_fence;        /* this process is registered for it */
};

struct fm_rxflow;
struct fm_txflow;

/* Receive side of one ring: in a segment (shm) or in our memory (net). */
struct fm_rx {
    struct fm_ring ring;
    struct fm_rxflow *net; /* the network flow that fills it, or NULL */
    uint64_t rd;     /* next record to read */
    uint64_t published; /* release position last written to the ring's head */
    uint32_t nheld;  /* messages read from it but not yet released */
    uint8_t broken;  /* a header failed validation: the ring is no longer read */
    fm_addr src;     /* sending endpoint, as its last FM_REC_SRC record said */
};

struct fm_held {
    struct fm_rx *rx;
    uint64_t end; /* ring position after the message */
};

/* Where messages to one address go: a ring in the receiver's segment, or
 * the mirror of a network flow's ring. */
struct fm_route {
    fm_addr dst;
    const struct fm_link *link;
    const uint32_t *gen_word; /* changes when the route must be resolved again */
    uint32_t gen;             /* its value when resolved */
    struct fm_seg_ep *dir;    /* shm: the receiver's directory entry (sleeping) */
    struct fm_txflow *flow;   /* net: the flow */
    struct fm_ring ring;
    int proc;              /* receiver's local process index */
    int slot;              /* receiver's endpoint slot */
    uint8_t need_src;      /* the ring must first learn our channel */
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
    struct fm_seg_ep *dir; /* own directory entry */

    /* receive */
    struct fm_rx *rx;      /* [nprocs * ep_max]: shm rings, indexed like the segment's */
    struct fm_rx **active; /* rings with a sender, polled round-robin */
    int nactive, active_cap;
    int next;              /* where the next poll starts */
    struct fm_rx **attached; /* rings links attached (fm_core_attach_rx): owned, changed
                                under ctx->lock, count published last */
    int nattached, attached_cap;
    int nadopted;          /* of those, already in active */
    uint32_t nclaimed_seen;
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

    /* wait: made at the first sleep in fm_wait */
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
 * sender waiting for ring space.
 */
static inline void fm_fence_fast(const struct fm_ctx *ctx)
{
    if (__builtin_expect(ctx->light_fence, 1))
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    else
        __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
void fm_fence_slow(const struct fm_ctx *ctx);

static inline fm_addr fm_addr_make(int rank, uint32_t channel)
{
    return ((fm_addr)(uint32_t)(rank + 1) << 32) | channel;
}
static inline int fm_addr_rank_of(fm_addr a) { return (int)(a >> 32) - 1; }
static inline uint32_t fm_addr_channel(fm_addr a) { return (uint32_t)a; }

/* Liveness: checks the local peers' pidfds if the last check is older than
 * FM_PEER_CHECK_MS (or now if force); marks exited ranks. */
void fm_ctx_check_peers(fm_ctx *ctx, int force);

/* Marks rank as gone for `state`; called with ctx->lock held. */
void fm_ctx_peer_gone(fm_ctx *ctx, int rank, int state);

/* Whether fm_recv or a send on ep can make progress now (used by fm_wait). */
int fm_ep_ready(fm_ep *ep);

/* Names the running kernel instance (its boot_id): processes that the
 * launcher puts on one node must share it, or they are not on one machine. */
void fm_kernel_id(char *buf, size_t len);

#endif
