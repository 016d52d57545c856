/*
 * Flows: the sending side's mirror rings and their life (made on first use,
 * ended after their data, freed when acknowledged and let go), and the
 * receiving side's landing rings (bytes laid into place, records published
 * in order, credits). Spare rings of ended flows serve the next ones.
 *
 * Ring memory follows use. A flow starts with a small ring (ring_min); one
 * whose sender found it full, or too small for a message, ends at once and
 * its successor gets a ring four times larger (or enough for the message),
 * up to ring_size and to what the receiver allows (ring_max in its ACKs,
 * from its FM_NET_RX_MEM bound); a large ring (or one over what the
 * receiver allows) unused for RING_IDLE_NS ends, and the next send gets a
 * small one; any flow unused for flow_idle_ns (FM_NET_FLOW_IDLE_MS) ends,
 * so that a process that once heard from a thousand endpoints does not
 * keep a ring for each on both sides. (Unused: nothing written, all of it
 * sent, and room for a message: a sender blocked on its reader waits.)
 * The receiver reads a successor only after its predecessor from the same
 * endpoint is read to its end (the udp link chains them), so messages keep
 * their order. The two send side by side, so when the sender is lost, the
 * successor may hold messages written after some of the predecessor's that
 * never left: a predecessor cut short that way takes its successors with
 * it.
 */
#include "session.h"

#include "core/crc32c.h"

#include "core/log.h"

#include <string.h>

/*
 * A flow's ring. A fresh ring needs only its first header word zeroed: the
 * ring protocol zeroes every later header slot before it is read. So rings
 * of ended flows are kept for new ones, which a connection-per-message
 * pattern opens by the thousand, without page faults or clearing.
 */
/* A large ring unused this long is replaced by a small one. */
#define RING_IDLE_NS 1000000000ull

static uint32_t ring_min(const struct fm_net *net)
{
    return net->p.ring_min ? net->p.ring_min : net->p.ring_size;
}

/* Only the smallest rings are kept spare: the ones connection-per-message
 * patterns open by the thousand; large ones go back to the system. `gauge`
 * is the counter of receive or send ring bytes. */
static unsigned char *ring_alloc(struct fm_net *net, uint32_t size, int gauge)
{
    void *p = NULL;
    if (size == ring_min(net) && net->nspare)
        p = net->spare[--net->nspare];
    else if (posix_memalign(&p, FM_CACHE_LINE, size))
        return NULL; /* aligned: header words never straddle cache lines */
    memset(p, 0, FM_REC_HDR);
    net->nc[gauge] += size;
    return p;
}

static void ring_free(struct fm_net *net, unsigned char *p, uint64_t size, int gauge)
{
    if (!p)
        return;
    net->nc[gauge] -= size;
    if (size == ring_min(net) && net->nspare < (int)FM_ARRAY_LEN(net->spare))
        net->spare[net->nspare++] = p;
    else
        free(p);
}

static void txflow_free(struct fm_session *s, struct fm_txflow *f)
{
    s->txf[f->id] = NULL;
    s->free_ids[s->nfree_ids++] = f->id; /* room: one per slot of txf */
    ring_free(s->net, f->ring.data, f->ring.size, FM_NC_RING_TX_BYTES);
    free(f);
}

/* The largest ring our flows to s may have now: what the peer allows (its
 * HELLO, HELLO_ACK and ACKs say), its bound over our FM_NET_RING_MIN too
 * (it may be below); until it said, our smallest. */
static uint32_t ring_limit(const struct fm_net *net, const struct fm_session *s)
{
    if (!s->ring_max)
        return ring_min(net);
    return FM_MIN(net->p.ring_size, s->ring_max);
}

uint32_t fm_flow_ring_max(const struct fm_net *net)
{
    uint32_t max = net->p.ring_size;
    uint64_t used = net->nc[FM_NC_RING_RX_BYTES];
    while (net->p.rx_mem && max > ring_min(net) && used + max > net->p.rx_mem)
        max /= 2;
    return max;
}

/*
 * The ring of the flow that succeeds f, which ended to grow: kept by
 * channel pair until the route resolves again, one entry a pair. (A single
 * entry a session was overwritten by a second endpoint growing in turn: the
 * first's successor started small, grew and overwrote the second's, for
 * ever.) An entry whose route never came back, its endpoint closed, goes
 * after RING_IDLE_NS; without memory for one, the successor starts small.
 */
static void grow_note(struct fm_net *net, struct fm_session *s, const struct fm_txflow *f,
                      uint32_t size)
{
    uint64_t now = net->t_last_output;
    uint32_t keep = 0;
    for (uint32_t i = 0; i < s->ngrows; i++) {
        const struct fm_grow *g = &s->grows[i];
        if ((g->src_channel != f->src_channel || g->dst_channel != f->dst_channel) &&
            now - g->t <= RING_IDLE_NS)
            s->grows[keep++] = *g;
    }
    s->ngrows = keep;
    if (s->ngrows == s->grows_cap) {
        uint32_t cap = s->grows_cap ? 2 * s->grows_cap : 4;
        struct fm_grow *a = realloc(s->grows, sizeof(*a) * cap);
        if (!a)
            return;
        s->grows = a;
        s->grows_cap = cap;
    }
    s->grows[s->ngrows++] = (struct fm_grow){f->src_channel, f->dst_channel, size, now};
}

/* The ring a new flow of these channels gets: its predecessor's growth. */
static uint32_t grow_take(struct fm_net *net, struct fm_session *s, uint32_t src, uint32_t dst)
{
    for (uint32_t i = 0; i < s->ngrows; i++) {
        if (s->grows[i].src_channel == src && s->grows[i].dst_channel == dst) {
            uint32_t size = s->grows[i].size;
            s->grows[i] = s->grows[--s->ngrows];
            return size;
        }
    }
    return FM_MIN(ring_min(net), ring_limit(net, s));
}

int fm_net_flow_full(struct fm_net *net, struct fm_txflow *f, size_t want)
{
    struct fm_session *s = f->s;
    uint64_t limit = ring_limit(net, s), size = f->ring.size * 4;
    /* A grant points into the ring until its commit: not ended under it. */
    if (f->ring.size >= limit || f->pinned || f->ending)
        return 0;
    while (size < limit && size < 4 * (uint64_t)want)
        size *= 2;
    grow_note(net, s, f, (uint32_t)FM_MIN(size, limit));
    net->nc[FM_NC_RING_GROWN]++;
    fm_net_flow_end(net, f);
    return 1;
}

void fm_flow_idle_check(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    for (uint32_t i = 0; i < s->nlive; i++) {
        struct fm_txflow *f = s->live[i];
        uint64_t t = __atomic_load_n(&f->t_write, __ATOMIC_RELAXED);
        /* Acks compared with an acknowledged FLOW's number (credit_is_for)
         * must not wrap: it trails the session's. A credit then refused was
         * built 2^29 packets ago, outdated by later ones. (The FLOW's own
         * number stays, for FLOW_STOP: moved, a stop was ignored.) */
        if (f->announced && fm_seq_lt(f->credit_seq, s->snd_una) &&
            s->snd_una - f->credit_seq > (1u << 30))
            f->credit_seq = s->snd_una - (1u << 29);
        /* A ring over what the peer allows ends too: a first flow goes
         * with the HELLO, before the peer said. What it still holds is
         * read before its successor's. */
        uint32_t keep = FM_MIN(ring_min(net), ring_limit(net, s));
        if (!t) /* made, not written yet: idle from this look on */
            __atomic_store_n(&f->t_write, t = now, __ATOMIC_RELAXED);
        uint64_t idle = now - t;
        /* A flow with data not sent yet, or short of room for a message
         * (a quarter of its ring) until its reader frees some, waits for
         * the network or the reader, not for its sender: it is not idle.
         * (Ended, a blocked sender's next flow filled too, and its
         * successors piled up unread past FM_NET_RX_MEM.) */
        uint64_t head = __atomic_load_n(&f->ctl.head, __ATOMIC_ACQUIRE);
        int waits = f->sent != f->ctl.tail ||
                    f->ring.size - (f->ctl.tail - head) < f->ring.size / 4;
        if (!f->pinned && !f->ending && !waits &&
            ((f->ring.size > keep && idle > RING_IDLE_NS) ||
             (net->p.flow_idle_ns && idle > net->p.flow_idle_ns))) {
            net->nc[FM_NC_FLOWS_IDLE]++;
            fm_net_flow_end(net, f);
            i--; /* it may have left the live list */
        }
    }
}

/* The flow is over: freed now, or when the last route lets go of it; its
 * ring (the memory that matters) goes at once. */
void fm_flow_done(struct fm_session *s, struct fm_txflow *f)
{
    f->done = 1;
    s->live[f->live_idx] = s->live[--s->nlive];
    s->live[f->live_idx]->live_idx = f->live_idx;
    if (f->refs == 0) {
        txflow_free(s, f);
        return;
    }
    if (f->pinned)
        return; /* the endpoint builds a message in it: freed when unpinned */
    ring_free(s->net, f->ring.data, f->ring.size, FM_NC_RING_TX_BYTES);
    f->ring.data = NULL;
}

void fm_flows_over(struct fm_net *net, struct fm_session *s, int lost)
{
    while (s->nlive)
        fm_flow_done(s, s->live[0]);
    for (uint32_t i = 0; i < s->rxf_cap; i++) {
        struct fm_rxflow *f = s->rxf[i];
        if (!f)
            continue;
        s->rxf[i] = NULL; /* the core owns it from here, as after a FLOW_END */
        f->cut = (uint8_t)lost;
        __atomic_store_n(&f->ended, 1, __ATOMIC_RELEASE);
        net->p.up.flow_end(net->p.up.core, f);
    }
}

void fm_net_flow_pin(struct fm_net *net, struct fm_txflow *f, int on)
{
    f->pinned = (uint8_t)on;
    if (!on && f->done) {
        ring_free(net, f->ring.data, f->ring.size, FM_NC_RING_TX_BYTES);
        f->ring.data = NULL;
    }
}

void fm_net_flow_put(struct fm_net *net, struct fm_txflow *f)
{
    (void)net;
    if (--f->refs == 0 && f->done)
        txflow_free(f->s, f);
}

void fm_net_rxflow_free(struct fm_rxflow *f)
{
    ring_free(f->s->net, f->ring.data, f->ring.size, FM_NC_RING_RX_BYTES);
    free(f);
}

void fm_flows_free(struct fm_session *s)
{
    for (uint32_t i = 0; i < s->txf_cap; i++)
        if (s->txf[i])
            txflow_free(s, s->txf[i]);
    free(s->txf);
    free(s->free_ids);
    free(s->live);
    free(s->grows);
    for (uint32_t i = 0; i < s->rxf_cap; i++)
        if (s->rxf[i])
            fm_net_rxflow_free(s->rxf[i]);
    free(s->rxf);
}

int fm_net_flow(struct fm_net *net, int rank, uint32_t src_channel, uint32_t dst_channel,
                struct fm_txflow **out)
{
    struct fm_session *s = fm_session_get(net, rank);
    if (!s)
        return FM_ENOMEM;
    if (s->state == S_GONE)
        return FM_EPEERLOST;
    for (uint32_t i = 0; i < s->nlive; i++) {
        struct fm_txflow *f = s->live[i];
        if (!f->ending && f->src_channel == src_channel && f->dst_channel == dst_channel) {
            f->refs++;
            *out = f;
            return 0;
        }
    }
    if (!s->have_addr) {
        struct sockaddr_in a[FM_RAILS_MAX];
        memset(a, 0, sizeof(a));
        int rc = net->p.up.address_of(net->p.up.core, rank, a);
        if (rc)
            return rc;
        int first = -1;
        for (int r = 0; r < net->p.nrails; r++) {
            s->rail[r].addr = a[r];
            s->rail[r].up = a[r].sin_family != 0;
            if (first < 0 && s->rail[r].up)
                first = r;
        }
        if (first < 0)
            return FM_EUNREACH;
        s->ctl_rail = (uint8_t)first;
        s->have_addr = 1;
    }
    if (!s->nfree_ids) {
        uint32_t cap = s->txf_cap ? s->txf_cap * 2 : 8;
        struct fm_txflow **t = realloc(s->txf, sizeof(*t) * cap);
        if (t)
            s->txf = t;
        uint32_t *ids = realloc(s->free_ids, sizeof(*ids) * cap);
        if (ids)
            s->free_ids = ids;
        struct fm_txflow **l = realloc(s->live, sizeof(*l) * cap);
        if (l)
            s->live = l;
        if (!t || !ids || !l)
            return FM_ENOMEM;
        for (uint32_t i = cap; i > s->txf_cap; i--) {
            s->txf[i - 1] = NULL;
            s->free_ids[s->nfree_ids++] = i - 1;
        }
        s->txf_cap = cap;
    }
    uint32_t size = grow_take(net, s, src_channel, dst_channel);
    struct fm_txflow *f = calloc(1, sizeof(*f));
    unsigned char *data = ring_alloc(net, size, FM_NC_RING_TX_BYTES);
    if (!f || !data) {
        free(f);
        ring_free(net, data, size, FM_NC_RING_TX_BYTES);
        return FM_ENOMEM;
    }
    f->ring = (struct fm_ring){.ctl = &f->ctl, .data = data, .size = size};
    f->s = s;
    f->id = s->free_ids[--s->nfree_ids];
    f->src_channel = src_channel;
    f->dst_channel = dst_channel;
    f->gen = 1;
    f->refs = 1;
    f->birth = s->births++;
    s->txf[f->id] = f;
    f->live_idx = s->nlive;
    s->live[s->nlive++] = f;
    mark_pending(net, s);
    *out = f;
    return 0;
}

/* Whether a credit in a packet that acknowledges up to ack is for f: the
 * receiver had f's FLOW when it built the packet. A packet from before the
 * id was reused would give the new flow the old one's credit, and its
 * sender would write past what the receiver released: DATA dropped as out
 * of its place, the flow stuck for ever. */
static int credit_is_for(const struct fm_txflow *f, uint32_t ack)
{
    return f->announced && fm_seq_lt(f->credit_seq, ack);
}

void fm_flow_credits(struct fm_session *s, const struct fm_wire_credit *c, int n, uint32_t ack)
{
    for (int i = 0; i < n; i++) {
        if (c[i].flow >= s->txf_cap || !s->txf[c[i].flow] || s->txf[c[i].flow]->done)
            continue;
        struct fm_txflow *f = s->txf[c[i].flow];
        if (!credit_is_for(f, ack))
            continue;
        /* Never beyond what was sent, never backwards. */
        if (c[i].head > f->ctl.head && c[i].head <= f->sent) {
            __atomic_store_n(&f->ctl.head, c[i].head, __ATOMIC_RELEASE);
            s->t_credit = s->t_last_rx; /* read with the packet: now */
        }
    }
}

void fm_flow_credit_lo(struct fm_session *s, uint32_t flow, uint32_t head_lo, uint32_t ack)
{
    if (flow >= s->txf_cap || !s->txf[flow])
        return;
    /* The head lies between the one we know and what we sent, less than
     * 4 GiB apart: an old credit widens to beyond `sent` and is ignored. */
    uint64_t known = __atomic_load_n(&s->txf[flow]->ctl.head, __ATOMIC_RELAXED);
    struct fm_wire_credit c = {.flow = flow, .head = known + (uint32_t)(head_lo - (uint32_t)known)};
    fm_flow_credits(s, &c, 1, ack);
}

void fm_flow_credit_ride(struct fm_session *s, struct fm_pkt_out *p)
{
    if (s->owed_flow >= s->rxf_cap || !s->rxf[s->owed_flow])
        return; /* several flows, or one that ended: the ACK carries them */
    struct fm_rxflow *f = s->rxf[s->owed_flow];
    uint64_t head = __atomic_load_n(&f->ctl.head, __ATOMIC_ACQUIRE);
    p->hdr.flags |= FM_HDR_CREDIT;
    p->hdr.credit_flow = f->id;
    p->sub.data.credit_lo = (uint32_t)head;
    f->credited = head;
    s->credit_owed = 0;
    ack_timer_settle(s);
}

struct fm_rxflow *fm_flow_rx_make(struct fm_net *net, struct fm_session *s,
                                  const struct fm_wire_flow *w, uint32_t seq, enum fm_drop *why)
{
    /* A ring larger than our FM_NET_RING_SIZE is taken: the sender chose it
     * before it knew our ring_max (its first flow, sent with its HELLO, has
     * its ring_min, which may be above ours). Refusing it would lose the
     * flow's messages, which the sender goes on writing. */
    *why = FM_DROP_FLOW;
    if (w->flow >= (1u << 20) || !fm_is_pow2(w->ring_size) || w->ring_size < 4096 ||
        w->ring_size > (1u << 30))
        return NULL;
    *why = FM_DROP_NOMEM;
    if (w->flow >= s->rxf_cap) { /* room for it now: opening it cannot fail */
        uint32_t cap = FM_MAX(w->flow + 1, s->rxf_cap * 2);
        struct fm_rxflow **a = realloc(s->rxf, sizeof(*a) * cap);
        if (!a)
            return NULL;
        memset(a + s->rxf_cap, 0, sizeof(*a) * (cap - s->rxf_cap));
        s->rxf = a;
        s->rxf_cap = cap;
    }
    struct fm_rxflow *f = calloc(1, sizeof(*f));
    unsigned char *data = ring_alloc(net, w->ring_size, FM_NC_RING_RX_BYTES);
    if (!f || !data) {
        free(f);
        ring_free(net, data, w->ring_size, FM_NC_RING_RX_BYTES);
        return NULL;
    }
    f->ring = (struct fm_ring){.ctl = &f->ctl, .data = data, .size = w->ring_size};
    f->s = s;
    f->src_rank = s->rank;
    f->id = w->flow;
    f->flow_seq = seq;
    f->src_channel = w->src_channel;
    f->dst_channel = w->dst_channel;
    *why = FM_DROP_NONE;
    return f;
}

enum fm_drop fm_flow_rx_open(struct fm_net *net, struct fm_session *s, struct fm_rxflow *f)
{
    if (s->rxf[f->id]) { /* a flow id is announced once */
        fm_net_rxflow_free(f);
        return FM_DROP_FLOW;
    }
    s->rxf[f->id] = f;
    net->p.up.flow_new(net->p.up.core, f, s->rank);
    return FM_DROP_NONE;
}

/* Whether a record's header is due at the write position: the reader sees
 * the word there (the frontier), and it must stay 0 until the record is
 * published. */
static int at_frontier(const struct fm_rxflow *f, uint64_t pos)
{
    return pos == f->wpos && f->wpos == f->rec_end;
}

/* Copies len bytes to ring position pos, wrapping at the end, and continues
 * the CRC *crc over the 64 bytes at head (if not NULL) and then them (crc
 * NULL: a plain copy). */
static void put(const struct fm_ring *r, uint64_t pos, const unsigned char *b, size_t len,
                const void *head, uint32_t *crc)
{
    if (!crc) {
        fm_ring_put(r, pos, b, len);
        return;
    }
    uint64_t off = pos & (r->size - 1);
    size_t first = (size_t)FM_MIN((uint64_t)len, r->size - off);
    *crc = head ? fm_crc32c_copy_after(*crc, head, r->data + off, b, first)
                : fm_crc32c_copy(*crc, r->data + off, b, first);
    if (first < len)
        *crc = fm_crc32c_copy(*crc, r->data, b + first, len - first);
}

static int place(struct fm_rxflow *f, uint64_t pos, const unsigned char *b, size_t len,
                 const void *hdrs, uint32_t *crc)
{
    uint64_t head = __atomic_load_n(&f->ctl.head, __ATOMIC_ACQUIRE);
    if (f->orphan || (pos & 7) || (len & 7) || len < 8 || pos < f->wpos ||
        pos + len > head + f->ring.size)
        return -1;
    if (at_frontier(f, pos)) {
        memcpy(&f->stash, b, 8);
        f->stash_pos = pos;
        if (crc) /* the record's header is stashed, not folded: headers first */
            *crc = fm_crc32c(hdrs ? fm_crc32c(*crc, hdrs, 64) : *crc, b, 8);
        hdrs = NULL;
        pos += 8;
        b += 8;
        len -= 8;
    }
    put(&f->ring, pos, b, len, hdrs, crc);
    return 0;
}

int fm_flow_rx_place(struct fm_rxflow *f, uint64_t pos, const unsigned char *b, size_t len)
{
    return place(f, pos, b, len, NULL, NULL);
}

int fm_flow_rx_place_crc(struct fm_rxflow *f, uint64_t pos, const unsigned char *b, size_t len,
                         const void *hdrs, uint32_t *crc)
{
    return place(f, pos, b, len, hdrs, crc);
}

/*
 * Lays stream bytes into a flow's ring. Records are published in order and
 * only when complete: the header word is written last, after the slot after
 * the record was zeroed, exactly as a shared-memory producer does. Bytes
 * laid ahead of their turn (b NULL) are in the ring already, but for a
 * header at the frontier, which is in the stash.
 */
enum fm_drop fm_flow_rx_data(struct fm_net *net, struct fm_rxflow *f, uint64_t pos,
                             const unsigned char *b, size_t len)
{
    uint64_t head = __atomic_load_n(&f->ctl.head, __ATOMIC_ACQUIRE);
    if (pos != f->wpos || (len & 7) || pos + len > head + f->ring.size)
        return FM_DROP_FLOW;
    int published = 0;
    enum fm_drop why = FM_DROP_NONE;
    while (len) {
        if (f->wpos == f->rec_end) {
            uint64_t h;
            if (b)
                memcpy(&h, b, 8);
            else if (f->stash_pos == f->wpos)
                h = f->stash;
            else {
                why = FM_DROP_FLOW; /* cannot happen: a frontier word is always stashed */
                break;
            }
            if (!fm_ring_hdr_valid(&f->ring, h) || FM_REC_TYPE(h) == FM_REC_SRC ||
                f->wpos + FM_REC_SIZE(FM_REC_LEN(h)) + FM_REC_HDR > head + f->ring.size) {
                why = FM_DROP_FLOW;
                break;
            }
            f->rec_start = f->wpos;
            f->rec_end = f->wpos + FM_REC_SIZE(FM_REC_LEN(h));
            f->rec_hdr = h;
            f->wpos += 8;
            b = b ? b + 8 : NULL;
            len -= 8;
        }
        size_t n = (size_t)FM_MIN((uint64_t)len, f->rec_end - f->wpos);
        if (b && !f->orphan)
            fm_ring_put(&f->ring, f->wpos, b, n);
        f->wpos += n;
        b = b ? b + n : NULL;
        len -= n;
        if (f->wpos == f->rec_end) {
            /* The next header's word becomes the frontier: what was laid
             * there ahead of its turn moves to the stash. */
            uint64_t *next = fm_ring_word(&f->ring, f->rec_end);
            f->stash = *next;
            f->stash_pos = f->rec_end;
            if (f->orphan) {
                __atomic_store_n(&f->ctl.head, f->wpos, __ATOMIC_RELEASE);
                fm_net_released(net, f);
                continue;
            }
            *next = 0;
            __atomic_store_n(fm_ring_word(&f->ring, f->rec_start), f->rec_hdr,
                             __ATOMIC_RELEASE);
            published = 1;
        }
    }
    /* Records published before a bad header are the reader's all the
     * same: its link must hear of them (the UDP link's rings are read only
     * when announced). */
    if (published)
        net->p.up.delivered(net->p.up.core, f);
    return why;
}

int fm_net_released(struct fm_net *net, struct fm_rxflow *f)
{
    struct fm_session *s = f->s;
    mark_pending(net, s);
    /* More than half the ring not credited back: the sender may be
     * waiting for room for its next message (at most half a ring). */
    if (f->wpos - f->credited > f->ring.size / 2) {
        s->credit_due = 1;
        return 1;
    }
    /* Otherwise the credit waits for a packet going back anyway: a reply
     * in a ping-pong, or the ACK the delayed-ACK timer sends. */
    if (!s->credit_owed)
        s->owed_flow = f->id;
    else if (s->owed_flow != f->id)
        s->owed_flow = FM_FLOW_MANY;
    s->credit_owed = 1;
    if (!s->t_ack_due)
        s->t_ack_due = 1; /* armed at the next output */
    return 0;
}

void fm_net_flow_end(struct fm_net *net, struct fm_txflow *f)
{
    struct fm_session *s = f->s;
    if (f->ending || f->done)
        return;
    f->ending = 1;
    __atomic_fetch_add(&f->gen, 1, __ATOMIC_RELEASE); /* routes to it resolve a new flow */
    if (!f->announced && f->ctl.tail == 0) {
        fm_flow_done(s, f); /* nothing written: the peer never hears of it */
        return;
    }
    s->nending++;
    mark_pending(net, s);
}

void fm_flow_stop_due(struct fm_session *s, struct fm_rxflow *f)
{
    if (s->nstops < FM_STOPS_MAX)
        s->stops[s->nstops++] = f->id;
    else
        s->stops_lost = 1;
}

void fm_flow_stops_rescan(struct fm_session *s)
{
    s->stops_lost = 0;
    s->nstops = 0;
    for (uint32_t i = 0; i < s->rxf_cap && !s->stops_lost; i++)
        if (s->rxf[i] && s->rxf[i]->stop_due)
            fm_flow_stop_due(s, s->rxf[i]);
}

void fm_net_orphan(struct fm_net *net, struct fm_rxflow *f)
{
    f->orphan = 1;
    f->owner = NULL;
    if (!f->stop_due && f->s->state == S_UP) {
        f->stop_due = 1;
        fm_flow_stop_due(f->s, f);
    }
    /* Whatever was in the ring is released with it. */
    __atomic_store_n(&f->ctl.head, f->wpos, __ATOMIC_RELEASE);
    fm_net_released(net, f);
}

/* Everything sent is acknowledged, yet data waits for credit, and no credit
 * came for a retransmission timeout: it may have been lost (credit goes
 * once, and a resent DATA carries none). Ask again, backing off like a
 * retransmission. (Not only after silence both ways: a peer streaming to
 * us kept that from coming for as long as its stream lasted.) */
void fm_flow_credit_check(struct fm_net *net, struct fm_session *s, uint64_t now)
{
    if (s->snd_una != s->snd_nxt || now - s->t_credit < s->rto || !fm_flow_credit_awaited(s))
        return;
    s->t_credit = now;
    s->rail[s->ctl_rail].ping_due = 1;
    s->rto = FM_MIN(s->rto * 2, net->p.rto_max_ns);
    mark_pending(net, s);
}

int fm_flow_credit_awaited(const struct fm_session *s)
{
    /* (A sender waiting for its turn at the peer's budget is quiet on
     * purpose: fm_budget_probe asks, and more rarely.) */
    if (s->grant == FM_GRANT_PAUSE)
        return 0;
    /* Only a ring short of room waits: the receiving endpoint releases
     * space an eighth of its ring at a time, so a flow with a small message
     * out had credit owed after nearly every message, and its sender
     * pinged 1, 2, 4 ms after it, idle or not (a review: 396 PINGs a side
     * in 100 exchanges 20 ms apart). */
    for (uint32_t i = 0; i < s->nlive; i++) {
        const struct fm_txflow *f = s->live[i];
        uint64_t head = __atomic_load_n(&f->ctl.head, __ATOMIC_ACQUIRE);
        uint64_t tail = __atomic_load_n(&f->ctl.tail, __ATOMIC_ACQUIRE);
        if (f->sent > head && f->ring.size - (tail - head) < f->ring.size / 4)
            return 1;
    }
    return 0;
}
