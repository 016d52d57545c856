/*
 * The shared-memory segment of one process: a memfd (never a name in
 * /dev/shm, so nothing can be left behind: the kernel frees it when the last
 * process that maps it exits). Local peers map it through
 * /proc/<pid>/fd/<fd>, which the same checks guard as ptrace-read access.
 *
 *   header page(s): struct fm_seg_hdr, one directory line per endpoint slot,
 *                   then the sender table (struct fm_seg_sender per slot
 *                   beyond the job's ranks)
 *   endpoint area 0 .. ep_max-1, each:
 *       ring control blocks  [nsenders * ep_max] struct fm_ring_ctl
 *       ring data            [nsenders * ep_max] ring_size bytes
 *
 * Ring (s, e) of an area receives from endpoint slot e of sender s. Senders
 * 0..nprocs-1 are the job's ranks on this node, in rank order; the others
 * are processes met by name, each of which claims a slot of the sender
 * table the first time it sends here. The file is sparse: the owner commits
 * an area's control blocks when it opens the endpoint; a sender commits its
 * ring's data the first time it sends there (fallocate, so a short memory
 * limit is an error, never SIGBUS).
 */
#ifndef FM_SHM_SEGMENT_H
#define FM_SHM_SEGMENT_H

#include "core/ring.h"

#include <stdint.h>

#define FM_SEG_MAGIC 0x31304753534d4d46ull /* "FMMSSG01" */
#define FM_SEG_VERSION 3

enum fm_seg_state {
    FM_SEG_LIVE = 1,
    FM_SEG_FINALIZED = 2, /* the owner left the job normally */
};

/* Directory entry of one endpoint slot; one cache line, read by senders. */
struct fm_seg_ep {
    uint32_t gen;      /* odd while an endpoint is open in this slot */
    uint32_t channel;  /* its channel */
    uint32_t sleeping; /* owner blocks in fm_wait: senders must ring the doorbell */
    int32_t bell_fd;   /* write end of the owner's doorbell pipe (its fd number) */
    uint64_t bell_ino; /* inode of that pipe, to verify what /proc opens */
    uint32_t nclaimed; /* rings senders have claimed in this area so far */
    uint8_t pad[FM_CACHE_LINE - 28];
};
_Static_assert(sizeof(struct fm_seg_ep) == FM_CACHE_LINE, "directory entry is one line");

struct fm_seg_hdr {
    uint64_t magic;
    uint32_t version;
    uint32_t state;     /* enum fm_seg_state */
    uint32_t pid;
    uint32_t rank;
    uint32_t nprocs;    /* processes of the job on this node: sender slots 0..nprocs-1 */
    uint32_t ep_max;
    uint64_t ring_size;
    uint64_t hdr_size;  /* bytes before endpoint area 0 */
    uint64_t ctl_size;  /* bytes of an area's control blocks (page-aligned) */
    uint64_t area_size; /* bytes of one endpoint area */
    uint64_t seg_size;
    uint32_t epoch;       /* the owner's incarnation, as its names say */
    uint32_t nsenders;    /* sender slots: nprocs, then those for processes met by name */
    uint64_t senders_off; /* bytes before the sender table */
    uint64_t domain_check; /* proves the owner's domain key to processes met by name:
                              SipHash(key, epoch); 0 until it has one */
    uint32_t named_writers; /* processes met by name that claimed a sender slot: each
                               adds 1, with a full barrier, before its first record */
    uint8_t pad[2 * FM_CACHE_LINE - 100];
    struct fm_seg_ep ep[]; /* ep_max entries */
};

/* A sender slot claimed by a process met by name: how the owner learns who
 * it is. Claimed with a compare-and-swap of `state` from free to writing. */
enum { FM_SENDER_FREE = 0, FM_SENDER_WRITING = 1, FM_SENDER_READY = 2 };
struct fm_seg_sender {
    uint32_t state;   /* FM_SENDER_*; READY is stored last, with release order */
    uint32_t len;     /* bytes of card */
    uint8_t card[64]; /* its endpoint name, channel 0 (core/name.h) */
    uint64_t mac;     /* SipHash(domain key, card): the owner refuses another domain */
};
_Static_assert(sizeof(struct fm_seg_hdr) == 2 * FM_CACHE_LINE, "segment header is two lines");

static inline struct fm_ring_ctl *fm_seg_ctl(struct fm_seg_hdr *h, int slot, int ring)
{
    char *area = (char *)h + h->hdr_size + (uint64_t)slot * h->area_size;
    return (struct fm_ring_ctl *)area + ring;
}

static inline unsigned char *fm_seg_data(struct fm_seg_hdr *h, int slot, int ring)
{
    char *area = (char *)h + h->hdr_size + (uint64_t)slot * h->area_size;
    return (unsigned char *)area + h->ctl_size + (uint64_t)ring * h->ring_size;
}

#endif
