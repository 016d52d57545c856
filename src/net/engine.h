/*
 * The reliable session engine: exactly-once, in-order delivery between two
 * processes over any lossy datagram link.
 *
 * It knows nothing of sockets. Packets come in through fm_net_input and go
 * out as descriptors that fm_net_output fills and the link transmits (UDP in
 * production, an in-memory lossy queue in the unit tests). Time is passed
 * in, so the tests can run it on a fake clock.
 *
 * A session joins two processes: one sequence space per direction, set up by
 * HELLO/HELLO_ACK (one round trip, authenticated by the job key). Over it
 * run flows, one per (sending endpoint, receiving channel). A flow's data is
 * a stream of ring records (the format of src/core/ring.h); the sender keeps
 * a mirror of the receiver's ring and sends byte ranges of it, the receiver
 * lays them into its ring at the same positions and publishes each record
 * when it is complete and in order, so fm_recv reads network messages the
 * way it reads shared-memory ones. The ring is also the flow control: the
 * receiver returns released bytes as credits, and a sender never has more
 * than a ring's worth outstanding, so everything that arrives in order fits.
 *
 * Thread safety: the caller serializes all calls on one engine (the UDP link
 * holds its lock), except that the mirror rings are written by their
 * sending endpoint and the landing rings read by their receiving endpoint,
 * with the ring's own release/acquire protocol.
 */
#ifndef FM_NET_ENGINE_H
#define FM_NET_ENGINE_H

#include "core/ring.h"
#include "wire.h"

#include <netinet/in.h>
#include <stdint.h>

/* Sequenced packets a session has in flight, and a receiver holds after a
 * gap (later ones are dropped): its tables start at the least and double
 * as the window fills, so an idle peer costs little; past WIN_SMALL only
 * for full packets (output.c). */
#define FM_NET_WIN_MIN 64
#define FM_NET_WIN_SMALL 256
#define FM_NET_WIN_MAX 8192
#define FM_NET_MAX_CREDITS 16 /* credits one ACK carries */
#define FM_RAILS_MAX 4        /* network links one process uses at once */

/* How a session spreads its packets over the rails (seed 000, 2.3); in the
 * order of FM_RAIL_POLICY's words. */
enum fm_rail_policy {
    FM_RAIL_DYNAMIC,        /* every rail, each packet on the least loaded free one */
    FM_RAIL_STATIC,         /* one rail per pair of processes, fixed at setup */
    FM_RAIL_UNIDIRECTIONAL, /* a rail carries data one way only: even rails from the lower
                               rank to the higher, odd rails back */
};

struct fm_net;
struct fm_session;

/* How a session with a peer ended (the peer_gone upcall). */
enum fm_net_peer_end {
    FM_NET_PEER_LEFT = 1,   /* it said goodbye (BYE): it left through fm_finalize */
    FM_NET_PEER_FAILED = 2, /* it died or stopped answering */
};

/* Sending side of a flow: a mirror of the receiver's ring. */
struct fm_txflow {
    struct fm_ring ring;     /* written by the sending endpoint like a shm ring */
    struct fm_ring_ctl ctl;  /* head = bytes the receiver released (credit) */
    struct fm_session *s;
    uint32_t id;             /* index in the session's flows */
    uint32_t src_channel;
    uint32_t dst_channel;
    uint32_t gen;            /* changes when the flow dies: routes must look again */
    uint64_t sent;           /* stream bytes transmitted at least once */
    uint64_t complete;       /* end of the last published record seen */
    uint64_t t_write;        /* when the sending endpoint last wrote, or the idle check first
                                saw the flow unwritten (atomic) */
    uint8_t burst;           /* that write came soon after the one before (atomic) */
    uint8_t announced;       /* its FLOW packet has a sequence number */
    uint8_t ending;          /* its endpoint closed, the receiver stopped it, it grew, or it
                                went unused */
    uint8_t end_sent;        /* FLOW_END has a sequence number: end_seq */
    uint8_t done;            /* ended and acknowledged: freed when refs drops to 0 */
    uint8_t pinned;          /* an fm_send_prepare grant points into the ring */
    uint8_t stopped;         /* its receiver asked it to stop: its FLOW_END may wait */
    uint32_t end_seq;
    /* Its FLOW's sequence number (once announced): a FLOW_STOP counts only
     * if it names it, and a credit only from a packet whose ack is past
     * credit_seq, that number or, for a long-lived flow, one far behind the
     * session's (fm_flow_idle_check). A flow id is reused, and a late
     * packet may mean the old flow. */
    uint32_t flow_seq, credit_seq;
    uint32_t live_idx;       /* its place among the session's live flows */
    uint32_t birth;          /* order of creation in its session (announce_waits) */
    int refs;                /* routes that point to it (fm_net_flow, fm_net_flow_put) */
};

/* The sending endpoint wrote a message into f's mirror at time now: small
 * messages written in a burst may gather into one packet; one that comes
 * after a pause goes at once. */
static inline void fm_txflow_wrote(struct fm_txflow *f, uint64_t now, uint64_t gather_ns)
{
    uint64_t last = __atomic_load_n(&f->t_write, __ATOMIC_RELAXED);
    __atomic_store_n(&f->burst, (uint8_t)(now - last < gather_ns), __ATOMIC_RELAXED);
    __atomic_store_n(&f->t_write, now, __ATOMIC_RELAXED);
}

/* Receiving side of a flow: the ring the receiving endpoint reads. */
struct fm_rxflow {
    struct fm_ring ring;
    struct fm_ring_ctl ctl;  /* head = bytes the endpoint released */
    struct fm_session *s;
    int src_rank;            /* the sending process */
    uint32_t id;             /* the sender's flow id */
    uint32_t flow_seq;       /* sequence number of its FLOW (named in FLOW_STOP) */
    uint32_t src_channel;
    uint32_t dst_channel;
    uint64_t wpos;           /* next stream byte expected */
    uint64_t rec_start;      /* record being filled: its position, */
    uint64_t rec_end;        /* where it ends, */
    uint64_t rec_hdr;        /* and its header, stored when complete */
    uint64_t credited;       /* head last sent back as credit */
    /* The word at the frontier, where the next record's header goes, stays
     * 0 for the reader; bytes that belong there, laid ahead of their turn,
     * wait here (fm_flow_rx_place). */
    uint64_t stash;
    uint64_t stash_pos;
    /* End of the furthest bytes laid ahead of their turn whose packet
     * passed its CRC: nothing checked lies beyond it (or before wpos). */
    uint64_t placed_end;
    void *owner;             /* the core's receiving endpoint, or NULL */
    struct fm_rxflow *successor; /* the link's: the next flow of its sender, read after it */
    uint8_t orphan;          /* its endpoint closed: bytes are released on arrival */
    uint8_t ended;           /* FLOW_END came: all its data is in the ring, and the core
                                owns the flow (fm_net_rxflow_free) */
    /* Ended without its FLOW_END, its sender lost: its last bytes may never
     * have been sent, though a later flow of the sender's (a grown ring),
     * sent beside it, delivered its own. That flow and any after it must
     * not be read: its messages would follow a hole. */
    uint8_t cut;
    uint8_t stop_due;        /* orphaned: a FLOW_STOP must tell the sender */
    uint8_t sender_gone;     /* the link's: its sender left or was lost, for good (2: and
                                the flow is to be dropped) */
};

/* One packet for the link to send: header, opcode payload, and for DATA
 * bytes of a mirror ring (in at most two pieces). */
struct fm_pkt_out {
    struct fm_wire_hdr hdr;
    union {
        struct {
            struct fm_wire_hello hello;
            uint8_t card[64]; /* a named HELLO's name */
        } hello;
        struct fm_wire_flow flow;
        struct fm_wire_flow_end end;
        struct fm_wire_data data;
        struct {
            struct fm_wire_ack ack;
            /* ncredit credits, then nsack ranges */
            unsigned char tail[FM_NET_MAX_CREDITS * sizeof(struct fm_wire_credit) +
                               FM_WIRE_SACK_MAX * sizeof(struct fm_wire_sack)];
        } ack;
    } sub;
    uint16_t sub_len;        /* bytes of sub that belong to the packet */
    uint8_t raw;             /* already sealed: bytes[0] is the whole datagram (faults) */
    uint32_t token;          /* DATA: not 0, it goes under the short header with this token */
    uint16_t nbytes[2];      /* DATA: lengths of the two pieces */
    const void *bytes[2];    /* DATA: the pieces, in a mirror ring */
    struct sockaddr_in to;
    int rank;
    uint8_t rail;            /* the local rail (socket) it leaves on */
    uint8_t side_ok;         /* it may leave by a socket of its own (udp.c): the peer
                                heard from us on this rail, so it knows our address */
};

/* New DATA of a session with nothing in flight (FM_HDR_ALONE): a request or
 * a reply, which its receiver waits for whole. */
static inline int fm_pkt_alone(const struct fm_pkt_out *p)
{
    return (p->hdr.flags & FM_HDR_ALONE) != 0;
}

/* What the engine needs from the process it runs in. */
struct fm_net_upcalls {
    void *core;
    /* A new flow arrived for dst_channel, with its ring to read from. */
    void (*flow_new)(void *core, struct fm_rxflow *f, int src_rank);
    /* Records were published in f's ring. */
    void (*delivered)(void *core, struct fm_rxflow *f);
    /* f's sender ended it: nothing more comes, and f is the core's to free. */
    void (*flow_end)(void *core, struct fm_rxflow *f);
    /* The session with rank ended: how, in an enum fm_net_peer_end. */
    void (*peer_gone)(void *core, int rank, int how);
    /* The addresses of a rank (or named peer): out[r] is its address on the
     * subnet of local rail r, sin_family 0 where it has none. 0 if some rail
     * reaches it, else a negative FM_E* code. */
    int (*address_of)(void *core, int rank, struct sockaddr_in out[FM_RAILS_MAX]);

    /* Peers by name (optional: NULL where the engine serves ranks only).
     * Peers of index >= size are named: their sessions run under the domain
     * key. A HELLO under it introduced a process by its name (`card`) and
     * epoch: its peer index, or a negative FM_E* code to refuse it. */
    int (*peer_named)(void *core, const void *card, size_t len, uint32_t epoch);
    /* The epoch a named peer's name gives (its packets are found by it). */
    uint32_t (*named_epoch)(void *core, int peer);
};

struct fm_net_params {
    int rank, size;
    uint8_t key[16];         /* the job key */
    uint32_t epoch;          /* this process's incarnation, random, not 0 */
    uint32_t ring_size;      /* bytes of a busy flow's ring: the largest */
    uint32_t ring_min;       /* bytes of a new or quiet flow's ring (0: ring_size) */
    uint64_t rx_mem;         /* bound on receive ring bytes peers may grow (0: none) */
    uint64_t flow_idle_ns;   /* a flow unused this long, all of it sent, ends (0: never) */
    uint32_t payload;        /* most stream bytes in one DATA packet (a multiple of 8) */
    uint32_t gather_packets; /* full packets one send of the link carries (GSO), which a
                                burst gathers before they go (0 or 1: a packet) */
    uint64_t timeout_ns;     /* a peer silent this long is lost */
    uint64_t rto_min_ns, rto_max_ns;
    uint64_t ack_delay_ns;   /* longest an acknowledgement waits for a packet to ride on */
    int nrails;              /* local rails, 1..FM_RAILS_MAX */
    enum fm_rail_policy rail_policy;
    int rail_query;          /* learn the peer's rail status by asking before each burst
                                (seed 000's SReq/SAck), not from every acknowledgement */
    uint64_t rail_heartbeat_ns; /* a rail silent this long is down (with several rails) */
    struct fm_net_upcalls up;
};

/* Counters of the engine; names in fm_net_counter_names. */
enum fm_net_counter {
    FM_NC_TX_PACKETS, FM_NC_TX_BYTES, FM_NC_RX_PACKETS, FM_NC_RX_BYTES,
    FM_NC_RETX_TIMEOUT, FM_NC_RETX_FAST, FM_NC_RETX_PROBE, FM_NC_ACKS, FM_NC_PINGS, FM_NC_SESSIONS,
    FM_NC_PEERS_LOST, FM_NC_RAIL_DOWN, FM_NC_RAIL_UP,
    FM_NC_RING_RX_BYTES, FM_NC_RING_TX_BYTES, /* gauges: bytes of receive and send rings now */
    FM_NC_RING_GROWN, FM_NC_PLACED, /* DATA after a gap laid into its ring at once */
    FM_NC_CWND_CUTS, /* congestion windows cut after a round that overflowed a port */
    FM_NC_FLOWS_IDLE, /* flows ended for want of use (their rings freed) */
    FM_NC_COUNT
};
extern const char *const fm_net_counter_names[FM_NC_COUNT];

struct fm_net *fm_net_new(const struct fm_net_params *p);

/* From now on the engine opens and accepts sessions with named peers under
 * the domain key, introducing itself by `card` (at most 64 bytes). */
void fm_net_named(struct fm_net *net, const uint8_t key[16], const void *card, size_t len);
void fm_net_free(struct fm_net *net);

/*
 * The flow from local endpoint channel src_channel to (rank, dst_channel),
 * created on first use with its mirror ring ready for records, with a
 * reference for the caller's route (fm_net_flow_put gives it back). The
 * session is set up in the background: data written before then waits in
 * the ring. FM_EPEERLOST if the peer is gone, FM_EUNREACH if it has no
 * address.
 */
int fm_net_flow(struct fm_net *net, int rank, uint32_t src_channel, uint32_t dst_channel,
                struct fm_txflow **out);
/* A route lets go of f; the flow is freed once it also ended. */
void fm_net_flow_put(struct fm_net *net, struct fm_txflow *f);
/* The sending endpoint holds (on) or let go of (off) a grant in f's ring:
 * an ended flow keeps its ring while it is pinned. */
void fm_net_flow_pin(struct fm_net *net, struct fm_txflow *f, int on);
/* The sending endpoint found f's ring full or too small for a send of
 * `want` bytes: f ends after its data and the next flow on its channels
 * gets a bigger ring (routes to f resolve again). Returns 0 if the ring
 * cannot grow. */
int fm_net_flow_full(struct fm_net *net, struct fm_txflow *f, size_t want);

/* Handles one datagram received on local rail `rail`; returns the drop
 * reason or FM_DROP_NONE. The packets of one batch of receives share `now`,
 * and fm_net_input_done ends the batch. */
enum fm_drop fm_net_input(struct fm_net *net, void *pkt, size_t len, int rail,
                          const struct sockaddr_in *from, uint64_t now);
void fm_net_input_done(struct fm_net *net);

/* How often an idle session sends its heartbeat. */
uint64_t fm_net_heartbeat_ns(const struct fm_net *net);

/* An ICMP error came back on `rail` for `from`: with refused set, no process
 * listens there any more (the peer is gone); otherwise the rail cannot reach
 * it, for now: the rail is taken out, unless it is the last (the session's
 * timeout decides then). */
void fm_net_unreachable(struct fm_net *net, int rail, const struct sockaddr_in *from,
                        int refused, uint64_t now);

/* The link's receive queue on each rail (bit r: rail r is busy): told to
 * senders in acknowledgements, for their choice of rail. */
void fm_net_set_rails_busy(struct fm_net *net, uint32_t mask);

/* DATA bytes sent on each local rail, retransmissions included. */
void fm_net_rail_counters(const struct fm_net *net, uint64_t tx_bytes[FM_RAILS_MAX]);

/*
 * Fills up to max packets to transmit now: handshakes, new data,
 * retransmissions, acknowledgements and credits, heartbeats. With flush
 * unset, a packet that is not full waits while the session has data in
 * flight and its flow is being written in a burst (so small messages
 * gather into one datagram); the caller flushes when it is about to wait.
 * Also runs timers and liveness. Returns the number of packets filled.
 */
int fm_net_output(struct fm_net *net, struct fm_pkt_out *pkts, int max, int flush, uint64_t now);

/* The sending endpoint wrote records into f's mirror: they may go. */
void fm_net_kick(struct fm_net *net, struct fm_txflow *f);

/* When the engine next needs to run (a timer), or UINT64_MAX. */
uint64_t fm_net_deadline(const struct fm_net *net);

/* The sending endpoint of f closed: f ends after its data, and the engine
 * frees it once that is acknowledged. f must not be used after this. */
void fm_net_flow_end(struct fm_net *net, struct fm_txflow *f);

/* Frees a flow the engine handed over with flow_end. */
void fm_net_rxflow_free(struct fm_rxflow *f);

/* The receiving endpoint released bytes of f's ring: credit is due.
 * Returns 1 when the sender may be short of room, and the credit should
 * go at once (fm_net_output); otherwise it rides on the next DATA or ACK
 * within FM_NET_ACK_DELAY_US. */
int fm_net_released(struct fm_net *net, struct fm_rxflow *f);

/* The receiving endpoint of f closed: discard what comes for it, and ask
 * the sender to end the flow. */
void fm_net_orphan(struct fm_net *net, struct fm_rxflow *f);

/* Bytes sent but not yet acknowledged, over all sessions. */
uint64_t fm_net_unacked(const struct fm_net *net);

/* Says goodbye to every peer (BYE in sequence, after all data). */
void fm_net_bye(struct fm_net *net);

/* Seals a packet (length, checksum) and describes it as up to 3 pieces
 * (header, then data in one or two); returns how many. */
int fm_pkt_seal(struct fm_pkt_out *p, struct iovec iov[4]);

/* Seals a packet and writes it whole at dst (fm_pkt_len bytes): the
 * payload is copied in the pass that computes its checksum. Returns its
 * length. */
size_t fm_pkt_seal_into(struct fm_pkt_out *p, void *dst);

/* The bytes packet p takes on the wire. */
static inline size_t fm_pkt_len(const struct fm_pkt_out *p)
{
    if (p->raw)
        return p->nbytes[0];
    size_t hdr = p->token ? sizeof(struct fm_wire_short) : sizeof(struct fm_wire_hdr);
    return hdr + p->sub_len + p->nbytes[0] + p->nbytes[1];
}

/* Counters: engine counters, then drops by reason. */
void fm_net_counters(const struct fm_net *net, uint64_t nc[FM_NC_COUNT],
                     uint64_t drops[FM_DROP_COUNT]);
/* Counts a drop the link decided on (e.g. fault injection). */
void fm_net_count_drop(struct fm_net *net, enum fm_drop why);

#endif
