/*
 * Receiving: a datagram checked (fm_wire_check), matched to its session and
 * its incarnation, then acknowledgements and credits taken, and sequenced
 * packets delivered in order (those ahead of a gap held until it fills).
 */
#include "session.h"

#include "core/crc32c.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <string.h>

/* pl: the packet's payload; placed: its DATA bytes are in the ring already
 * (place_early); made: a held FLOW's flow (fm_flow_rx_make). */
static enum fm_drop deliver(struct fm_net *net, struct fm_session *s, const struct fm_wire_hdr *h,
                            const unsigned char *pl, int placed, struct fm_rxflow *made)
{
    switch (h->op) {
    case FM_OP_FLOW: {
        struct fm_wire_flow w;
        memcpy(&w, pl, sizeof(w));
        enum fm_drop why;
        if (!made && !(made = fm_flow_rx_make(net, s, &w, h->seq, &why)))
            return why;
        return fm_flow_rx_open(net, s, made);
    }
    case FM_OP_DATA: {
        struct fm_wire_data d;
        memcpy(&d, pl, sizeof(d));
        if (d.flow >= s->rxf_cap || !s->rxf[d.flow])
            return FM_DROP_FLOW;
        struct fm_rxflow *f = s->rxf[d.flow];
        enum fm_drop why = fm_flow_rx_data(net, f, d.pos, placed ? NULL : pl + sizeof(d),
                                           h->len - sizeof(d));
        s->rx_fresh = 1;
        s->rx_open = f->wpos != f->rec_end;
        return why;
    }
    case FM_OP_FLOW_END: {
        struct fm_wire_flow_end e;
        memcpy(&e, pl, sizeof(e));
        if (e.flow >= s->rxf_cap || !s->rxf[e.flow])
            return FM_DROP_FLOW;
        struct fm_rxflow *f = s->rxf[e.flow];
        s->rxf[e.flow] = NULL; /* the core owns it from here */
        __atomic_store_n(&f->ended, 1, __ATOMIC_RELEASE); /* read by the endpoint */
        net->p.up.flow_end(net->p.up.core, f);
        return FM_DROP_NONE;
    }
    case FM_OP_FLOW_STOP: {
        struct fm_wire_flow_end e;
        memcpy(&e, pl, sizeof(e));
        struct fm_txflow *f = e.flow < s->txf_cap ? s->txf[e.flow] : NULL;
        /* One that names an earlier flow of this id (late, or sent again
         * after its flow's end was acknowledged) stops nothing. */
        if (f && f->announced && f->flow_seq == e.flow_seq && !f->done && !f->ending) {
            /* Nobody waits for this flow's end: it rides with what the
             * session sends next (stopped_ends). */
            f->stopped = 1;
            if (!s->t_ends_due)
                s->t_ends_due = 1;
            fm_net_flow_end(net, f);
        }
        return FM_DROP_NONE;
    }
    default: /* FM_OP_BYE: everything before it is delivered */
        s->bye_received = 1;
        s->ack_now = 1; /* the leaving process waits for this acknowledgement */
        fm_session_gone(net, s, FM_NET_PEER_LEFT);
        return FM_DROP_NONE;
    }
}

/* Makes room to hold packets up to `off` after the next expected one: the
 * table doubles (a session that never sees a gap has none). */
static int hold_room(struct fm_session *s, uint32_t off)
{
    if (off <= s->held_cap)
        return 0;
    uint32_t cap = s->held_cap ? s->held_cap : FM_NET_WIN_MIN;
    while (cap < off)
        cap *= 2;
    struct held *t = calloc(cap, sizeof(*t));
    if (!t)
        return -1;
    /* Whatever is held lies within held_cap after the next expected one. */
    for (uint32_t i = 1; s->held && i <= s->held_cap; i++)
        t[(s->rcv_nxt + i) & (cap - 1)] = *held_at(s, s->rcv_nxt + i);
    free(s->held);
    s->held = t;
    s->held_cap = cap;
    return 0;
}

/* Remembers in hd where DATA that came after a gap lies, its bytes in the
 * ring already and its CRC checked. */
static void hold_placed(struct fm_session *s, struct held *hd, const struct fm_wire_data *d,
                        size_t n)
{
    *hd = (struct held){.pos = d->pos, .flow = d->flow, .nbytes = (uint16_t)n, .placed = 1};
    struct fm_rxflow *f = s->rxf[d->flow];
    f->placed_end = FM_MAX(f->placed_end, d->pos + n);
}

/* DATA that came after a gap, for a flow we know, checked already: its
 * bytes go into the ring now (no copy to keep, no allocation). */
static int place(struct fm_session *s, struct held *hd, const struct fm_wire_hdr *h,
                 const unsigned char *pl)
{
    struct fm_wire_data d;
    memcpy(&d, pl, sizeof(d));
    size_t n = h->len - sizeof(d);
    if (d.flow >= s->rxf_cap || !s->rxf[d.flow] ||
        fm_flow_rx_place(s->rxf[d.flow], d.pos, pl + sizeof(d), n) != 0)
        return 0;
    hold_placed(s, hd, &d, n);
    return 1;
}

/* A sequenced packet, its header h (a short one made full) and its
 * payload pl: deliver it in order, or hold it until its turn. */
static enum fm_drop on_sequenced(struct fm_net *net, struct fm_session *s,
                                 const struct fm_wire_hdr *h, const unsigned char *pl, int placed)
{
    uint32_t off = h->seq - s->rcv_nxt;
    s->echo_seq = h->seq;
    s->echo_due = 1;
    if (fm_seq_lt(h->seq, s->rcv_nxt)) {
        s->ack_now = 1; /* the peer missed our acknowledgement */
        return FM_DROP_DUPLICATE;
    }
    if (off > FM_NET_WIN_MAX)
        return FM_DROP_WINDOW;
    if (off > 0) {
        if (!s->nheld)
            net->rx_gaps++; /* a new gap: the budget takes it for a drop */
        s->ack_now = 1; /* tell the sender about the gap at once */
        if (hold_room(s, off))
            return FM_DROP_NOMEM;
        struct held *hd = held_at(s, h->seq);
        if (hd->pkt || hd->placed)
            return FM_DROP_DUPLICATE;
        if (placed) { /* place_early laid and checked it */
            struct fm_wire_data d;
            memcpy(&d, pl, sizeof(d));
            hold_placed(s, hd, &d, h->len - sizeof(d));
            net->nc[FM_NC_PLACED]++;
            s->nheld++;
            return FM_DROP_NONE;
        }
        if (h->op == FM_OP_DATA && place(s, hd, h, pl)) {
            net->nc[FM_NC_PLACED]++;
            s->nheld++;
            return FM_DROP_NONE;
        }
        /* Held with its full header, whichever it came with; a FLOW with
         * its flow made (an invalid one fails again in its turn). */
        struct fm_rxflow *made = NULL;
        enum fm_drop why = FM_DROP_NONE;
        if (h->op == FM_OP_FLOW) {
            struct fm_wire_flow w;
            memcpy(&w, pl, sizeof(w));
            made = fm_flow_rx_make(net, s, &w, h->seq, &why);
        }
        hd->len = sizeof(*h) + h->len;
        hd->pkt = why == FM_DROP_NOMEM ? NULL : malloc(hd->len);
        if (!hd->pkt) {
            if (made)
                fm_net_rxflow_free(made);
            return FM_DROP_NOMEM;
        }
        hd->made = made;
        memcpy(hd->pkt, h, sizeof(*h));
        memcpy((unsigned char *)hd->pkt + sizeof(*h), pl, h->len);
        s->nheld++;
        return FM_DROP_NONE;
    }
    enum fm_drop why = deliver(net, s, h, pl, placed, NULL);
    if (why == FM_DROP_NOMEM)
        return why; /* not taken: it comes again */
    if (h->op == FM_OP_DATA)
        s->rx_alone = (h->flags & FM_HDR_ALONE) != 0;
    s->rcv_nxt++;
    s->unacked++;
    s->rx_since_tx += s->rx_since_tx < UINT32_MAX;
    /* Then whatever was waiting behind it. */
    struct held *hd;
    while (s->nheld && s->state != S_GONE &&
           ((hd = held_at(s, s->rcv_nxt))->pkt || hd->placed)) {
        /* Out of the table before its delivery: a goodbye ends the session,
         * which lets go of everything still held (nheld wrapped, and the
         * ACK's walk of the held packets never ended). */
        enum fm_drop w2;
        s->nheld--;
        if (hd->placed) {
            hd->placed = 0;
            struct fm_rxflow *f = hd->flow < s->rxf_cap ? s->rxf[hd->flow] : NULL;
            w2 = f ? fm_flow_rx_data(net, f, hd->pos, NULL, hd->nbytes) : FM_DROP_FLOW;
        } else {
            unsigned char *pkt = hd->pkt;
            struct fm_rxflow *made = hd->made;
            *hd = (struct held){0};
            struct fm_wire_hdr h2;
            memcpy(&h2, pkt, sizeof(h2));
            w2 = deliver(net, s, &h2, pkt + sizeof(h2), 0, made);
            free(pkt);
        }
        if (w2 != FM_DROP_NONE)
            net->drops[w2]++;
        s->rcv_nxt++;
        s->unacked++;
        s->rx_since_tx += s->rx_since_tx < UINT32_MAX;
    }
    /* Enough for an ACK of its own. In an exchange (we sent DATA back
     * lately, or the sender had nothing else in flight) and unless the
     * sender is held to a grant, it waits while a message is still
     * arriving, and until the program had a turn with what came: an answer
     * it sends carries the acknowledgement, which spares the receiver a
     * send on the message's way to it. A lone message waits whole however
     * long (at most a batch of the sender's, FM_UDP_SEND_MAX packets): its
     * sender has sent all of it and waits for nothing else. */
    uint32_t every = fm_budget_ack_every(net, s);
    if (s->unacked >= every) {
        if (s->grant_given ||
            (!s->rx_alone && (s->unacked >= ACK_DEFER_MAX || s->rx_since_tx >= ACK_DEFER_MAX)))
            s->ack_now = 1;
        else
            s->ack_soon = 1;
    }
    if (!s->t_ack_due)
        s->t_ack_due = 1; /* armed at the next output, with its clock */
    return why;
}

static size_t payload_size(uint8_t op)
{
    switch (op) {
    case FM_OP_HELLO:
    case FM_OP_HELLO_ACK: return sizeof(struct fm_wire_hello);
    case FM_OP_FLOW: return sizeof(struct fm_wire_flow);
    case FM_OP_DATA: return sizeof(struct fm_wire_data);
    case FM_OP_ACK: return sizeof(struct fm_wire_ack);
    case FM_OP_FLOW_END:
    case FM_OP_FLOW_STOP: return sizeof(struct fm_wire_flow_end);
    default: return 0;
    }
}

/* Lays DATA packet pkt (header h, of hlen bytes on the wire, data header
 * d) into flow f while taking its CRC: 1 if sound, -1 if corrupt, 0 if f
 * refuses the range. */
static int place_checked(struct fm_rxflow *f, const unsigned char *pkt, size_t len,
                         const struct fm_wire_hdr *h, size_t hlen, const struct fm_wire_data *d)
{
    /* The headers as they were sealed, CRC field 0, as one block (full
     * ones are 64 bytes, short ones go after zeros): the CRC of the whole
     * packet then folds in one pass with the copy. */
    unsigned char hdrs[sizeof(*h) + sizeof(*d)];
    _Static_assert(sizeof(hdrs) == 64, "a DATA packet's full headers are one block");
    size_t n = hlen + sizeof(*d), pad = sizeof(hdrs) - n;
    memset(hdrs, 0, pad);
    fm_wire_crc_view(hdrs + pad, pkt, n);
    uint32_t crc = fm_crc32c_pad_start(pad);
    if (fm_flow_rx_place_crc(f, d->pos, pkt + n, len - n, hdrs, &crc) != 0)
        return 0;
    return crc == h->crc ? 1 : -1;
}

/* The session a full header names by job, ranks and epoch, or NULL. */
static struct fm_session *session_of(const struct fm_net *net, const struct fm_wire_hdr *h)
{
    if (h->job == net->job && h->dst_rank == (uint32_t)net->p.rank &&
        h->src_rank < (uint32_t)net->p.size)
        return net->sess[h->src_rank];
    if (net->domain && h->job == net->domain && h->dst_rank == FM_WIRE_NAMED &&
        h->src_rank == FM_WIRE_NAMED)
        return fm_session_named(net, h->src_epoch);
    return NULL;
}

/*
 * Reads the header of the packet at pkt into h. A short DATA's is made
 * full from the session its token names, *s (NULL: none, or flags a short
 * header cannot have, and h is zeroed); a full one is copied, and *s
 * is NULL. Returns the header's length on the wire, 0 if the packet is
 * shorter than that.
 */
static size_t read_hdr(const struct fm_net *net, const unsigned char *pkt, size_t len,
                       struct fm_wire_hdr *h, struct fm_session **s)
{
    *s = NULL;
    if (len >= sizeof(struct fm_wire_short) && pkt[1] == FM_OP_DATA_SHORT) {
        struct fm_wire_short b;
        memcpy(&b, pkt, sizeof(b));
        struct fm_session *t = fm_session_by_token(net, b.token);
        if (!t || (b.flags & ~FM_SHORT_FLAGS)) {
            memset(h, 0, sizeof(*h)); /* version 0: no train goes on with it */
            return sizeof(b);         /* fm_wire_check_short or the token drops it */
        }
        /* Written as six words: the checks that follow read fields two
         * at a time, and a load that spans stores of different fields
         * cannot take its value from them (a stall of a dozen cycles). */
        uint64_t w[6] = {
            b.version | (uint64_t)FM_OP_DATA << 8 | (uint64_t)b.flags << 16 |
                (uint64_t)b.crc << 32,
            t->named ? net->domain : net->job,
            t->named ? (uint64_t)FM_WIRE_NAMED << 32 | FM_WIRE_NAMED
                     : (uint64_t)net->p.rank << 32 | (uint32_t)t->rank,
            (uint64_t)net->p.epoch << 32 | t->peer_epoch,
            (uint64_t)b.ack << 32 | b.seq,
            b.len | (uint64_t)b.rail << 16};
        _Static_assert(sizeof(w) == sizeof(*h), "six words make a header");
        memcpy(h, w, sizeof(w));
        *s = t;
        return sizeof(b);
    }
    if (len < sizeof(*h))
        return 0;
    memcpy(h, pkt, sizeof(*h));
    return sizeof(*h);
}

/*
 * The common cases of a stream: the next DATA of a flow with nothing held,
 * or DATA after a gap (a loss) that lands beyond everything laid so far.
 * Its bytes go into the ring while their CRC is taken, one pass where a
 * check and then a copy took two. Until the CRC agrees the header is
 * trusted only as far as where the bytes go: space of a flow of the session
 * it names that nobody reads and that holds nothing checked (in order,
 * nothing is held, so nothing was placed there, and the word the reader
 * looks at next goes to the stash; after a gap, from the flow's next
 * expected byte and its placed_end on). A packet that fails the CRC leaves
 * bytes there that the packet really due there overwrites when it comes,
 * before anything is read. A packet that falls into a hole below
 * placed_end (a retransmission) is checked first and copied after, by the
 * caller. Returns 1 if the packet is sound and its bytes in place, -1 if it
 * failed the CRC, 0 if it is not such a packet (untouched: fm_wire_check
 * judges it).
 */
static int place_early(struct fm_net *net, const unsigned char *pkt, size_t len,
                       const struct fm_wire_hdr *h, size_t hlen, struct fm_session *s)
{
    struct fm_wire_data d;
    if (len < hlen + sizeof(d) + FM_REC_HDR)
        return 0;
    if (h->version != FM_WIRE_VERSION || h->op != FM_OP_DATA || hlen + h->len != len)
        return 0;
    if (hlen == sizeof(*h))
        s = session_of(net, h);
    if (!s || s->state != S_UP || !s->rcv_known || h->src_epoch != s->peer_epoch ||
        (h->dst_epoch != net->p.epoch && h->dst_epoch != 0))
        return 0;
    memcpy(&d, pkt + hlen, sizeof(d));
    struct fm_rxflow *f = d.flow < s->rxf_cap ? s->rxf[d.flow] : NULL;
    if (!f)
        return 0;
    uint32_t off = h->seq - s->rcv_nxt;
    if (off == 0) {
        if (s->nheld || d.pos != f->wpos)
            return 0;
    } else {
        struct held *hd;
        if (off > FM_NET_WIN_MAX || off > s->held_cap || (hd = held_at(s, h->seq))->pkt ||
            hd->placed || d.pos < FM_MAX(f->wpos, f->placed_end))
            return 0;
    }
    return place_checked(f, pkt, len, h, hlen, &d);
}

/*
 * The next packet of a train: in the same batch of receives (a GRO
 * datagram's packets, or one recvmmsg's), the DATA that continues the last
 * packet delivered in order, from the same peer and flow, with the same
 * header but for its sequence number, CRC and length. What that header was
 * checked for (job, ranks, epochs, the session's state, the rail, the
 * acknowledgement it carried) holds for this one too, and the rail and
 * liveness updates were made at the same `now`. So it is only checked
 * while copied into place (as place_early does) and delivered. Returns 1
 * if it was handled, with *why, 0 for the full path.
 */
static int train_next(struct fm_net *net, const unsigned char *pkt, size_t len,
                      const struct fm_wire_hdr *h, size_t hlen, int rail, uint64_t now,
                      enum fm_drop *why)
{
    struct fm_session *s = net->train.s;
    if (!s || !hlen || net->train.now != now || net->train.rail != rail)
        return 0;
    struct fm_wire_data d;
    const struct fm_wire_hdr *t = &net->train.h;
    if (len < hlen + sizeof(d) + FM_REC_HDR)
        return 0;
    memcpy(&d, pkt + hlen, sizeof(d));
    struct fm_rxflow *f = net->train.f;
    if (h->version != t->version || h->op != t->op || h->flags != t->flags || h->job != t->job ||
        h->src_rank != t->src_rank || h->dst_rank != t->dst_rank ||
        h->src_epoch != t->src_epoch || h->dst_epoch != t->dst_epoch || h->ack != t->ack ||
        h->rail != t->rail || h->seq != t->seq + 1 || hlen + h->len != len ||
        d.flow != f->id || s->rxf[f->id] != f || s->state != S_UP || s->rcv_nxt != h->seq ||
        s->nheld || d.pos != f->wpos)
        return 0;
    int placed = place_checked(f, pkt, len, h, hlen, &d);
    if (!placed)
        return 0;
    if (placed < 0) {
        net->train.s = NULL;
        *why = FM_DROP_CRC;
        return 1;
    }
    net->nc[FM_NC_RX_PACKETS]++;
    net->nc[FM_NC_RX_BYTES] += len;
    fm_budget_on_data(net, s, len, (h->flags & FM_HDR_ALONE) != 0, now);
    *why = on_sequenced(net, s, h, pkt + hlen, 1);
    s->t_busy = now;
    mark_pending(net, s);
    net->train.h.seq = h->seq;
    return 1;
}

/* The packet just handled by the full path starts a train if it was DATA
 * delivered in order, carrying no credit (which the train does not read). */
static void train_start(struct fm_net *net, struct fm_session *s, const struct fm_wire_hdr *h,
                        const unsigned char *pl, int rail, uint64_t now)
{
    struct fm_wire_data d;
    memcpy(&d, pl, sizeof(d));
    if (h->op != FM_OP_DATA || (h->flags & FM_HDR_CREDIT) || s->state != S_UP ||
        s->rcv_nxt != h->seq + 1 || s->nheld || d.flow >= s->rxf_cap || !s->rxf[d.flow])
        return;
    net->train.s = s;
    net->train.f = s->rxf[d.flow];
    net->train.h = *h;
    net->train.now = now;
    net->train.rail = rail;
}

void fm_net_input_done(struct fm_net *net) { net->train.s = NULL; }

enum fm_drop fm_net_input(struct fm_net *net, void *pkt, size_t len, int rail,
                          const struct sockaddr_in *from, uint64_t now)
{
    if (rail < 0 || rail >= net->p.nrails)
        rail = 0;
    struct fm_wire_hdr h;
    struct fm_session *s; /* a short DATA's, by its token */
    size_t hlen = read_hdr(net, pkt, len, &h, &s);
    int brief = hlen == sizeof(struct fm_wire_short);
    enum fm_drop fast;
    if (train_next(net, pkt, len, &h, hlen, rail, now, &fast)) {
        if (fast != FM_DROP_NONE)
            net->drops[fast]++;
        return fast;
    }
    net->train.s = NULL;
    int placed = hlen && (s || !brief) ? place_early(net, pkt, len, &h, hlen, s) : 0;
    enum fm_drop why = placed > 0   ? FM_DROP_NONE
                       : placed < 0 ? FM_DROP_CRC
                       : brief      ? fm_wire_check_short(pkt, len)
                                    : fm_wire_check(pkt, len, net->job, net->domain,
                                                    (uint32_t)net->p.rank, (uint32_t)net->p.size);
    if (!why && brief && !s)
        why = FM_DROP_FOREIGN; /* sound, but its token is none of ours */
    const unsigned char *pl = (const unsigned char *)pkt + hlen;
    if (why)
        goto drop;
    if (h.len < payload_size(h.op) || (h.op == FM_OP_HELLO && h.dst_epoch != 0)) {
        why = FM_DROP_OPCODE;
        goto drop;
    }
    net->nc[FM_NC_RX_PACKETS]++;
    net->nc[FM_NC_RX_BYTES] += len;
    if (h.op == FM_OP_HELLO || h.op == FM_OP_HELLO_ACK) {
        struct fm_wire_hello hello;
        memcpy(&hello, pl, sizeof(hello));
        /* The MAC first: nothing is made for a request without the key. */
        int named = h.src_rank == FM_WIRE_NAMED;
        size_t extra = h.len - sizeof(hello);
        if (fm_wire_hello_mac(named ? net->domain_key : net->p.key, &h, &hello,
                              pl + sizeof(hello), extra) != hello.mac) {
            why = FM_DROP_AUTH;
            goto drop;
        }
        s = named ? fm_session_named(net, h.src_epoch) : NULL;
        if (named && !s && h.op == FM_OP_HELLO && net->p.up.peer_named) {
            int peer = net->p.up.peer_named(net->p.up.core, pl + sizeof(hello), extra,
                                            h.src_epoch);
            s = peer >= net->p.size ? fm_session_get(net, peer) : NULL;
        } else if (!named) {
            s = h.op == FM_OP_HELLO ? fm_session_get(net, (int)h.src_rank) : net->sess[h.src_rank];
        }
        if (!s) {
            why = named ? FM_DROP_STALE : FM_DROP_NOSESSION;
            goto drop;
        }
        why = fm_session_on_hello(net, s, rail, &h, &hello, from);
        if (why)
            goto drop;
        s->t_last_rx = now;
        fm_rail_heard(net, s, rail, h.rail, h.op, from, now);
        return FM_DROP_NONE;
    }
    if (!brief)
        s = h.src_rank == FM_WIRE_NAMED ? fm_session_named(net, h.src_epoch)
                                        : net->sess[h.src_rank];
    if (!s) {
        why = FM_DROP_NOSESSION;
        goto drop;
    }
    if (s->state == S_GONE && s->bye_received && h.src_epoch == s->peer_epoch &&
        h.op != FM_OP_ACK && h.seq && fm_seq_lt(h.seq, s->rcv_nxt)) {
        /* A retransmission of what came before the peer's goodbye: our
         * acknowledgement was lost, send it again. */
        s->ack_now = 1;
        mark_pending(net, s);
        why = FM_DROP_DUPLICATE;
        goto drop;
    }
    if (s->state != S_UP) {
        why = s->state == S_GONE ? FM_DROP_STALE : FM_DROP_NOSESSION;
        goto drop;
    }
    /* dst_epoch 0: sent right after the HELLO, before its answer came. */
    if (h.src_epoch != s->peer_epoch || (h.dst_epoch != net->p.epoch && h.dst_epoch != 0)) {
        why = FM_DROP_STALE;
        goto drop;
    }
    s->t_last_rx = now;
    s->probed = 0;
    /* A packet from a connected sender's socket (udp.c) has a source that
     * is no address to answer on. */
    fm_rail_heard(net, s, rail, h.rail, h.op, h.flags & FM_HDR_SIDE_PORT ? NULL : from, now);
    if ((h.flags & FM_HDR_ACK_VALID) && h.op != FM_OP_ACK)
        fm_loss_on_ack(net, s, h.ack, NULL, NULL, -1, 0, now);
    switch (h.op) {
    case FM_OP_ACK: {
        struct fm_wire_ack a;
        memcpy(&a, pl, sizeof(a));
        size_t credits = a.ncredit * sizeof(struct fm_wire_credit);
        if (h.len != sizeof(a) + credits + a.nsack * sizeof(struct fm_wire_sack) ||
            a.nsack > FM_WIRE_SACK_MAX || !(h.flags & FM_HDR_ACK_VALID) ||
            !fm_wire_ring_max_valid(a.ring_max)) {
            why = FM_DROP_OPCODE;
            goto drop;
        }
        struct fm_wire_sack sack[FM_WIRE_SACK_MAX];
        memcpy(sack, pl + sizeof(a) + credits, sizeof(sack[0]) * a.nsack);
        if (s->grant != a.grant && (s->grant == FM_GRANT_TRICKLE || s->grant == FM_GRANT_PAUSE)) {
            s->probes = 0;
            mark_pending(net, s); /* its turn: what waited may go */
        }
        s->grant = a.grant;
        s->t_grant = now;
        s->ring_max = a.ring_max;
        fm_loss_on_ack(net, s, h.ack, &a, sack, h.flags & FM_HDR_ECHO ? (int64_t)h.seq : -1,
                       (h.flags & FM_HDR_STATUS) != 0, now);
        struct fm_wire_credit c[FM_NET_MAX_CREDITS];
        int n = FM_MIN(a.ncredit, FM_NET_MAX_CREDITS);
        memcpy(c, pl + sizeof(a), sizeof(c[0]) * (size_t)n);
        fm_flow_credits(s, c, n, h.ack);
        return FM_DROP_NONE;
    }
    case FM_OP_PING:
        /* Credits are sent once; an ACK that carried one may have been
         * lost, and a sender without credit sends nothing that would
         * bring it back. A PING asks for all of them again, on the rail it
         * came on (which it probes). */
        s->rail[rail].reply_due = 1;
        if (!s->credit_round)
            s->credit_round = UINT32_MAX; /* every slot, clamped when it starts */
        if (h.flags & FM_HDR_STATUS)
            s->status_due = 1;
        mark_pending(net, s);
        return FM_DROP_NONE;
    case FM_OP_DATA:
    case FM_OP_FLOW:
    case FM_OP_FLOW_END:
    case FM_OP_FLOW_STOP:
    case FM_OP_BYE:
        if ((h.op == FM_OP_FLOW && h.len != sizeof(struct fm_wire_flow)) ||
            ((h.op == FM_OP_FLOW_END || h.op == FM_OP_FLOW_STOP) &&
             h.len != sizeof(struct fm_wire_flow_end)) ||
            (h.op == FM_OP_BYE && h.len != 0)) {
            why = FM_DROP_OPCODE;
            goto drop;
        }
        if (h.op == FM_OP_DATA) {
            fm_budget_on_data(net, s, len, (h.flags & FM_HDR_ALONE) != 0, now);
            if ((h.flags & FM_HDR_CREDIT) && (h.flags & FM_HDR_ACK_VALID)) {
                struct fm_wire_data d;
                memcpy(&d, pl, sizeof(d));
                fm_flow_credit_lo(s, h.credit_flow, d.credit_lo, h.ack);
            }
        }
        why = on_sequenced(net, s, &h, pl, placed);
        s->t_busy = now;
        mark_pending(net, s);
        if (why)
            goto drop;
        if (placed > 0)
            train_start(net, s, &h, pl, rail, now);
        return FM_DROP_NONE;
    default:
        why = FM_DROP_OPCODE;
        goto drop;
    }
drop:
    net->drops[why]++;
    fm_debug("net", "dropped a %zu-byte packet: %s", len, fm_drop_names[why]);
    if ((why == FM_DROP_FOREIGN || why == FM_DROP_AUTH) && len >= sizeof(h)) {
        memcpy(&h, pkt, sizeof(h));
        if (h.op == FM_OP_HELLO && h.src_rank == FM_WIRE_NAMED)
            fm_log_limited(FM_LOG_ERROR, "net", 1,
                           "a process at %s:%u asked for a session under another domain key "
                           "(or before this one called fm_ep_name or fm_addr_insert), and is "
                           "refused: give both the same FM_KEY, or the same key file",
                           from ? inet_ntoa(from->sin_addr) : "?",
                           from ? ntohs(from->sin_port) : 0);
    }
    return why;
}
