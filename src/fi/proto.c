/* The provider's protocol over fastmsg messages (fmfi.h has the wire):
 * sending (eager, rendezvous, RMA), receiving and tag matching, and the
 * completions they make. Every function runs with the domain lock held. */
#include "core/core_api.h"
#include "core/name.h"
#include "fmfi.h"

#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define HDR sizeof(struct fmfi_hdr)
#define RX_BATCH 64 /* messages one progress call takes from an endpoint */
/* Past this many unexpected messages, a progress call takes one message
 * only: the rest wait in the ring, whose sender then waits for room. A
 * sender running ahead of its receiver is held back by the ring, as it
 * should be, instead of growing the receiver's unexpected queue without
 * bound; a receive waiting for a later message still gets it, one message
 * per call. */
#define UNEXP_SOFT 256

/* ---- ops ------------------------------------------------------------------------ */

struct fmfi_op *fmfi_op_new(struct fmfi_ep *ep)
{
    struct fmfi_op *op;
    if (!fmfi_list_empty(&ep->free_ops)) {
        op = fmfi_container(ep->free_ops.next, struct fmfi_op, link);
        fmfi_list_del(&op->link);
    } else if (!(op = malloc(sizeof(*op)))) {
        return NULL;
    }
    memset(op, 0, sizeof(*op));
    fmfi_list_init(&op->link);
    return op;
}

void fmfi_op_free(struct fmfi_ep *ep, struct fmfi_op *op)
{
    free(op->inject);
    op->inject = NULL;
    fmfi_list_push(&ep->free_ops, &op->link);
}

static struct fmfi_op *find_id(struct fmfi_list *q, uint64_t id)
{
    struct fmfi_list *pos;
    fmfi_list_each(pos, q)
    {
        struct fmfi_op *op = fmfi_container(pos, struct fmfi_op, link);
        if (op->id == id)
            return op;
    }
    return NULL;
}

static bool same_process(fm_addr a, fm_addr b) { return (a >> 32) == (b >> 32); }

/* Whether who's loss was handled (everything it sent has been read), and
 * the peer is not back (a named peer may come back with its index). */
static bool is_lost(const struct fmfi_ep *ep, fm_addr who)
{
    for (size_t i = 0; i < ep->nlost; i++)
        if (same_process(ep->lost[i], who))
            return !fm_core_peer_up(ep->dom->ctx, fm_addr_rank_of(who));
    return false;
}

/* Remembers a lost peer, for receives directed at it later. (Without
 * memory a later directed receive waits, as before.) */
static void note_lost(struct fmfi_ep *ep, fm_addr who)
{
    if (is_lost(ep, who))
        return;
    if (ep->nlost == ep->lost_cap) {
        size_t cap = ep->lost_cap ? 2 * ep->lost_cap : 4;
        fm_addr *a = realloc(ep->lost, cap * sizeof(*a));
        if (!a)
            return;
        ep->lost = a;
        ep->lost_cap = cap;
    }
    ep->lost[ep->nlost++] = who;
}

/* ---- completions ------------------------------------------------------------------ */

static uint64_t op_cq_flags(const struct fmfi_op *op)
{
    switch (op->kind) {
    case OP_SEND:
        return FI_SEND | (op->tagged ? FI_TAGGED : FI_MSG);
    case OP_RECV:
        return FI_RECV | (op->tagged ? FI_TAGGED : FI_MSG);
    case OP_WRITE:
        return FI_RMA | FI_WRITE;
    default:
        return FI_RMA | FI_READ;
    }
}

static struct fmfi_cntr *op_cntr(struct fmfi_ep *ep, const struct fmfi_op *op)
{
    switch (op->kind) {
    case OP_SEND:
        return ep->send_cntr;
    case OP_RECV:
        return ep->recv_cntr;
    case OP_WRITE:
        return ep->write_cntr;
    default:
        return ep->read_cntr;
    }
}

/* Ends an op: its completion (or error, err > 0), its counter, and frees it
 * unless it is a multi-receive buffer still posted. */
static void complete(struct fmfi_ep *ep, struct fmfi_op *op, int err)
{
    if (op->kind == OP_CTL) {
        fmfi_op_free(ep, op);
        return;
    }
    /* The last message of a spent multi-receive buffer releases it: not the
     * one that used it up, while an earlier one may still be arriving. */
    struct fmfi_op *parent = op->parent;
    if (parent && --parent->shares == 0 && parent->spent) {
        op->release_flag = FI_MULTI_RECV;
        fmfi_list_del(&parent->link);
        fmfi_op_free(ep, parent);
    }
    bool rx = op->kind == OP_RECV;
    if (!rx)
        ep->tx_ops--;
    struct fmfi_cq *cq = rx ? ep->rx_cq : ep->tx_cq;
    bool sel = rx ? ep->rx_sel : ep->tx_sel;
    struct fmfi_comp c = {
        .op_context = op->context,
        .flags = op_cq_flags(op) | op->release_flag,
        .src = FI_ADDR_NOTAVAIL,
    };
    if (rx) {
        c.len = op->msg_len < op->len ? op->msg_len : op->len;
        c.buf = op->iov[0].iov_base;
        c.tag = op->hdr.tag;
        if (op->hdr.flags & FMFI_F_DATA) {
            c.data = op->hdr.data;
            c.flags |= FI_REMOTE_CQ_DATA;
        }
        if (ep->caps & FI_SOURCE)
            c.src = fmfi_av_fi(ep->av, op->src);
    }
    if (err) {
        fmfi_cntr_err(op_cntr(ep, op));
        if (cq)
            fmfi_cq_push_err(cq, &c, err, err == FI_ETRUNC ? op->msg_len - op->len : 0);
    } else {
        fmfi_cntr_inc(op_cntr(ep, op));
        bool wanted = !sel || (op->flags & FI_COMPLETION) || op->release_flag;
        if (cq && wanted && !op->silent)
            fmfi_cq_push(cq, &c);
    }
    fmfi_op_free(ep, op);
}

static void complete_rx(struct fmfi_ep *ep, struct fmfi_op *op)
{
    complete(ep, op, op->msg_len > op->len ? FI_ETRUNC : 0);
}

/* ---- sending ---------------------------------------------------------------------- */

/* Appends to out[n..] the part of iov from `off` on, at most `max` bytes;
 * returns the new count. */
static int iov_slice(const struct iovec *iov, size_t cnt, size_t off, size_t max,
                     struct iovec *out, int n)
{
    for (size_t i = 0; i < cnt && max; i++) {
        if (off >= iov[i].iov_len) {
            off -= iov[i].iov_len;
            continue;
        }
        size_t take = iov[i].iov_len - off;
        if (take > max)
            take = max;
        out[n++] = (struct iovec){(char *)iov[i].iov_base + off, take};
        max -= take;
        off = 0;
    }
    return n;
}

/* The iovecs of op's data (its own copy if it has one). */
static int data_iov(const struct fmfi_op *op, size_t off, size_t max, struct iovec *out, int n)
{
    if (op->inject)
        return iov_slice(&(struct iovec){op->inject, op->len}, 1, off, max, out, n);
    return iov_slice(op->iov, op->iovcnt, off, max, out, n);
}

/* Sends one fastmsg message: hdr, then op's data from `off`, at most `max`
 * bytes. Returns the payload bytes taken, or a negative FM_E* code. */
static ssize_t send_part(struct fmfi_ep *ep, fm_addr dst, const struct fmfi_hdr *h,
                         const struct fmfi_op *op, size_t off, size_t max)
{
    struct iovec iov[1 + FMFI_IOV_MAX];
    iov[0] = (struct iovec){(void *)h, HDR};
    int n = op && max ? data_iov(op, off, max, iov, 1) : 1;
    ssize_t g = fm_send(ep->fm, dst, iov, n);
    if (g < 0)
        return g;
    if ((size_t)g < HDR) {
        /* A link takes at least a quarter of its largest message: only a
         * misconfigured FM_SHM_MAX_MSG below 4 headers gets here. */
        FMFI_WARN(FI_LOG_EP_DATA, "fastmsg took %zd bytes of a header: raise FM_SHM_MAX_MSG\n",
                  g);
        return FM_EPEERLOST;
    }
    return g - (ssize_t)HDR;
}

/* An RTS carries the sender's buffers, for a receiver on this node that
 * reads them itself; then the op waits for CTS or FIN. */
static int send_rts(struct fmfi_ep *ep, struct fmfi_op *op)
{
    struct iovec v[FMFI_IOV_MAX];
    int n = data_iov(op, 0, op->len, v, 0);
    struct {
        uint64_t addr, len;
    } w[FMFI_IOV_MAX];
    for (int i = 0; i < n; i++)
        w[i].addr = (uintptr_t)v[i].iov_base, w[i].len = v[i].iov_len;
    op->hdr.iovcnt = (uint16_t)n;
    struct iovec iov[2] = {{&op->hdr, HDR}, {w, (size_t)n * sizeof(w[0])}};
    ssize_t g = fm_send(ep->fm, op->peer, iov, 2);
    if (g < 0)
        return (int)g;
    if ((size_t)g != HDR + iov[1].iov_len)
        return FM_EPEERLOST; /* see send_part */
    op->state = ST_WAIT;
    fmfi_list_push(&ep->tx_wait, &op->link);
    return 0;
}

/* Moves a send, RMA or control op forward. Returns 0 when it is wholly
 * handed over (or waits for an answer), FM_EAGAIN when the ring is full, or
 * another FM_E* code when the peer cannot be reached. */
static int tx_advance(struct fmfi_ep *ep, struct fmfi_op *op)
{
    for (;;) {
        struct fmfi_hdr h = op->hdr;
        size_t total = op->len, off = op->done;
        if (op->state == ST_PARTIAL) {
            h = (struct fmfi_hdr){.op = FMFI_CONT, .off = off};
        } else if (op->state == ST_STREAM) {
            h = (struct fmfi_hdr){.op = FMFI_DATA, .id = op->remote_id, .off = off};
            if (op->kind == OP_CTL)
                h.op = FMFI_READ_RESP, h.id = op->hdr.id;
            total = op->want;
        }
        if (h.op == FMFI_RTS)
            return send_rts(ep, op);
        bool carries = op->state != ST_QUEUED || h.op == FMFI_EAGER || h.op == FMFI_WRITE;
        ssize_t g = send_part(ep, op->peer, &h, carries ? op : NULL, off,
                              carries ? total - off : 0);
        if (g < 0)
            return (int)g;
        op->done += (size_t)g;
        if (op->state == ST_QUEUED)
            op->state = carries ? ST_PARTIAL : ST_WAIT;
        if (op->state == ST_PARTIAL && op->done == total) {
            if (op->kind == OP_SEND && !(op->hdr.flags & FMFI_F_ACKREQ)) {
                complete(ep, op, 0);
                return 0;
            }
            op->state = ST_WAIT; /* an ACK ends a write or a DELIVERY_COMPLETE send */
        }
        if (op->state == ST_STREAM && op->done == total) {
            if (op->kind != OP_SEND || !(op->hdr.flags & FMFI_F_ACKREQ)) {
                complete(ep, op, 0);
                return 0;
            }
            op->state = ST_WAIT; /* FI_DELIVERY_COMPLETE: the receiver's ACK ends it */
        }
        if (op->state == ST_WAIT) {
            if (op->kind == OP_CTL)
                fmfi_op_free(ep, op);
            else
                fmfi_list_push(&ep->tx_wait, &op->link);
            return 0;
        }
    }
}

static void fail_op(struct fmfi_ep *ep, struct fmfi_op *op, int fm_err)
{
    complete(ep, op, -fmfi_fm_err(fm_err));
}

/* Whether an op that met this error goes again later: a full ring, or
 * memory short for a moment (a route to grow, now that a flow ends after
 * FM_NET_FLOW_IDLE_MS and is resolved again). A control message failed
 * otherwise was dropped while its peer lived, which then waited for ever. */
static int again(int rc)
{
    return rc == FM_EAGAIN || rc == FM_ENOMEM;
}

/* Runs a queue in order; stops at the first op whose ring is full. */
static int run_queue(struct fmfi_ep *ep, struct fmfi_list *q)
{
    int events = 0;
    while (!fmfi_list_empty(q)) {
        struct fmfi_op *op = fmfi_container(q->next, struct fmfi_op, link);
        fmfi_list_del(&op->link);
        int rc = tx_advance(ep, op);
        if (again(rc)) {
            /* back at the head: order to each peer is kept */
            op->link.next = q->next;
            op->link.prev = q;
            q->next->prev = &op->link;
            q->next = &op->link;
            break;
        }
        if (rc)
            fail_op(ep, op, rc);
        events++;
    }
    return events;
}

/* A read's answer that cannot go whole now is copied: the answer streams
 * from the registered memory, and a write the peer sent after its read,
 * copied in as it comes, would change what the read returns (the provider
 * advertises FI_ORDER_WAR). Without memory for the copy it streams from
 * the region, as before. */
static void keep_answer(struct fmfi_op *op)
{
    uint8_t *copy = malloc(op->len);
    if (!copy) {
        FMFI_WARN(FI_LOG_EP_DATA, "out of memory for a read's answer: a later write may "
                                  "show through\n");
        return;
    }
    memcpy(copy + op->done, (uint8_t *)op->iov[0].iov_base + op->done, op->len - op->done);
    op->iov[0].iov_base = copy;
    op->inject = copy; /* freed with the op */
}

void fmfi_tx_start(struct fmfi_ep *ep, struct fmfi_op *op)
{
    if (op->kind != OP_CTL) {
        op->id = ++ep->next_id;
        op->hdr.id = op->id;
        ep->tx_ops++;
    }
    struct fmfi_list *q = op->kind == OP_CTL ? &ep->ctl_queue : &ep->tx_queue;
    if (fmfi_list_empty(q)) {
        int rc = tx_advance(ep, op);
        if (rc == 0)
            return;
        if (!again(rc)) {
            fail_op(ep, op, rc);
            return;
        }
    }
    if (op->kind == OP_CTL && op->done < op->len)
        keep_answer(op);
    fmfi_list_push(q, &op->link);
}

/* A control message: a header, and data from `src` (READ_RESP). */
void fmfi_send_ctl(struct fmfi_ep *ep, fm_addr dst, const struct fmfi_hdr *h,
                     uint8_t *data, size_t len)
{
    struct fmfi_op *op = fmfi_op_new(ep);
    if (!op) {
        FMFI_WARN(FI_LOG_EP_DATA, "out of memory for a control message: peer will wait\n");
        return;
    }
    op->kind = OP_CTL;
    op->peer = dst;
    op->hdr = *h;
    if (len) {
        op->iov[0] = (struct iovec){data, len};
        op->iovcnt = 1;
        op->len = op->want = len;
        op->state = ST_STREAM;
    }
    fmfi_tx_start(ep, op);
}

/* ---- receiving: where the bytes go ---------------------------------------------------- */

/* Copies a message's payload segments (after `skip` bytes) into op's
 * buffers at `off`, as far as they reach. */
static void fill(struct fmfi_op *op, size_t off, const struct iovec *seg, int nseg, size_t skip,
                 size_t len)
{
    if (off < op->len)
        fmfi_iov_copy(op->iov, op->iovcnt, off, seg, (size_t)nseg, skip, len);
}

static struct fmfi_inbound *inbound(struct fmfi_ep *ep, fm_addr src)
{
    for (size_t i = 0; i < ep->ninb; i++)
        if (ep->inb[i].src == src)
            return &ep->inb[i];
    return NULL;
}

/* The inbound slot filling unexpected message ux, if any. */
static struct fmfi_inbound *inbound_of(struct fmfi_ep *ep, const struct fmfi_unexp *ux)
{
    for (size_t i = 0; i < ep->ninb; i++)
        if (ep->inb[i].unexp == ux)
            return &ep->inb[i];
    return NULL;
}

static void inbound_del(struct fmfi_ep *ep, struct fmfi_inbound *in);

struct fmfi_inbound *fmfi_inbound_add(struct fmfi_ep *ep, fm_addr src)
{
    struct fmfi_inbound *old = inbound(ep, src);
    if (old) { /* a new first part: the sender's previous message ends unfinished */
        struct fmfi_op *op = old->op;
        inbound_del(ep, old);
        if (op)
            complete(ep, op, FI_EIO);
    }
    if (ep->ninb == ep->inb_cap) {
        size_t cap = ep->inb_cap ? ep->inb_cap * 2 : 8;
        void *p = realloc(ep->inb, cap * sizeof(*ep->inb));
        if (!p)
            return NULL;
        ep->inb = p;
        ep->inb_cap = cap;
    }
    struct fmfi_inbound *in = &ep->inb[ep->ninb++];
    memset(in, 0, sizeof(*in));
    in->src = src;
    return in;
}

static void inbound_del(struct fmfi_ep *ep, struct fmfi_inbound *in)
{
    *in = ep->inb[--ep->ninb];
}

void fmfi_ack(struct fmfi_ep *ep, fm_addr dst, uint64_t id, bool refused)
{
    struct fmfi_hdr h = {.op = FMFI_ACK, .id = id, .flags = refused ? FMFI_F_ERR : 0};
    fmfi_send_ctl(ep, dst, &h, NULL, 0);
}

/* A whole message has reached its receive. */
static void rx_done(struct fmfi_ep *ep, struct fmfi_op *op)
{
    if (op->hdr.flags & FMFI_F_ACKREQ)
        fmfi_ack(ep, op->src, op->hdr.id, false);
    complete_rx(ep, op);
}

/* ---- receiving: matching ------------------------------------------------------------- */

static bool matches(const struct fmfi_op *op, fm_addr src, const struct fmfi_hdr *h)
{
    if (op->peer != FM_ADDR_NONE && op->peer != src)
        return false;
    return !op->tagged || ((op->tag ^ h->tag) & ~op->ignore) == 0;
}

static struct fmfi_list *posted_list(struct fmfi_ep *ep, bool tagged)
{
    return tagged ? &ep->posted_tag : &ep->posted_msg;
}

static struct fmfi_list *unexp_list(struct fmfi_ep *ep, bool tagged)
{
    return tagged ? &ep->unexp_tag : &ep->unexp_msg;
}

/* The receive a message from src goes to: a posted one, or for a multi-
 * receive buffer a new op for this message's share of it. NULL: none. */
static struct fmfi_op *take_posted(struct fmfi_ep *ep, fm_addr src, const struct fmfi_hdr *h)
{
    struct fmfi_list *pos, *q = posted_list(ep, h->flags & FMFI_F_TAGGED);
    fmfi_list_each(pos, q)
    {
        struct fmfi_op *op = fmfi_container(pos, struct fmfi_op, link);
        if (!matches(op, src, h))
            continue;
        if (!op->multi) {
            fmfi_list_del(&op->link);
            return op;
        }
        struct fmfi_op *share = fmfi_op_new(ep);
        if (!share)
            return NULL;
        size_t room = op->len - op->multi_used;
        *share = (struct fmfi_op){.kind = OP_RECV, .context = op->context, .flags = op->flags,
                                  .iovcnt = 1, .len = h->len < room ? h->len : room,
                                  .parent = op};
        fmfi_list_init(&share->link);
        share->iov[0] = (struct iovec){(char *)op->iov[0].iov_base + op->multi_used, share->len};
        op->multi_used += share->len;
        op->shares++;
        if (op->len - op->multi_used < ep->min_multi_recv) {
            op->spent = 1;
            fmfi_list_del(&op->link);
            fmfi_list_push(&ep->spent_multi, &op->link);
        }
        return share;
    }
    return NULL;
}

/* ---- rendezvous ----------------------------------------------------------------------- */

/* Reads a same-node sender's buffers straight into op's (one copy), or
 * returns false when the kernel will not (another node, no permission). */
static bool cma_read(struct fmfi_ep *ep, struct fmfi_op *op, const struct iovec *riov,
                     size_t rcnt, size_t want)
{
    uint8_t name[FM_NAME_MAX];
    size_t nlen = sizeof(name);
    struct fm_name n;
    if (!fmfi_params.cma || fm_addr_name(ep->dom->ctx, op->src, name, &nlen) != 0 ||
        fm_name_decode(name, nlen, &n) != 0 || n.node != fm_core_node(ep->dom->ctx))
        return false;
    size_t got = 0;
    while (got < want) {
        struct iovec l[FMFI_IOV_MAX], r[FMFI_IOV_MAX];
        int nl = iov_slice(op->iov, op->iovcnt, got, want - got, l, 0);
        int nr = iov_slice(riov, rcnt, got, want - got, r, 0);
        ssize_t k = process_vm_readv((pid_t)n.pid, l, (unsigned long)nl, r, (unsigned long)nr, 0);
        if (k <= 0) {
            /* Nothing read: the sender streams instead. Part read: the
             * rest is asked for the same way, from where we are. */
            if (got)
                FMFI_WARN(FI_LOG_EP_DATA, "process_vm_readv stopped after %zu bytes\n", got);
            return false;
        }
        got += (size_t)k;
    }
    return true;
}

/* A receive matched an RTS: fetch the data, or ask the sender for it. */
static void rndv_start(struct fmfi_ep *ep, struct fmfi_op *op, const struct iovec *riov)
{
    size_t want = op->msg_len < op->len ? op->msg_len : op->len;
    if (want && cma_read(ep, op, riov, op->hdr.iovcnt, want)) {
        struct fmfi_hdr fin = {.op = FMFI_FIN, .id = op->hdr.id};
        fmfi_send_ctl(ep, op->src, &fin, NULL, 0);
        complete_rx(ep, op);
        return;
    }
    op->id = ++ep->next_id;
    op->done = 0;
    op->want = want;
    struct fmfi_hdr cts = {.op = FMFI_CTS, .id = op->hdr.id, .off = op->id, .len = want};
    fmfi_send_ctl(ep, op->src, &cts, NULL, 0);
    if (want == 0)
        rx_done(ep, op);
    else
        fmfi_list_push(&ep->rx_wait, &op->link);
}

/* ---- receiving: delivering an unexpected message to a receive ----------------------- */

/* Unexpected messages come and go at the message rate: their entries are
 * kept for reuse, with room for a small message's data in them. */
static struct fmfi_unexp *unexp_new(struct fmfi_ep *ep, size_t len)
{
    struct fmfi_unexp *ux;
    if (!fmfi_list_empty(&ep->free_unexp)) {
        ux = fmfi_container(ep->free_unexp.next, struct fmfi_unexp, link);
        fmfi_list_del(&ux->link);
    } else if (!(ux = malloc(sizeof(*ux)))) {
        return NULL;
    }
    ux->claim_context = NULL;
    ux->orphaned = false;
    ux->have = 0;
    ep->nunexp++;
    ux->buf = len <= sizeof(ux->small) ? ux->small : malloc(len);
    if (!ux->buf) {
        free(ux);
        return NULL;
    }
    return ux;
}

static void unexp_free(struct fmfi_ep *ep, struct fmfi_unexp *ux)
{
    if (ux->buf != ux->small)
        free(ux->buf);
    ep->nunexp--;
    fmfi_list_push(&ep->free_unexp, &ux->link);
}

static void deliver_unexp(struct fmfi_ep *ep, struct fmfi_op *op, struct fmfi_unexp *ux)
{
    op->src = ux->src;
    op->hdr = ux->hdr;
    op->msg_len = ux->hdr.len;
    if (ux->hdr.op == FMFI_RTS) {
        rndv_start(ep, op, ux->riov);
        unexp_free(ep, ux);
        return;
    }
    struct iovec seg = {ux->buf, ux->have};
    fill(op, 0, &seg, 1, 0, ux->have);
    op->done = ux->have;
    if (ux->have < ux->hdr.len) {
        /* The rest is still coming: it goes straight to the receive. */
        struct fmfi_inbound *in = inbound_of(ep, ux);
        if (in) {
            in->unexp = NULL;
            in->op = op;
        } else {
            complete(ep, op, FI_ENOMEM); /* its tracking could not be made: the rest is lost */
        }
    } else {
        rx_done(ep, op);
    }
    unexp_free(ep, ux);
}

static struct fmfi_unexp *find_unexp(struct fmfi_ep *ep, const struct fmfi_op *op)
{
    struct fmfi_list *pos;
    fmfi_list_each(pos, unexp_list(ep, op->tagged))
    {
        struct fmfi_unexp *ux = fmfi_container(pos, struct fmfi_unexp, link);
        if (matches(op, ux->src, &ux->hdr))
            return ux;
    }
    return NULL;
}

void fmfi_rx_post(struct fmfi_ep *ep, struct fmfi_op *op)
{
    struct fmfi_unexp *ux;
    if (!op->multi) {
        if ((ux = find_unexp(ep, op))) {
            fmfi_list_del(&ux->link);
            deliver_unexp(ep, op, ux);
        } else if (op->peer != FM_ADDR_NONE && is_lost(ep, op->peer)) {
            op->msg_len = 0; /* nothing more comes from it: fails as at its loss */
            fail_op(ep, op, FM_EPEERLOST);
        } else {
            fmfi_list_push(posted_list(ep, op->tagged), &op->link);
        }
        return;
    }
    /* A multi-receive buffer takes unexpected messages while room lasts. */
    fmfi_list_push(posted_list(ep, op->tagged), &op->link);
    while ((ux = find_unexp(ep, op))) {
        struct fmfi_op *share = take_posted(ep, ux->src, &ux->hdr);
        if (!share)
            return;
        bool used_up = op->spent; /* (its share's completion may free it) */
        fmfi_list_del(&ux->link);
        deliver_unexp(ep, share, ux);
        if (used_up)
            return;
    }
}

/* A completion describing an unexpected message, for FI_PEEK. */
static void peek_comp(struct fmfi_ep *ep, struct fmfi_op *op, const struct fmfi_unexp *ux)
{
    op->src = ux->src;
    op->hdr = ux->hdr;
    op->msg_len = op->len = ux->hdr.len;
    op->iov[0].iov_base = NULL;
    complete(ep, op, 0);
}

static void discard(struct fmfi_ep *ep, struct fmfi_unexp *ux)
{
    if (ux->hdr.flags & FMFI_F_ACKREQ)
        fmfi_ack(ep, ux->src, ux->hdr.id, false);
    if (ux->hdr.op == FMFI_RTS) { /* a CTS for nothing ends the sender's op */
        struct fmfi_hdr cts = {.op = FMFI_CTS, .id = ux->hdr.id};
        fmfi_send_ctl(ep, ux->src, &cts, NULL, 0);
    } else if (ux->have < ux->hdr.len) {
        struct fmfi_inbound *in = inbound_of(ep, ux);
        if (in)
            in->unexp = NULL; /* the rest is dropped as it comes */
    }
    unexp_free(ep, ux);
}

void fmfi_rx_peek(struct fmfi_ep *ep, struct fmfi_op *op)
{
    struct fmfi_unexp *ux = find_unexp(ep, op);
    if (!ux) {
        complete(ep, op, FI_ENOMSG);
        return;
    }
    struct fmfi_op *rep = fmfi_op_new(ep);
    if (!rep) {
        complete(ep, op, FI_ENOMEM);
        return;
    }
    *rep = *op;
    fmfi_list_init(&rep->link);
    peek_comp(ep, rep, ux);
    if (op->flags & FI_DISCARD) {
        fmfi_list_del(&ux->link);
        discard(ep, ux);
    } else if (op->flags & FI_CLAIM) {
        fmfi_list_del(&ux->link);
        ux->claim_context = op->context;
        fmfi_list_push(&ep->claimed, &ux->link);
    }
    fmfi_op_free(ep, op);
}

void fmfi_rx_claim(struct fmfi_ep *ep, struct fmfi_op *op)
{
    struct fmfi_list *pos;
    fmfi_list_each(pos, &ep->claimed)
    {
        struct fmfi_unexp *ux = fmfi_container(pos, struct fmfi_unexp, link);
        if (ux->claim_context != op->context)
            continue;
        fmfi_list_del(&ux->link);
        op->src = ux->src;
        op->hdr = ux->hdr;
        if (ux->orphaned) { /* nothing more comes: dropped, or failed */
            op->msg_len = op->len = 0;
            unexp_free(ep, ux);
            if (op->flags & FI_DISCARD)
                complete(ep, op, 0);
            else
                fail_op(ep, op, FM_EPEERLOST);
        } else if (op->flags & FI_DISCARD) {
            op->msg_len = op->len = 0;
            discard(ep, ux);
            complete(ep, op, 0);
        } else {
            deliver_unexp(ep, op, ux);
        }
        return;
    }
    complete(ep, op, FI_EINVAL);
}

int fmfi_rx_cancel(struct fmfi_ep *ep, void *context)
{
    struct fmfi_list *lists[] = {&ep->posted_tag, &ep->posted_msg};
    for (int i = 0; i < 2; i++) {
        struct fmfi_list *pos;
        fmfi_list_each(pos, lists[i])
        {
            struct fmfi_op *op = fmfi_container(pos, struct fmfi_op, link);
            if (op->context != context)
                continue;
            fmfi_list_del(&op->link);
            if (op->shares) { /* released, with FI_MULTI_RECV, by its last share */
                op->spent = 1;
                fmfi_list_push(&ep->spent_multi, &op->link);
                return 0;
            }
            op->msg_len = 0;
            complete(ep, op, FI_ECANCELED);
            return 0;
        }
    }
    return -FI_ENOENT;
}

/* ---- receiving: dispatch ----------------------------------------------------------------- */

/* A new message (EAGER or RTS) from src whose first `plen` payload bytes
 * are in seg after `skip`. */
static void rx_first(struct fmfi_ep *ep, fm_addr src, const struct fmfi_hdr *h,
                     const struct iovec *seg, int nseg, size_t skip, size_t plen)
{
    struct fmfi_iov_wire {
        uint64_t addr, len;
    } w[FMFI_IOV_MAX];
    struct iovec riov[FMFI_IOV_MAX] = {{0}};
    if (h->op == FMFI_RTS) {
        if (h->iovcnt > FMFI_IOV_MAX || plen != h->iovcnt * sizeof(w[0])) {
            ep->dropped++;
            return;
        }
        struct iovec wv = {w, plen};
        fmfi_iov_copy(&wv, 1, 0, seg, (size_t)nseg, skip, plen);
        for (int i = 0; i < h->iovcnt; i++)
            riov[i] = (struct iovec){(void *)(uintptr_t)w[i].addr, (size_t)w[i].len};
        plen = 0;
    } else if (plen > h->len || h->len > FMFI_EAGER_CEILING) {
        ep->dropped++;
        return;
    }
    struct fmfi_op *op = take_posted(ep, src, h);
    if (op) {
        op->src = src;
        op->hdr = *h;
        op->msg_len = h->len;
        if (h->op == FMFI_RTS) {
            rndv_start(ep, op, riov);
            return;
        }
        fill(op, 0, seg, nseg, skip, plen);
        op->done = plen;
        if (plen == h->len) {
            rx_done(ep, op);
            return;
        }
        struct fmfi_inbound *in = fmfi_inbound_add(ep, src);
        if (!in) {
            complete(ep, op, FI_ENOMEM);
            return;
        }
        in->op = op;
        in->hdr = *h;
        in->off = plen;
        return;
    }
    struct fmfi_unexp *ux = unexp_new(ep, h->op == FMFI_EAGER ? h->len : 0);
    if (!ux) {
        FMFI_WARN(FI_LOG_EP_DATA, "out of memory for an unexpected message: dropped\n");
        ep->dropped++;
        return;
    }
    ux->src = src;
    ux->hdr = *h;
    memcpy(ux->riov, riov, sizeof(riov));
    if (plen) {
        struct iovec dst = {ux->buf, plen};
        fmfi_iov_copy(&dst, 1, 0, seg, (size_t)nseg, skip, plen);
    }
    ux->have = plen;
    fmfi_list_push(unexp_list(ep, h->flags & FMFI_F_TAGGED), &ux->link);
    if (h->op == FMFI_EAGER && plen < h->len) {
        struct fmfi_inbound *in = fmfi_inbound_add(ep, src);
        if (in) {
            in->unexp = ux;
            in->hdr = *h;
            in->off = plen;
        }
    }
}

/* The rest of src's current message (EAGER or WRITE). */
static void rx_cont(struct fmfi_ep *ep, fm_addr src, const struct fmfi_hdr *h,
                    const struct iovec *seg, int nseg, size_t plen)
{
    struct fmfi_inbound *in = inbound(ep, src);
    if (!in || h->off != in->off || plen > in->hdr.len - in->off) {
        ep->dropped++;
        return;
    }
    if (in->op) {
        fill(in->op, in->off, seg, nseg, HDR, plen);
        in->op->done += plen;
    } else if (in->unexp) {
        struct iovec dst = {in->unexp->buf, in->hdr.len};
        fmfi_iov_copy(&dst, 1, in->off, seg, (size_t)nseg, HDR, plen);
        in->unexp->have += plen;
    } else if (in->rma_dst) {
        struct iovec dst = {in->rma_dst, in->hdr.len};
        fmfi_iov_copy(&dst, 1, in->off, seg, (size_t)nseg, HDR, plen);
    }
    in->off += plen;
    if (in->off < in->hdr.len)
        return;
    struct fmfi_inbound done = *in;
    inbound_del(ep, in);
    if (done.op)
        rx_done(ep, done.op);
    else if (done.hdr.op == FMFI_WRITE)
        fmfi_rma_written(ep, src, &done.hdr, done.rma_dst != NULL);
}

static void rx_cts(struct fmfi_ep *ep, const struct fmfi_hdr *h)
{
    struct fmfi_op *op = find_id(&ep->tx_wait, h->id);
    if (!op || op->kind != OP_SEND) {
        ep->dropped++;
        return;
    }
    fmfi_list_del(&op->link);
    op->remote_id = h->off;
    op->want = h->len < op->len ? h->len : op->len;
    op->done = 0;
    op->state = ST_STREAM;
    if (op->want == 0) {
        complete(ep, op, 0);
        return;
    }
    fmfi_list_push(&ep->tx_queue, &op->link);
}

static void rx_data(struct fmfi_ep *ep, const struct fmfi_hdr *h, const struct iovec *seg,
                    int nseg, size_t plen)
{
    struct fmfi_op *op = find_id(&ep->rx_wait, h->id);
    if (!op || h->off != op->done || plen > op->want - op->done) {
        ep->dropped++;
        return;
    }
    fill(op, op->done, seg, nseg, HDR, plen);
    op->done += plen;
    if (op->done == op->want) {
        fmfi_list_del(&op->link);
        rx_done(ep, op); /* its ACK, if the sender asked for delivery */
    }
}

/* FIN and ACK end a waiting op; READ_RESP fills a read. */
static void rx_answer(struct fmfi_ep *ep, const struct fmfi_hdr *h, const struct iovec *seg,
                      int nseg, size_t plen)
{
    struct fmfi_op *op = find_id(&ep->tx_wait, h->id);
    /* READ_RESP answers a read, FIN a send, ACK a send or a write. */
    bool fits = op && (h->op == FMFI_READ_RESP ? op->kind == OP_READ
                       : h->op == FMFI_FIN    ? op->kind == OP_SEND
                                              : op->kind == OP_SEND || op->kind == OP_WRITE);
    if (!fits) {
        ep->dropped++;
        return;
    }
    if (h->flags & FMFI_F_ERR) {
        fmfi_list_del(&op->link);
        complete(ep, op, FI_EACCES);
        return;
    }
    if (h->op == FMFI_READ_RESP) {
        if (h->off != op->done || plen > op->len - op->done) {
            ep->dropped++;
            return;
        }
        fill(op, op->done, seg, nseg, HDR, plen);
        op->done += plen;
        if (op->done < op->len)
            return;
    }
    fmfi_list_del(&op->link);
    complete(ep, op, 0);
}

/* A peer process is gone: everything towards it or from it fails. */
static void peer_lost(struct fmfi_ep *ep, fm_addr who)
{
    note_lost(ep, who);
    struct fmfi_list *queues[] = {&ep->tx_queue, &ep->tx_wait, &ep->rx_wait, &ep->ctl_queue,
                                  &ep->posted_tag, &ep->posted_msg};
    for (size_t i = 0; i < sizeof(queues) / sizeof(queues[0]); i++) {
        struct fmfi_list *pos, *tmp;
        fmfi_list_each_safe(pos, tmp, queues[i])
        {
            struct fmfi_op *op = fmfi_container(pos, struct fmfi_op, link);
            fm_addr peer = op->kind == OP_RECV && op->src ? op->src : op->peer;
            if (peer == FM_ADDR_NONE || !same_process(peer, who))
                continue;
            fmfi_list_del(&op->link);
            op->msg_len = 0;
            fail_op(ep, op, FM_EPEERLOST);
        }
    }
    for (size_t i = 0; i < ep->ninb;) {
        struct fmfi_inbound *in = &ep->inb[i];
        if (!same_process(in->src, who)) {
            i++;
            continue;
        }
        if (in->op)
            fail_op(ep, in->op, FM_EPEERLOST);
        inbound_del(ep, in);
    }
    /* Its unexpected messages that can never be whole go: an RTS, whose
     * data was still to come (a receive matched to it later waited for
     * ever, its CTS having nowhere to go), or an eager one cut short.
     * Whole ones stay to be received. A claimed one stays for the receive
     * that claims it, which then fails. */
    struct fmfi_list *unexp[] = {&ep->unexp_tag, &ep->unexp_msg, &ep->claimed};
    for (size_t i = 0; i < sizeof(unexp) / sizeof(unexp[0]); i++) {
        struct fmfi_list *pos, *tmp;
        fmfi_list_each_safe(pos, tmp, unexp[i])
        {
            struct fmfi_unexp *ux = fmfi_container(pos, struct fmfi_unexp, link);
            if (!same_process(ux->src, who) ||
                (ux->hdr.op != FMFI_RTS && ux->have == ux->hdr.len))
                continue;
            if (unexp[i] == &ep->claimed) {
                ux->orphaned = true;
            } else {
                fmfi_list_del(&ux->link);
                unexp_free(ep, ux);
            }
        }
    }
}

void fmfi_rx_message(struct fmfi_ep *ep, fm_addr src, const struct iovec *seg, int nseg,
                     size_t len)
{
    struct fmfi_hdr h;
    if (len < HDR) {
        ep->dropped++;
        return;
    }
    struct iovec hv = {&h, HDR};
    fmfi_iov_copy(&hv, 1, 0, seg, (size_t)nseg, 0, HDR);
    size_t plen = len - HDR;
    switch (h.op) {
    case FMFI_EAGER:
    case FMFI_RTS:
        rx_first(ep, src, &h, seg, nseg, HDR, plen);
        break;
    case FMFI_CONT:
        rx_cont(ep, src, &h, seg, nseg, plen);
        break;
    case FMFI_CTS:
        rx_cts(ep, &h);
        break;
    case FMFI_DATA:
        rx_data(ep, &h, seg, nseg, plen);
        break;
    case FMFI_FIN:
    case FMFI_ACK:
    case FMFI_READ_RESP:
        rx_answer(ep, &h, seg, nseg, plen);
        break;
    case FMFI_WRITE:
        fmfi_rma_write_in(ep, src, &h, seg, nseg, plen);
        break;
    case FMFI_READ_REQ:
        fmfi_rma_read_in(ep, src, &h);
        break;
    default:
        ep->dropped++;
    }
}

int fmfi_ep_progress(struct fmfi_ep *ep)
{
    if (!ep->fm)
        return 0;
    int events = run_queue(ep, &ep->ctl_queue);
    size_t done0 = ep->rx_cq ? ep->rx_cq->tail : 0;
    for (int i = 0; i < RX_BATCH; i++) {
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        fm_addr src;
        ssize_t len = fm_recv(ep->fm, seg, &nseg, &src);
        if (len == FM_EAGAIN)
            break;
        events++;
        if (len == FM_EPEERLOST) {
            peer_lost(ep, src);
            continue;
        }
        if (len < 0)
            break;
        fmfi_rx_message(ep, src, seg, nseg, (size_t)len);
        fm_recv_done(ep->fm);
        /* A receive completed: the caller wants it now, not after one more
         * look at empty rings (over the network, a system call). */
        if (ep->nunexp > UNEXP_SOFT || (ep->rx_cq && ep->rx_cq->tail != done0))
            break;
    }
    events += run_queue(ep, &ep->ctl_queue);
    events += run_queue(ep, &ep->tx_queue);
    return events;
}

/* Closing: ops in flight end without completions (the endpoint that would
 * report them is gone), and buffered messages are dropped. */
void fmfi_ep_drain(struct fmfi_ep *ep)
{
    struct fmfi_list *ops[] = {&ep->tx_queue,   &ep->tx_wait,    &ep->rx_wait,
                               &ep->ctl_queue,  &ep->posted_tag, &ep->posted_msg,
                               &ep->spent_multi};
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        while (!fmfi_list_empty(ops[i])) {
            struct fmfi_op *op = fmfi_container(ops[i]->next, struct fmfi_op, link);
            fmfi_list_del(&op->link);
            fmfi_op_free(ep, op);
        }
    struct fmfi_list *unexp[] = {&ep->unexp_tag, &ep->unexp_msg, &ep->claimed};
    for (size_t i = 0; i < sizeof(unexp) / sizeof(unexp[0]); i++)
        while (!fmfi_list_empty(unexp[i])) {
            struct fmfi_unexp *ux = fmfi_container(unexp[i]->next, struct fmfi_unexp, link);
            fmfi_list_del(&ux->link);
            unexp_free(ep, ux);
        }
    for (size_t i = 0; i < ep->ninb; i++)
        if (ep->inb[i].op)
            fmfi_op_free(ep, ep->inb[i].op);
    ep->ninb = 0;
    while (!fmfi_list_empty(&ep->free_unexp)) {
        struct fmfi_list *l = ep->free_unexp.next;
        fmfi_list_del(l);
        free(fmfi_container(l, struct fmfi_unexp, link));
    }
}
