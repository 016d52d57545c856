/*
 * The shared-memory link: endpoints of processes on one node talk through
 * rings in the receiver's segment. Sending is a copy into the ring (or none
 * with fm_send_prepare) and one release store; no system call unless the
 * receiver sleeps in fm_wait.
 */
#ifndef FM_SHM_H
#define FM_SHM_H

#include "core/ctx.h"
#include "core/link.h"
#include "ring.h"

#include <sys/types.h>

/* Creates this process's segment; the node's first process also creates
 * and publishes the node board (board.h). */
int fm_shm_setup(fm_ctx *ctx, char *err, size_t errlen);
/* After a bootstrap fence: writes this process's segment on the board. */
int fm_shm_join(fm_ctx *ctx, char *err, size_t errlen);
/* After the next fence: maps the segments of the other local processes. */
int fm_shm_connect(fm_ctx *ctx, char *err, size_t errlen);
/* Unmaps every segment and closes what fm_shm_setup and _connect opened. */
void fm_shm_teardown(fm_ctx *ctx);

/* Commits the endpoint's area and publishes it. */
int fm_shm_ep_open(fm_ep *ep);
/* Unpublishes the endpoint and returns its memory to the system. */
void fm_shm_ep_close(fm_ep *ep);
/* Creates the endpoint's doorbell (before its first sleep in fm_wait). */
int fm_shm_ep_bell(fm_ep *ep);

/*
 * Fills rt with the ring from ep to endpoint (rank, channel) on this node,
 * claiming it on first use. FM_EAGAIN if that endpoint is not open (yet),
 * FM_EPEERLOST if the process is gone, FM_ENOMEM if its memory cannot be
 * committed.
 */
int fm_shm_resolve(fm_ep *ep, int rank, uint32_t channel, struct fm_route *rt);

/* Wakes endpoint `slot` of local process `proc` (it sleeps in fm_wait). */
void fm_shm_ring_bell(fm_ctx *ctx, int proc, int slot);

/* Rescans the endpoint's claimed rings when senders claimed new ones. */
void fm_shm_refresh_rx(fm_ep *ep);

/* After a record is published: wake the receiver if it sleeps. The fence
 * pairs with the one in fm_wait between setting `sleeping` and rechecking
 * the rings, so that one of the two sides always sees the other. */
static inline void fm_shm_notify(fm_ctx *ctx, struct fm_route *rt)
{
    fm_fence_fast(ctx);
    if (fm_unlikely(__atomic_load_n(&rt->dir->sleeping, __ATOMIC_RELAXED)))
        fm_shm_ring_bell(ctx, rt->proc, rt->slot);
}

/* Writes the FM_REC_SRC record that tells the receiver our channel. */
static inline int fm_shm_tell_src(fm_ep *ep, struct fm_route *rt)
{
    if (fm_ring_room(&rt->ring, 4) < 4)
        return FM_EAGAIN;
    struct iovec v = {&ep->channel, 4};
    fm_ring_write(&rt->ring, FM_REC_SRC, &v, 1, 4);
    rt->ring.ctl->src_channel = ep->channel;
    rt->ring.ctl->src_told = 1;
    rt->need_src = 0;
    return 0;
}

/* Sends one message (see struct fm_link): copy into the ring, publish,
 * wake the receiver if it sleeps. Inline: this is the fast path. */
static inline ssize_t fm_shm_send(fm_ep *ep, struct fm_route *rt, const struct iovec *iov,
                                  int iovcnt, size_t total)
{
    if (fm_unlikely(rt->need_src) && fm_shm_tell_src(ep, rt) < 0)
        return FM_EAGAIN;
    int64_t n = fm_ring_take(&rt->ring, total, (size_t)ep->ctx->cfg.shm_max_msg);
    if (fm_unlikely(n < 0))
        return FM_EAGAIN;
    fm_ring_write(&rt->ring, FM_REC_DATA, iov, iovcnt, (size_t)n);
    fm_shm_notify(ep->ctx, rt);
    return (ssize_t)n;
}

#endif
