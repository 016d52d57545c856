/*
 * The session engine between two engines in one process, over an in-memory
 * link that loses, duplicates, reorders and corrupts packets, on a fake
 * clock: byte streams must arrive exactly once and in order, credits must
 * keep the sender inside the receiver's ring, silence must end a session,
 * and foreign or damaged packets must be dropped and counted.
 */
#include "net/engine.h"
#include "net/session.h"
#include "net/fault.h"
#include "core/util.h"
#include "testing/fmtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RING 16384

struct link_pkt {
    unsigned char data[FM_WIRE_MAX];
    size_t len;
    int to;
    int rail;
};

/* The network: a queue of datagrams in flight. */
static struct link_pkt *queue;
static int nqueue, qcap = 4096;
static struct fm_fault faults;
static int use_faults;
static uint64_t now = 1000000;
/* Rails of the engines made next, and rails that lose everything. */
static int nrails = 1, rail_query;
static uint32_t gather_packets; /* the engine's: full packets a datagram of the link carries */
static int rail_dead[FM_RAILS_MAX];
/* stream(): rounds at which rail 1 dies and comes back (-1: never); with
 * kill_one_way, it dies from A to B only. */
static int kill_round = -1, revive_round = -1, kill_one_way;
static int rail_dead_to_b[FM_RAILS_MAX];
/* stream(): bytes of a message B sends A every round (0: none). */
static size_t chat_bytes;
/* Until this time, packets to rank 0 that carry credit are lost. */
static uint64_t lose_credits_until;

/* Per engine: what the upcalls saw. */
struct side {
    struct fm_net *net;
    struct fm_rxflow *rx[64];
    uint64_t rd[64]; /* read position in each */
    int nrx;
    int gone_state;
    int gone_rank;
};
static struct side sides[2];

static void up_flow_new(void *core, struct fm_rxflow *f, int src)
{
    struct side *sd = core;
    (void)src;
    CHECK(sd->nrx < 64);
    sd->rx[sd->nrx++] = f;
}
static void up_delivered(void *core, struct fm_rxflow *f)
{
    (void)core;
    (void)f;
}
static void up_flow_end(void *core, struct fm_rxflow *f)
{
    (void)core;
    fm_net_rxflow_free(f);
}
static void up_gone(void *core, int rank, int state)
{
    struct side *sd = core;
    sd->gone_rank = rank;
    sd->gone_state = state;
}
static int up_addr(void *core, int rank, struct sockaddr_in out[FM_RAILS_MAX])
{
    (void)core;
    for (int r = 0; r < nrails; r++) {
        memset(&out[r], 0, sizeof(out[r]));
        out[r].sin_family = AF_INET;
        out[r].sin_port = (uint16_t)(1000 + 10 * r + rank);
    }
    return 0;
}

/* Each flow's ring: small, so that streams wrap often; large, for windows of
 * thousands of packets. */
static uint32_t ring_size = RING;
static uint64_t flow_idle_ns; /* the engine's: a flow unused this long ends (0: never) */
/* Output batches the sender sends per round trip of the link. */
static int batches_per_rtt = 1;

static struct fm_net *make(int rank, uint8_t keybyte)
{
    struct fm_net_params p = {
        .rank = rank, .size = 2, .epoch = 0x1000u + (uint32_t)rank + keybyte,
        .ring_size = ring_size, .flow_idle_ns = flow_idle_ns, .payload = 1400,
        .gather_packets = gather_packets,
        .timeout_ns = 2000000000ull,
        .rto_min_ns = 1000000, .rto_max_ns = 200000000, .ack_delay_ns = 200000,
        .nrails = nrails, .rail_heartbeat_ns = 3000000, .rail_query = rail_query,
        .up = {.core = &sides[rank], .flow_new = up_flow_new, .delivered = up_delivered,
               .flow_end = up_flow_end, .peer_gone = up_gone, .address_of = up_addr},
    };
    memset(p.key, keybyte, sizeof(p.key));
    return fm_net_new(&p);
}

static void enqueue(const void *data, size_t len, int to, int rail)
{
    if (nqueue == qcap || rail_dead[rail] || (to == 1 && rail_dead_to_b[rail]))
        return; /* the link is full, or the rail is broken: lost */
    memcpy(queue[nqueue].data, data, len);
    queue[nqueue].len = len;
    queue[nqueue].to = to;
    queue[nqueue].rail = rail;
    nqueue++;
}

/* Seals packets onto the link, applying faults. Each is sealed both ways
 * the link does, into pieces and into one buffer (a datagram of several
 * packets, udp.c), which must give the same bytes. */
static void put_on_link(struct fm_pkt_out *pk, int n)
{
    for (int i = 0; i < n; i++) {
        struct iovec iov[4];
        int k = fm_pkt_seal(&pk[i], iov);
        unsigned char buf[FM_WIRE_MAX], whole[FM_WIRE_MAX];
        size_t len = 0;
        for (int j = 0; j < k; j++) {
            memcpy(buf + len, iov[j].iov_base, iov[j].iov_len);
            len += iov[j].iov_len;
        }
        CHECK_EQ(fm_pkt_seal_into(&pk[i], whole), len);
        CHECK(memcmp(whole, buf, len) == 0);
        enum fm_fault_action a = use_faults ? fm_fault_next(&faults, buf, len) : FM_FAULT_PASS;
        if (a == FM_FAULT_DROP)
            continue;
        if (now < lose_credits_until && pk[i].rank == 0 &&
            ((pk[i].hdr.flags & FM_HDR_CREDIT) ||
             (pk[i].hdr.op == FM_OP_ACK && pk[i].sub.ack.ack.ncredit)))
            continue;
        enqueue(buf, len, pk[i].rank, pk[i].rail);
        if (a == FM_FAULT_DUP)
            enqueue(buf, len, pk[i].rank, pk[i].rail);
        if (a == FM_FAULT_REORDER && nqueue >= 2) {
            struct link_pkt t = queue[nqueue - 1];
            queue[nqueue - 1] = queue[nqueue - 2];
            queue[nqueue - 2] = t;
        }
    }
}

/* Moves output of engine `from` onto the link. */
/* Sends at most max packets of what one side has (udp.c asks for up to
 * FM_UDP_SEND_MAX = 256 at once). */
static int pump_some(int from, int flush, int max)
{
    static struct fm_pkt_out pk[256];
    int n = fm_net_output(sides[from].net, pk, FM_MIN(max, 256), flush, now);
    put_on_link(pk, n);
    return n;
}

static int pump_out(int from, int flush)
{
    return pump_some(from, flush, 64);
}

static void deliver_all(void)
{
    struct sockaddr_in from = {0};
    int n = nqueue;
    nqueue = 0;
    for (int i = 0; i < n; i++) {
        from.sin_family = AF_INET;
        from.sin_port = (uint16_t)(1000 + 10 * queue[i].rail + (1 - queue[i].to));
        fm_net_input(sides[queue[i].to].net, queue[i].data, queue[i].len, queue[i].rail, &from,
                     now);
    }
}

/* Both engines send and receive, n times, the clock advancing by step. */
static void exchange(int n, uint64_t step)
{
    for (int i = 0; i < n; i++) {
        pump_out(0, 1);
        deliver_all();
        pump_out(1, 1);
        deliver_all();
        now += step;
    }
}

/* Reads every complete record of B's flows: checks the stream, releases. */
static uint64_t consume(struct side *sd, uint64_t *got, uint64_t seed)
{
    uint64_t msgs = 0;
    for (int k = 0; k < sd->nrx; k++) {
        struct fm_rxflow *f = sd->rx[k];
        uint64_t *rd = sd->rd;
        for (;;) {
            uint64_t h = fm_ring_peek(&f->ring, rd[k]);
            if (!h)
                break;
            if (!fm_ring_hdr_valid(&f->ring, h))
                fmt_fail(__FILE__, __LINE__, "bad header %#llx at %llu (wpos %llu)", (unsigned long long)h, (unsigned long long)rd[k], (unsigned long long)f->wpos);
            struct iovec seg[2];
            int n = fm_ring_segments(&f->ring, rd[k], FM_REC_LEN(h), seg);
            for (int i = 0; i < n; i++)
                for (size_t j = 0; j < seg[i].iov_len; j++, (*got)++)
                    if (((unsigned char *)seg[i].iov_base)[j] != fmt_pattern(seed, *got))
                        fmt_fail(__FILE__, __LINE__, "stream byte %llu differs",
                                 (unsigned long long)*got);
            rd[k] += FM_REC_SIZE(FM_REC_LEN(h));
            fm_ring_release(&f->ring, rd[k]);
            fm_net_released(sd->net, f);
            msgs++;
        }
    }
    return msgs;
}

static void write_msg(struct fm_net *net, struct fm_txflow *f, size_t len, uint64_t seed,
                      uint64_t *sent);

/* Streams `total` bytes from A to B in messages of random sizes (and B
 * sends A a chat_bytes message a round); returns the rounds it took. */
static int stream(uint64_t total, uint64_t seed)
{
    struct fm_txflow *f, *chat = NULL;
    CHECK_RC(fm_net_flow(sides[0].net, 1, 5, 9, &f), 0);
    if (chat_bytes)
        CHECK_RC(fm_net_flow(sides[1].net, 0, 3, 4, &chat), 0);
    uint64_t sent = 0, got = 0, chat_sent = 0, chat_got = 0;
    int rounds;
    unsigned char buf[3000];
    srand((unsigned)seed);
    for (rounds = 0; got < total; rounds++) {
        CHECK(rounds < 2000000);
        if (chat && fm_ring_room(&chat->ring, chat_bytes) >= (int64_t)chat_bytes)
            write_msg(sides[1].net, chat, chat_bytes, 99, &chat_sent);
        if (rounds == kill_round)
            *(kill_one_way ? &rail_dead_to_b[1] : &rail_dead[1]) = 1;
        if (rounds == revive_round)
            rail_dead[1] = rail_dead_to_b[1] = 0;
        /* Write what fits. */
        while (sent < total) {
            uint64_t want = (uint64_t)(1 + rand() % 2999);
            size_t len = (size_t)FM_MIN(want, total - sent);
            if (fm_ring_room(&f->ring, len) < (int64_t)len)
                break;
            for (size_t i = 0; i < len; i++)
                buf[i] = fmt_pattern(seed, sent + i);
            struct iovec v = {buf, len};
            fm_ring_write(&f->ring, FM_REC_DATA, &v, 1, len);
            fm_txflow_wrote(f, now, 10000);
            fm_net_kick(sides[0].net, f);
            sent += len;
        }
        for (int b = 0; b < batches_per_rtt; b++)
            pump_out(0, rounds % 3 == 0);
        deliver_all();
        consume(&sides[1], &got, seed);
        pump_out(1, rounds % 3 == 0);
        deliver_all();
        consume(&sides[0], &chat_got, 99);
        now += 50000; /* 50 us per round */
    }
    CHECK_EQ(got, total);
    CHECK_EQ(sides[1].nrx, 1);
    CHECK_EQ(sides[1].rx[0]->src_channel, 5);
    CHECK_EQ(sides[1].rx[0]->dst_channel, 9);
    if (chat)
        fm_net_flow_put(sides[1].net, chat);
    return rounds;
}

static void reset(void)
{
    for (int i = 0; i < 2; i++) {
        fm_net_free(sides[i].net);
        memset(&sides[i], 0, sizeof(sides[i]));
        sides[i].net = make(i, 7);
    }
    nqueue = 0;
}

static void test_clean_stream(void)
{
    reset();
    use_faults = 0;
    stream(2 << 20, 1);
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    fm_net_counters(sides[0].net, nc, dr);
    CHECK_EQ(nc[FM_NC_RETX_TIMEOUT] + nc[FM_NC_RETX_FAST], 0);
}

/* FM_FAULT's spec: the sides it works on, and a clear error otherwise. */
static void test_fault_sides(void)
{
    char err[128];
    struct fm_fault f;
    CHECK_RC(fm_fault_parse(&f, "drop=0.01", err, sizeof(err)), 0);
    CHECK(f.on_send && f.on_recv);
    CHECK_RC(fm_fault_parse(&f, "drop=0.01,on=send", err, sizeof(err)), 0);
    CHECK(f.on_send && !f.on_recv);
    CHECK_RC(fm_fault_parse(&f, "on=recv,drop=0.01", err, sizeof(err)), 0);
    CHECK(!f.on_send && f.on_recv);
    CHECK_RC(fm_fault_parse(&f, "on=both", err, sizeof(err)), 0);
    CHECK(f.on_send && f.on_recv);
    CHECK_RC(fm_fault_parse(&f, "drop=0.01,on=sideways", err, sizeof(err)), -1);
    CHECK(strstr(err, "on=sideways") != NULL);
    CHECK_RC(fm_fault_parse(&f, "drop=nan", err, sizeof(err)), -1); /* no probability */
    CHECK(strstr(err, "drop=nan") != NULL);
}

static void test_faulty_stream(const char *spec, uint64_t total)
{
    char err[128];
    reset();
    CHECK_RC(fm_fault_parse(&faults, spec, err, sizeof(err)), 0);
    use_faults = 1;
    stream(total, 2);
    use_faults = 0;
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    fm_net_counters(sides[1].net, nc, dr);
    if (strstr(spec, "corrupt"))
        CHECK(dr[FM_DROP_CRC] > 0);
    if (strstr(spec, "dup"))
        CHECK(dr[FM_DROP_DUPLICATE] > 0);
    if (strstr(spec, "drop") || strstr(spec, "reorder"))
        CHECK(nc[FM_NC_PLACED] > 0); /* data after a gap went into the ring at once */
    fm_net_counters(sides[0].net, nc, dr);
    if (strstr(spec, "drop"))
        CHECK(nc[FM_NC_RETX_TIMEOUT] + nc[FM_NC_RETX_FAST] > 0);
}

/* test_faulty_stream of `bytes` under the faults `loss` with each seed in
 * [first, end): each within max_ns of the fake clock and max_timeouts
 * retransmission timeouts. */
static void lossy_streams(const char *loss, int first, int end, uint64_t bytes,
                          uint64_t max_ns, uint64_t max_timeouts)
{
    for (int seed = first; seed < end; seed++) {
        char spec[96];
        snprintf(spec, sizeof(spec), "%s,seed=%d", loss, seed);
        uint64_t t0 = now;
        test_faulty_stream(spec, bytes);
        CHECK(now - t0 < max_ns);
        uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
        fm_net_counters(sides[0].net, nc, dr);
        CHECK(nc[FM_NC_RETX_TIMEOUT] < max_timeouts);
    }
}

/* Heavy loss in a window of thousands of packets: the receiver holds more
 * ranges than one ACK lists, and those that come into the list as holes
 * below them close were delivered long before. Timed as round trips they
 * pushed the retransmission timeout to rto_max, where every retransmission
 * lost again waited that long (the streams took 27-1556 ms of the fake
 * clock; 8-20 ms once only listed deliveries were timed). */
static void test_heavy_loss_wide_window(void)
{
    lossy_streams("drop=0.06,corrupt=0.03", 10, 16, 16u << 20, 50000000, UINT64_MAX);
}

/* A sixth of the packets lost each way, ACKs too, in a window of thousands:
 * retransmissions are lost again, and after a lost ACK the next one comes
 * with a tail probe's copy. A round trip timed from the packets that ACK
 * newly listed grew with each such wait; a lost retransmission waited for
 * a timeout, one per timeout, since a later retransmission's delivery
 * proved nothing to RACK; and with the window cut to its floor while the
 * receiver held more ranges than an ACK lists, only the lowest hole was
 * resent, one a round trip. Over these seeds the streams took 31-321 ms
 * of the fake clock and 69-450 timeouts each; now 6-23 ms and 5-14. */
static void test_heavy_loss_both_ways(void)
{
    lossy_streams("drop=0.15,reorder=0.1", 20, 32, 4u << 20, 30000000, 30);
}

/* Writes one len-byte message of the pattern `seed` from stream byte *sent. */
static void write_msg(struct fm_net *net, struct fm_txflow *f, size_t len, uint64_t seed,
                      uint64_t *sent)
{
    static unsigned char buf[256 << 10];
    CHECK(len <= sizeof(buf) && fm_ring_room(&f->ring, len) >= (int64_t)len);
    for (size_t i = 0; i < len; i++)
        buf[i] = fmt_pattern(seed, *sent + i);
    struct iovec v = {buf, len};
    fm_ring_write(&f->ring, FM_REC_DATA, &v, 1, len);
    fm_txflow_wrote(f, now, 10000);
    fm_net_kick(net, f);
    *sent += len;
}

/* A ping-pong of len-byte messages through rings four messages deep, each
 * round trip `rtt` ns: each side's credit rides back on its reply
 * (FM_HDR_CREDIT), so the rings never run dry; a lost reply's credit comes
 * back in the ACK of the delayed-ACK timer. Without loss hardly an ACK goes
 * on its own: not for a message of more than ACK_EVERY packets, whose reply
 * carries the acknowledgement, nor for the delayed-ACK timer when round
 * trips are longer than it. */
static void test_pingpong(const char *fault, size_t len, uint64_t rtt)
{
    char err[128];
    ring_size = 4 * 4096;
    while (ring_size < 4 * (len + 8))
        ring_size *= 2;
    reset();
    use_faults = fault != NULL;
    if (fault)
        CHECK_RC(fm_fault_parse(&faults, fault, err, sizeof(err)), 0);
    struct fm_txflow *f[2];
    CHECK_RC(fm_net_flow(sides[0].net, 1, 1, 2, &f[0]), 0);
    CHECK_RC(fm_net_flow(sides[1].net, 0, 2, 1, &f[1]), 0);
    uint64_t sent[2] = {0, 0}, got[2] = {0, 0};
    const int rounds = 1000;
    for (int i = 0; i < rounds; i++) {
        for (int side = 0; side < 2; side++) {
            write_msg(sides[side].net, f[side], len, 11 + side, &sent[side]);
            int t = 0;
            while (got[1 - side] < sent[side]) {
                CHECK(++t < 10000);
                pump_some(side, 1, 256); /* a lone message leaves whole, as over udp */
                deliver_all();
                consume(&sides[1 - side], &got[1 - side], 11 + side);
                pump_out(1 - side, 0);
                deliver_all();
                now += rtt;
            }
        }
    }
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    fm_net_counters(sides[0].net, nc, dr);
    if (!fault)
        CHECK(nc[FM_NC_ACKS] < (uint64_t)rounds / 10);
    fm_net_counters(sides[1].net, nc, dr);
    if (!fault)
        CHECK(nc[FM_NC_ACKS] < (uint64_t)rounds / 10);
    use_faults = 0;
    ring_size = RING;
}

/* Credit goes once. Side 0 streams into a ring that holds a quarter of
 * its stream, so it needs credit to go on, and side 1 streams to side 0 all
 * along; every credit side 1 sends in the first 3 ms is lost. Side 0 must
 * ask for it again within a few timeouts: it waited for both sides to fall
 * quiet, which side 1's stream kept from happening as long as it lasted. */
static void test_credit_lost_while_peer_streams(void)
{
    ring_size = 16u << 10;
    reset();
    struct fm_txflow *f[2];
    CHECK_RC(fm_net_flow(sides[0].net, 1, 1, 2, &f[0]), 0);
    CHECK_RC(fm_net_flow(sides[1].net, 0, 2, 1, &f[1]), 0);
    const uint64_t total = 64u << 10, len = 1000;
    uint64_t sent[2] = {0, 0}, got[2] = {0, 0}, t0 = now;
    lose_credits_until = now + 3000000;
    while (got[1] < total) {
        CHECK(now - t0 < 100000000); /* 100 ms: side 0 stalled */
        if (sent[0] < total && fm_ring_room(&f[0]->ring, len) >= (int64_t)len)
            write_msg(sides[0].net, f[0], len, 21, &sent[0]);
        if (fm_ring_room(&f[1]->ring, len) >= (int64_t)len)
            write_msg(sides[1].net, f[1], len, 22, &sent[1]);
        pump_out(0, 1);
        pump_out(1, 1);
        deliver_all();
        consume(&sides[1], &got[1], 21);
        consume(&sides[0], &got[0], 22);
        now += 50000;
    }
    CHECK(now - t0 < 30000000);
    lose_credits_until = 0;
    ring_size = RING;
}

/* Delivers the first k datagrams on the link; the rest stay in flight. */
static void deliver_first(int k)
{
    int n = nqueue;
    nqueue = 0;
    struct sockaddr_in from = {.sin_family = AF_INET};
    for (int i = 0; i < k && i < n; i++) {
        from.sin_port = (uint16_t)(1000 + 10 * queue[i].rail + (1 - queue[i].to));
        fm_net_input(sides[queue[i].to].net, queue[i].data, queue[i].len, queue[i].rail, &from,
                     now);
    }
    for (int i = k; i < n; i++)
        queue[nqueue++] = queue[i];
}

/* A burst's packets share a send time. ACKs for its first packets,
 * the later ones coming more than a round trip after the burst left (it
 * is still on its way), say nothing about the rest: RACK must not take
 * them for lost. */
static void test_burst_not_lost(void)
{
    reset();
    use_faults = 0;
    struct fm_txflow *f;
    CHECK_RC(fm_net_flow(sides[0].net, 1, 3, 4, &f), 0);
    uint64_t sent = 0, got = 0;
    /* A first message and its ACK: until then a new session sends one
     * packet (fm_budget_unscheduled), and the burst is the point here. */
    write_msg(sides[0].net, f, 8, 21, &sent);
    exchange(4, 10000);
    consume(&sides[1], &got, 21);
    exchange(40, 10000); /* past the delayed ACK */
    CHECK_EQ(got, sent);
    for (int i = 0; i < 500; i++)
        write_msg(sides[0].net, f, 4000, 21, &sent);
    for (int i = 0; i < 40; i++)
        pump_out(0, 1); /* about 1400 packets, all at time `now` */
    CHECK(nqueue > 1000);
    for (int part = 0; part < 4; part++) {
        now += 50000; /* the burst drains slowly: 100 packets per 50 us */
        deliver_first(100);
        consume(&sides[1], &got, 21);
        /* The ACK overtakes the rest of the burst. */
        static struct link_pkt ack[4];
        int left = nqueue, acks = pump_out(1, 1);
        CHECK(acks > 0 && acks <= 4);
        memcpy(ack, queue + left, sizeof(*queue) * (size_t)acks);
        memmove(queue + acks, queue, sizeof(*queue) * (size_t)left);
        memcpy(queue, ack, sizeof(*queue) * (size_t)acks);
        deliver_first(acks);
    }
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    fm_net_counters(sides[0].net, nc, dr);
    CHECK_EQ(nc[FM_NC_RETX_FAST], 0);
    while (got < sent) {
        deliver_all();
        consume(&sides[1], &got, 21);
        pump_out(1, 1);
        deliver_all();
        pump_out(0, 1);
        now += 10000;
    }
    fm_net_counters(sides[1].net, nc, dr);
    CHECK_EQ(dr[FM_DROP_DUPLICATE], 0);
}

/* Two rails: a stream spreads over both; when rail 1 dies in the middle,
 * its packets go again on rail 0 and nothing is lost or doubled; when it
 * comes back it carries traffic again. Then both die: the peer is lost. */
static void test_rails(void)
{
    nrails = 2;
    reset();
    use_faults = 0;
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT], tx[FM_RAILS_MAX];
    stream(1 << 20, 6);
    fm_net_rail_counters(sides[0].net, tx);
    CHECK(tx[0] > (1 << 18) && tx[1] > (1 << 18)); /* both rails carry a fair share */
    /* Idle, the rails are not probed: a second of silence costs the
     * session's own heartbeats (every 500 ms here), not a probe per rail
     * every third of the 3 ms rail heartbeat. */
    exchange(5, 100000); /* the delayed ACK of the last packets (200 us) */
    fm_net_counters(sides[0].net, nc, dr);
    uint64_t pings = nc[FM_NC_PINGS];
    exchange(100, 10000000);
    fm_net_counters(sides[0].net, nc, dr);
    CHECK(nc[FM_NC_PINGS] - pings <= 4);
    CHECK_EQ(nc[FM_NC_RAIL_DOWN], 0);

    reset();
    kill_round = 60;     /* rail heartbeat: 60 rounds */
    revive_round = 250;
    stream(8 << 20, 7); /* checks every byte, once, in order */
    kill_round = revive_round = -1;
    fm_net_counters(sides[0].net, nc, dr);
    CHECK(nc[FM_NC_RAIL_DOWN] >= 1);
    CHECK(nc[FM_NC_RAIL_UP] >= 1);
    CHECK_EQ(nc[FM_NC_PEERS_LOST], 0);
    CHECK_EQ(sides[0].gone_state, 0);
    fm_net_rail_counters(sides[0].net, tx);
    uint64_t rail1_before = tx[1];
    /* Back up: rail 1 is used again. */
    exchange(200, 50000);
    struct fm_txflow *f;
    CHECK_RC(fm_net_flow(sides[0].net, 1, 5, 9, &f), 0);
    unsigned char buf[1000] = {0};
    for (int i = 0; i < 8; i++) {
        struct iovec v = {buf, sizeof(buf)};
        fm_ring_write(&f->ring, FM_REC_DATA, &v, 1, sizeof(buf));
    }
    fm_net_kick(sides[0].net, f);
    pump_out(0, 1);
    fm_net_rail_counters(sides[0].net, tx);
    CHECK(tx[1] > rail1_before);
    fm_net_flow_put(sides[0].net, f);

    /* Rail 1 broken from A to B only: B's packets still come on it. A
     * takes it down, its DATA there unacknowledged while rail 0's is, and
     * uses it again once mended; each of its packets there went again
     * after a timeout before (1681 timeouts for 8 MiB, 8 now). */
    reset();
    kill_round = 60;
    revive_round = 250;
    kill_one_way = 1;
    stream(8 << 20, 7);
    kill_round = revive_round = -1;
    kill_one_way = 0;
    fm_net_counters(sides[0].net, nc, dr);
    CHECK(nc[FM_NC_RAIL_DOWN] >= 1 && nc[FM_NC_RAIL_UP] >= 1);
    CHECK(nc[FM_NC_RETX_TIMEOUT] < 100);
    CHECK_EQ(nc[FM_NC_PEERS_LOST], 0);

    /* Seed 000's explicit status query instead of the piggybacked bits:
     * the stream still arrives whole, and bursts asked first. */
    rail_query = 1;
    reset();
    stream(1 << 20, 8);
    fm_net_counters(sides[0].net, nc, dr);
    CHECK(nc[FM_NC_PINGS] >= 1);
    rail_query = 0;

    /* Every rail silent: the peer is lost after the session timeout. */
    rail_dead[0] = rail_dead[1] = 1;
    uint64_t t0 = now;
    while (sides[0].gone_state == 0) {
        pump_out(0, 1);
        deliver_all();
        now += 10000000;
        CHECK(now - t0 < 3000000000ull);
    }
    CHECK_EQ(sides[0].gone_state, FM_NET_PEER_FAILED);
    rail_dead[0] = rail_dead[1] = 0;
    nrails = 1;
}

static void test_silence(void)
{
    reset();
    stream(10000, 3);
    /* B stops answering: A declares it lost after the timeout, not before. */
    uint64_t t0 = now;
    while (sides[0].gone_state == 0) {
        pump_out(0, 1);
        nqueue = 0; /* everything A sends is lost */
        now += 10000000;
        CHECK(now - t0 < 3000000000ull);
    }
    CHECK_EQ(sides[0].gone_state, FM_NET_PEER_FAILED);
    CHECK(now - t0 >= 2000000000ull);
    struct fm_txflow *f;
    CHECK_RC(fm_net_flow(sides[0].net, 1, 5, 9, &f), FM_EPEERLOST);
    /* The session's rings go with it, on both sides (they stayed until the
     * engine went away). */
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    fm_net_counters(sides[0].net, nc, dr);
    CHECK_EQ(nc[FM_NC_RING_TX_BYTES], 0);
    sides[1].nrx = 0; /* its flows are the engine's to end now */
    while (sides[1].gone_state == 0) {
        pump_out(1, 1);
        nqueue = 0;
        now += 10000000;
    }
    fm_net_counters(sides[1].net, nc, dr);
    CHECK_EQ(nc[FM_NC_RING_RX_BYTES], 0);
}

static void test_bye(void)
{
    reset();
    stream(5000, 4);
    fm_net_bye(sides[0].net);
    for (int i = 0; i < 10 && !sides[1].gone_state; i++)
        exchange(1, 0);
    CHECK_EQ(sides[1].gone_state, FM_NET_PEER_LEFT);
    CHECK_EQ(fm_net_unacked(sides[0].net), 0);
}

/* Idle sessions, the clock jumping to each next deadline: every wake-up has
 * a timer to act on. (After a heartbeat or a delayed ACK the deadline was
 * left at now + 1, a wake-up for nothing.) */
static void test_idle_wakes_for_timers(void)
{
    reset();
    stream(100000, 1);
    int wakes = 0, idle = 0;
    for (int k = 0; k < 400; k++) {
        exchange(1, 0);
        uint64_t d = FM_MIN(fm_net_deadline(sides[0].net), fm_net_deadline(sides[1].net));
        CHECK(d != UINT64_MAX);
        idle += d > now + 1;
        wakes++;
        now = FM_MAX(now + 1, d);
    }
    CHECK_EQ(idle, wakes);
    CHECK(now > 100000000000ull); /* 400 heartbeats apart, not ticks */
    CHECK_EQ(sides[0].gone_state, 0);
}

/* A goodbye held behind a gap: when the gap fills, the session ends with
 * nothing held, and the goodbye's acknowledgement goes (the count of held
 * packets wrapped, and building that ACK looped for ever). */
static void test_bye_after_gap(void)
{
    reset();
    stream(5000, 4);
    struct fm_txflow *f;
    CHECK_RC(fm_net_flow(sides[0].net, 1, 5, 9, &f), 0);
    uint64_t sent = 0;
    write_msg(sides[0].net, f, 100, 3, &sent);
    fm_net_bye(sides[0].net);
    pump_out(0, 1);
    CHECK(nqueue >= 2);
    CHECK_EQ(queue[nqueue - 1].data[1], FM_OP_BYE);
    memmove(&queue[0], &queue[1], sizeof(queue[0]) * (size_t)--nqueue); /* lose the first */
    for (int i = 0; i < 20 && fm_net_unacked(sides[0].net); i++) {
        deliver_all();
        exchange(1, 500000);
    }
    CHECK_EQ(sides[1].gone_state, FM_NET_PEER_LEFT);
    CHECK_EQ(fm_net_unacked(sides[0].net), 0);
}

/* Packets in the datagrams of one output of `from` (the link bundles
 * them): how many were sequenced FLOW_ENDs. */
static int flow_ends_out(int from, int *total)
{
    int before = nqueue;
    *total = pump_out(from, 1);
    int ends = 0;
    for (int i = before; i < nqueue; i++)
        ends += queue[i].data[1] == FM_OP_FLOW_END;
    return ends;
}

/* A flow its receiver stopped (the endpoint closed) ends without a datagram
 * of its own: its FLOW_END rides with the sender's next data, ahead of it,
 * or with the delayed ACK, and no later than that. */
static void test_stop_rides(void)
{
    reset();
    use_faults = 0;
    struct fm_txflow *f, *g, *h;
    uint64_t sent = 0;
    CHECK_RC(fm_net_flow(sides[1].net, 0, 2, 1, &g), 0);
    write_msg(sides[1].net, g, 100, 31, &sent);
    exchange(3, 10000);
    CHECK_EQ(sides[0].nrx, 1);
    exchange(40, 10000); /* past the delayed ACK: nothing owed */
    /* A closes the endpoint g feeds: A asks B to stop it. */
    fm_net_orphan(sides[0].net, sides[0].rx[0]);
    pump_out(0, 1);
    deliver_all();
    int total;
    CHECK_EQ(flow_ends_out(1, &total), 0);
    CHECK(!g->end_sent);
    /* B's answer on a new flow carries the end, first. */
    CHECK_RC(fm_net_flow(sides[1].net, 0, 3, 1, &h), 0);
    write_msg(sides[1].net, h, 100, 32, &sent);
    CHECK_EQ(flow_ends_out(1, &total), 1);
    CHECK(g->end_sent && total >= 3); /* FLOW_END, FLOW, DATA */
    deliver_all();
    exchange(40, 10000);
    /* With nothing to send, the end goes with the delayed ACK. */
    CHECK_RC(fm_net_flow(sides[1].net, 0, 4, 1, &f), 0);
    write_msg(sides[1].net, f, 100, 33, &sent);
    exchange(40, 10000);
    CHECK_EQ(sides[0].nrx, 3);
    fm_net_orphan(sides[0].net, sides[0].rx[2]);
    pump_out(0, 1);
    deliver_all();
    CHECK_EQ(flow_ends_out(1, &total), 0);
    now += 100000;
    CHECK_EQ(flow_ends_out(1, &total), 0);
    now += 150000; /* past ack_delay_ns */
    CHECK_EQ(flow_ends_out(1, &total), 1);
    CHECK(f->end_sent && total == 1); /* it carries the acknowledgement */
    deliver_all();
    exchange(40, 10000);
    CHECK_EQ(fm_net_unacked(sides[1].net), 0);
}

/* More flows stopped at once than the list of stops holds: each still asks
 * its sender to stop, once; one that ended before its turn does not. */
static void test_many_stops(void)
{
    reset();
    use_faults = 0;
    enum { N = 48 }; /* three times FM_STOPS_MAX */
    struct fm_txflow *g[N];
    uint64_t sent = 0;
    for (int i = 0; i < N; i++) {
        CHECK_RC(fm_net_flow(sides[1].net, 0, 100 + (uint32_t)i, 1, &g[i]), 0);
        write_msg(sides[1].net, g[i], 10, 41, &sent);
    }
    exchange(40, 10000);
    CHECK_EQ(sides[0].nrx, N);
    for (int i = 0; i < N; i++)
        fm_net_orphan(sides[0].net, sides[0].rx[i]);
    int stops = 0, total;
    for (int k = 0; k < 10; k++) {
        int before = nqueue;
        pump_out(0, 1);
        for (int i = before; i < nqueue; i++)
            stops += queue[i].data[1] == FM_OP_FLOW_STOP;
        deliver_all();
        flow_ends_out(1, &total);
        deliver_all();
        now += 10000;
    }
    CHECK_EQ(stops, N);
    for (int i = 0; i < N; i++)
        CHECK(g[i]->end_sent);
}

/* A rank back from computing longer than the timeout, its HELLO lost: the
 * handshake gets a full timeout again, with retries, as an established
 * session does. It was judged from its first HELLO, and the peer taken
 * for lost at once. */
static void test_handshake_after_absence(void)
{
    reset();
    use_faults = 0;
    struct fm_txflow *f;
    uint64_t sent = 0, got = 0;
    CHECK_RC(fm_net_flow(sides[0].net, 1, 5, 9, &f), 0);
    write_msg(sides[0].net, f, 100, 1, &sent);
    pump_out(0, 1);
    nqueue = 0;              /* the HELLO and what came with it: lost */
    now += 4000000000ull;    /* away twice the timeout */
    exchange(100, 1000000);
    CHECK_EQ(sides[0].gone_state, 0);
    CHECK_EQ(consume(&sides[1], &got, 1), 1);
    fm_net_flow_put(sides[0].net, f);
}

/* Streams `total` bytes on each of nf flows from A to B, B reading; true if
 * all of it came within 10 s (the clock jumps to the engines' deadlines). */
static int flows_stream(struct fm_txflow **f, int nf, uint64_t *sent, uint64_t total)
{
    uint64_t t0 = now, got = 0, want = 0;
    for (int i = 0; i < nf; i++)
        want += total - sent[i];
    while (now - t0 < 10000000000ull && got < want) {
        for (int i = 0; i < nf; i++)
            while (sent[i] < total && fm_ring_room(&f[i]->ring, 1000) >= 1000)
                write_msg(sides[0].net, f[i], 1000, 50 + (uint64_t)i, &sent[i]);
        pump_out(0, 1);
        deliver_all();
        for (int k = 0; k < sides[1].nrx; k++) {
            struct fm_rxflow *rx = sides[1].rx[k];
            for (uint64_t h; (h = fm_ring_peek(&rx->ring, sides[1].rd[k]));) {
                got += FM_REC_LEN(h);
                sides[1].rd[k] += FM_REC_SIZE(FM_REC_LEN(h));
                fm_ring_release(&rx->ring, sides[1].rd[k]);
                fm_net_released(sides[1].net, rx);
            }
        }
        pump_out(1, 1);
        deliver_all();
        uint64_t d = FM_MIN(fm_net_deadline(sides[0].net), fm_net_deadline(sides[1].net));
        now = d != UINT64_MAX && d > now + 50000 ? d : now + 50000;
    }
    return got == want;
}

/* More flows from one peer than an ACK has credits for, after an idle
 * second (whose heartbeat PING asks for every credit again): each ACK
 * listed the same first flows, and a later flow's new credit never went;
 * its sender stalled for good. Then the round over the flows never ended:
 * each PING brought ACKs without end (64 an output here; 256 a call in the
 * UDP link, which sent nothing else until its other peers took it for
 * lost). */
static void test_many_flows(void)
{
    reset();
    use_faults = 0;
    enum { NF = 24 };
    struct fm_txflow *f[NF];
    uint64_t sent[NF] = {0};
    for (int i = 0; i < NF; i++)
        CHECK_RC(fm_net_flow(sides[0].net, 1, 100 + (uint32_t)i, 9, &f[i]), 0);
    CHECK(flows_stream(f, NF, sent, 64000));
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT], acks0, pings0;
    fm_net_counters(sides[1].net, nc, dr);
    acks0 = nc[FM_NC_ACKS];
    fm_net_counters(sides[0].net, nc, dr);
    pings0 = nc[FM_NC_PINGS];
    for (uint64_t t0 = now; now - t0 < 1000000000ull;) { /* idle: heartbeats */
        exchange(1, 0);
        uint64_t d = FM_MIN(fm_net_deadline(sides[0].net), fm_net_deadline(sides[1].net));
        now = FM_MAX(now + 1, d);
    }
    fm_net_counters(sides[0].net, nc, dr);
    uint64_t pings = nc[FM_NC_PINGS] - pings0;
    fm_net_counters(sides[1].net, nc, dr);
    /* Each PING brings one round of every flow's credit, no more. */
    CHECK(pings >= 1);
    CHECK(nc[FM_NC_ACKS] - acks0 <=
          pings * ((NF + FM_NET_MAX_CREDITS - 1) / FM_NET_MAX_CREDITS + 1));
    CHECK(flows_stream(f, NF, sent, 128000));
    for (int i = 0; i < NF; i++)
        fm_net_flow_put(sides[0].net, f[i]);
}

/* Simulated time passes with nothing written: the sides exchange heartbeats. */
static void idle_for(uint64_t ns)
{
    for (uint64_t t0 = now; now - t0 < ns;) {
        exchange(1, 0);
        uint64_t d = FM_MIN(fm_net_deadline(sides[0].net), fm_net_deadline(sides[1].net));
        now = FM_MAX(now + 1, d);
    }
}

/* A flow whose ring is full, all of it sent and acknowledged, waits for
 * its reader, not for its sender: it must not end for want of use (its
 * sender's next flow would fill too, and rings pile up unread at the
 * reader). Once the reader has read it, it is idle and ends. */
static void test_blocked_not_idle(void)
{
    flow_idle_ns = 50000000;
    reset();
    use_faults = 0;
    struct fm_txflow *f;
    uint64_t sent = 0, got = 0, nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    CHECK_RC(fm_net_flow(sides[0].net, 1, 5, 9, &f), 0);
    while (fm_ring_room(&f->ring, 1000) >= 1000)
        write_msg(sides[0].net, f, 1000, 60, &sent);
    idle_for(1000000000ull);
    fm_net_counters(sides[0].net, nc, dr);
    CHECK_EQ(nc[FM_NC_FLOWS_IDLE], 0);
    CHECK(!f->ending && f->sent == f->ctl.tail);
    CHECK_EQ(consume(&sides[1], &got, 60), sent / 1000);
    idle_for(1000000000ull);
    fm_net_counters(sides[0].net, nc, dr);
    CHECK_EQ(nc[FM_NC_FLOWS_IDLE], 1);
    CHECK(f->ending);
    fm_net_flow_put(sides[0].net, f);
    flow_idle_ns = 0;
}

/* A flow that lived through 2^30 of its session's packets: the number its
 * credits are judged by moved up with the session's, and a FLOW_STOP,
 * which names the FLOW's own number, was then ignored: the receiver's
 * endpoint was closed, and the sender wrote on into a flow nobody read.
 * Credits still count. */
static void test_stop_long_lived(void)
{
    reset();
    use_faults = 0;
    struct fm_net *A = sides[0].net, *B = sides[1].net;
    struct fm_txflow *f;
    uint64_t sent = 0, got = 0;
    CHECK_RC(fm_net_flow(A, 1, 5, 9, &f), 0);
    write_msg(A, f, 100, 1, &sent);
    exchange(40, 10000);
    CHECK_EQ(consume(&sides[1], &got, 1), 1);
    CHECK_EQ(fm_net_unacked(A), 0);
    /* What 2^30 packets of other flows would have done to the numbers. */
    struct fm_session *sa = f->s, *sb = B->sess[0];
    uint32_t shift = (1u << 30) + 4096;
    sa->snd_una += shift;
    sa->snd_nxt += shift;
    sa->cc_end += shift;
    sb->rcv_nxt += shift;
    exchange(300, 10000000); /* timers: seconds */
    write_msg(A, f, 100, 1, &sent);
    exchange(40, 50000);
    CHECK_EQ(consume(&sides[1], &got, 1), 1);
    exchange(40, 50000);
    CHECK_EQ(f->ctl.head, f->sent); /* its credit came back */
    fm_net_orphan(B, sides[1].rx[0]);
    exchange(40, 50000);
    CHECK(f->ending);
}

/* A new sender has one packet in flight until an ACK tells it its grant.
 * A receiver that sends it small messages all along acknowledges in them
 * and sent no ACK: the sender stayed at a packet a round trip (2974 rounds
 * for 4 MiB against 65). */
static void test_stream_beside_chat(void)
{
    ring_size = 1u << 20;
    reset();
    use_faults = 0;
    int alone = stream(4u << 20, 7);
    reset();
    chat_bytes = 64;
    int beside = stream(4u << 20, 7);
    chat_bytes = 0;
    CHECK(beside < 2 * alone);
    ring_size = RING;
}

/* Takes the first packet of kind op that B sends, now or in the next nine
 * 100 us steps (op ACK: one that carries a credit), off the link. */
static struct link_pkt take_from_b(uint8_t op)
{
    for (int round = 0; round < 10; round++, now += 100000) {
        int before = nqueue;
        pump_out(1, 1);
        for (int i = before; i < nqueue; i++) {
            struct fm_wire_ack a;
            memcpy(&a, queue[i].data + sizeof(struct fm_wire_hdr), sizeof(a));
            if (queue[i].data[1] != op || (op == FM_OP_ACK && !a.ncredit))
                continue;
            struct link_pkt p = queue[i];
            memmove(&queue[i], &queue[i + 1], sizeof(queue[0]) * (size_t)(nqueue - i - 1));
            nqueue--;
            return p;
        }
    }
    fmt_fail(__FILE__, __LINE__, "B sent no packet of opcode %d", op);
    abort();
}

/* A credit from before a flow id was reused (a late ACK) is not the new
 * flow's. Taken, it let A write past what B released: B dropped that DATA
 * as out of its place ("flow"), and the new flow never moved again. */
static void test_late_credit_after_reuse(void)
{
    ring_size = 4096;
    reset();
    use_faults = 0;
    struct fm_net *A = sides[0].net, *B = sides[1].net;
    struct fm_txflow *f, *g;
    uint64_t sent = 0, got = 0;
    CHECK_RC(fm_net_flow(A, 1, 5, 9, &f), 0);
    write_msg(A, f, 100, 1, &sent);
    exchange(4, 10000);
    CHECK_EQ(consume(&sides[1], &got, 1), 1);
    struct link_pkt late = take_from_b(FM_OP_ACK); /* its credit of 112 bytes */
    uint32_t id = f->id;
    fm_net_flow_put(A, f);
    fm_net_flow_end(A, f);
    exchange(40, 10000); /* B frees the flow at its FLOW_END, A at B's ACK of it */
    sides[1].nrx = 0;
    sides[1].rd[0] = 0;
    CHECK_RC(fm_net_flow(A, 1, 5, 9, &g), 0);
    CHECK_EQ(g->id, id);
    sent = got = 0;
    write_msg(A, g, 100, 2, &sent);
    exchange(2, 10000);
    CHECK_EQ(sides[1].nrx, 1);
    struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = 1001};
    fm_net_input(A, late.data, late.len, 0, &from, now);
    CHECK_EQ(g->ctl.head, 0); /* B released nothing of this flow */
    for (int round = 0; got < 20000; round++) {
        CHECK(round < 2000);
        while (sent < 20000 && fm_ring_room(&g->ring, 96) >= 96)
            write_msg(A, g, 96, 2, &sent);
        exchange(1, 100000);
        consume(&sides[1], &got, 2);
    }
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    fm_net_counters(B, nc, dr);
    CHECK_EQ(dr[FM_DROP_FLOW], 0);
    ring_size = RING;
}

/* A FLOW_STOP sent again for a flow whose id was freed and reused (B's
 * first one lost, its ACK of A's FLOW_END not) stops nothing: it names
 * the FLOW it answers. It stopped the new flow, to another channel. */
static void test_late_stop_after_reuse(void)
{
    reset();
    use_faults = 0;
    struct fm_net *A = sides[0].net, *B = sides[1].net;
    struct fm_txflow *f, *h, *g;
    uint64_t sent = 0;
    CHECK_RC(fm_net_flow(A, 1, 5, 9, &f), 0);
    CHECK_RC(fm_net_flow(A, 1, 6, 10, &h), 0); /* keeps the ids apart */
    write_msg(A, f, 100, 1, &sent);
    write_msg(A, h, 100, 1, &sent);
    exchange(40, 10000);
    CHECK_EQ(sides[1].nrx, 2);
    uint32_t id = f->id;
    /* At about the same time A's endpoint 5 and B's channel 9 close. */
    fm_net_flow_put(A, f);
    fm_net_flow_end(A, f);
    fm_net_orphan(B, sides[1].rx[0]->id == id ? sides[1].rx[0] : sides[1].rx[1]);
    pump_out(0, 1); /* the FLOW_END */
    take_from_b(FM_OP_FLOW_STOP); /* lost */
    deliver_all();
    sides[1].nrx = 0;
    for (int i = 0; i < 6; i++) { /* B's delayed ACK frees the id */
        now += 50000;
        pump_out(1, 1);
        deliver_all();
        pump_out(0, 1);
        deliver_all();
    }
    CHECK_RC(fm_net_flow(A, 1, 7, 11, &g), 0);
    CHECK_EQ(g->id, id);
    write_msg(A, g, 100, 2, &sent);
    exchange(40, 50000); /* B's FLOW_STOP comes again */
    CHECK(!g->ending && !g->stopped);
}

/* A new flow's first DATA after its FLOW and a stopped flow's end is cut
 * so that the three fill one full packet exactly: the link sends them as
 * the first segment of the GSO send of the rest (udp.c), one datagram for
 * what took two. The message still arrives whole. */
static void test_first_cut(void)
{
    reset();
    use_faults = 0;
    struct fm_txflow *g, *h;
    uint64_t sent = 0;
    CHECK_RC(fm_net_flow(sides[1].net, 0, 2, 1, &g), 0);
    write_msg(sides[1].net, g, 104, 51, &sent);
    exchange(40, 10000);
    fm_net_orphan(sides[0].net, sides[0].rx[0]);
    pump_out(0, 1);
    deliver_all();
    CHECK_RC(fm_net_flow(sides[1].net, 0, 3, 1, &h), 0);
    uint64_t start = sent;
    write_msg(sides[1].net, h, 4000, 51, &sent);
    struct fm_pkt_out pk[16];
    int n = fm_net_output(sides[1].net, pk, 16, 1, now);
    /* (A session sends a packet at a time until an ACK brings its grant:
     * the first three at least.) */
    CHECK(n >= 3);
    CHECK(pk[0].hdr.op == FM_OP_FLOW_END && pk[1].hdr.op == FM_OP_FLOW &&
          pk[2].hdr.op == FM_OP_DATA);
    size_t full = sizeof(struct fm_wire_hdr) + sizeof(struct fm_wire_data) + 1400;
    CHECK_EQ(fm_pkt_len(&pk[0]) + fm_pkt_len(&pk[1]) + fm_pkt_len(&pk[2]), full);
    put_on_link(pk, n);
    deliver_all();
    exchange(40, 10000);
    CHECK_EQ(sides[0].nrx, 2);
    struct fm_rxflow *f = sides[0].rx[1];
    uint64_t hdr = fm_ring_peek(&f->ring, 0);
    CHECK(hdr && FM_REC_LEN(hdr) == 4000);
    struct iovec seg[2];
    int k = fm_ring_segments(&f->ring, 0, 4000, seg);
    uint64_t at = start;
    for (int i = 0; i < k; i++)
        for (size_t j = 0; j < seg[i].iov_len; j++, at++)
            CHECK_EQ(((unsigned char *)seg[i].iov_base)[j], fmt_pattern(51, at));
    CHECK_EQ(at, sent);
}

/* A flow from A to B whose session is up, its grant in hand, with
 * nothing in flight: its first message went and was read. */
static struct fm_txflow *quiet_flow(uint64_t *sent, uint64_t *got, uint64_t seed)
{
    reset();
    use_faults = 0;
    struct fm_txflow *f;
    CHECK_RC(fm_net_flow(sides[0].net, 1, 5, 9, &f), 0);
    write_msg(sides[0].net, f, 100, seed, sent);
    exchange(200, 10000);
    CHECK_EQ(consume(&sides[1], got, seed), 1);
    CHECK_EQ(fm_net_unacked(sides[0].net), 0);
    return f;
}

/* Messages written in a burst while nothing is in flight leave whole in
 * one output, without a flush: only packets already in flight make a short
 * packet wait to gather (a message's own first packet did, and its tail
 * took a send call of its own). */
static void test_burst_leaves_whole(void)
{
    uint64_t sent = 0, got = 0;
    struct fm_txflow *f = quiet_flow(&sent, &got, 52);
    write_msg(sides[0].net, f, 104, 52, &sent);
    write_msg(sides[0].net, f, 2000, 52, &sent); /* a burst: the flow says so */
    CHECK(__atomic_load_n(&f->burst, __ATOMIC_RELAXED));
    struct fm_pkt_out pk[16];
    int n = fm_net_output(sides[0].net, pk, 16, 0, now);
    CHECK(n >= 2);
    CHECK(f->sent == f->ring.ctl->tail);
    put_on_link(pk, n);
    deliver_all();
    CHECK_EQ(consume(&sides[1], &got, 52), 2);
    CHECK_EQ(got, sent);
}

/* New DATA of a session with nothing in flight is marked alone (udp.c
 * then sends its datagrams one call each and shares a long run's last two,
 * so that the receiver starts on a lone message before all of it came; the
 * receiver holds its acknowledgement for the answer); DATA that follows
 * DATA still unacknowledged, as in a stream, is not. */
static int count_data(const struct fm_pkt_out *pk, int n, int alone)
{
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (pk[i].hdr.op != FM_OP_DATA)
            continue;
        k += fm_pkt_alone(&pk[i]) == alone;
    }
    return k;
}

static void test_alone_marks(void)
{
    uint64_t sent = 0, got = 0;
    struct fm_txflow *f = quiet_flow(&sent, &got, 53);
    struct fm_pkt_out pk[16];
    write_msg(sides[0].net, f, 6000, 53, &sent);
    int n = fm_net_output(sides[0].net, pk, 16, 1, now);
    CHECK(count_data(pk, n, 1) >= 2);
    CHECK_EQ(count_data(pk, n, 0), 0);
    put_on_link(pk, n);
    CHECK(fm_net_unacked(sides[0].net) > 0);
    write_msg(sides[0].net, f, 3000, 53, &sent);
    n = fm_net_output(sides[0].net, pk, 16, 1, now);
    CHECK(count_data(pk, n, 0) >= 2);
    CHECK_EQ(count_data(pk, n, 1), 0);
    put_on_link(pk, n);
    deliver_all();
    exchange(20, 10000);
    CHECK_EQ(consume(&sides[1], &got, 53), 2);
    CHECK_EQ(got, sent);
}

/* Messages written in a burst while packets are in flight wait until they
 * fill a datagram of the link (gather_packets), and then go as whole
 * datagrams' worth of packets; the rest goes at a flush. */
static void test_burst_gathers_datagrams(void)
{
    gather_packets = 4;
    uint64_t sent = 0, got = 0;
    struct fm_txflow *f = quiet_flow(&sent, &got, 54);
    struct fm_pkt_out pk[16];
    write_msg(sides[0].net, f, 2000, 54, &sent); /* after a pause: it goes at once */
    int n = fm_net_output(sides[0].net, pk, 16, 0, now);
    CHECK_EQ(count_data(pk, n, 1), 2);
    put_on_link(pk, n); /* in flight from here on */
    for (int i = 0; i < 3; i++)
        write_msg(sides[0].net, f, 1000, 54, &sent);
    CHECK(__atomic_load_n(&f->burst, __ATOMIC_RELAXED));
    n = fm_net_output(sides[0].net, pk, 16, 0, now);
    CHECK_EQ(count_data(pk, n, 0), 0); /* 3 KB: not a datagram's worth (4 packets) */
    for (int i = 0; i < 2; i++)
        write_msg(sides[0].net, f, 1500, 54, &sent); /* 6 KB now */
    n = fm_net_output(sides[0].net, pk, 16, 0, now);
    CHECK_EQ(count_data(pk, n, 0), 4); /* one datagram's worth; the rest waits */
    put_on_link(pk, n);
    CHECK(f->sent < f->ring.ctl->tail);
    n = fm_net_output(sides[0].net, pk, 16, 1, now);
    CHECK_EQ(count_data(pk, n, 0), 1); /* a flush sends it */
    CHECK(f->sent == f->ring.ctl->tail);
    put_on_link(pk, n);
    deliver_all();
    CHECK_EQ(consume(&sides[1], &got, 54), 6);
    /* Without a flush, what waits goes once what is in flight is acknowledged. */
    write_msg(sides[0].net, f, 1000, 54, &sent);
    n = fm_net_output(sides[0].net, pk, 16, 0, now);
    CHECK_EQ(count_data(pk, n, 0), 0);
    pump_out(1, 0); /* arms the receiver's delayed ACK */
    now += 1000000;
    pump_out(1, 0);
    deliver_all();
    n = fm_net_output(sides[0].net, pk, 16, 0, now);
    CHECK_EQ(count_data(pk, n, 1), 1); /* nothing in flight now: it goes alone */
    put_on_link(pk, n);
    deliver_all();
    CHECK_EQ(consume(&sides[1], &got, 54), 1);
    CHECK_EQ(got, sent);
    gather_packets = 0;
}

static void test_bad_packets(void)
{
    reset();
    stream(3000, 5);
    /* Capture one good DATA packet from A. */
    struct fm_txflow *f;
    CHECK_RC(fm_net_flow(sides[0].net, 1, 5, 9, &f), 0);
    char msg[100] = "hello";
    struct iovec v = {msg, sizeof(msg)};
    fm_ring_write(&f->ring, FM_REC_DATA, &v, 1, sizeof(msg));
    fm_net_kick(sides[0].net, f);
    pump_out(0, 1);
    CHECK(nqueue >= 1);
    struct link_pkt good = queue[0];
    deliver_all();
    uint64_t got = 0;
    (void)got;
    struct fm_net *b = sides[1].net;
    struct sockaddr_in from = {0};
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    /* Replayed: a duplicate. */
    CHECK_EQ(fm_net_input(b, good.data, good.len, 0, &from, now), FM_DROP_DUPLICATE);
    /* Truncated. */
    CHECK_EQ(fm_net_input(b, good.data, good.len - 5, 0, &from, now), FM_DROP_SHORT);
    CHECK_EQ(fm_net_input(b, good.data, 10, 0, &from, now), FM_DROP_SHORT);
    /* One bit flipped. */
    unsigned char bad[FM_WIRE_MAX];
    memcpy(bad, good.data, good.len);
    bad[good.len - 1] ^= 4;
    CHECK_EQ(fm_net_input(b, bad, good.len, 0, &from, now), FM_DROP_CRC);
    /* Another job: a process whose key differs sends a valid-looking hello. */
    struct fm_net *stranger = make(0, 99);
    struct fm_txflow *sf;
    CHECK_RC(fm_net_flow(stranger, 1, 1, 1, &sf), 0);
    struct fm_pkt_out pk[4];
    int n = fm_net_output(stranger, pk, 4, 1, now);
    CHECK(n >= 1);
    struct iovec iov[4];
    int k = fm_pkt_seal(&pk[0], iov);
    size_t len = 0;
    for (int j = 0; j < k; j++) {
        memcpy(bad + len, iov[j].iov_base, iov[j].iov_len);
        len += iov[j].iov_len;
    }
    CHECK_EQ(fm_net_input(b, bad, len, 0, &from, now), FM_DROP_FOREIGN);
    fm_net_free(stranger);
    /* Garbage of every length. */
    for (size_t l = 0; l < 200; l++) {
        for (size_t i = 0; i < l; i++)
            bad[i] = (unsigned char)(i * 31 + l);
        CHECK(fm_net_input(b, bad, l, 0, &from, now) != FM_DROP_NONE);
    }
    fm_net_counters(b, nc, dr);
    CHECK(dr[FM_DROP_DUPLICATE] >= 1 && dr[FM_DROP_SHORT] >= 2 && dr[FM_DROP_CRC] >= 1 &&
          dr[FM_DROP_FOREIGN] >= 1);
    /* Still works afterwards. */
    pump_out(1, 1);
    deliver_all();
    CHECK_EQ(sides[0].gone_state, 0);
    CHECK_EQ(sides[1].gone_state, 0);
}

int main(void)
{
    queue = malloc(sizeof(*queue) * (size_t)qcap);
    CHECK(queue != NULL);
    test_clean_stream();
    test_fault_sides();
    test_faulty_stream("drop=0.05,seed=1", 1 << 20);
    test_faulty_stream("dup=0.05,seed=2", 1 << 20);
    test_faulty_stream("reorder=0.1,seed=3", 1 << 20);
    test_faulty_stream("corrupt=0.02,seed=4", 1 << 20);
    test_faulty_stream("drop=0.02,dup=0.02,reorder=0.02,corrupt=0.01,seed=5", 1 << 20);
    /* Windows of thousands of packets, wider than one ACK's ranges. */
    ring_size = 4u << 20;
    batches_per_rtt = 48;
    test_faulty_stream("drop=0.01,seed=6", 16u << 20);
    test_faulty_stream("drop=0.03,dup=0.01,reorder=0.05,seed=7", 16u << 20);
    test_heavy_loss_wide_window();
    test_heavy_loss_both_ways();
    ring_size = RING;
    batches_per_rtt = 1;
    ring_size = 4u << 20;
    test_burst_not_lost();
    ring_size = RING;
    test_pingpong(NULL, 4000, 10000);
    test_pingpong("drop=0.05,seed=8", 4000, 10000);
    test_pingpong(NULL, 40000, 10000);
    test_pingpong(NULL, 200000, 10000); /* more than ACK_DEFER_MAX packets, alone */
    test_pingpong(NULL, 4000, 250000); /* longer than the delayed-ACK timer */
    test_pingpong("drop=0.05,seed=9", 40000, 10000);
    test_credit_lost_while_peer_streams();
    test_rails();
    test_silence();
    test_bye();
    test_bye_after_gap();
    test_idle_wakes_for_timers();
    test_stop_rides();
    test_many_stops();
    test_late_credit_after_reuse();
    test_late_stop_after_reuse();
    test_stream_beside_chat();
    test_stop_long_lived();
    test_many_flows();
    test_blocked_not_idle();
    test_handshake_after_absence();
    test_first_cut();
    test_burst_leaves_whole();
    test_alone_marks();
    test_burst_gathers_datagrams();
    test_bad_packets();
    for (int i = 0; i < 2; i++)
        fm_net_free(sides[i].net);
    free(queue);
    return 0;
}
