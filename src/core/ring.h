/*
 * A single-producer single-consumer ring of variable-length records in
 * shared memory: the receive memory of one (sender endpoint, receiver
 * endpoint) pair.
 *
 * Record: an 8-byte header (payload length, type) at an 8-aligned position,
 * then the payload, which may wrap around the end of the ring (the receiver
 * then sees two segments). The next record starts at the next 8-aligned
 * position.
 *
 * Why no shared tail counter: the consumer learns that a record is complete
 * by reading its header word, which the producer stores last with release
 * order. A header of zero means "nothing yet". The producer keeps that true
 * by zeroing the header slot *after* its record before publishing the record,
 * so stale bytes of an earlier lap are never taken for a header. That is one
 * cache line per direction for a small message and no counter that bounces
 * between the cores. The consumer publishes `head` (bytes released); the
 * producer reads it only when its cached copy says the ring is full.
 */
#ifndef FM_SHM_RING_H
#define FM_SHM_RING_H

#include "core/util.h"

#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

enum fm_rec_type {
    FM_REC_DATA = 1, /* a message */
    FM_REC_PAD = 2,  /* filler up to the end of the ring, skipped by the consumer */
    FM_REC_SRC = 3,  /* payload: the 4-byte channel of the sending endpoint from now on */
};

#define FM_REC_HDR 8u /* header bytes */
/* Header word: bits 0-31 payload length, bits 32-39 type; never 0 when valid. */
#define FM_REC_MAKE(type, len) (((uint64_t)(type) << 32) | (uint32_t)(len))
#define FM_REC_LEN(h) ((uint32_t)(h))
#define FM_REC_TYPE(h) ((unsigned)((h) >> 32) & 0xffu)
#define FM_REC_SIZE(len) FM_ALIGN_UP((uint64_t)FM_REC_HDR + (len), 8)

/* Shared control block of one ring. Lines are split by writer. */
struct fm_ring_ctl {
    /* Written by the consumer: bytes released so far. */
    uint64_t head;
    uint8_t pad0[FM_CACHE_LINE - 8];
    /* Written and read only by the producer; shared so that a sender endpoint
     * reopened in the same slot resumes where the last one stopped. */
    uint64_t tail;       /* bytes written so far */
    uint64_t head_cache; /* last value of head read */
    uint32_t src_channel; /* channel of the sending endpoint, as last told */
    uint32_t src_told;    /* 1 once a FM_REC_SRC record was written */
    uint8_t pad1[FM_CACHE_LINE - 24];
    /* Written once when the ring is claimed, and when the producer waits. */
    uint32_t claimed;       /* the receiving endpoint's generation the producer set the
                               ring up for (shm/shm.c), 0 before */
    uint32_t space_wanted;  /* producer sleeps until head moves: consumer rings its doorbell */
    uint32_t producer_proc; /* local index of the sending process */
    uint32_t producer_ep;   /* endpoint slot of the sender in its process */
    uint32_t committed;     /* the ring's pages are committed (shm/shm.c); 0 once given back */
    uint8_t pad2[FM_CACHE_LINE - 20];
};
_Static_assert(sizeof(struct fm_ring_ctl) == 3 * FM_CACHE_LINE, "ring ctl is 3 lines");

/* A process's view of one ring. */
struct fm_ring {
    struct fm_ring_ctl *ctl;
    unsigned char *data;
    uint64_t size; /* power of two */
};

static inline uint64_t *fm_ring_word(const struct fm_ring *r, uint64_t pos)
{
    return (uint64_t *)(r->data + (pos & (r->size - 1)));
}

/* Copies len bytes to ring position pos, wrapping at the end. */
static inline void fm_ring_put(const struct fm_ring *r, uint64_t pos, const void *src, size_t len)
{
    uint64_t off = pos & (r->size - 1);
    size_t first = (size_t)FM_MIN((uint64_t)len, r->size - off);
    memcpy(r->data + off, src, first);
    if (first < len)
        memcpy(r->data, (const char *)src + first, len - first);
}

/* ---- producer ---------------------------------------------------------- */

/* Free bytes as last known; re-reads head when that is less than `need`. */
static inline uint64_t fm_ring_free(struct fm_ring *r, uint64_t need)
{
    struct fm_ring_ctl *c = r->ctl;
    uint64_t free_bytes = r->size - (c->tail - c->head_cache);
    if (free_bytes < need) {
        c->head_cache = __atomic_load_n(&c->head, __ATOMIC_ACQUIRE);
        free_bytes = r->size - (c->tail - c->head_cache);
    }
    return free_bytes;
}

/* Largest payload that fits now (a record also needs its header and the
 * zeroed header slot after it), or -1 if not even an empty record fits. */
static inline int64_t fm_ring_room(struct fm_ring *r, uint64_t want)
{
    uint64_t free_bytes = fm_ring_free(r, FM_REC_SIZE(want) + FM_REC_HDR);
    if (free_bytes < 2 * FM_REC_HDR)
        return -1;
    return (int64_t)FM_MIN(want, free_bytes - 2 * FM_REC_HDR);
}

/* Publishes a record whose payload is already in place at tail+8. */
static inline void fm_ring_publish(struct fm_ring *r, unsigned type, uint32_t len)
{
    struct fm_ring_ctl *c = r->ctl;
    uint64_t rec = FM_REC_SIZE(len);
    *fm_ring_word(r, c->tail + rec) = 0; /* the next header: "nothing yet" */
    __atomic_store_n(fm_ring_word(r, c->tail), FM_REC_MAKE(type, len), __ATOMIC_RELEASE);
    c->tail += rec;
}

/* Writes one record gathered from iov, taking exactly len bytes of it; the
 * caller checked fm_ring_room() >= len. */
static inline void fm_ring_write(struct fm_ring *r, unsigned type, const struct iovec *iov,
                                 int iovcnt, size_t len)
{
    uint64_t pos = r->ctl->tail + FM_REC_HDR;
    for (int i = 0; i < iovcnt && len; i++) {
        size_t n = FM_MIN(iov[i].iov_len, len);
        fm_ring_put(r, pos, iov[i].iov_base, n);
        pos += n;
        len -= n;
    }
    fm_ring_publish(r, type, (uint32_t)(pos - r->ctl->tail - FM_REC_HDR));
}

/* Free bytes a grant of `len` contiguous bytes needs: a record and the
 * terminator slot, plus a PAD to the end of the ring if the record does not
 * fit before it. */
static inline uint64_t fm_ring_grant_need(const struct fm_ring *r, uint64_t len)
{
    uint64_t at = r->ctl->tail & (r->size - 1);
    uint64_t need = FM_REC_SIZE(len) + FM_REC_HDR;
    if (at + FM_REC_HDR + len > r->size && at + FM_REC_HDR != r->size)
        need += r->size - at;
    return need;
}

/*
 * Grants contiguous payload space for up to `want` bytes at *buf and returns
 * its length, or -1 when none. If the space left before the end of the ring
 * is smaller than what the start of the ring offers, writes a PAD record to
 * skip to the start. The caller fills *buf and calls fm_ring_publish.
 */
static inline int64_t fm_ring_grant(struct fm_ring *r, uint64_t want, void **buf)
{
    struct fm_ring_ctl *c = r->ctl;
    uint64_t free_bytes = fm_ring_free(r, fm_ring_grant_need(r, want));
    if (free_bytes < 2 * FM_REC_HDR)
        return -1;
    uint64_t off = (c->tail + FM_REC_HDR) & (r->size - 1);
    uint64_t here = FM_MIN(FM_MIN(want, r->size - off), free_bytes - 2 * FM_REC_HDR);
    if (here < want && off != 0) {
        /* Bytes from the header slot to the end of the ring: skipped by a PAD. */
        uint64_t to_end = r->size - (c->tail & (r->size - 1));
        if (to_end + 2 * FM_REC_HDR <= free_bytes) {
            uint64_t there = FM_MIN(FM_MIN(want, r->size - FM_REC_HDR),
                                    free_bytes - to_end - 2 * FM_REC_HDR);
            if (there > here) {
                fm_ring_publish(r, FM_REC_PAD, (uint32_t)(to_end - FM_REC_HDR));
                *buf = r->data + FM_REC_HDR;
                return (int64_t)there;
            }
        }
    }
    *buf = r->data + off;
    return (int64_t)here;
}

/*
 * How much of a send of `total` bytes one message takes: all of it, up to
 * max_msg, when that fits; else a prefix of at least a quarter of max_msg
 * (large transfers pipeline through the ring without being cut into
 * slivers at its end); else -1, meaning "try again".
 */
static inline int64_t fm_ring_take(struct fm_ring *r, size_t total, size_t max_msg)
{
    size_t want = FM_MIN(total, max_msg);
    int64_t room = fm_ring_room(r, want);
    if (fm_likely(room >= (int64_t)want))
        return (int64_t)want;
    if (room < 0 || (size_t)room < FM_MIN(want, max_msg / 4))
        return -1;
    return room;
}

/* The same rule for contiguous space (fm_send_prepare). */
static inline int64_t fm_ring_take_grant(struct fm_ring *r, size_t len, size_t max_msg,
                                         void **buf)
{
    size_t want = FM_MIN(len, max_msg);
    int64_t got = fm_ring_grant(r, want, buf);
    if (got < 0 || ((size_t)got < want && (size_t)got < FM_MIN(want, max_msg / 4)))
        return -1;
    return got;
}

/* ---- consumer ---------------------------------------------------------- */

/* The header at position rd, or 0 when no record is there yet. */
static inline uint64_t fm_ring_peek(const struct fm_ring *r, uint64_t rd)
{
    return __atomic_load_n(fm_ring_word(r, rd), __ATOMIC_ACQUIRE);
}

/* Describes the payload of the record at rd in at most two segments;
 * returns the number of segments (0 for an empty payload). */
static inline int fm_ring_segments(const struct fm_ring *r, uint64_t rd, uint32_t len,
                                   struct iovec *seg)
{
    if (len == 0)
        return 0;
    uint64_t off = (rd + FM_REC_HDR) & (r->size - 1);
    uint64_t first = FM_MIN((uint64_t)len, r->size - off);
    seg[0].iov_base = r->data + off;
    seg[0].iov_len = first;
    if (first == len)
        return 1;
    seg[1].iov_base = r->data;
    seg[1].iov_len = len - first;
    return 2;
}

/* Frees everything before position pos for the producer. */
static inline void fm_ring_release(struct fm_ring *r, uint64_t pos)
{
    __atomic_store_n(&r->ctl->head, pos, __ATOMIC_RELEASE);
}

/* A header the consumer can trust: known type, length that fits the ring. */
static inline int fm_ring_hdr_valid(const struct fm_ring *r, uint64_t h)
{
    unsigned t = FM_REC_TYPE(h);
    return t >= FM_REC_DATA && t <= FM_REC_SRC && (h >> 40) == 0 &&
           FM_REC_LEN(h) <= r->size - 2 * FM_REC_HDR &&
           (t != FM_REC_SRC || FM_REC_LEN(h) == 4);
}

#endif
