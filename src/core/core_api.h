/*
 * The core as a link sees it: the route and receive-ring types links fill,
 * and the calls that go up. Every call here takes the core's locks itself,
 * so a link never touches an endpoint's or the context's fields and never
 * has to know the core's lock rules beyond the one below.
 *
 * Lock order: ctx->domain_lock, then a link's own lock, then ctx->lock. A
 * link may call these with its own lock held (the network link calls them
 * from its engine's upcalls), never with ctx->lock held.
 *
 * Endpoint lifetime: the core owns every endpoint. An endpoint a link got
 * from fm_core_ep_on stays valid until that link's ep_close member has
 * run for it; fm_ep_close unpublishes the endpoint first (no attachment
 * can find it after that), then calls every link's ep_close, then frees
 * it. So a link must stop naming the endpoint in ep_close.
 */
#ifndef FM_CORE_API_H
#define FM_CORE_API_H

#include "boot/boot.h"
#include "config.h"
#include "fastmsg.h"
#include "link.h"
#include "ring.h"

#include <stdint.h>

/* Why a rank can no longer be reached. */
enum fm_peer_state {
    FM_PEER_UP = 0,
    FM_PEER_FINALIZED = 1, /* left the job through fm_finalize */
    FM_PEER_FAILED = 2,    /* died or stopped answering */
};

/* Where messages to one address go: a ring the receiver reads (in its
 * shared segment), or a network flow's mirror of the receiver's ring. */
struct fm_route {
    fm_addr dst;
    const struct fm_link *link;
    const uint32_t *gen_word; /* changes when the route must be resolved again */
    uint32_t gen;             /* its value when resolved */
    struct fm_ring ring;
    size_t max_msg;           /* largest message one send puts in the ring */
    const uint32_t *sleeping; /* direct: the receiver's sleep flag (link->notify wakes it) */
    void *link_rt;            /* the link's: the flow, or the receiver's doorbell */
    uint8_t direct;           /* the receiver reads this ring: the core writes it inline */
    uint8_t need_src;         /* the ring must first learn our channel (FM_REC_SRC) */
};

/* Receive side of one ring, made and owned by the link that fills it. */
struct fm_rx {
    struct fm_ring ring;
    const struct fm_link *link;
    void *link_state;   /* set by the core when attached: what link's setup made */
    void *link_rx;      /* the link's: the network flow that fills it */
    uint64_t rd;        /* next record to read */
    uint64_t published; /* release position last written to the ring's head */
    uint32_t nheld;     /* messages read from it but not yet released */
    uint8_t broken;     /* a header failed validation: the ring is no longer read */
    uint8_t ended;      /* atomic: nothing more comes; retired once read (fm_core_rx_end) */
    uint8_t announced;  /* set by the link before attaching: it calls fm_core_rx_ready
                           after what it publishes, and the ring is not polled */
    uint8_t queued;     /* atomic, announced rings: in the endpoint's ready set */
    uint8_t await_release; /* the core's: ended and read, retired once released */
    uint8_t idle_polls;    /* the core's: polls that found it empty in a row */
    int slot;           /* in the endpoint's attached rings (the core's) */
    int src_rank;       /* the sending process; FM_REC_SRC records give its channel */
    fm_addr src;        /* sending endpoint */
    struct fm_rx *ready_next; /* the core's: links of the ready set */
    struct fm_rx *hot_next;
};

/* An address: rank + 1 in the high word (0 is FM_ADDR_NONE), channel low. */
static inline fm_addr fm_addr_make(int rank, uint32_t channel)
{
    return ((fm_addr)(uint32_t)(rank + 1) << 32) | channel;
}
static inline int fm_addr_rank_of(fm_addr a) { return (int)(a >> 32) - 1; }
static inline uint32_t fm_addr_channel(fm_addr a) { return (uint32_t)a; }

/* Names the node: the running kernel instance (its boot_id) and the network
 * namespace. Processes that share it run on one node. */
#define FM_KERNEL_ID_MAX 96
void fm_kernel_id(char *buf, size_t len);

/* ---- what a link may read ---- */
const struct fm_config *fm_core_cfg(const fm_ctx *ctx);
/* The bootstrap, for fm_init's stages (setup, join, start). */
struct fm_boot *fm_core_boot(fm_ctx *ctx);
/* A card another rank published, at any time after fm_init (the
 * bootstrap's connection is shared: calls are serialized here). */
int fm_core_boot_get(fm_ctx *ctx, int rank, const char *key, char *val, size_t len);
int fm_core_rank(const fm_ctx *ctx);
int fm_core_size(const fm_ctx *ctx);
/* Node index of every rank (equal: same node), from the launcher or the
 * ranks' kernel ids. */
const int *fm_core_node_of(const fm_ctx *ctx);
fm_ctx *fm_core_ep_ctx(const fm_ep *ep);
uint32_t fm_core_ep_channel(const fm_ep *ep);
/* The endpoint's index among this process's open ones, < FM_EP_MAX. */
int fm_core_ep_slot(const fm_ep *ep);
/* What `link`'s setup made, or NULL when the process does not use it. */
void *fm_core_link_state(const fm_ctx *ctx, const struct fm_link *link);
/* What `link`'s ep_open made for ep. */
void *fm_core_ep_state(const fm_ep *ep, const struct fm_link *link);
/* Whether rank `peer` is still up (atomic read). */
int fm_core_peer_up(const fm_ctx *ctx, int peer);
/* This node, as names say it (a hash of the kernel's boot id). */
uint32_t fm_core_node(const fm_ctx *ctx);

/* This process's incarnation: random, never 0 (names carry it; the network
 * session uses it to tell a restarted process from the old one). */
uint32_t fm_core_epoch(const fm_ctx *ctx);
/* What the name of this process says (channel 0), with every link's part. */
struct fm_name;
void fm_core_self_name(fm_ctx *ctx, struct fm_name *n);
/* A named peer's name (channel 0); FM_EINVAL for a rank or no peer. */
int fm_core_peer_name(const fm_ctx *ctx, int peer, struct fm_name *n);
/* A process introduced itself with its name (channel 0) and epoch: its
 * peer index, made on first sight, or FM_EINVAL when card is not a name of
 * that epoch. */
int fm_core_peer_by_name(fm_ctx *ctx, const void *card, size_t len, uint32_t epoch);

/* ---- what a link may tell ---- */
/* How many processes of the job run on this node (for fm_wait's choice
 * between spinning and yielding). */
void fm_core_set_node_procs(fm_ctx *ctx, int nprocs);
/* The count, in this process's shared segment, of processes met by name
 * that may write to its rings (NULL: none can); read by sleepers. */
void fm_core_set_named_writers(fm_ctx *ctx, const uint32_t *count);
/* The endpoint's sleep flag lives at *word (shared with the peers that
 * wake it), not in the endpoint (ep_open only). */
void fm_core_ep_sleep_word(fm_ep *ep, uint32_t *word);
/* A word that changes when rings appear for the endpoint that the link
 * must attach: the core then calls its refresh (ep_open only; one link per
 * endpoint may have one, since fm_recv reads it every time). */
void fm_core_ep_news(fm_ep *ep, const struct fm_link *link, const uint32_t *word);
/* Watches fd: when it becomes readable, fm_wait wakes and the link's event
 * member gets `cookie`. */
int fm_core_watch(fm_ctx *ctx, const struct fm_link *link, int fd, uint32_t cookie);
void fm_core_unwatch(fm_ctx *ctx, int fd);

/* The endpoint open on `channel`, or NULL: the link keeps a ring for that
 * channel until one opens or drops it. */
fm_ep *fm_core_ep_on(fm_ctx *ctx, uint32_t channel);
/*
 * Gives a receive ring to ep, polled from its next fm_recv: an endpoint
 * fm_core_ep_on found while the caller holds off its close (its link's
 * ep_close takes the lock the caller holds), or one the caller owns
 * (refresh). 0, or FM_ENOMEM.
 */
int fm_core_ep_attach_rx(fm_ep *ep, struct fm_rx *rx);
/* Nothing more comes into rx: once read and released, the core detaches
 * it and calls the link's retire. */
void fm_core_rx_end(struct fm_rx *rx);
/* An announced ring has news: records published, or its end. Puts it in
 * ep's ready set and wakes ep. Any thread, while rx is attached and
 * cannot be retired (its link's lock held). */
void fm_core_rx_ready(fm_ep *ep, struct fm_rx *rx);

/* Wakes ep if it sleeps in fm_wait: something arrived for it from another
 * thread. Valid for an endpoint the link holds an attachment to. */
void fm_core_wake(fm_ep *ep);

/* A peer left (FM_PEER_FINALIZED) or died (FM_PEER_FAILED): sends to it
 * fail with FM_EPEERLOST, and every endpoint is woken to learn it. */
void fm_core_peer_gone(fm_ctx *ctx, int rank, int state);

/* The store-load fence of a sender that published a record and now reads
 * the receiver's sleep flag (see ctx.h). */
void fm_core_fence(const fm_ctx *ctx);

/* Whether the CPUs are crowded: more ranks on this node than CPUs, or more
 * tasks ready to run on the machine than CPUs (looked at every 50 ms at
 * most). A process that polls then takes time from one that works. */
int fm_core_crowded(fm_ctx *ctx);

#endif
