/*
 * Replication of the cluster-scope name table between node agents
 * (docs/names.md, "How the table spreads"). Transport-agnostic: the agent
 * (tools/fmnamed) runs it over fastmsg's reliable session, the simulation
 * (tests/names_sim.c) runs a thousand of them in one process over a lossy
 * in-memory network. One instance per node; not thread-safe.
 *
 * State: per origin node, its incarnation, the sequence number of its last
 * change and its current publications. A change (an item) travels down a
 * 16-ary tree rooted at its origin over the members sorted by node id, so an
 * update costs N-1 messages in all and at most 16 sends at any node. A
 * joining node gets one snapshot from the member it contacted. Every node
 * probes its next ceil(sqrt(N)) members (the overlapping ring of TIPC's
 * monitor); silence past the timeout floods a DOWN item that purges the node
 * everywhere; a node that learns it was declared down takes a new
 * incarnation and re-announces itself. Probes carry a digest of the version
 * vector: on a mismatch the two exchange vectors and send each other what
 * is missing (anti-entropy), which repairs lost items and partitions.
 */
#ifndef FM_NAMES_DISTR_H
#define FM_NAMES_DISTR_H

#include <stddef.h>
#include <stdint.h>

#define ND_CARD_MAX 64   /* how to reach a node: the agent's endpoint name */
#define ND_NAME_MAX 64   /* a publisher's endpoint name */
#define ND_MSG_MAX 16384 /* one message: the transport must carry this much */

/* One cluster-scope publication. id is unique per origin node and survives
 * the origin's reincarnation (so a node that comes back does not re-publish
 * what did not change). */
struct nd_pub {
    uint64_t id;
    uint32_t type, lower, upper;
    uint8_t namelen;
    uint8_t name[ND_NAME_MAX];
};

struct nd_ops {
    void *arg;
    /* Sends one message (<= ND_MSG_MAX bytes) to node `to`, reached by its
     * card. May drop it: the protocol repairs losses. */
    void (*send)(void *arg, uint32_t to, const void *card, size_t cardlen, const void *msg,
                 size_t len);
    /* The table changed: origin's publication p appeared or went away; lost
     * says it went because its node was declared down. */
    void (*added)(void *arg, uint32_t origin, const struct nd_pub *p);
    void (*removed)(void *arg, uint32_t origin, const struct nd_pub *p, int lost);
};

struct nd_params {
    uint32_t probe_us;   /* between probes of each monitored member */
    uint32_t down_us;    /* silence after which a monitored member is down */
    uint32_t rejoin_us;  /* between pings to one member believed down */
    uint32_t tomb_us;    /* how long a down member is remembered */
    uint32_t fanout;     /* children per node in a dissemination tree */
};

/* Defaults: probe 200 ms, down 1.5 s (TIPC's link tolerance), rejoin 1 s,
 * tomb 60 s, fanout 16. */
void nd_params_default(struct nd_params *p);

struct nd_stats {
    uint64_t msgs_sent, bytes_sent, msgs_recv, bytes_recv;
    uint64_t items_applied, items_dup, gaps, states_applied;
    uint64_t malformed; /* messages or records that did not parse */
    uint64_t probes_sent, downs_declared, reincarnations;
};

struct nd;

struct nd *nd_new(uint32_t node, uint32_t inc, const void *card, size_t cardlen,
                  const struct nd_ops *ops, const struct nd_params *params, uint64_t now_us);
void nd_free(struct nd *d);

/* A node to join through (a seed, a discovery probe's sender). */
void nd_contact(struct nd *d, const void *card, size_t cardlen, uint64_t now_us);

/* This node's own publications. nd_publish: 0, or -EEXIST if id is taken;
 * nd_withdraw: 0, or -ENOENT; lost: its publisher died (FM_NAME_LOST). */
int nd_publish(struct nd *d, const struct nd_pub *p);
int nd_withdraw(struct nd *d, uint64_t id, int lost);

/* A message from the transport. Malformed input is counted and ignored. */
void nd_input(struct nd *d, const void *msg, size_t len, uint64_t now_us);

/* Timers: probes, timeouts, pings to members believed down, tomb expiry. */
void nd_tick(struct nd *d, uint64_t now_us);

/* Sends what was batched for each destination (call after a burst of input,
 * publishes and ticks). */
void nd_flush(struct nd *d);

/* The transport found node unreachable (its session timed out). */
void nd_peer_lost(struct nd *d, uint32_t node, uint64_t now_us);

/* Going away: tells the members so they purge this node at once. */
void nd_leave(struct nd *d);

/* Queries. */
uint32_t nd_incarnation(const struct nd *d);
int nd_synced(const struct nd *d);       /* a snapshot from a member came in */
size_t nd_members(const struct nd *d);   /* live, this node included */
uint64_t nd_digest(const struct nd *d);  /* equal on converged nodes */
size_t nd_pubs(const struct nd *d);      /* publications held, all origins */
size_t nd_memory(const struct nd *d);    /* bytes allocated */
int nd_has_member(const struct nd *d, uint32_t node);
const struct nd_stats *nd_stats(const struct nd *d);

#endif
