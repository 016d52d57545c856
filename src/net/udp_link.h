/*
 * The UDP link (udp_link.c): its ops table, and its engine's counters for
 * the tests that look at them.
 */
#ifndef FM_NET_UDP_LINK_H
#define FM_NET_UDP_LINK_H

#include "core/link.h"
#include "engine.h"

#include <stdint.h>

extern const struct fm_link fm_udp_link;

/* Engine counters and drops by reason; FM_EINVAL when the process has no
 * network path. */
int fm_udp_link_counters(const fm_ctx *ctx, uint64_t nc[FM_NC_COUNT],
                         uint64_t drops[FM_DROP_COUNT]);

#endif
