/*
 * libFuzzer target: datagrams and local events into a network engine with
 * live state on both sides of its sessions.
 *
 * Before the input, two engines in one process (no sockets, as in
 * src/net/engine_test.c) set up a session: a (rank 0) sends b (rank 1) a
 * flow of three messages, which b reads and releases, so credit goes back.
 * Then b opens a flow to a and one to rank 2 (which has no engine) and
 * writes to both. a gets b's FLOW and first message and acknowledges them
 * (its ACK grants b more); the six DATA packets b sends next stay in flight
 * for good, a never sees them. b's HELLO to rank 2 stays unanswered, its
 * FLOW and DATA in flight. The input then speaks to b for a and for rank 2;
 * b's output goes nowhere.
 *
 * Input: a sequence of chunks [u16 length, little-endian][bytes].
 *
 *  - A chunk of one byte is a local event at b (event()): time passes, b
 *    writes, ends its flow, orphans a flow it receives, says goodbye, hears
 *    that a is unreachable.
 *  - Any other chunk is a datagram into b, split into packets as the UDP
 *    link does. If its first byte (the version's place) is odd, the chunk
 *    is one packet and is "repaired" (repair(), repair_short()): version,
 *    job tag, ranks, epochs, length and CRC are made valid, and a HELLO's
 *    MAC and a HELLO_ACK's nonce; the sequence numbers it carries are
 *    offsets: seq (and a HELLO's first_seq) from what b expected from the
 *    sender after the setup; ack and SACK ranges from the first packet b
 *    has in flight to it after the setup; FLOW_STOP's flow_seq from the
 *    sequence number of b's FLOW to it. The first byte's other bits pick a
 *    variant, never the opcode:
 *      0x02  from rank 2 (b asked for a session, none is up) instead of a
 *      0x04  the other dst_epoch (HELLO: b's epoch; others: 0)
 *      0x08  a stale src_epoch; under the short header, a foreign token
 *      0x10  HELLO: MAC as it is; HELLO_ACK: MAC and nonce as they are;
 *            short DATA: flags as they are
 *      0x20  it comes in on rail 1 (else rail 0)
 *      0x40  its CRC is wrong (after all the rest is right)
 *      0x80  the next chunk comes in the same batch of receives (a train)
 *    A chunk ends its batch (fm_net_input_done) unless 0x80 says otherwise;
 *    then b's endpoints read and release what arrived, time passes and b's
 *    output is taken (and discarded).
 *
 * Everything is deterministic: the engines' random numbers come from their
 * epochs. FUZZ_DUMP_SEEDS=dir writes seeds that reach every opcode's
 * delivery (write_seeds()).
 */
#include "core/crc32c.h"
#include "net/engine.h"
#include "net/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define SIZE 3          /* ranks 0 (a), 1 (b) and 2 (no engine) */
#define EPOCH(r) (100u + (uint32_t)(r))
#define STALE 0x5000u   /* added to a stale src_epoch */
#define MSG 300         /* bytes of the setup's messages */
#define NRX 32          /* receiving flows an engine tracks */

static uint8_t key[16];
static uint64_t job;

/* One engine and the flows its endpoints read. */
struct side {
    struct fm_net *net;
    struct fm_rxflow *rx[NRX];
    int nrx;
};
static struct side sides[2];

/* What the setup left, for repair and the events. */
static struct {
    uint32_t rx_base[SIZE]; /* next seq b expects from a rank (rank 2: 0) */
    uint32_t tx_base[SIZE]; /* b's first seq to a rank in flight after the setup */
    uint32_t flow_base[SIZE]; /* the seq of b's FLOW to a rank */
    uint32_t token[SIZE];   /* b's token for its session with a rank */
    uint64_t nonce[SIZE];   /* b's HELLO nonce to a rank (to a: none, 0) */
    uint32_t a_next, b_next; /* a's next sequence number to b, and b's to a */
    uint32_t a_acked;        /* the last acknowledgement a sent b */
    int a_known, b_known;
    int done; /* the setup is over: nothing more is noted */
    uint64_t a_tail;        /* stream bytes of a's flow to b */
    uint32_t b_flow;        /* b's flow id to a */
} st;

static struct fm_txflow *fb, *fb2; /* b's flows to a and to rank 2 */
static uint64_t now;

static void up_flow_new(void *core, struct fm_rxflow *f, int src)
{
    struct side *sd = core;
    (void)src;
    if (sd->nrx < NRX)
        sd->rx[sd->nrx++] = f;
}
static void up_delivered(void *core, struct fm_rxflow *f)
{
    /* Read between batches (consume), as an endpoint does. */
    (void)core;
    (void)f;
}
static void up_flow_end(void *core, struct fm_rxflow *f)
{
    struct side *sd = core;
    for (int i = 0; i < sd->nrx; i++)
        if (sd->rx[i] == f)
            sd->rx[i] = sd->rx[--sd->nrx];
    fm_net_rxflow_free(f);
}
static void up_gone(void *core, int rank, int how)
{
    (void)core;
    (void)rank;
    (void)how;
}
static int up_addr(void *core, int rank, struct sockaddr_in out[FM_RAILS_MAX])
{
    (void)core;
    for (int r = 0; r < 2; r++) {
        memset(&out[r], 0, sizeof(out[r]));
        out[r].sin_family = AF_INET;
        out[r].sin_port = (uint16_t)(7000 + 10 * r + rank);
    }
    return 0;
}

static struct fm_net *make(int rank)
{
    struct fm_net_params p = {
        .rank = rank, .size = SIZE, .epoch = EPOCH(rank), .ring_size = 16384,
        .ring_min = 4096, .payload = 512, .timeout_ns = 1000000000ull, .rto_min_ns = 1000000,
        .rto_max_ns = 100000000, .ack_delay_ns = 100000, .nrails = 2,
        .up = {.core = &sides[rank], .flow_new = up_flow_new, .delivered = up_delivered,
               .flow_end = up_flow_end, .peer_gone = up_gone, .address_of = up_addr},
    };
    memcpy(p.key, key, sizeof(key));
    return fm_net_new(&p);
}

/* The endpoints of a side read every published record and release it:
 * credit is due (an orphaned flow has no reader, the engine releases). */
static void consume(struct side *sd)
{
    for (int i = 0; i < sd->nrx; i++) {
        struct fm_rxflow *f = sd->rx[i];
        if (f->orphan)
            continue;
        uint64_t rd = f->ctl.head, h;
        while ((h = fm_ring_peek(&f->ring, rd)) != 0 && fm_ring_hdr_valid(&f->ring, h))
            rd += FM_REC_SIZE(FM_REC_LEN(h));
        if (rd != f->ctl.head) {
            fm_ring_release(&f->ring, rd);
            fm_net_released(sd->net, f);
        }
    }
}

static int sequenced(uint8_t op)
{
    return op == FM_OP_DATA || op == FM_OP_FLOW || op == FM_OP_BYE || op == FM_OP_FLOW_END ||
           op == FM_OP_FLOW_STOP;
}

/* Notes what the setup's packets say (sequence numbers, tokens, nonces). */
static void observe(int from, const struct fm_pkt_out *p)
{
    const struct fm_wire_hdr *h = &p->hdr;
    if (st.done)
        return;
    if (from == 0 && p->rank == 1 && sequenced(h->op) &&
        (!st.a_known || !fm_seq_lt(h->seq, st.a_next))) {
        st.a_next = h->seq + 1;
        st.a_known = 1;
    }
    if (from == 0 && p->rank == 1 && (h->flags & FM_HDR_ACK_VALID))
        st.a_acked = h->ack;
    if (from == 1 && p->rank == 0 && sequenced(h->op) &&
        (!st.b_known || !fm_seq_lt(h->seq, st.b_next))) {
        st.b_next = h->seq + 1;
        st.b_known = 1;
    }
    if (from != 1 || p->rank < 0 || p->rank >= SIZE)
        return;
    if (h->op == FM_OP_FLOW)
        st.flow_base[p->rank] = h->seq;
    if (h->op == FM_OP_HELLO || h->op == FM_OP_HELLO_ACK) {
        st.tx_base[p->rank] = p->sub.hello.hello.first_seq;
        st.token[p->rank] = p->sub.hello.hello.token;
        if (h->op == FM_OP_HELLO)
            st.nonce[p->rank] = p->sub.hello.hello.nonce;
    }
}

/* Takes all of a side's output; delivers it to the other side if `deliver`. */
static void pump(int from, int deliver)
{
    static struct fm_pkt_out pk[16];
    static unsigned char buf[FM_WIRE_MAX];
    int n;
    do {
        n = fm_net_output(sides[from].net, pk, 16, 1, now);
        for (int i = 0; i < n; i++) {
            observe(from, &pk[i]);
            size_t len = fm_pkt_seal_into(&pk[i], buf);
            if (!deliver)
                continue;
            struct sockaddr_in src = {.sin_family = AF_INET,
                                      .sin_port = (uint16_t)(7000 + from)};
            fm_net_input(sides[1 - from].net, buf, len, pk[i].rail, &src, now);
        }
    } while (n == 16);
    if (deliver)
        fm_net_input_done(sides[1 - from].net);
}

static void write_msg(struct fm_txflow *f, size_t len)
{
    static char msg[4096];
    struct iovec v = {msg, len};
    if (!f || f->ending || f->done || fm_ring_room(&f->ring, len) < (int64_t)len)
        return;
    memset(msg, (int)len, len);
    fm_ring_write(&f->ring, FM_REC_DATA, &v, 1, len);
    fm_net_kick(sides[1].net, f);
}

/* The setup did not leave what repair and the seeds expect (the engine
 * changed): every input fails, not just reaches less. */
static void broken(const char *what)
{
    fprintf(stderr, "fuzz_net: the setup went wrong: %s\n", what);
    abort();
}

static void setup(void)
{
    memset(&st, 0, sizeof(st));
    memset(sides, 0, sizeof(sides));
    now = 1000000000ull;
    sides[0].net = make(0);
    sides[1].net = make(1);
    struct fm_net *a = sides[0].net, *b = sides[1].net;
    if (!a || !b)
        broken("no engine");
    /* a to b: a session, a flow, three messages, read and credited. */
    struct fm_txflow *fa;
    if (fm_net_flow(a, 1, 3, 4, &fa) != 0)
        broken("no flow from a");
    char msg[MSG] = "seed";
    struct iovec v = {msg, sizeof(msg)};
    for (int i = 0; i < 3; i++)
        fm_ring_write(&fa->ring, FM_REC_DATA, &v, 1, sizeof(msg));
    fm_net_kick(a, fa);
    for (int r = 0; r < 3; r++) {
        pump(0, 1);
        consume(&sides[1]);
        pump(1, 1);
        now += 100000;
    }
    if (sides[1].nrx != 1 || sides[1].rx[0]->wpos != fa->ctl.tail)
        broken("a's messages did not all reach b");
    st.a_tail = fa->ctl.tail;
    st.rx_base[0] = st.a_next;
    /* b to a: a gets the FLOW and the first DATA, and its ACK grants b
     * the rest, which stays in flight for good. b to rank 2: a HELLO that
     * nobody answers, and data waiting for the session. */
    if (fm_net_flow(b, 0, 5, 6, &fb) != 0 || fm_net_flow(b, 2, 7, 8, &fb2) != 0)
        broken("no flow from b");
    st.b_flow = fb->id;
    write_msg(fb, 200);
    write_msg(fb2, 100);
    pump(1, 1);
    consume(&sides[0]);
    for (int r = 0; r < 2; r++) { /* the first arms a's ACK timer */
        pump(0, 1);
        now += 200000;
    }
    st.tx_base[0] = st.b_next;
    if (st.a_acked != st.b_next)
        broken("a did not acknowledge b's first message");
    for (int i = 0; i < 6; i++)
        write_msg(fb, 500);
    pump(1, 0);
    if (st.b_next - st.tx_base[0] < 2 || !st.nonce[2])
        broken("b has nothing in flight to a, or no HELLO to rank 2");
    now += 100000;
    st.done = 1;
}

static void teardown(void)
{
    fm_net_free(sides[0].net);
    fm_net_free(sides[1].net);
    memset(sides, 0, sizeof(sides));
    fb = fb2 = NULL;
}

/* Makes a full-header packet pass the checks of b (see the top). */
static void repair(unsigned char *p, size_t len)
{
    struct fm_wire_hdr h;
    int v = p[0], r = v & 2 ? 2 : 0;
    memcpy(&h, p, sizeof(h));
    h.version = FM_WIRE_VERSION;
    h.job = job;
    h.src_rank = (uint32_t)r;
    h.dst_rank = 1;
    h.src_epoch = EPOCH(r) + (v & 8 ? STALE : 0);
    h.dst_epoch = (h.op == FM_OP_HELLO) == !(v & 4) ? 0 : EPOCH(1);
    if (sequenced(h.op))
        h.seq += st.rx_base[r];
    h.ack += st.tx_base[r];
    h.len = (uint16_t)(len - sizeof(h));
    h.crc = 0;
    unsigned char *pl = p + sizeof(h);
    size_t n = len - sizeof(h);
    if (h.op == FM_OP_FLOW_STOP && n >= sizeof(struct fm_wire_flow_end)) {
        struct fm_wire_flow_end e;
        memcpy(&e, pl, sizeof(e));
        e.flow_seq += st.flow_base[r];
        memcpy(pl, &e, sizeof(e));
    }
    if (h.op == FM_OP_ACK && n >= sizeof(struct fm_wire_ack)) {
        struct fm_wire_ack a;
        memcpy(&a, pl, sizeof(a));
        size_t at = sizeof(a) + a.ncredit * sizeof(struct fm_wire_credit);
        for (unsigned i = 0; i < a.nsack && at + sizeof(struct fm_wire_sack) <= n; i++) {
            struct fm_wire_sack k;
            memcpy(&k, pl + at, sizeof(k));
            k.first += st.tx_base[r];
            memcpy(pl + at, &k, sizeof(k));
            at += sizeof(k);
        }
    }
    if ((h.op == FM_OP_HELLO || h.op == FM_OP_HELLO_ACK) && n >= sizeof(struct fm_wire_hello)) {
        struct fm_wire_hello hl;
        memcpy(&hl, pl, sizeof(hl));
        hl.first_seq += st.rx_base[r];
        if (!(v & 0x10)) {
            if (h.op == FM_OP_HELLO_ACK)
                hl.nonce = st.nonce[r];
            hl.mac = fm_wire_hello_mac(key, &h, &hl, pl + sizeof(hl), n - sizeof(hl));
        }
        memcpy(pl, &hl, sizeof(hl));
    }
    memcpy(p, &h, sizeof(h));
    h.crc = fm_crc32c(0, p, len) ^ (v & 0x40 ? 1u : 0);
    memcpy(p, &h, sizeof(h));
}

/* Makes a packet under the short header pass the checks of b. */
static void repair_short(unsigned char *p, size_t len)
{
    struct fm_wire_short h;
    int v = p[0], r = v & 2 ? 2 : 0;
    memcpy(&h, p, sizeof(h));
    h.version = FM_WIRE_VERSION;
    h.token = st.token[r] ^ (v & 8 ? 0x00100000u : 0);
    if (!(v & 0x10))
        h.flags &= FM_SHORT_FLAGS;
    h.seq += st.rx_base[r];
    h.ack += st.tx_base[r];
    h.len = (uint16_t)(len - sizeof(h));
    h.crc = 0;
    memcpy(p, &h, sizeof(h));
    h.crc = fm_crc32c(0, p, len) ^ (v & 0x40 ? 1u : 0);
    memcpy(p, &h, sizeof(h));
}

/* A local event at b: byte e picks it (low 3 bits) and its argument. */
static void event(uint8_t e)
{
    struct fm_net *b = sides[1].net;
    int arg = e >> 3;
    switch (e & 7) {
    case 0: /* time passes: retransmissions, tail probes, RACK */
        now += 1000000ull * (uint64_t)(1 + arg);
        break;
    case 1: /* a long silence: heartbeats, idle flows, a lost peer (in steps
               of at most 200 ms: a longer one forgives silence, output.c) */
        now += 50000000ull * (uint64_t)(1 + (arg & 3));
        break;
    case 2: /* b's endpoint writes to a (a new flow once the last ended) */
        if ((!fb || fb->ending || fb->done) && fm_net_flow(b, 0, 5, 6, &fb) != 0)
            fb = NULL;
        write_msg(fb, 8 + 97 * (size_t)arg);
        break;
    case 3: /* b's endpoint reading a flow closes */
        for (int i = sides[1].nrx - 1; i >= 0; i--)
            if (!sides[1].rx[i]->orphan) {
                fm_net_orphan(b, sides[1].rx[i]);
                break;
            }
        break;
    case 4: /* b's endpoint writing to a closes, or finds its ring too small */
        if (!fb || fb->ending || fb->done)
            break;
        if (!(arg & 1))
            fm_net_flow_end(b, fb);
        else if (!fm_net_flow_full(b, fb, 97 * (size_t)arg))
            break;
        fb = NULL;
        break;
    case 5: /* b leaves */
        fm_net_bye(b);
        break;
    case 6: /* b's endpoint writes to rank 2 */
        write_msg(fb2, 8 + 97 * (size_t)arg);
        break;
    default: { /* an ICMP error from a's address: a rail down, or a gone */
        struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = 7000};
        fm_net_unreachable(b, arg & 1, &from, (arg >> 1) & 1, now);
        break;
    }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    setup();
    struct fm_net *b = sides[1].net;
    static unsigned char buf[FM_WIRE_MAX];
    size_t off = 0;
    while (off + 2 <= size) {
        size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;
        off += 2;
        len = len < size - off ? len : size - off;
        len = len < sizeof(buf) ? len : sizeof(buf);
        memcpy(buf, data + off, len);
        off += len;
        int v = len ? buf[0] : 0, rail = (int)(len % 3), batch = 0;
        if (len == 1) {
            event(buf[0]);
        } else if (len >= 2 && (v & 1)) {
            rail = (v >> 5) & 1;
            batch = (v & 0x80) != 0;
            if (buf[1] == FM_OP_DATA_SHORT && len >= sizeof(struct fm_wire_short))
                repair_short(buf, len);
            else if (buf[1] != FM_OP_DATA_SHORT && len >= sizeof(struct fm_wire_hdr))
                repair(buf, len);
            struct sockaddr_in src = {.sin_family = AF_INET, .sin_port = 7000};
            fm_net_input(b, buf, len, rail, &src, now);
        } else {
            /* As it came: a datagram of packets back to back. */
            struct sockaddr_in src = {.sin_family = AF_INET, .sin_port = 7000};
            for (size_t k = 0, n; k < len; k += n) {
                n = fm_wire_packet_len(buf + k, len - k);
                fm_net_input(b, buf + k, n, rail, &src, now);
            }
        }
        if (batch)
            continue;
        fm_net_input_done(b);
        consume(&sides[1]);
        now += 50000;
        pump(1, 0);
    }
    teardown();
    return 0;
}

/* ---- seeds ---------------------------------------------------------------------- */

/* A seed being built: chunks as the input reads them. */
struct seed {
    unsigned char b[8192];
    size_t n;
};

static void put(struct seed *s, const void *p, size_t len)
{
    if (s->n + 2 + len > sizeof(s->b))
        abort();
    s->b[s->n++] = (unsigned char)(len & 0xff);
    s->b[s->n++] = (unsigned char)(len >> 8);
    if (len)
        memcpy(s->b + s->n, p, len);
    s->n += len;
}

static void put_event(struct seed *s, uint8_t e) { put(s, &e, 1); }

/* A full-header packet: v the variant (0x01 is added), seq and ack as
 * offsets (see the top). */
static void put_full(struct seed *s, int v, uint8_t op, uint16_t flags, uint32_t seq,
                     uint32_t ack, uint32_t credit_flow, const void *pl, size_t n)
{
    unsigned char p[sizeof(struct fm_wire_hdr) + 4096];
    struct fm_wire_hdr h = {.version = (uint8_t)(v | 1), .op = op, .flags = flags, .seq = seq,
                            .ack = ack, .credit_flow = credit_flow};
    memcpy(p, &h, sizeof(h));
    if (n)
        memcpy(p + sizeof(h), pl, n);
    put(s, p, sizeof(h) + n);
}

/* DATA's payload: data header and one record of `len` bytes at pos. */
static size_t data_pl(unsigned char *out, uint32_t flow, uint32_t credit_lo, uint64_t pos,
                      uint32_t len)
{
    struct fm_wire_data d = {.flow = flow, .credit_lo = credit_lo, .pos = pos};
    uint64_t rec = FM_REC_MAKE(FM_REC_DATA, len);
    memcpy(out, &d, sizeof(d));
    memcpy(out + sizeof(d), &rec, sizeof(rec));
    memset(out + sizeof(d) + sizeof(rec), 'x', FM_REC_SIZE(len) - FM_REC_HDR);
    return sizeof(d) + (size_t)FM_REC_SIZE(len);
}

static void put_data(struct seed *s, int v, uint16_t flags, uint32_t seq, uint32_t ack,
                     uint32_t flow, uint64_t pos, uint32_t len)
{
    unsigned char pl[4096];
    put_full(s, v, FM_OP_DATA, flags, seq, ack, 0, pl, data_pl(pl, flow, 0, pos, len));
}

static void put_short(struct seed *s, int v, uint16_t flags, uint32_t seq, uint32_t ack,
                      uint32_t flow, uint64_t pos, uint32_t len)
{
    unsigned char p[sizeof(struct fm_wire_short) + 4096];
    struct fm_wire_short h = {.version = (uint8_t)(v | 1), .op = FM_OP_DATA_SHORT,
                              .flags = flags, .seq = seq, .ack = ack};
    memcpy(p, &h, sizeof(h));
    put(s, p, sizeof(h) + data_pl(p + sizeof(h), flow, 0, pos, len));
}

static void put_flow(struct seed *s, int v, uint32_t seq, uint32_t flow, uint32_t ring)
{
    struct fm_wire_flow w = {.flow = flow, .src_channel = 9, .dst_channel = 10, .ring_size = ring};
    put_full(s, v, FM_OP_FLOW, 0, seq, 0, 0, &w, sizeof(w));
}

static void put_end(struct seed *s, int v, uint8_t op, uint16_t flags, uint32_t seq,
                    uint32_t ack, uint32_t flow, uint32_t flow_seq)
{
    struct fm_wire_flow_end e = {.flow = flow, .flow_seq = flow_seq};
    put_full(s, v, op, flags, seq, ack, 0, &e, sizeof(e));
}

/* An ACK: cumulative ack, credits {flow, head}, SACK ranges {first, count}. */
static void put_ack(struct seed *s, int v, uint16_t flags, uint32_t ack, uint32_t grant,
                    const struct fm_wire_credit *c, int nc, const struct fm_wire_sack *k,
                    int nk)
{
    unsigned char pl[4096];
    struct fm_wire_ack a = {.rails_busy = 1, .ncredit = (uint16_t)nc, .nsack = (uint16_t)nk,
                            .grant = grant, .ring_max = 8192};
    size_t n = 0;
    memcpy(pl, &a, sizeof(a));
    n += sizeof(a);
    for (int i = 0; i < nc; i++, n += sizeof(*c))
        memcpy(pl + n, &c[i], sizeof(*c));
    for (int i = 0; i < nk; i++, n += sizeof(*k))
        memcpy(pl + n, &k[i], sizeof(*k));
    put_full(s, v, FM_OP_ACK, FM_HDR_ACK_VALID | flags, 0, ack, 0, pl, n);
}

static void put_hello(struct seed *s, int v, uint8_t op, uint32_t first_seq, uint32_t token)
{
    struct fm_wire_hello hl = {.nonce = 0x1234, .first_seq = first_seq, .token = token,
                               .ring_max = 8192};
    put_full(s, v, op, 0, 0, 0, 0, &hl, sizeof(hl));
}

static void save(const char *dir, const char *name, const struct seed *s)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/seed-%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(s->b, 1, s->n, f) != s->n || fclose(f) != 0)
        fprintf(stderr, "fuzz_net: cannot write %s\n", path);
}

/* Seeds that take each opcode to its delivery, and the paths around it. */
static void write_seeds(const char *dir)
{
    /* The setup's stream position of a's flow, b's flow id, and how many
     * packets b has in flight to a (its FLOW and DATA). */
    setup();
    uint64_t W = st.a_tail;
    uint32_t bf = st.b_flow, inflight = st.b_next - st.tx_base[0];
    teardown();
    fprintf(stderr, "fuzz_net: seeds for stream position %llu, b's flow %u, %u in flight\n",
            (unsigned long long)W, bf, inflight);
    const int R2 = 0x02, ACKV = FM_HDR_ACK_VALID, BAD = 0x40, TRAIN = 0x80;
    struct seed s;
#define SEED(name, ...)                                                                        \
    do {                                                                                       \
        s.n = 0;                                                                               \
        __VA_ARGS__;                                                                           \
        save(dir, name, &s);                                                                   \
    } while (0)
    /* DATA under either header, in order, to a's flow; then a record split. */
    SEED("data-short", put_short(&s, 0, ACKV, 0, 0, 0, W, 40);
         put_short(&s, 0, FM_HDR_ALONE, 1, 0, 0, W + FM_REC_SIZE(40), 100));
    SEED("data-full-credit",
         unsigned char pl[512];
         put_full(&s, 0, FM_OP_DATA, ACKV | FM_HDR_CREDIT, 0, 2, bf, pl,
                  data_pl(pl, 0, 512, W, 64));
         put_full(&s, 0x04, FM_OP_DATA, ACKV | FM_HDR_CREDIT, 1, 3, bf, pl,
                  data_pl(pl, 0, 1000, W + FM_REC_SIZE(64), 64)));
    /* A train: packets in one batch, one failing its CRC, then sent again;
     * one placed ahead that fails it too. */
    SEED("data-train", put_short(&s, TRAIN, 0, 0, 0, 0, W, 40);
         put_short(&s, TRAIN, 0, 1, 0, 0, W + FM_REC_SIZE(40), 40);
         put_short(&s, TRAIN | BAD, 0, 2, 0, 0, W + 2 * FM_REC_SIZE(40), 40);
         put_short(&s, TRAIN, 0, 2, 0, 0, W + 2 * FM_REC_SIZE(40), 40);
         put_data(&s, TRAIN, 0, 3, 0, 0, W + 3 * FM_REC_SIZE(40), 40);
         put_short(&s, BAD, 0, 5, 0, 0, W + 5 * FM_REC_SIZE(40), 40);
         put_short(&s, 0, 0, 4, 0, 0, W + 4 * FM_REC_SIZE(40), 40));
    /* Records that wrap around the ring, enough for a credit at once. */
    SEED("data-wrap", put_short(&s, 0, 0, 0, 0, 0, W, 2000);
         put_short(&s, 0, 0, 1, 0, 0, W + FM_REC_SIZE(2000), 1500);
         put_short(&s, 0, 0, 2, 0, 0, W + FM_REC_SIZE(2000) + FM_REC_SIZE(1500), 8));
    /* A stream of small packets: acknowledgements by count. */
    SEED("data-stream", for (uint32_t i = 0; i < 20; i++)
             put_short(&s, 0, 0, i, 0, 0, W + i * FM_REC_SIZE(16), 16));
    /* After a gap: placed ahead, held, then the gap fills. */
    SEED("data-gap", put_short(&s, 0, 0, 2, 0, 0, W + 2 * FM_REC_SIZE(40), 40);
         put_short(&s, 0, 0, 1, 0, 0, W + FM_REC_SIZE(40), 40);
         put_end(&s, 0, FM_OP_FLOW_END, 0, 3, 0, 0, 0);
         put_short(&s, 0, 0, 1, 0, 0, W + FM_REC_SIZE(40), 40);
         put_short(&s, 0, 0, 0, 0, 0, W, 40));
    /* A new flow, its data, its end; flows and data held behind a gap. */
    SEED("flow", put_flow(&s, 0, 0, 1, 4096); put_data(&s, 0, 0, 1, 0, 1, 0, 200);
         put_short(&s, 0, 0, 2, 0, 1, FM_REC_SIZE(200), 16);
         put_end(&s, 0, FM_OP_FLOW_END, 0, 3, 0, 1, 0));
    SEED("flow-held", put_data(&s, 0, 0, 1, 0, 2, 0, 64); put_flow(&s, 0, 2, 3, 8192);
         put_flow(&s, 0, 0, 2, 4096); put_end(&s, 0, FM_OP_FLOW_END, 0, 3, 0, 2, 0));
    SEED("flow-end", put_end(&s, 0, FM_OP_FLOW_END, 0, 0, 0, 0, 0);
         put_short(&s, 0, 0, 1, 0, 0, W, 40));
    /* The receiver of b's flow stops it; b ends it. */
    SEED("flow-stop", put_end(&s, 0, FM_OP_FLOW_STOP, ACKV, 0, 1, bf, 0); put_event(&s, 0);
         put_ack(&s, 0, 0, inflight + 1, 0, NULL, 0, NULL, 0));
    /* Goodbye in order, a retransmission after it; and behind a gap, with
     * packets held after it. */
    SEED("bye", put_full(&s, 0, FM_OP_BYE, 0, 0, 0, 0, NULL, 0);
         put_short(&s, 0, 0, 0xffffffffu, 0, 0, W, 40);
         put_full(&s, 0, FM_OP_PING, 0, 0, 0, 0, NULL, 0));
    SEED("bye-held", put_short(&s, 0, 0, 3, 0, 0, W + FM_REC_SIZE(40), 40);
         put_flow(&s, 0, 2, 1, 4096); put_full(&s, 0, FM_OP_BYE, 0, 1, 0, 0, NULL, 0);
         put_short(&s, 0, 0, 0, 0, 0, W, 40));
    /* A PING asks for credit and rail status. */
    SEED("ping", put_short(&s, 0, 0, 0, 0, 0, W, 40);
         put_full(&s, 0x20, FM_OP_PING, FM_HDR_STATUS | ACKV, 0, 1, 0, NULL, 0));
    /* ACKs of b's packets in flight: SACK ranges, RACK, credits, grants. */
    {
        struct fm_wire_sack k[3] = {{3, 2}, {6, 1}, {0x7fffffffu, 3}};
        struct fm_wire_credit c[2] = {{bf, 0, 256}, {7, 0, 64}};
        SEED("ack-sack", put_ack(&s, 0, 0, 1, 0, c, 2, k, 2); put_event(&s, 0);
             put_ack(&s, 0, FM_HDR_STATUS, 2, 0, NULL, 0, k, 3); put_event(&s, 8 * 9);
             put_ack(&s, 0, 0, inflight, 0, c, 1, NULL, 0));
        struct fm_wire_sack many[FM_WIRE_SACK_MAX];
        for (uint32_t i = 0; i < FM_WIRE_SACK_MAX; i++)
            many[i] = (struct fm_wire_sack){1 + 2 * i, 1};
        SEED("ack-sack-full", put_ack(&s, 0, 0, 0, 0, NULL, 0, many, FM_WIRE_SACK_MAX);
             put_event(&s, 0); put_ack(&s, 0, 0, 2, 0, NULL, 0, many + 1, FM_WIRE_SACK_MAX - 1));
        SEED("ack-grant", put_ack(&s, 0, 0, 0, 2, NULL, 0, NULL, 0); put_event(&s, 2);
             put_ack(&s, 0, 0, 3, 0, c, 1, k, 1); put_event(&s, 8 * 3 + 2));
    }
    /* Time alone (empty chunks, then events): a tail probe, retransmission
     * timeouts, then silence ends the sessions. */
    SEED("timeout", for (int i = 0; i < 30; i++) put(&s, NULL, 0);
         put_event(&s, 8 * 4); put_event(&s, 8 * 31);
         for (int i = 0; i < 6; i++) put_event(&s, 1 + 8 * 3));
    /* All acknowledged, but b waits for credit: it asks with a PING. */
    SEED("credit-wait", put_ack(&s, 0, 0, inflight, 0, NULL, 0, NULL, 0);
         put_event(&s, 8 * 4); put_event(&s, 8 * 9);
         put_full(&s, 0, FM_OP_PING, 0, 0, 0, 0, NULL, 0));
    /* b's own actions: orphan, end, bye, write; an ICMP error. */
    SEED("events", put_short(&s, 0, 0, 0, 0, 0, W, 40); put_event(&s, 3);
         put_short(&s, 0, 0, 1, 0, 0, W + FM_REC_SIZE(40), 40); put_event(&s, 4);
         put_event(&s, 2 + 8 * 5); put_event(&s, 5); put_event(&s, 7 + 8 * 1);
         put_event(&s, 0));
    /* b's ring is too small: the flow ends, its successor grows; a's ACKs
     * let both go. */
    SEED("grow", put_ack(&s, 0, 0, inflight, 0, (struct fm_wire_credit[]){{bf, 0, 3072}}, 1,
                         NULL, 0);
         put_event(&s, 2 + 8 * 20); put_event(&s, 4 + 8 * 31); put_event(&s, 2 + 8 * 30);
         put_ack(&s, 0, 0, inflight + 3, 0, NULL, 0, NULL, 0); put_event(&s, 0);
         put_event(&s, 7 + 8 * 3));
    /* A's HELLO again (b answers it), and a stale one. */
    SEED("hello-again", put_hello(&s, 0, FM_OP_HELLO, 0, 77);
         put_hello(&s, 0x08, FM_OP_HELLO, 0, 77); put_hello(&s, 0x10, FM_OP_HELLO, 0, 77));
    /* Rank 2 answers b's HELLO: its flow goes; rank 2 acknowledges and
     * sends back. */
    SEED("hello-ack-2", put_hello(&s, R2, FM_OP_HELLO_ACK, 500, 99);
         put_ack(&s, R2, 0, 2, 0, NULL, 0, NULL, 0); put_flow(&s, R2, 500, 0, 4096);
         put_short(&s, R2, 0, 501, 0, 0, 0, 24); put_event(&s, 6 + 8 * 2));
    /* Rank 2 asks for the session itself, and sends at once. */
    SEED("hello-2", put_hello(&s, R2, FM_OP_HELLO, 10, 0); put_flow(&s, R2 | 0x04, 10, 0, 4096);
         put_data(&s, R2, 0, 11, 0, 0, 0, 32); put_full(&s, R2, FM_OP_BYE, 0, 12, 0, 0, NULL, 0));
    /* Stale and foreign variants, and the raw path (even first byte). */
    SEED("stale", put_short(&s, 0x08, 0, 0, 0, 0, W, 40);
         put_data(&s, 0x08, 0, 0, 0, 0, W, 40); put_data(&s, R2, 0, 0, 0, 0, 0, 40);
         put_short(&s, 0x10, 0x20, 0, 0, 0, W, 40);
         put_hello(&s, R2 | 0x10, FM_OP_HELLO_ACK, 0, 1);
         unsigned char raw[sizeof(struct fm_wire_hdr) + sizeof(struct fm_wire_short) + 8] = {
             FM_WIRE_VERSION - 1, FM_OP_PING};
         raw[sizeof(struct fm_wire_hdr)] = FM_WIRE_VERSION + 1;
         raw[sizeof(struct fm_wire_hdr) + 1] = FM_OP_DATA_SHORT;
         put(&s, raw, sizeof(raw)));
#undef SEED
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)(i * 7 + 1);
    job = fm_wire_job_tag(key);
    const char *dir = getenv("FUZZ_DUMP_SEEDS");
    if (dir)
        write_seeds(dir);
    return 0;
}
