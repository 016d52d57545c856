/*
 * What a link may ask of the core: the calls that go up. Each takes the
 * core's locks itself, so a link never touches an endpoint's or the
 * context's fields and never has to know the core's lock rules beyond the
 * one below.
 *
 * Lock order: a link's own lock, then ctx->lock. A link may call these
 * with its own lock held (the network link calls them from its engine's
 * upcalls), never with ctx->lock held.
 *
 * Endpoint lifetime: the core owns every endpoint. An endpoint handed to a
 * link by fm_core_attach_rx stays valid until that link's ep_close member
 * has run for it; fm_ep_close unpublishes the endpoint first (no new
 * attachment can find it), then calls ep_close, then frees it. A link
 * therefore must stop naming the endpoint in ep_close.
 */
#ifndef FM_CORE_API_H
#define FM_CORE_API_H

#include "fastmsg.h"

#include <stdint.h>

struct fm_rx;

/*
 * Gives a receive ring to the endpoint open on `channel`, atomically with
 * respect to that endpoint's fm_ep_close: the ring is polled from the next
 * fm_recv. Returns the endpoint, or NULL when none is open on the channel
 * (or memory ran out): the link keeps the ring until one opens (its
 * ep_open member) or drops it.
 */
fm_ep *fm_core_attach_rx(fm_ctx *ctx, uint32_t channel, struct fm_rx *rx);

/* Wakes ep if it sleeps in fm_wait: something arrived for it from another
 * thread. Valid for an endpoint the link holds an attachment to. */
void fm_core_wake(fm_ep *ep);

/* A peer left (FM_PEER_FINALIZED) or died (FM_PEER_FAILED): sends to it
 * fail with FM_EPEERLOST, and every endpoint is woken to learn it. */
void fm_core_peer_gone(fm_ctx *ctx, int rank, int state);

#endif
