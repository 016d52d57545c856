/*
 * The session engine's own types, shared by its files (internal: the core
 * and the links see engine.h only). What each file holds:
 *
 *   engine.c      the engine object: setup, counters, the next deadline
 *   session.c     sessions: contact, the handshake, timers, the end
 *   input.c       receiving: checks, acknowledgements, in-order delivery
 *   output.c      sending: each session's packets in order, and the timers
 *   flow.c        flows: mirror and landing rings, their life, credits
 *   rail_sched.c  rail scheduling: which rail a packet takes, rate samples,
 *                 failover and recovery, probing (seed 000)
 *   loss.c        acknowledgements and loss recovery: RTT and timeout,
 *                 SACK, RACK, the tail loss probe
 *   budget.c      the receiver's incoming budget, granted to its senders
 */
#ifndef FM_NET_SESSION_H
#define FM_NET_SESSION_H

#include "engine.h"

#include "core/util.h"
#include "fastmsg.h"

#include <stdlib.h>

/* Received packets an ACK waits for before it goes on its own. */
#define ACK_EVERY 16
/* A smallest round trip is forgotten after this long: the path may have
 * changed (budget.c, cwnd.c). While our own traffic holds a queue at the
 * port, every sample waits in it, and one taken then let the window or
 * the budget grow past the port's buffer (a loss burst at each expiry):
 * the minimum is then kept RTT_MIN_HELD times longer, not for ever, which
 * a path that really got longer would pay with a window stuck at the
 * size the old minimum allowed. */
#define RTT_MIN_LIFE_NS 10000000000ull
#define RTT_MIN_HELD 6

/* Keeps *min the smallest round trip of the last `life` ns (*t: when it
 * was taken); never 0 once a sample came. */
static inline void fm_rtt_min_update(uint64_t *min, uint64_t *t, uint64_t rtt, uint64_t now,
                                     uint64_t life)
{
    if (!*min || rtt < *min || now - *t > life) {
        *min = rtt ? rtt : 1;
        *t = now;
    }
}
/* How many packets an ACK_EVERY acknowledgement may wait, at most, while a
 * message arrives or the program answers it; and how many a session may
 * receive without sending DATA back before it counts as a one-way stream,
 * whose ACKs go every ACK_EVERY (a sender on several rails dispatches by
 * them). */
#define ACK_DEFER_MAX 64
#define FM_STOPS_MAX 16
/* owed_flow when more than one flow owes credit: the next ACK carries it. */
#define FM_FLOW_MANY UINT32_MAX
/* Heartbeats per timeout: an idle session pings this often. */
#define PINGS_PER_TIMEOUT 4
/* The first HELLO retry; then doubling. */
#define HELLO_RETRY_NS 2000000u
/* Load a rail counts as having when the peer says its receive queue there
 * is busy: another rail with less than this in flight goes first. */
#define RAIL_BUSY_BYTES (64u << 10)

enum sess_state {
    S_NEW,        /* nothing sent yet */
    S_HELLO_SENT, /* waiting for HELLO_ACK */
    S_UP,         /* both sides know each other's epoch and first sequence number */
    S_GONE,       /* the peer left or was lost */
};

/* A sequenced packet in flight. */
struct txent {
    uint64_t t_sent; /* last transmission */
    uint64_t rs_delivered, rs_t; /* DATA: its rail's delivered and delivered_t then */
    uint64_t pos;    /* DATA: stream position */
    uint32_t flow;   /* DATA, FLOW: flow id */
    uint32_t len;    /* DATA: bytes */
    uint8_t op;      /* DATA, FLOW or BYE */
    uint8_t sacked;  /* selectively acknowledged */
    uint8_t retx;    /* retransmissions so far */
    uint8_t due;     /* to be (re)transmitted at the next output */
    uint8_t rail;    /* the local rail of its last transmission */
    uint8_t counted; /* DATA: its bytes count in that rail's inflight */
    uint8_t rs_busy; /* DATA: that rail had a backlog when it left (a rate sample) */
    uint8_t alone;   /* DATA: marked alone (FM_HDR_ALONE), and so is each copy */
    uint32_t t_prev, t_next; /* neighbours in the send-time list (loss.c) */
};

/* A packet received ahead of a gap, held until the gap fills. */
/* A sequenced packet that came after a gap: DATA laid into its flow's ring
 * already (placed), or else a copy of the packet. */
struct held {
    void *pkt;     /* the copy, or NULL */
    size_t len;
    uint64_t pos;  /* placed: where its bytes start in the flow's stream */
    uint32_t flow; /* placed: the sender's flow id */
    uint16_t nbytes;
    uint8_t placed;
    struct fm_rxflow *made; /* a held FLOW: its flow, made when it was held */
};

/* A session's view of one local rail. */
struct sess_rail {
    struct sockaddr_in addr; /* the peer on this rail's subnet; sin_family 0: none known */
    uint64_t t_rx;           /* last packet from the peer on it */
    uint64_t t_ping;         /* last probe sent on it */
    uint64_t rack_t;         /* latest send time of a packet on it known delivered, */
    uint32_t rack_seq;       /* and that packet (a burst's packets share a send time) */
    uint64_t srtt;           /* smoothed round trip of packets sent on it */
    uint64_t inflight;       /* DATA bytes on it neither acknowledged nor given up */
    uint64_t delivered;      /* DATA bytes on it acknowledged, ever */
    uint64_t delivered_t;    /* when delivered last grew (or the rail started from idle) */
    uint64_t rate;           /* bytes per second it delivers (a slowly decaying maximum) */
    uint64_t rate_t;         /* when rate last took its stretch's samples */
    uint64_t rate_max;       /* the largest sample since */
    uint64_t t_unanswered;   /* when the oldest DATA sent on it since it last had an
                                acknowledgement left (0: none), */
    uint32_t given_up;       /* how much of it was given up as lost since, */
    uint64_t t_sent;         /* and when DATA last left on it */
    uint8_t up;              /* the peer answers on it (within the rail heartbeat) */
    uint8_t deaf;            /* down because the peer does not hear us on it, though its
                                packets come: only an ACK on it (the peer answers on a
                                rail it hears us on) brings it back */
    uint8_t heard;           /* a packet came on it from the peer: it knows our address */
    uint8_t peer_idx;        /* the peer's index for this rail (from its packets) */
    uint8_t peer_busy;       /* the peer's receive queue on it is busy */
    uint8_t ping_due;        /* a PING goes on it at the next output */
    uint8_t reply_due;       /* answer a probe that came on it, on it */
};

/* Sessions by a 32-bit key, one of theirs (open addressing; a session
 * stays until the engine goes). */
struct sess_table {
    int *slot;    /* peer + 1; 0: empty */
    size_t cap, n;
};

/* A flow that ended to grow, by its channels: the ring its successor gets. */
struct fm_grow {
    uint32_t src_channel, dst_channel;
    uint32_t size;
    uint64_t t; /* when */
};

struct fm_session {
    struct fm_net *net;
    int rank;              /* the peer's index: a rank, or (>= size) a named peer */
    int named;             /* a named peer: domain key, FM_WIRE_NAMED, found by epoch */
    int state;
    struct sess_rail rail[FM_RAILS_MAX];
    int have_addr;         /* some rail has the peer's address */
    uint8_t ctl_rail;      /* rail of packets that are not DATA: the last one heard on */
    uint8_t rails_watched; /* rails are being probed: the session is busy */
    uint8_t status_fresh;  /* rail_query: the peer's rail status came for this burst */
    uint8_t status_due;    /* rail_query: the peer asked for ours */
    uint64_t t_status_asked; /* rail_query: when we last asked, or 0 */
    uint64_t t_busy;       /* last sequenced packet sent or received */
    uint32_t peer_epoch;   /* 0 until known */
    uint32_t peer_epoch_named; /* named: the epoch its name gives */
    uint32_t token;        /* ours for the session: the peer's short DATA carries it */
    uint32_t peer_token;   /* the peer's, from its HELLO or HELLO_ACK; 0: not known yet */
    uint64_t hello_nonce;  /* of our HELLO */
    uint64_t peer_nonce;   /* of theirs, to echo */
    uint64_t t_hello;      /* next HELLO retry */
    uint64_t hello_backoff;
    uint64_t t_first_hello;
    uint8_t hello_ack_due;
    uint8_t pending;       /* in the engine's pending list */
    uint32_t timer_idx;    /* timers.c: 1 + its place in the heap, 0 if not filed */
    uint32_t timers_ran;   /* the output call (net->outputs) that last ran its timers */
    uint8_t gathering;     /* holds a part-filled packet back: in the gathering list */
    uint8_t ack_now;       /* send an ACK at the next output */
    uint8_t ack_soon;      /* enough came for an ACK: it goes once the program had a turn */
    uint8_t rx_fresh;      /* DATA delivered since this session's last output */
    uint8_t rx_open;       /* the last DATA left its message incomplete */
    uint8_t rx_alone;      /* the last DATA came alone (FM_HDR_ALONE) */
    uint32_t rx_since_tx;  /* sequenced packets received since we last sent DATA */
    uint8_t credit_due;    /* credit the sender may be waiting for: an ACK at the next output */
    uint8_t credit_owed;   /* credit it is not short of: rides on our next DATA or ACK */
    uint32_t owed_flow;    /* the one flow that owes it, or FM_FLOW_MANY */
    /* The peer asked (PING) for every flow's credit again: the slots of
     * the round still to go, from credit_next on (where the last ACK's
     * list ended); 0: no round. */
    uint32_t credit_round, credit_next;
    uint8_t bye_due, bye_sent, bye_received;
    uint32_t grant;        /* bytes the peer lets us have in flight to it; 0: no limit */
    uint32_t grant_given;  /* the grant our last ACK gave the peer */
    /* The peer must hear of its grant in an ACK of its own, though a packet
     * of ours acknowledged what it sent (fm_budget_news): a receiver
     * answering with small messages left a paused sender paused for good,
     * and a new sender at one packet a round trip. */
    uint8_t grant_due;
    uint8_t grant_told;    /* an ACK of ours has told the peer a grant */
    uint64_t t_grant;      /* when the peer's last ACK (its grant) came */
    uint64_t active_epoch; /* budget.c: the last epoch in which the peer sent DATA */
    uint64_t turn_epoch;   /* budget.c: the epoch in which it holds a share */
    uint8_t in_recent;     /* budget.c: listed in net->recent */
    uint8_t probes;        /* budget.c: PINGs sent while waiting for a turn */
    uint32_t ring_max;     /* the largest ring the peer lets our flows grow to */
    struct fm_grow *grows; /* flows that ended to grow: their successors' rings (flow.c) */
    uint32_t ngrows, grows_cap;
    uint32_t births;       /* flows created, for their order */

    /* transmit */
    uint32_t snd_nxt, snd_una;
    struct txent *tx;      /* packets in flight, by seq % tx_cap (see txent_at) */
    uint32_t tx_cap;       /* a power of two, FM_NET_WIN_MIN to FM_NET_WIN_MAX */
    /* The packets in flight and not acknowledged, in the order of their
     * last transmission: the ones RACK may find lost (loss.c). A packet
     * leaves when acknowledged; a retransmission goes to the end. */
    uint32_t t_first, t_last, t_count;
    uint8_t probed;        /* a tail loss probe went since the last ACK */
    /* A packet was marked due since retransmit() last walked the whole
     * window: without one, a send need not walk it. */
    uint8_t due_marked;
    /* The peer's last ACK listed FM_WIRE_SACK_MAX ranges, the lowest: what it
     * holds from sack_end on may have been left out (loss.c). */
    uint8_t sack_cut;
    uint32_t sack_end;
    /* The ranges of the peer's last ACK, as far as they were taken: the
     * next ACK's mostly repeat them, and only what they add is walked. */
    struct fm_wire_sack sack_seen[FM_WIRE_SACK_MAX];
    uint8_t nsack_seen;
    uint64_t srtt, rttvar, rto;
    uint64_t rtt_peak;     /* the longest recent round trip, slowly forgotten */
    uint64_t rtt_min, t_rtt_min; /* the shortest recent round trip, and when */
    /* The congestion window (cwnd.c): bytes in flight allowed, 0 for no
     * limit; the current round, which ends when cc_end is acknowledged,
     * and what it delivered and lost. */
    uint64_t cwnd;
    uint32_t cc_end, cc_delivered, cc_lost;
    uint64_t cc_bytes, cc_t_start, cc_t_last; /* cc_t_last: the last delivery */
    uint64_t cc_rtt_round; /* the round's shortest round trip, 0 before one */
    uint8_t cc_recovering; /* the round after a cut: its losses are the cut's */
    uint64_t t_last_tx, t_last_rx;
    /* When credit last moved a flow's head, new data last went, or we last
     * asked for credit: the credit check waits an RTO after it. */
    uint64_t t_credit;

    /* receive */
    int rcv_known;
    uint32_t rcv_nxt;
    struct held *held;     /* by seq % held_cap (see held_at); NULL before a gap */
    uint32_t held_cap;
    uint32_t nheld;
    uint32_t unacked;      /* received since our last acknowledgement */
    uint32_t echo_seq;     /* the last sequenced packet that came, */
    uint8_t echo_due;      /* since our last ACK: the next one names it */
    uint64_t t_ack_due;    /* when a delayed acknowledgement must go */
    uint64_t t_ends_due;   /* when FLOW_ENDs of stopped flows must go (1: at the next output) */

    struct fm_txflow **txf; /* by id (ids are reused once a flow is freed) */
    uint32_t txf_cap;
    uint32_t *free_ids;     /* ids of freed flows */
    uint32_t nfree_ids;
    struct fm_txflow **live; /* flows not done yet: what output walks */
    uint32_t nlive, next_live;
    int nending;            /* live flows waiting for their FLOW_END to be acknowledged */
    struct fm_rxflow **rxf; /* by the sender's flow id; NULL once ended */
    uint32_t rxf_cap;
    /* Receiving flows that must ask their sender to stop, by id (a flow
     * that ended meanwhile is skipped); beyond FM_STOPS_MAX, stops_lost
     * makes the next output look through rxf. */
    uint32_t stops[FM_STOPS_MAX];
    uint32_t nstops;
    uint8_t stops_lost;
};

struct fm_net {
    struct fm_net_params p;
    uint64_t job;
    uint64_t domain;            /* named sessions' tag (fm_net_named), 0 before */
    uint8_t domain_key[16];
    uint8_t card[64];           /* our name, in named HELLOs */
    size_t card_len;
    struct fm_session **sess;   /* by peer: ranks, then named peers; created on contact */
    int sess_cap;
    struct sess_table by_epoch; /* named sessions by the peer's epoch */
    struct sess_table by_token; /* sessions by their token (short DATA) */
    struct fm_session **all;    /* created sessions */
    int nall, all_cap;
    /* timers.c: sessions with a deadline, a min-heap by it, with room for
     * every created session */
    struct fm_timer {
        uint64_t at;
        struct fm_session *s;
    } *timers;
    uint32_t ntimers, timers_cap;
    uint32_t outputs; /* fm_net_output calls, for fm_session.timers_ran */
    /* Room for every session (all_cap), so that adding to them never fails. */
    struct fm_session **pending; /* sessions with something to send */
    int npending;
    struct fm_session **gathering; /* sessions holding small messages back */
    int ngathering;
    uint64_t t_last_output; /* when fm_net_output last ran */
    uint64_t t_wake;        /* the engine's deadline when fm_net_output last returned */
    unsigned char *spare[16]; /* smallest rings of ended flows, for the next ones */
    int nspare;
    uint64_t rng;
    uint32_t rails_busy;    /* bit r: our receive queue on rail r is busy */
    uint64_t rail_tx[FM_RAILS_MAX]; /* DATA bytes sent per rail */
    /* budget.c: peers sending to us (per epoch), their arrival rate, and
     * the smallest recent round trip */
    uint64_t epoch, t_epoch, epoch_ns;
    /* The peers that sent DATA in the last few epochs, or wait for their
     * turn, in the order they came (turns go round from turn_next).
     * Sessions live as long as the engine, so the pointers stay valid. */
    struct fm_session **recent;
    uint32_t nrecent, recent_cap, turn_next;
    uint32_t nwaiting;          /* of them, paused (FM_GRANT_PAUSE) */
    uint8_t turns_lost;         /* the list could not grow: equal grants for all */
    uint64_t rx_bytes, rx_rate;
    /* How many senders hold a share at once (budget.c), the highest rate
     * DATA came at of late, and the gaps (losses) seen this epoch. */
    uint32_t turn_peers;
    uint64_t rx_peak;
    uint32_t rx_gaps;
    uint64_t rtt_min, t_rtt_min;
    /* input.c: the stream packet last delivered in order, while the batch
     * of receives it came in lasts (s NULL: none), which the next packet of
     * a train continues */
    struct {
        struct fm_session *s;
        struct fm_rxflow *f;
        struct fm_wire_hdr h;
        uint64_t now;
        int rail;
    } train;
    uint64_t nc[FM_NC_COUNT];
    uint64_t drops[FM_DROP_COUNT];
};

/* ---- small helpers ------------------------------------------------------- */

static inline uint64_t rnd(struct fm_net *net)
{
    uint64_t x = net->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return net->rng = x;
}

/* Appends s to a session list unless its flag says it is there. The list
 * has room for every session: fm_session_get made it with the session. */
static inline void list_add(struct fm_session **list, int *n, struct fm_session *s, uint8_t *flag)
{
    if (*flag)
        return;
    list[(*n)++] = s;
    *flag = 1;
}

static inline struct txent *txent_at(const struct fm_session *s, uint32_t seq)
{
    return &s->tx[seq & (s->tx_cap - 1)];
}

static inline struct held *held_at(const struct fm_session *s, uint32_t seq)
{
    return &s->held[seq & (s->held_cap - 1)];
}

/* DATA bytes a session has in flight, on all rails. */
static inline uint64_t fm_session_inflight(const struct fm_net *net, const struct fm_session *s)
{
    uint64_t n = 0;
    for (int r = 0; r < net->p.nrails; r++)
        n += s->rail[r].inflight;
    return n;
}

static inline void mark_pending(struct fm_net *net, struct fm_session *s)
{
    list_add(net->pending, &net->npending, s, &s->pending);
}

/*
 * Our acknowledgement and credit went on a packet going back anyway: the
 * delayed-ACK timer stops, and the next packet to acknowledge starts it
 * again. Left running, it would send an ACK of its own for the first packet
 * after it expired, one per round trip of a ping-pong slower than the
 * timer. A peer held to a grant keeps it running: such a sender lives on
 * frequent ACKs, which incast measurements showed (drops at the port
 * otherwise).
 */
static inline void ack_timer_settle(struct fm_session *s)
{
    if (!s->unacked && !s->credit_owed && !s->grant_given)
        s->t_ack_due = 0;
}

/*
 * Whether the peer's last ACK would have listed q had it arrived. The
 * receiver lists only its lowest FM_WIRE_SACK_MAX ranges; above a full list
 * it may hold packets that came long ago, which appear in a later ACK as
 * the ranges below them close or merge. Such a packet is neither timed
 * when that ACK comes (it would add the repair of every hole below it to
 * the round trip, and the timeout would grow to rto_max, where each lost
 * retransmission costs a quarter of FM_NET_TIMEOUT_MS), nor taken for lost
 * before: a retransmission's delivery, RACK's reference then, passed every
 * packet not known delivered, and 4 MiB through 15 % loss resent 2,000
 * packets for 500 lost. (But a hole below a full list is resent even
 * while the window is full: output.c.)
 */
static inline int fm_sack_listed(const struct fm_session *s, uint32_t q)
{
    return !s->sack_cut || fm_seq_lt(q, s->sack_end);
}

/* ---- between the engine's files -------------------------------------------- */

/* rail_sched.c */
/* e no longer counts as in flight on its rail (acknowledged, or given up). */
void fm_rail_settle(struct fm_session *s, struct txent *e);
/* DATA entry e leaves on rail sr: in flight there, and the start of a rate sample. */
void fm_rail_sent(struct fm_net *net, struct sess_rail *sr, struct txent *e, uint64_t now);
/* e was acknowledged: its rail's delivery rate takes the sample. */
void fm_rail_acked(struct fm_session *s, struct txent *e, uint64_t now);
/* The next usable rail after r, or -1. */
int fm_rail_next_usable(const struct fm_net *net, const struct fm_session *s, int r);
/* Rail r stopped answering: its traffic moves to the others. */
void fm_rail_down(struct fm_net *net, struct fm_session *s, int r, uint64_t now);
/* A packet of opcode op came on local rail r from the peer's rail peer_idx;
 * from: its source, or NULL when that is no address to answer on
 * (FM_HDR_SIDE_PORT). */
void fm_rail_heard(struct fm_net *net, struct fm_session *s, int r, unsigned peer_idx,
                   uint8_t op, const struct sockaddr_in *from, uint64_t now);
/* The rail the next DATA packet goes on (the policy of FM_RAIL_POLICY). */
int fm_rail_pick(struct fm_net *net, struct fm_session *s);
/* Rail liveness and probes, from the timers. */
void fm_rail_check(struct fm_net *net, struct fm_session *s, uint64_t now);
/* When the rails next need the timers, or UINT64_MAX. */
uint64_t fm_rail_deadline(const struct fm_net *net, const struct fm_session *s);

/* loss.c */
/* Packet q was sent, or sent again: it goes to the end of the send-time
 * list (unless acknowledged already). */
void fm_loss_sent(struct fm_session *s, uint32_t q);
void fm_loss_resent(struct fm_session *s, uint32_t q);
/* Packet e is to go again at the next output (lost, or its rail failed). */
void fm_loss_mark_due(struct fm_session *s, struct txent *e);
/* Marks the packets RACK deems lost as due again. */
void fm_loss_detect(struct fm_net *net, struct fm_session *s, uint64_t now);
/* The timers of packets in flight: RACK, the tail loss probe, the timeout. */
void fm_loss_timers(struct fm_net *net, struct fm_session *s, uint64_t now);
/* When fm_loss_timers is next due while packets are in flight. */
uint64_t fm_loss_deadline(const struct fm_net *net, const struct fm_session *s);
/* A cumulative acknowledgement `ack` arrived: on any packet, or in an ACK
 * a, with its selective ones and echo (the sequence number whose arrival
 * it answers, or -1). */
void fm_loss_on_ack(struct fm_net *net, struct fm_session *s, uint32_t ack,
                    const struct fm_wire_ack *a, const struct fm_wire_sack *sack, int64_t echo,
                    int status_answer, uint64_t now);

/* budget.c */
/* The most senders a turn starts with (budget.c's adapt_turn grows it). */
#define BUDGET_TURN_PEERS 32
/* A round trip was measured: the smallest recent one sizes the budget. */
void fm_budget_rtt(struct fm_net *net, uint64_t rtt, uint64_t now);
/* DATA arrived from s: its bytes count, and unless it came alone (a lone
 * request or reply, FM_HDR_ALONE), s is an active sender. The common case
 * inline: a sender already counted in the current epoch. */
void fm_budget_epoch(struct fm_net *net, struct fm_session *s, size_t len, int alone,
                     uint64_t now);
static inline void fm_budget_on_data(struct fm_net *net, struct fm_session *s, size_t len,
                                     int alone, uint64_t now)
{
    if (s->active_epoch == net->epoch && now - net->t_epoch < net->epoch_ns)
        net->rx_bytes += len;
    else
        fm_budget_epoch(net, s, len, alone, now);
}
/* Grants that say: wait for your turn, with one packet in flight (its ACK
 * brings the turn), or, when the waiting ones' packets would be more than
 * the budget, with nothing in flight but a message that fits one packet
 * (the turn comes in an ACK of its own). See fm_budget_allows. */
#define FM_GRANT_TRICKLE 1u
#define FM_GRANT_PAUSE 2u
/* The grant our ACKs to s carry now: bytes in flight it may have, 0 for no
 * limit (fewer than two senders), FM_GRANT_TRICKLE or FM_GRANT_PAUSE. */
uint32_t fm_budget_grant(const struct fm_net *net, const struct fm_session *s);
/* Whether the ACK a packet to s replaces must go anyway, for its grant: s
 * sends to us and was never told one, or its grant changed (its turn came,
 * or its share moved by more than a quarter). Our DATA acknowledges but
 * carries no grant. */
int fm_budget_news(const struct fm_net *net, const struct fm_session *s);
/* What a sender may have in flight to a peer before its first ACK says
 * what the peer grants: a thousand senders starting at once would
 * otherwise each fill a ring's credit into one port. */
uint32_t fm_budget_unscheduled(const struct fm_net *net);
/* An ACK gave s that grant. */
void fm_budget_granted(struct fm_net *net, struct fm_session *s, uint32_t grant);
/* The epoch ends on time while senders wait, even with no DATA coming;
 * fm_budget_deadline says when. */
void fm_budget_tick(struct fm_net *net, uint64_t now);
uint64_t fm_budget_deadline(const struct fm_net *net);
/* Sender side: a paused session silent for long asks for its grant, at
 * fm_budget_probe_deadline (UINT64_MAX: not paused, or nothing waits). */
void fm_budget_probe(struct fm_net *net, struct fm_session *s, uint64_t now);
uint64_t fm_budget_probe_deadline(const struct fm_session *s);
/* Packets received from s before an ACK goes on its own. */
uint32_t fm_budget_ack_every(const struct fm_net *net, const struct fm_session *s);
/* Whether s may send len more bytes of DATA under the peer's grant; last:
 * they are all its flow has to send (a small message, when waiting). */
int fm_budget_allows(const struct fm_net *net, const struct fm_session *s, uint64_t len,
                     int last);

/* timers.c */
/* Room in the heap for this many sessions (made before a session is). */
int fm_timers_reserve(struct fm_net *net, uint32_t sessions);
/* Files s under deadline at (UINT64_MAX: none), or moves it there. */
void fm_timer_set(struct fm_net *net, struct fm_session *s, uint64_t at);
/* Brings s's deadline forward to at, if that is sooner (or files it). */
void fm_timer_sooner(struct fm_net *net, struct fm_session *s, uint64_t at);
/* The session with the earliest deadline if it is due by now, else NULL. */
struct fm_session *fm_timer_due(const struct fm_net *net, uint64_t now);
/* The earliest deadline filed, UINT64_MAX if none. */
uint64_t fm_timer_next(const struct fm_net *net);

/* cwnd.c */
/* A packet's fate is known at now: a round's packets came after a pause
 * longer than a retransmission timeout start it over. A round that took
 * in an idle spell (a few small messages, then a burst) was timed from
 * before it, and its first cut took the path for slower than it is, down
 * to the window's floor. */
static inline void fm_cwnd_news(struct fm_session *s, uint64_t now)
{
    if (s->cc_t_last && now - s->cc_t_last > s->rto) {
        s->cc_delivered = s->cc_lost = 0;
        s->cc_bytes = 0;
        s->cc_t_start = 0;
    }
    s->cc_t_last = now;
}
/* Packets of len bytes were delivered (cumulatively or selectively
 * acknowledged for the first time), or found lost. */
static inline void fm_cwnd_delivered(struct fm_session *s, uint32_t len, uint64_t now)
{
    fm_cwnd_news(s, now);
    if (!s->cc_t_start)
        s->cc_t_start = now; /* a round is timed from its first delivery */
    s->cc_delivered++;
    s->cc_bytes += len;
}
/* Whether a window above its floor keeps a queue at the port (the smallest
 * round trip is then kept longer: fm_rtt_min_update). */
int fm_cwnd_holds_queue(const struct fm_net *net, const struct fm_session *s);
/* (A round that has lost many already is judged at once: cwnd.c.) */
void fm_cwnd_lost(struct fm_net *net, struct fm_session *s, uint64_t now);
/* The acknowledgement moved: a round that is over is judged. */
void fm_cwnd_round(struct fm_net *net, struct fm_session *s, uint64_t now);
/* Whether len more bytes may go with inflight in flight. */
static inline int fm_cwnd_allows(const struct fm_session *s, uint64_t inflight, uint64_t len)
{
    return !s->cwnd || inflight == 0 || inflight + len <= s->cwnd;
}

/* flow.c */
/* A flow is over and acknowledged: freed now or when its last route lets go. */
void fm_flow_done(struct fm_session *s, struct fm_txflow *f);
/* Frees every flow of a session (the engine goes away). */
void fm_flows_free(struct fm_session *s);
/* The session ended: nothing more will be sent or acknowledged. Its sending
 * flows are over (rings freed now, flows when their routes, told by gen,
 * let go); its receiving flows end as a FLOW_END would end them, read to
 * their end by their endpoints or freed if none reads them (lost: marked
 * cut, since what the peer wrote last may be missing). Kept until the
 * engine went away before: a server whose named peers come and go grew
 * with each. */
void fm_flows_over(struct fm_net *net, struct fm_session *s, int lost);
/* Credits from an ACK whose cumulative acknowledgement is ack: the
 * receiver released that much of each flow. */
void fm_flow_credits(struct fm_session *s, const struct fm_wire_credit *c, int n, uint32_t ack);
/* Takes the credit a DATA packet carries (FM_HDR_CREDIT), with its ack. */
void fm_flow_credit_lo(struct fm_session *s, uint32_t flow, uint32_t head_lo, uint32_t ack);
/* Lets DATA packet p carry the credit s owes, if one flow owes it. */
void fm_flow_credit_ride(struct fm_session *s, struct fm_pkt_out *p);
/* A FLOW packet's receiving flow, with its ring, not yet open: NULL and
 * *why FM_DROP_NOMEM (no memory now: the packet must not be acknowledged,
 * its sender sends it again) or FM_DROP_FLOW (never). Taken when the packet
 * is, delivered or held, so that a packet once acknowledged (selectively
 * too: the sender does not send that again) always opens. */
struct fm_rxflow *fm_flow_rx_make(struct fm_net *net, struct fm_session *s,
                                  const struct fm_wire_flow *w, uint32_t seq, enum fm_drop *why);
/* Opens f in its turn: FM_DROP_FLOW (and f freed) if its id is in use. */
enum fm_drop fm_flow_rx_open(struct fm_net *net, struct fm_session *s, struct fm_rxflow *f);
/* DATA bytes of f at stream position pos, in turn: laid into the ring
 * (b NULL: they were already, by fm_flow_rx_place), and the records they
 * complete published. */
enum fm_drop fm_flow_rx_data(struct fm_net *net, struct fm_rxflow *f, uint64_t pos,
                             const unsigned char *b, size_t len);
/* DATA bytes of f that came ahead of their turn: laid into the ring now,
 * published when their turn comes (fm_flow_rx_data with b NULL). Returns
 * 0, or -1 if they cannot be (then the packet is held as a copy). */
int fm_flow_rx_place(struct fm_rxflow *f, uint64_t pos, const unsigned char *b, size_t len);
/* The same, continuing the CRC *crc over the packet's 64 bytes of headers
 * at hdrs, then over the bytes as they are copied. */
int fm_flow_rx_place_crc(struct fm_rxflow *f, uint64_t pos, const unsigned char *b, size_t len,
                         const void *hdrs, uint32_t *crc);
/* Receiving flow f must ask its sender to stop: into s's list of stops. */
void fm_flow_stop_due(struct fm_session *s, struct fm_rxflow *f);
/* Rebuilds that list from the flows, after it overflowed. */
void fm_flow_stops_rescan(struct fm_session *s);
/* Asks the peer again for credit it may have sent and lost. */
void fm_flow_credit_check(struct fm_net *net, struct fm_session *s, uint64_t now);
/* Whether s has sent bytes its peer has not released yet, and is not
 * paused: what fm_flow_credit_check looks after. */
int fm_flow_credit_awaited(const struct fm_session *s);
/* Large rings of s's flows unused for a while make way for small ones. */
void fm_flow_idle_check(struct fm_net *net, struct fm_session *s, uint64_t now);
/* The largest ring our ACKs let a peer's new flows have (FM_NET_RX_MEM). */
uint32_t fm_flow_ring_max(const struct fm_net *net);

/* session.c */
/* The session with peer `rank`, made on first contact; NULL if it cannot be. */
struct fm_session *fm_session_get(struct fm_net *net, int rank);
/* The named session whose peer has that epoch, or NULL. */
struct fm_session *fm_session_named(const struct fm_net *net, uint32_t epoch);
/* The session whose token this is, or NULL. */
struct fm_session *fm_session_by_token(const struct fm_net *net, uint32_t token);
/* The session ends: the peer left (FM_NET_PEER_LEFT) or was lost. */
void fm_session_gone(struct fm_net *net, struct fm_session *s, int state);
/* Frees a session and all it holds (the engine goes away). */
void fm_session_free(struct fm_session *s);
/* A HELLO or HELLO_ACK (its MAC checked) from `from` on local rail `rail`. */
enum fm_drop fm_session_on_hello(struct fm_net *net, struct fm_session *s, int rail,
                                 const struct fm_wire_hdr *h, const struct fm_wire_hello *hello,
                                 const struct sockaddr_in *from);
/* The handshake's packets due now, into pkts; returns how many. */
int fm_session_handshake(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *pkts,
                         int max, uint64_t now);
/* Liveness, heartbeats, and the timers of the rails, loss and credit. */
void fm_session_timers(struct fm_net *net, struct fm_session *s, uint64_t now);
/* When the session next needs its timers, or UINT64_MAX. */
uint64_t fm_session_deadline(const struct fm_net *net, const struct fm_session *s);
/* The program was away (fm_net_output): s gets a full timeout again. */
void fm_session_amnesty(struct fm_net *net, struct fm_session *s, uint64_t now);

/* output.c */
/* Starts a packet of kind op to the session's peer, on its control rail,
 * with our acknowledgement riding on it. */
void fm_pkt_init(struct fm_net *net, struct fm_session *s, struct fm_pkt_out *p, uint8_t op);
/* Sends p on local rail r instead. */
void fm_pkt_rail(const struct fm_session *s, struct fm_pkt_out *p, int r);

#endif
