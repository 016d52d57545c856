/*
 * The link interface: how the core reaches a transport. A link is one ops
 * table covering its whole life; the core never names a transport (the
 * registry, links.c, is the one place that lists them) and a link never
 * includes the core's private headers: it sees the types of core_api.h and
 * calls the functions there.
 *
 * Who calls what, and with which lock:
 *  - setup, join, start, leaving, teardown: fm_init and fm_finalize, on the
 *    thread that calls them, no lock held.
 *  - describe, named: any thread, with ctx->domain_lock held (named) or no
 *    lock (describe); they may take the link's own lock.
 *  - ep_open, ep_bell, ep_close, resolve, send, grant, commit, drop,
 *    refresh, released, retire: the thread that uses the endpoint (one at a
 *    time, as the API says), no core lock held. ep_close runs after the
 *    endpoint was unpublished: from its return on the link must not name
 *    the endpoint again (core_api.h, "Endpoint lifetime").
 *  - progress, deadline, event: any thread, concurrently with everything
 *    above; the link serializes them with its own lock.
 * Members marked optional may be NULL.
 *
 * `state` is what setup made (NULL when the job does not use the link);
 * `ep_state` is what ep_open made for that endpoint.
 */
#ifndef FM_LINK_H
#define FM_LINK_H

#include "config.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct fm_ctx fm_ctx;
typedef struct fm_ep fm_ep;
struct fm_route;
struct fm_rx;
struct fm_name;

struct fm_link {
    const char *name;
    unsigned transport; /* its bit in FM_TRANSPORTS (enum fm_transport) */

    /* ---- life ---- */
    /* Before the bootstrap's first fence: makes the link's state and
     * publishes what peers need (address cards). Leaves *state NULL when
     * this job has no use for the link. */
    int (*setup)(fm_ctx *ctx, void **state, char *err, size_t errlen);
    /* After the first fence (optional). */
    int (*join)(fm_ctx *ctx, void *state, char *err, size_t errlen);
    /* After the second fence: reads the peers' cards and starts. */
    int (*start)(fm_ctx *ctx, void *state, char *err, size_t errlen);
    /* fm_finalize, before the endpoints close: peers are to see a normal
     * exit, not a failure (optional). */
    void (*leaving)(fm_ctx *ctx, void *state);
    /* Sends what is outstanding (bounded), says goodbye, frees everything. */
    void (*teardown)(fm_ctx *ctx, void *state);

    /* ---- names ---- */
    /* Fills this link's part of the process's name: how to reach it
     * (optional). */
    void (*describe)(fm_ctx *ctx, void *state, struct fm_name *n);
    /* The process now talks to named peers under the domain key `key`, and
     * introduces itself with `card` (its name, channel 0) (optional). */
    void (*named)(fm_ctx *ctx, void *state, const uint8_t key[16], const void *card,
                  size_t len);

    /* ---- endpoints ---- */
    /* A new endpoint: make what it needs to be reached through this link. */
    int (*ep_open)(fm_ctx *ctx, void *state, fm_ep *ep, void **ep_state);
    /* The endpoint made its doorbell, a pipe written to wake it (before it
     * first sleeps): publish it to the peers that ring it (optional). */
    void (*ep_bell)(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state, int fd, uint64_t ino);
    /* The endpoint closed (already unpublished): stop reading for it, free
     * the rings it received on, forget it. */
    void (*ep_close)(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state);

    /* ---- sending ---- */
    /* Whether this link carries traffic to `peer`, a rank or (index >= the
     * job's size) a named peer (asked in the registry's order: the first
     * that does, does). */
    int (*reaches)(fm_ctx *ctx, void *state, int peer);
    /* Fills rt with the ring towards (peer, channel). FM_EAGAIN when that
     * endpoint is not open yet, FM_EPEERLOST, FM_ENOMEM. */
    int (*resolve)(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state, int peer,
                   uint32_t channel, struct fm_route *rt);
    /* Sends one message: a prefix of the `total` bytes in iov (at least one
     * byte, or all of an empty message). Returns the bytes taken or
     * FM_EAGAIN when the ring has no room for a worthwhile part. NULL for a
     * link whose receiver reads the route's ring directly (rt->direct): the
     * core then writes the ring itself, inline. */
    ssize_t (*send)(fm_ep *ep, struct fm_route *rt, const struct iovec *iov, int iovcnt,
                    size_t total);
    /* Grants contiguous ring space for fm_send_prepare (same rule). */
    ssize_t (*grant)(fm_ep *ep, struct fm_route *rt, size_t len, void **buf);
    /* Sends the first len bytes of the last grant as a message; -1 if it
     * was dropped instead, the route's flow having ended meanwhile. */
    int (*commit)(fm_ep *ep, struct fm_route *rt, size_t len);
    /* The last grant is given up uncommitted (a new prepare or send, or
     * the endpoint closes): let go of what it holds. Optional. */
    void (*abandon)(fm_ep *ep, struct fm_route *rt);
    /* Wakes the receiver of a direct route, whose sleep flag was set. */
    void (*notify)(fm_ep *ep, struct fm_route *rt);
    /* Largest message one send puts in a ring. */
    size_t (*max_msg)(const fm_ctx *ctx);
    /* The route lets go of what it holds: it is about to be resolved again,
     * or freed (closing: its endpoint closes, so a flow it feeds ends after
     * its data). Optional. */
    void (*drop)(fm_ep *ep, struct fm_route *rt, int closing);

    /* ---- receiving ---- */
    /* The endpoint's news word changed (fm_core_ep_news): attach the rings
     * that appeared (optional). Not 0 (no memory): the core asks again. */
    int (*refresh)(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state);
    /* The endpoint released bytes of one of this link's rings. */
    void (*released)(fm_ctx *ctx, void *state, struct fm_rx *rx);
    /* An ended ring, read to its end, was detached: free it (optional). */
    void (*retire)(fm_ctx *ctx, void *state, struct fm_rx *rx);

    /* ---- progress and sleep ---- */
    /* Receives, runs timers, sends (flush: part-filled packets too).
     * Returns the events handled. Optional. */
    int (*progress)(fm_ctx *ctx, void *state, int flush);
    /* When progress must next run, or UINT64_MAX (optional). */
    uint64_t (*deadline)(fm_ctx *ctx, void *state);
    /* A descriptor the link watches (fm_core_watch) became readable. */
    void (*event)(fm_ctx *ctx, void *state, uint32_t cookie);

    /* ---- what it shows ---- */
    /* FM_STATS=1: counters, one line, when the process leaves (optional). */
    void (*stats)(fm_ctx *ctx, void *state, FILE *out);
    /* fm_info: whether it works here and with what, then its limits, for
     * the configuration cfg (no context: fm_info starts none). */
    void (*info)(const struct fm_config *cfg, FILE *out);
    /* fm_info: its lines of the memory formula. */
    void (*info_limits)(const struct fm_config *cfg, FILE *out);
};

/* The links, in the order a route tries them: on-node first. */
#define FM_LINKS_MAX 4
extern const struct fm_link *const fm_links[];
extern const int fm_nlinks;
/* A link's place in fm_links (and in the context's per-link arrays); -1 if
 * it is not registered. */
int fm_link_index(const struct fm_link *link);

#endif
