/*
 * libfmshmem's internal interface: the process's state, the two symmetric
 * segments and how an address on one PE becomes an address on another, and
 * the active messages that carry operations to PEs on other nodes.
 *
 * Within a node every PE maps every local peer's segments, so put, get and
 * atomics are loads, stores and CPU atomics (rma.c, atomic.c). Towards a PE
 * on another node an operation is a message to that PE's server endpoint,
 * applied by its server thread (am.c), so the target need not call the
 * library for a get to complete.
 */
#ifndef FMSHMEM_INTERNAL_H
#define FMSHMEM_INTERNAL_H

#include "core/util.h"
#include <fastmsg.h>
#include <pthread.h>
#include <shmem.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#define SUBSYS "shmem"

/* The symmetric segments: the heap, and the executable's data and .bss. */
enum seg { SEG_HEAP = 0, SEG_STATIC = 1, SEG_COUNT };

struct segment {
    char *base;   /* this PE's mapping */
    size_t size;
    int fd;       /* memfd peers on this node open through /proc/<pid>/fd */
};

/* Channels of the two endpoints: requests towards a PE's server thread, and
 * the replies (and start-up cards) towards its application thread. */
#define CH_SERVER 0xF5E30001u
#define CH_CLIENT 0xF5E30002u

/* Bytes at the start of the heap kept for the library's own symmetric
 * objects (barrier counters of the teams, lock words, scratch). */
#define TEAM_SLOTS 64
#define TEAM_SLOT_LONGS SHMEM_SYNC_SIZE
#define INTERNAL_BYTES ((size_t)TEAM_SLOTS * TEAM_SLOT_LONGS * sizeof(long) + 4096)
/* The longs of a team slot (and of a user's pSync, SHMEM_SYNC_SIZE long):
 * 0..31 dissemination counters, one per round; SLOT_SCRATCH a value the
 * members read from each other (collect's sizes, free team slots); the
 * central barrier's count and generation (team slots only). */
#define SLOT_SCRATCH 32
#define SLOT_CENTRAL_COUNT 48
#define SLOT_CENTRAL_GEN 49
/* The heap's address is aligned to this, so shmem_align works up to it. */
#define HEAP_ALIGN ((size_t)1 << 30)

struct fmshmem_team {
    int start, stride, size; /* members: world PEs start + i * stride, i < size */
    int my_pe;               /* index of this PE, -1 if not a member */
    int slot;                /* its counters in the internal area */
    bool on_node;            /* every member on this node: a central barrier */
    shmem_team_config_t config;
};

struct state {
    fm_ctx *ctx;
    int me, npes;
    bool initialized, finalized;
    int thread_level;
    struct segment seg[SEG_COUNT];
    /* Per PE: its segments mapped here (NULL: on another node), and its pid. */
    char **peer_base[SEG_COUNT];
    bool *local;
    int nlocal;          /* PEs on this node, this one included */
    int *local_pes;      /* their world ranks, ascending */
    bool any_remote;
    /* Active messages (am.c): NULL when every PE is on this node. */
    fm_ep *client;       /* application thread: sends requests, takes replies */
    fm_ep *server;       /* server thread: takes requests, sends replies */
    pthread_t server_thread;
    _Atomic int server_stop;
    fm_addr *server_addr, *client_addr;
    uint8_t *dirty;      /* remote PEs written to since the last quiet */
    int *dirty_list, ndirty;
    /* Teams. */
    uint64_t team_slots_free;
    struct fmshmem_team world, shared;
    uint64_t spin_before_yield; /* wait loops: spins before sched_yield */
};

extern struct state fmshmem;
#define S fmshmem

/* ---- init.c ---- */
/* Prints "shmem: PE n: <what>" and ends the job (there is no error path in
 * OpenSHMEM: the spec leaves errors undefined; we say what happened). */
_Noreturn void fmshmem_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void fmshmem_check_pe(int pe, const char *what);
/* Ends the job if a PE died; called from every waiting loop now and then. */
void fmshmem_check_peers(void);
/* Ends the job naming the PE that died: the one line every PE prints. */
_Noreturn void fmshmem_pe_died(int pe);

/* ---- segments.c ---- */
int fmshmem_segments_create(void);
int fmshmem_segments_map_peer(int pe, const void *card, size_t len);
size_t fmshmem_segments_card(void *card, size_t cap);
void fmshmem_segments_destroy(void);

/* Which segment `addr` (a symmetric address of this PE) lies in, and its
 * offset there; ends the job naming `what` if it is not symmetric. */
static inline enum seg fmshmem_seg_of(const void *addr, size_t len, uint64_t *off,
                                      const char *what)
{
    for (int s = 0; s < SEG_COUNT; s++) {
        uintptr_t a = (uintptr_t)addr, b = (uintptr_t)S.seg[s].base;
        if (a >= b && a - b <= S.seg[s].size && len <= S.seg[s].size - (a - b)) {
            *off = a - b;
            return (enum seg)s;
        }
    }
    fmshmem_fatal("%s: address %p (%zu bytes) is not symmetric: neither in the symmetric heap "
                  "nor in the program's data or .bss",
                  what, addr, len);
}

/* The address of `addr` at PE pe when pe is on this node, else NULL. */
static inline void *fmshmem_local_ptr(const void *addr, size_t len, int pe, const char *what)
{
    uint64_t off;
    enum seg s = fmshmem_seg_of(addr, len, &off, what);
    char *base = S.peer_base[s][pe];
    return base ? base + off : NULL;
}

/* ---- heap.c ---- */
void fmshmem_heap_init(void);
void fmshmem_heap_fini(void);

/* ---- am.c: active messages to PEs on other nodes ---- */
enum am_op {
    AM_PUT = 1,    /* payload -> segment */
    AM_GET,        /* reply GET_REP with len bytes of the segment */
    AM_AMO,        /* atomic, no reply */
    AM_FAMO,       /* atomic, reply FAMO_REP with the old value */
    AM_FLUSH,      /* reply FLUSH_REP: everything sent before it was applied */
    AM_GET_REP,
    AM_FAMO_REP,
    AM_FLUSH_REP,
};

enum amo_op {
    AMO_FETCH, AMO_SET, AMO_SWAP, AMO_CSWAP, AMO_ADD, AMO_AND, AMO_OR, AMO_XOR,
};

struct am_hdr {
    uint8_t op, seg, size, amo; /* size: operand bytes (4 or 8) of an AMO */
    uint32_t len;               /* bytes asked (GET); the payload is the rest of the message */
    uint64_t off;               /* offset in the segment, or in the reply (GET_REP) */
    uint64_t token;             /* the initiator's request */
};

/* am_check.c: whether a request (payload: the bytes after the header) fits
 * segments of these sizes, and whether a reply fits the get it answers. */
bool fmshmem_am_request_ok(const struct am_hdr *h, size_t payload, const size_t *seg_size);
bool fmshmem_am_reply_ok(const struct am_hdr *h, size_t payload, size_t total, size_t left);

/* Copies `len` bytes at offset `at` of a received message out of its
 * segments (fm_recv's iovecs). */
static inline void fmshmem_copy_out(void *to, const struct iovec *seg, int nseg, size_t at,
                                    size_t len)
{
    char *d = to;
    for (int i = 0; i < nseg && len; i++) {
        if (at >= seg[i].iov_len) {
            at -= seg[i].iov_len;
            continue;
        }
        size_t k = FM_MIN(len, seg[i].iov_len - at);
        memcpy(d, (char *)seg[i].iov_base + at, k);
        d += k;
        len -= k;
        at = 0;
    }
}

int fmshmem_am_init(void);
void fmshmem_am_fini(void);
void fmshmem_am_put(int pe, enum seg s, uint64_t off, const void *src, size_t len);
/* Starts a get; completed by fmshmem_am_complete (quiet) or at once when blocking. */
void fmshmem_am_get(int pe, enum seg s, uint64_t off, void *dst, size_t len, bool blocking);
/* An atomic on another node. fetch: where the old value goes (NULL: none);
 * blocking: wait for it. */
void fmshmem_am_amo(int pe, enum seg s, uint64_t off, enum amo_op op, int size, uint64_t value,
                    uint64_t cond, void *fetch, bool blocking);
/* Waits until every get and fetching atomic issued has its reply, and every
 * put and atomic sent is applied at its target. */
void fmshmem_am_quiet(void);
/* Waits for the replies of every get and fetching atomic in flight. */
void fmshmem_am_quiet_gets(void);
/* Handles replies that arrived (from wait loops). */
void fmshmem_am_poll(void);
/* The application thread waits: it serves requests itself while it can. */
void fmshmem_am_serve_inline(void);
/* It is about to nap: the server thread serves from now on. */
void fmshmem_am_hand_over(void);

/* Applies an atomic to local memory; returns the old value. Shared by the
 * on-node path and the server thread, so both are atomic with each other. */
uint64_t fmshmem_amo_apply(void *p, enum amo_op op, int size, uint64_t value, uint64_t cond);

/* ---- sync.c ---- */
/* A waiting loop of the application thread. Each step spins, yields or
 * naps, takes replies, and serves requests for the server thread (which
 * then needs no wake-up). */
#define FMSHMEM_WAIT_WHILE(cond)                                                               \
    do {                                                                                       \
        uint64_t spins_ = 0;                                                                   \
        while (cond)                                                                           \
            fmshmem_wait_step(&spins_);                                                        \
    } while (0)
void fmshmem_wait_step(uint64_t *spins);
/* What a shmem_test call does besides looking: take this PE's replies. */
void fmshmem_test_progress(void);
/* Dissemination barrier over the members of a set, counters in psync (a
 * symmetric array of at least log2(size) longs). */
void fmshmem_set_sync(int start, int stride, int size, int my_index, long *psync);
void fmshmem_team_sync_internal(struct fmshmem_team *t);
long *fmshmem_team_psync(int slot);

/* ---- atomic.c ---- */
/* An atomic on dest at pe, wherever pe is; returns the old value when
 * fetch (else 0). */
uint64_t fmshmem_amo(void *dest, int pe, enum amo_op op, int size, uint64_t value,
                     uint64_t cond, bool fetch, const char *what);

/* ---- rma.c ---- */
void fmshmem_put(void *dest, const void *src, size_t len, int pe, bool nbi);
void fmshmem_get(void *dest, const void *src, size_t len, int pe, bool nbi);

#endif
