/*
 * Incast at scale, simulated: N sending engines (src/net/) and a receiving
 * one in one process on a fake clock, the receiver behind a port of
 * --rate Mbit/s with a FIFO of --buffer bytes that drops at its tail, as
 * bench/incast.sh's tbf port (1 Gbit/s, 256 KB). Each sender streams
 * 16 KiB messages as fast as its ring and its grant allow; a victim sends
 * an 8-byte message every 200 us, or when its last one arrived if later
 * (one at a time, as a ping-pong's). The receiver's program reads at once,
 * and its acknowledgements come back over an idle path of --ack-us. With
 * --cpu-wait-us W, the senders and the victim wait for a CPU, as on a
 * crowded host: after each turn at a CPU (take in what arrived, write,
 * send) the next comes 0 to 2W later, at random; one that had nothing to
 * do sleeps, and waits as long again for a CPU once a packet wakes it.
 *
 * Printed per sender count: goodput over the port's rate, the port's queue
 * (mean and largest, in KB and in ms of the port's time), drops at the
 * port, fairness (the smallest over the largest sender's bytes), the
 * senders that got nothing through, the victim's one-way latency (p50
 * and p99), the receiver's engine's CPU: the real time its input and
 * output took, over the simulated time (what a real receiver of so many
 * senders would spend of a core; noisy on a shared VM), and how often a
 * sender's engine ran, per ms (wake/ms: waiting senders sleep). What no two-CPU
 * machine can run: a thousand real senders.
 *
 *   incast_sim [--senders LIST] [--light N] [--ms M] [--warmup-ms M] [--rate MBIT]
 *              [--buffer BYTES] [--ack-us US] [--stagger-us US] [--cpu-wait-us US]
 *              [--json] [--quick]
 *   --light: N more peers beside the senders, each sending an 8-byte message
 *            every LIGHT_EVERY_NS, spread over that time (clients of a server)
 *   --stagger-us: sender i starts i x US after the first (default together)
 *   --json: a JSON line per sender count (test "incast_sim"), as bench/ prints
 *
 * --quick (256 senders, 150 ms; --senders after it chooses others) is the
 * ctest run: it checks what the budget promises at that scale (the port kept busy, no sender starved,
 * hardly a drop, a queue short of the buffer, the victim not buried) and
 * exits 1 if not.
 */
#include "core/ring.h"
#include "core/util.h"
#include "net/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TICK_NS 2000u      /* the clock's step */
#define MSG_LEN 16384u     /* a sender's message */
#define VICTIM_EVERY_NS 200000u
#define LIGHT_EVERY_NS 50000000u
#define RING (64u << 10)   /* each flow's ring */
#define MAX_SENDERS 4096

struct pkt {
    unsigned char *data;
    uint32_t len;
    int to;
    uint64_t due; /* the reverse path: when it arrives */
};

/* A FIFO of packets (the port's queue, and the reverse path). */
struct fifo {
    struct pkt *p;
    size_t head, n, cap;
    uint64_t bytes;
};

static void fifo_push(struct fifo *q, struct pkt p)
{
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 1024;
        struct pkt *a = malloc(cap * sizeof(*a));
        if (!a)
            abort();
        for (size_t i = 0; i < q->n; i++)
            a[i] = q->p[(q->head + i) % q->cap];
        free(q->p);
        q->p = a;
        q->head = 0;
        q->cap = cap;
    }
    q->p[(q->head + q->n++) % q->cap] = p;
    q->bytes += p.len;
}

static struct pkt *fifo_front(struct fifo *q) { return q->n ? &q->p[q->head] : NULL; }

static struct pkt fifo_pop(struct fifo *q)
{
    struct pkt p = q->p[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    q->bytes -= p.len;
    return p;
}

struct node {
    struct fm_net *net;
    struct fm_txflow *tx;     /* senders: the flow to the receiver */
    struct fm_rxflow **rx;    /* the receiver: the flow from each rank */
    uint64_t *rd;             /* and where its reading is */
    uint64_t got;             /* the receiver: bytes from this rank (indexed by rank) */
    int dirty;                /* something arrived or was written since its last output */
    struct fifo inbox;        /* senders: ACKs arrived, not yet seen by the process */
    uint64_t next_run;        /* senders: when the process next has a CPU */
    int asleep;               /* senders: had nothing to do; a packet wakes it */
    uint64_t next_light;      /* light peers: when the next message is due (less its phase) */
};

static struct node *nodes;
/* ranks: 0 the receiver, 1..n senders, then nlight light peers, then the victim */
static int nsize, nlight;
static uint64_t now = 1000000000ull;
static uint64_t t_start, stagger_ns, warmup_ns = 20000000ull, cpu_wait_ns;
static uint64_t rng; /* the CPU waits' xorshift64 state, seeded by each run */
static int victim_waits; /* its message is on the way: a ping-pong sends one at a time */
static uint64_t *lat;
static size_t nlat, lat_cap;

static void up_flow_new(void *core, struct fm_rxflow *f, int src)
{
    struct node *nd = core;
    nd->rx[src] = f;
    nd->rd[src] = 0;
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
    (void)core;
    fprintf(stderr, "incast_sim: rank %d lost (state %d)\n", rank, state);
    exit(1);
}
static int up_addr(void *core, int rank, struct sockaddr_in out[FM_RAILS_MAX])
{
    (void)core;
    memset(&out[0], 0, sizeof(out[0]));
    out[0].sin_family = AF_INET;
    out[0].sin_addr.s_addr = htonl(0x0a000000u + (uint32_t)rank);
    out[0].sin_port = htons(7000);
    return 0;
}

static struct fm_net *make(int rank)
{
    struct fm_net_params p = {
        .rank = rank, .size = nsize, .epoch = 0x1000u + (uint32_t)rank, .ring_size = RING,
        .payload = 1408, .timeout_ns = 3000000000ull, .rto_min_ns = 1000000,
        .rto_max_ns = 750000000, .ack_delay_ns = 200000, .nrails = 1,
        .rail_heartbeat_ns = 100000000,
        .up = {.core = &nodes[rank], .flow_new = up_flow_new, .delivered = up_delivered,
               .flow_end = up_flow_end, .peer_gone = up_gone, .address_of = up_addr},
    };
    memset(p.key, 5, sizeof(p.key));
    return fm_net_new(&p);
}

static unsigned char *packet_bytes(struct fm_pkt_out *pk, uint32_t *len)
{
    unsigned char *b = malloc(fm_pkt_len(pk));
    if (!b)
        abort();
    *len = (uint32_t)fm_pkt_seal_into(pk, b);
    return b;
}

struct figures {
    double goodput, q_mean_kb, q_max_kb, q_max_ms, drops_pct, fairness, victim_p50_us,
        victim_p99_us, receiver_cpu_pct, sender_wakeups_per_ms;
    int starved;
};

/* Times a sender's engine ran while measuring (an ACK came, or a deadline
 * passed), over all senders: a sender that waits is asleep. */
static uint64_t sender_runs;

/* The real time the receiver's engine took while measuring (its input and
 * its output, not this program's scan of every flow for messages),
 * against the simulated time: the share of a core that engine would need
 * in a real receiver of these senders. The clock is read only around work
 * done, so an idle tick costs nothing here. */
static uint64_t receiver_ns;
static int measuring_cpu;

static uint64_t cpu_start(void) { return measuring_cpu ? fm_now_ns() : 0; }
static void cpu_stop(uint64_t t0)
{
    if (measuring_cpu)
        receiver_ns += fm_now_ns() - t0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void lat_add(uint64_t v)
{
    if (nlat == lat_cap) {
        lat_cap = lat_cap ? 2 * lat_cap : 1024;
        lat = realloc(lat, lat_cap * sizeof(*lat));
        if (!lat)
            abort();
    }
    lat[nlat++] = v;
}

/* The receiver's program: reads every complete message, releases it. */
static void consume(int measuring)
{
    struct node *r = &nodes[0];
    for (int src = 1; src < nsize; src++) {
        struct fm_rxflow *f = r->rx[src];
        if (!f)
            continue;
        for (;;) {
            uint64_t h = fm_ring_peek(&f->ring, r->rd[src]);
            if (!h)
                break;
            uint32_t len = FM_REC_LEN(h);
            if (src == nsize - 1) {
                struct iovec seg[2];
                uint64_t sent = 0;
                int n = fm_ring_segments(&f->ring, r->rd[src], len, seg);
                unsigned char b[8];
                size_t k = 0;
                for (int i = 0; i < n; i++)
                    for (size_t j = 0; j < seg[i].iov_len; j++)
                        b[k++] = ((unsigned char *)seg[i].iov_base)[j];
                memcpy(&sent, b, 8);
                victim_waits = 0;
                if (measuring)
                    lat_add(now - sent);
            } else if (measuring) {
                nodes[src].got += len;
            }
            r->rd[src] += FM_REC_SIZE(len);
            fm_ring_release(&f->ring, r->rd[src]);
            fm_net_released(r->net, f);
            r->dirty = 1;
        }
    }
}

/* One simulation: its parameters, the port's queue, the reverse path, and
 * what is counted while measuring. */
struct sim {
    int nsend;
    double bytes_per_ns, credit; /* the port's rate, and what it may send now */
    uint64_t buffer, ack_ns, next_victim;
    struct fifo port, back;
    int measuring;
    uint64_t drops, arrivals, delivered, q_sum, q_max, samples;
};

/* A sender's engine takes in a packet from the receiver. */
static void hear(int rank, struct pkt p)
{
    struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = htons(7000)};
    fm_net_input(nodes[rank].net, p.data, p.len, 0, &from, now);
    fm_net_input_done(nodes[rank].net);
    nodes[rank].dirty = 1;
    free(p.data);
}

/* Whether sender `rank`'s process has a CPU now. */
static int on_cpu(int rank) { return now >= nodes[rank].next_run; }

/* Its next turn at a CPU: 0 to 2 x cpu_wait_ns from now. */
static void next_cpu_turn(int rank)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    nodes[rank].next_run = cpu_wait_ns ? now + rng % (2 * cpu_wait_ns) : 0;
}

static void kick_flow(int rank)
{
    fm_txflow_wrote(nodes[rank].tx, now, 0);
    fm_net_kick(nodes[rank].net, nodes[rank].tx);
    nodes[rank].dirty = 1;
}

/* Senders with a CPU take in the ACKs that waited for it. */
static void senders_hear(void)
{
    for (int i = 1; i < nsize; i++)
        while (on_cpu(i) && nodes[i].inbox.n)
            hear(i, fifo_pop(&nodes[i].inbox));
}

/* The senders' programs write while their rings have room; the victim
 * writes its next message when the last one arrived. */
static void programs_write(struct sim *m)
{
    static unsigned char msg[MSG_LEN];
    for (int i = 1; i <= m->nsend; i++) {
        struct fm_txflow *f = nodes[i].tx;
        int wrote = 0;
        if (now < t_start + (uint64_t)i * stagger_ns || !on_cpu(i))
            continue;
        while (fm_ring_room(&f->ring, MSG_LEN) >= (int64_t)MSG_LEN) {
            struct iovec v = {msg, MSG_LEN};
            fm_ring_write(&f->ring, FM_REC_DATA, &v, 1, MSG_LEN);
            wrote = 1;
        }
        if (wrote)
            kick_flow(i);
    }
    for (int i = m->nsend + 1; i <= m->nsend + nlight; i++) {
        struct fm_txflow *f = nodes[i].tx;
        uint64_t phase = (uint64_t)(i - m->nsend) * LIGHT_EVERY_NS / (uint64_t)nlight;
        if (now >= (nodes[i].next_light ? nodes[i].next_light : t_start) + phase && on_cpu(i) && fm_ring_room(&f->ring, 8) >= 8) {
            struct iovec v = {&now, 8};
            fm_ring_write(&f->ring, FM_REC_DATA, &v, 1, 8);
            kick_flow(i);
            nodes[i].next_light =
                (nodes[i].next_light ? nodes[i].next_light : t_start) + LIGHT_EVERY_NS;
        }
    }
    struct fm_txflow *f = nodes[nsize - 1].tx;
    if (now >= m->next_victim && !victim_waits && on_cpu(nsize - 1) &&
        fm_ring_room(&f->ring, 8) >= 8) {
        struct iovec v = {&now, 8};
        fm_ring_write(&f->ring, FM_REC_DATA, &v, 1, 8);
        kick_flow(nsize - 1);
        victim_waits = 1;
        m->next_victim = now + VICTIM_EVERY_NS;
    }
}

/* What the senders' engines send goes into the port's queue, or is
 * dropped at its tail. */
static void senders_send(struct sim *m)
{
    struct fm_pkt_out pk[64];
    for (int i = 1; i < nsize; i++) {
        struct node *nd = &nodes[i];
        if (!on_cpu(i))
            continue;
        if (!nd->dirty && now < fm_net_deadline(nd->net)) {
            nd->asleep = 1;
            continue;
        }
        nd->dirty = 0;
        nd->asleep = 0;
        sender_runs += m->measuring;
        next_cpu_turn(i);
        int n;
        do {
            n = fm_net_output(nd->net, pk, 64, 1, now);
            for (int k = 0; k < n; k++) {
                struct pkt p = {.to = 0};
                p.data = packet_bytes(&pk[k], &p.len);
                m->arrivals += m->measuring;
                if (m->port.bytes + p.len > m->buffer) {
                    m->drops += m->measuring;
                    free(p.data);
                    continue;
                }
                fifo_push(&m->port, p);
            }
        } while (n == 64);
    }
}

/* The port sends to the receiver at its rate. */
static void port_send(struct sim *m)
{
    struct sockaddr_in from = {.sin_family = AF_INET, .sin_port = htons(7000)};
    struct pkt *front;
    m->credit = FM_MIN(m->credit + m->bytes_per_ns * TICK_NS, 2.0 * 1500);
    while ((front = fifo_front(&m->port)) && m->credit >= front->len) {
        struct pkt p = fifo_pop(&m->port);
        m->credit -= p.len;
        m->delivered += m->measuring ? p.len : 0;
        uint64_t t0 = cpu_start();
        fm_net_input(nodes[0].net, p.data, p.len, 0, &from, now);
        cpu_stop(t0);
        free(p.data);
        nodes[0].dirty = 1;
    }
    fm_net_input_done(nodes[0].net);
    if (!m->port.n)
        m->credit = FM_MIN(m->credit, 1500.0); /* an idle port saves no more than a burst */
    if (m->measuring) {
        m->q_sum += m->port.bytes;
        m->q_max = FM_MAX(m->q_max, m->port.bytes);
        m->samples++;
    }
}

/* The receiver's acknowledgements go back over an idle path, and arrive
 * ack_ns later: in their sender's engine if it has a CPU, else in its
 * inbox (a sleeping sender they wake waits for a CPU first). */
static void receiver_answer(struct sim *m)
{
    struct fm_pkt_out pk[64];
    if (nodes[0].dirty || now >= fm_net_deadline(nodes[0].net)) {
        nodes[0].dirty = 0;
        int n;
        do {
            uint64_t t0 = cpu_start();
            n = fm_net_output(nodes[0].net, pk, 64, 1, now);
            cpu_stop(t0);
            for (int k = 0; k < n; k++) {
                struct pkt p = {.to = pk[k].rank, .due = now + m->ack_ns};
                p.data = packet_bytes(&pk[k], &p.len);
                fifo_push(&m->back, p);
            }
        } while (n == 64);
    }
    struct pkt *front;
    while ((front = fifo_front(&m->back)) && front->due <= now) {
        struct pkt p = fifo_pop(&m->back);
        if (nodes[p.to].asleep) {
            nodes[p.to].asleep = 0;
            next_cpu_turn(p.to);
        }
        if (on_cpu(p.to))
            hear(p.to, p);
        else
            fifo_push(&nodes[p.to].inbox, p);
    }
}

static void figures(const struct sim *m, double secs, struct figures *fig)
{
    fig->goodput = (double)m->delivered / (m->bytes_per_ns * 1e9 * secs);
    fig->q_mean_kb = m->samples ? (double)m->q_sum / (double)m->samples / 1000 : 0;
    fig->q_max_kb = (double)m->q_max / 1000;
    fig->q_max_ms = (double)m->q_max / m->bytes_per_ns / 1e6;
    fig->drops_pct = m->arrivals ? 100.0 * (double)m->drops / (double)m->arrivals : 0;
    uint64_t lo = UINT64_MAX, hi = 0;
    fig->starved = 0;
    for (int i = 1; i <= m->nsend; i++) {
        lo = FM_MIN(lo, nodes[i].got);
        hi = FM_MAX(hi, nodes[i].got);
        fig->starved += nodes[i].got == 0;
    }
    fig->fairness = hi ? (double)lo / (double)hi : 0;
    qsort(lat, nlat, sizeof(*lat), cmp_u64);
    fig->victim_p50_us = nlat ? (double)lat[nlat / 2] / 1000 : -1;
    fig->victim_p99_us = nlat ? (double)lat[nlat * 99 / 100] / 1000 : -1;
    nlat = 0;
}

static void run(int nsend, uint64_t ms, double rate_mbit, uint64_t buffer, uint64_t ack_ns,
                struct figures *fig)
{
    nsize = nsend + nlight + 2;
    victim_waits = 0;
    nodes = calloc((size_t)nsize, sizeof(*nodes));
    nodes[0].rx = calloc((size_t)nsize, sizeof(*nodes[0].rx));
    nodes[0].rd = calloc((size_t)nsize, sizeof(*nodes[0].rd));
    if (!nodes || !nodes[0].rx || !nodes[0].rd)
        abort();
    for (int i = 0; i < nsize; i++)
        if (!(nodes[i].net = make(i)))
            abort();
    for (int i = 1; i < nsize; i++)
        if (fm_net_flow(nodes[i].net, 0, 1, 1, &nodes[i].tx) != 0)
            abort();
    struct sim m = {.nsend = nsend, .bytes_per_ns = rate_mbit * 1e6 / 8 / 1e9,
                    .buffer = buffer, .ack_ns = ack_ns, .next_victim = now};
    t_start = now;
    rng = 0x9E3779B97F4A7C15ull;
    uint64_t t_meas = now + warmup_ns, t_end = t_meas + ms * 1000000ull;
    for (; now < t_end; now += TICK_NS) {
        m.measuring = measuring_cpu = now >= t_meas;
        senders_hear();
        programs_write(&m);
        senders_send(&m);
        port_send(&m);
        consume(m.measuring);
        receiver_answer(&m);
    }
    figures(&m, (double)(t_end - t_meas) / 1e9, fig);
    fig->receiver_cpu_pct = 100.0 * (double)receiver_ns / (double)(t_end - t_meas);
    fig->sender_wakeups_per_ms = (double)sender_runs / (nsize - 2) / (double)ms;
    receiver_ns = 0;
    sender_runs = 0;
    measuring_cpu = 0;
    while (m.port.n)
        free(fifo_pop(&m.port).data);
    while (m.back.n)
        free(fifo_pop(&m.back).data);
    free(m.port.p);
    free(m.back.p);
    for (int i = 0; i < nsize; i++) {
        while (nodes[i].inbox.n)
            free(fifo_pop(&nodes[i].inbox).data);
        free(nodes[i].inbox.p);
        fm_net_free(nodes[i].net);
    }
    free(nodes[0].rx);
    free(nodes[0].rd);
    free(nodes);
}

static void usage(void)
{
    fprintf(stderr, "usage: incast_sim [--senders 8,32,...] [--ms M] [--warmup-ms M] "
                    "[--light N] [--rate MBIT] [--buffer BYTES] [--ack-us US] [--stagger-us US] "
                    "[--cpu-wait-us US] [--json] [--quick]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    char list[256] = "8,32,64,256,1000";
    uint64_t ms = 200, buffer = 256000, ack_us = 10;
    double rate = 1000;
    int quick = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(argv[i], "--quick")) {
            quick = 1;
            snprintf(list, sizeof(list), "256");
            ms = 150;
        } else if (!strcmp(argv[i], "--json")) {
            json = 1;
        } else if (!strcmp(argv[i], "--senders") && v) {
            snprintf(list, sizeof(list), "%s", v);
            i++;
        } else if (!strcmp(argv[i], "--light") && v) {
            nlight = atoi(v);
            i++;
        } else if (!strcmp(argv[i], "--ms") && v) {
            ms = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(argv[i], "--rate") && v) {
            rate = strtod(v, NULL);
            i++;
        } else if (!strcmp(argv[i], "--buffer") && v) {
            buffer = strtoull(v, NULL, 10);
            i++;
        } else if (!strcmp(argv[i], "--warmup-ms") && v) {
            warmup_ns = strtoull(v, NULL, 10) * 1000000;
            i++;
        } else if (!strcmp(argv[i], "--stagger-us") && v) {
            stagger_ns = strtoull(v, NULL, 10) * 1000;
            i++;
        } else if (!strcmp(argv[i], "--cpu-wait-us") && v) {
            cpu_wait_ns = strtoull(v, NULL, 10) * 1000;
            i++;
        } else if (!strcmp(argv[i], "--ack-us") && v) {
            ack_us = strtoull(v, NULL, 10);
            i++;
        } else {
            usage();
        }
    }
    if (!ms || rate <= 0 || buffer < 3000 || nlight < 0 || nlight > MAX_SENDERS)
        usage();
    char check[sizeof(list)];
    memcpy(check, list, sizeof(list));
    for (char *tok = strtok(check, ","); tok; tok = strtok(NULL, ","))
        if (atoi(tok) < 1 || atoi(tok) > MAX_SENDERS)
            usage(); /* before any output */
    if (!json)
        printf("# incast simulated: a %.0f Mbit/s port with a %llu-byte buffer, %llu ms measured "
           "after %llu ms, ACK path %llu us, senders wait %llu us for a CPU, %d light peers\n",
           rate, (unsigned long long)buffer, (unsigned long long)ms,
           (unsigned long long)(warmup_ns / 1000000), (unsigned long long)ack_us,
           (unsigned long long)(cpu_wait_ns / 1000), nlight);
    if (!json)
        printf("%8s %8s %9s %9s %9s %7s %8s %8s %10s %10s %8s %8s\n", "senders", "goodput",
               "queue_kb", "qmax_kb", "qmax_ms", "drops%", "min/max", "starved", "victim_p50",
               "victim_p99", "recv_cpu", "wake/ms");
    int bad = 0;
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        int n = atoi(tok);
        if (n < 1 || n > MAX_SENDERS)
            usage();
        struct figures f;
        run(n, ms, rate, buffer, ack_us * 1000, &f);
        if (json)
            printf("{\"test\": \"incast_sim\", \"senders\": %d, \"light\": %d, \"ms\": %llu, "
                   "\"rate_mbit\": "
                   "%.0f, \"buffer\": %llu, \"cpu_wait_us\": %llu, \"goodput\": %.4f, "
                   "\"queue_kb\": %.1f, "
                   "\"queue_max_kb\": %.1f, \"drops_pct\": %.3f, \"minmax\": %.3f, "
                   "\"starved\": %d, \"victim_p50_us\": %.0f, \"victim_p99_us\": %.0f, "
                   "\"receiver_cpu_pct\": %.1f, \"sender_wakeups_per_ms\": %.2f}\n",
                   n, nlight, (unsigned long long)ms, rate, (unsigned long long)buffer,
                   (unsigned long long)(cpu_wait_ns / 1000), f.goodput,
                   f.q_mean_kb, f.q_max_kb, f.drops_pct, f.fairness, f.starved, f.victim_p50_us,
                   f.victim_p99_us, f.receiver_cpu_pct, f.sender_wakeups_per_ms);
        else
            printf("%8d %8.3f %9.1f %9.1f %9.2f %7.2f %8.2f %8d %8.0fus %8.0fus %7.1f%% %8.2f\n",
                   n, f.goodput, f.q_mean_kb, f.q_max_kb, f.q_max_ms, f.drops_pct, f.fairness,
                   f.starved, f.victim_p50_us, f.victim_p99_us, f.receiver_cpu_pct,
                   f.sender_wakeups_per_ms);
        fflush(stdout);
        /* What the budget promises: the port busy, every sender served
         * within a few turns, hardly a drop, the queue short of full, and
         * the victim's message not behind a full buffer. The design before
         * it gave 12.8 % drops, 81 senders starved and a full queue at 256
         * senders. And senders waiting for their turn sleep: with a
         * deadline left in the past, each of 256 senders ran at every 2 us
         * tick (461 times a ms; 0.5 once mended). */
        double full_us = (double)buffer / (rate * 1e6 / 8) * 1e6;
        if (quick && (f.goodput < 0.9 || f.starved || f.drops_pct > 0.5 ||
                      f.q_mean_kb > 0.75 * (double)buffer / 1000 || f.victim_p50_us < 0 ||
                      f.victim_p50_us > 0.75 * full_us || f.sender_wakeups_per_ms > 50))
            bad = 1;
    }
    if (bad)
        fprintf(stderr, "incast_sim: the budget does not hold at this scale (see above)\n");
    return bad;
}
