/*
 * The one configuration table: every FM_* environment variable is declared
 * once in FM_CONFIG_VARS, which gives the field of struct fm_config, its
 * parsing, its limits, and the line fm_info prints about it.
 */
#ifndef FM_CONFIG_H
#define FM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum fm_cfg_kind {
    FM_CFG_INT,  /* decimal integer */
    FM_CFG_SIZE, /* bytes, with an optional K, M or G suffix (powers of 1024) */
    FM_CFG_WORD, /* one of the words listed in `choices` */
    FM_CFG_LIST, /* comma-separated words, each one of `choices` */
    FM_CFG_STR,  /* free text, checked where it is used */
};

/* Field types by kind: numbers and choices as int64_t, text as a string. */
typedef char fm_cfg_str[256];
#define FM_CFG_TYPE_FM_CFG_INT int64_t
#define FM_CFG_TYPE_FM_CFG_SIZE int64_t
#define FM_CFG_TYPE_FM_CFG_WORD int64_t
#define FM_CFG_TYPE_FM_CFG_LIST int64_t
#define FM_CFG_TYPE_FM_CFG_STR fm_cfg_str

/* X(field, kind, env name, default, min, max, choices, meaning) */
#define FM_CONFIG_VARS(X)                                                                \
    X(log, FM_CFG_WORD, "FM_LOG", "error", 0, 0, "none,error,warn,info,debug",           \
      "what the library prints to stderr: errors that make a call fail say what to "     \
      "change; warn adds degraded paths, info the choices made, debug every event")      \
    X(bootstrap, FM_CFG_WORD, "FM_BOOTSTRAP", "auto", 0, 0,                              \
      "auto,pmi1,pmi2,pmix,singleton",                                                   \
      "how the process joins its job: auto takes PMIx when PMIX_NAMESPACE is set, "      \
      "PMI-2 when PMI_JOBID is (Slurm), PMI-1 when PMI_FD or PMI_PORT is, else a "       \
      "singleton of size 1")                                                             \
    X(transports, FM_CFG_LIST, "FM_TRANSPORTS", "shm,udp", 0, 0, "shm,udp",              \
      "links that may be used: shm between ranks of one node, udp between nodes; "       \
      "FM_TRANSPORTS=udp sends everything over the network path, also on one node")      \
    X(rails, FM_CFG_STR, "FM_RAILS", "auto", 0, 0, NULL,                                 \
      "the network links (rails) the udp link uses, comma-separated, at most 4, the "    \
      "same string on every node: auto (the first interface that is up and not "         \
      "loopback), an interface name, an IPv4 address, or a subnet like 10.1.0.0/24. "    \
      "Peers' rails are matched by subnet")                                              \
    X(rail_policy, FM_CFG_WORD, "FM_RAIL_POLICY", "dynamic", 0, 0,                       \
      "dynamic,static,unidirectional",                                                   \
      "how packets spread over several rails: dynamic (each on the least loaded rail), " \
      "static (one rail per pair of processes), unidirectional (even rails carry data "  \
      "from lower to higher ranks, odd rails back)")                                     \
    X(rail_status, FM_CFG_WORD, "FM_RAIL_STATUS", "ack", 0, 0, "ack,query",                 \
      "how a sender learns which of the receiver's rails are busy: ack (piggybacked on "  \
      "every acknowledgement) or query (asked before each burst, as seed 000's SReq; "    \
      "for comparison)")                                                                  \
    X(rail_heartbeat_ms, FM_CFG_INT, "FM_RAIL_HEARTBEAT_MS", "100", 5, 600000, NULL,      \
      "with several rails: a rail to a peer silent this long is taken out of use (its "  \
      "packets go on the others) until it answers again; each rail is probed three "     \
      "times per interval while it carries nothing from the peer")                       \
    X(net_ring_size, FM_CFG_SIZE, "FM_NET_RING_SIZE", "1M", 4096, 1 << 30, NULL,      \
      "bytes of a busy network flow's ring (a power of two): the most data one sending " \
      "endpoint may have outstanding towards one receiving endpoint, and four times "    \
      "the largest message one send takes")                                              \
    X(net_ring_min, FM_CFG_SIZE, "FM_NET_RING_MIN", "32K", 4096, 1 << 30, NULL,         \
      "bytes of a new or quiet network flow's ring (a power of two; lowered to "        \
      "FM_NET_RING_SIZE if above it): a flow starts with it, grows by 4x up to FM_NET_RING_SIZE "   \
      "while its sender finds it full, and returns to it after a second without sends") \
    X(net_rx_mem, FM_CFG_SIZE, "FM_NET_RX_MEM", "64M", 0, (1LL << 40), NULL,           \
      "bound on the bytes of network receive rings a process lets its peers grow "     \
      "(0: none): beyond it new and quiet flows keep FM_NET_RING_MIN")                   \
    X(net_flow_idle_ms, FM_CFG_INT, "FM_NET_FLOW_IDLE_MS", "10000", 0, 3600000, NULL,    \
      "a network flow its sender has not used this long ends, and its rings go on both " \
      "sides; the next send opens another in the same datagram (0: flows stay)")         \
    X(net_timeout_ms, FM_CFG_INT, "FM_NET_TIMEOUT_MS", "3000", 50, 3600000, NULL,        \
      "a network peer silent this long is lost (FM_EPEERLOST); idle sessions exchange "  \
      "heartbeats four times per timeout. A dead process is found sooner, by the "       \
      "ICMP error its host returns")                                                     \
    X(net_rto_min_us, FM_CFG_INT, "FM_NET_RTO_MIN_US", "1000", 50, 10000000, NULL,       \
      "shortest retransmission timeout; the timeout follows the measured round trip")    \
    X(net_ack_delay_us, FM_CFG_INT, "FM_NET_ACK_DELAY_US", "100", 0, 100000, NULL,       \
      "longest an acknowledgement waits for a data packet to ride on")                   \
    X(net_gather_us, FM_CFG_INT, "FM_NET_GATHER_US", "10", 0, 1000000, NULL,            \
      "a message sent within this many microseconds of the previous one on its flow "   \
      "may wait, while earlier packets are unacknowledged, to share a datagram with "     \
      "the next ones, until the packet fills or the next fastmsg call (0: never)")       \
    X(progress_thread, FM_CFG_INT, "FM_PROGRESS_THREAD", "0", 0, 2, NULL,                \
      "1: a thread advances the network path all the time, for programs that compute "  \
      "for long between fastmsg calls; 2: a thread runs it only while no fastmsg call "  \
      "has for a heartbeat's time, so peers of a computing process do not take it for "  \
      "dead (the libfabric provider's default); 0: progress happens inside calls only")  \
    X(stats, FM_CFG_INT, "FM_STATS", "0", 0, 1, NULL,                                    \
      "1: each rank prints its network counters (packets, retransmissions, drops by "    \
      "reason) to stderr when it leaves the job")                                        \
    X(fault, FM_CFG_STR, "FM_FAULT", "", 0, 0, NULL,                                     \
      "inject faults on the network path: drop=P,dup=P,reorder=P,corrupt=P,seed=N, "    \
      "on=send|recv|both (probabilities per packet, on the sides on= names: both by "    \
      "default, so a packet meets them twice); empty: none")                             \
    X(ep_max, FM_CFG_INT, "FM_EP_MAX", "8", 1, 64, NULL,                                 \
      "endpoints (channels) one process may have open at once")                          \
    X(shm_ring_size, FM_CFG_SIZE, "FM_SHM_RING_SIZE", "256K", 4096, 1 << 30, NULL,       \
      "bytes of one shared-memory receive ring (a power of two); each local sender "     \
      "endpoint that talks to an endpoint gets one ring there")                          \
    X(shm_max_msg, FM_CFG_SIZE, "FM_SHM_MAX_MSG", "64K", 64, 1 << 29, NULL,              \
      "largest message one shm fm_send puts in a ring; longer sends take a prefix, so "  \
      "the receiver can read one part while the sender writes the next")                 \
    X(shm_peers, FM_CFG_INT, "FM_SHM_PEERS", "16", 0, 4096, NULL,                        \
      "processes outside the job (met by name) on this node that may send to this one "  \
      "over shared memory; their rings are committed only as they talk, and more go "    \
      "over the network link")                                                           \
    X(wait_spin_us, FM_CFG_INT, "FM_WAIT_SPIN_US", "50", 0, 1000000, NULL,               \
      "microseconds fm_wait polls before it blocks in the kernel, or twice the recent "  \
      "typical wait when that is at most 20 times as long; when the node has more "      \
      "ranks than CPUs it yields a few times instead (0: block at once)")                 \
    X(peer_check_ms, FM_CFG_INT, "FM_PEER_CHECK_MS", "10", 1, 1000, NULL,                \
      "how often a caller retrying on FM_EAGAIN checks that its peers are alive")        \
    X(names_mcast_ms, FM_CFG_INT, "FM_NAMES_MCAST_MS", "1000", 0, 3600000, NULL,         \
      "how long fm_name_mcast waits for room at a destination before it gives up")

struct fm_config {
#define FM_CFG_FIELD(field, kind, name, def, min, max, choices, desc)                     \
    FM_CFG_TYPE_##kind field;
    FM_CONFIG_VARS(FM_CFG_FIELD)
#undef FM_CFG_FIELD
};

struct fm_cfg_var {
    const char *name;
    enum fm_cfg_kind kind;
    const char *def;
    int64_t min, max;
    const char *choices; /* comma-separated, for WORD and LIST */
    const char *desc;
    size_t offset; /* of the field in struct fm_config */
};

extern const struct fm_cfg_var fm_cfg_table[];
extern const size_t fm_cfg_count;

/*
 * Fills cfg from the environment (defaults where unset). WORD variables are
 * stored as the index of the word in `choices`, LIST variables as a bit mask
 * of word indices, STR variables as given. On a bad value returns FM_EINVAL
 * and writes why in err.
 */
int fm_config_load(struct fm_config *cfg, char *err, size_t errlen);
/* The same, with other defaults for some variables ("NAME=value" strings,
 * NULL-terminated): what a library embedding fastmsg needs unless told. */
int fm_config_load_with(struct fm_config *cfg, const char *const *defaults, char *err,
                        size_t errlen);

/* Parses one value of a variable into *out (an int64_t, or a fm_cfg_str for
 * STR); 0 or FM_EINVAL with err written. */
int fm_config_parse(const struct fm_cfg_var *var, const char *s, void *out, char *err,
                    size_t errlen);

/* Writes the value of cfg for var as text (the inverse of fm_config_parse). */
void fm_config_format(const struct fm_cfg_var *var, const struct fm_config *cfg,
                      char *buf, size_t len);

/* Indices of FM_BOOTSTRAP and FM_RAIL_STATUS words and bits of FM_TRANSPORTS.
 * (FM_RAIL_POLICY's words are in the order of enum fm_rail_policy.) */
enum { FM_BOOT_AUTO, FM_BOOT_PMI1, FM_BOOT_PMI2, FM_BOOT_PMIX, FM_BOOT_SINGLETON };
enum { FM_RAIL_STATUS_ACK, FM_RAIL_STATUS_QUERY };
enum { FM_TRANSPORT_SHM = 1 << 0, FM_TRANSPORT_UDP = 1 << 1 };

#endif
