/*
 * A link is how a route moves a message: shared memory or the network. The
 * core keeps one ops table per link and calls it through the route; every
 * member is non-blocking.
 */
#ifndef FM_LINK_H
#define FM_LINK_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct fm_ep;
struct fm_route;

struct fm_link {
    const char *name;
    /* Sends one message: a prefix of the `total` bytes in iov (at least one
     * byte, or all of an empty message). Returns the bytes taken or
     * FM_EAGAIN when the route's ring has no room for a worthwhile part. */
    ssize_t (*send)(struct fm_ep *ep, struct fm_route *rt, const struct iovec *iov, int iovcnt,
                    size_t total);
    /* Grants contiguous ring space for fm_send_prepare (same rule). */
    ssize_t (*grant)(struct fm_ep *ep, struct fm_route *rt, size_t len, void **buf);
    /* Sends the first len bytes of the last grant as a message. */
    void (*commit)(struct fm_ep *ep, struct fm_route *rt, size_t len);
    /* Largest message one send puts in a ring. */
    size_t (*max_msg)(const struct fm_ep *ep);
    /* The route is about to be resolved again or freed: let go of what it
     * holds. NULL when a route holds nothing. */
    void (*drop)(struct fm_ep *ep, struct fm_route *rt);
};

extern const struct fm_link fm_shm_link;

#endif
