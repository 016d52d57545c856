/*
 * Rails: the network links a process uses at once (seed 000). Each rail is
 * a UDP socket bound to one local interface; FM_RAILS names them, the same
 * string on every node. A process publishes its rails as one bootstrap card,
 * and a peer's rails are matched to ours by subnet: our rail r talks to the
 * peer's address that lies in rail r's subnet. docs/rails.md has the design.
 */
#ifndef FM_NET_RAILS_H
#define FM_NET_RAILS_H

#include "engine.h"
#include "udp.h"

#include <netinet/in.h>
#include <stddef.h>

/* Opens a socket per comma-separated element of spec (see fm_udp_open),
 * at most FM_RAILS_MAX, no interface twice; of several, one this node does
 * not have is left out with a warning. Returns how many, or FM_E* with err
 * filled (nothing left open). */
int fm_rails_open(struct fm_udp rails[FM_RAILS_MAX], const char *spec, char *err,
                  size_t errlen);
void fm_rails_close(struct fm_udp *rails, int n);

/* The card a process publishes: "a.b.c.d/len:port" per rail, comma-separated.
 * Returns its length, or -1 if it does not fit. */
int fm_rails_card(const struct fm_udp *rails, int n, char *buf, size_t len);

/*
 * Matches a peer's card against our n rails: out[r] is the peer's address in
 * the subnet of our rail r, sin_family 0 where it has none. With one rail and
 * no address in its subnet, the peer's first address is used (it may be
 * routed). Returns how many rails matched, or -1 for a malformed card.
 */
int fm_rails_match(const struct fm_udp *rails, int n, const char *card,
                   struct sockaddr_in out[FM_RAILS_MAX]);
/* The same for a peer's rails given as addresses (from its name). */
int fm_rails_pair(const struct fm_udp *rails, int n, const struct sockaddr_in *peer, int npeer,
                  struct sockaddr_in out[FM_RAILS_MAX]);

#endif
