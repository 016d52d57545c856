/*
 * The network path of a process: the session engine on a UDP socket,
 * plugged into the core. Routes to ranks that shared memory does not reach
 * (or all of them, with FM_TRANSPORTS=udp) go through here.
 *
 * Progress happens inside fastmsg calls: a send hands its records to the
 * engine at once; receiving, waiting and fm_progress read the socket, run
 * timers and flush. With FM_PROGRESS_THREAD=1 a thread does it as well.
 * Lock order: the net lock, then ctx->lock.
 */
#ifndef FM_NET_NETLINK_H
#define FM_NET_NETLINK_H

#include "core/ctx.h"
#include "engine.h"

#include <stdint.h>

/* ctx->epfd tag of the UDP socket (other tags are local process indices). */
#define FM_EPOLL_NET 0xFFFFFFFFu

/* Before the bootstrap fence: opens the socket, publishes its address (and,
 * on rank 0, the job key). */
int fm_netlink_setup(fm_ctx *ctx, char *err, size_t errlen);
/* After the fence: reads the job key, starts the engine (and the progress
 * thread). */
int fm_netlink_start(fm_ctx *ctx, char *err, size_t errlen);
/* Sends what is outstanding (bounded by FM_NET_TIMEOUT_MS), says goodbye,
 * and frees everything. */
void fm_netlink_finalize(fm_ctx *ctx);

/* The route from ep to (rank, channel) over the network. */
int fm_netlink_resolve(fm_ep *ep, int rank, uint32_t channel, struct fm_route *rt);

/* Receives, runs timers, sends; flush also sends part-filled packets.
 * Returns the number of datagrams received. Does nothing if another thread
 * is at it. */
int fm_netlink_progress(fm_ctx *ctx, int flush);
/* When the engine next needs to run, or UINT64_MAX. */
uint64_t fm_netlink_deadline(fm_ctx *ctx);

/* The endpoint released bytes of a network ring: credit goes back. */
void fm_netlink_released(fm_ctx *ctx, struct fm_rx *rx);
/* Flows that came for a channel before it was opened join the endpoint. */
void fm_netlink_ep_opened(fm_ep *ep);
/* The endpoint's flows stop being read: what arrives is discarded. */
void fm_netlink_ep_closed(fm_ep *ep);
/* Frees rx's flow if it ended and everything in it was read and released;
 * returns 1 then (the caller detaches and frees rx). */
int fm_netlink_retire(fm_ep *ep, struct fm_rx *rx);

/* Engine counters and drops by reason, for FM_STATS and the tests. */
void fm_netlink_counters(fm_ctx *ctx, uint64_t nc[FM_NC_COUNT], uint64_t drops[FM_DROP_COUNT]);

extern const struct fm_link fm_net_link;

#endif
