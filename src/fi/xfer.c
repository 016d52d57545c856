/* The data transfer calls: fi_send/fi_recv and friends, their tagged forms
 * and RMA. Each takes the domain lock, checks its arguments and hands an
 * op to the protocol (proto.c). */
#include "fmfi.h"

#include <stdlib.h>
#include <string.h>

#define HDR sizeof(struct fmfi_hdr)

/* What a call carries, whichever form it came in. */
struct xfer {
    const struct iovec *iov;
    size_t iovcnt;
    fi_addr_t addr;
    uint64_t tag, ignore, data;
    uint64_t flags;
    void *context;
    bool tagged;
    bool silent;          /* fi_inject and its kin: no completion event, ever */
    uint64_t rkey, raddr; /* RMA */
};

static int check_iov(const struct xfer *x)
{
    if (x->iovcnt > FMFI_IOV_MAX || (x->iovcnt && !x->iov))
        return -FI_EINVAL;
    return 0;
}

static int op_iov(struct fmfi_op *op, const struct xfer *x)
{
    if (x->iovcnt)
        memcpy(op->iov, x->iov, x->iovcnt * sizeof(*x->iov));
    op->iovcnt = x->iovcnt;
    op->len = fmfi_iov_len(x->iov, x->iovcnt);
    if (!(x->flags & FI_INJECT) || !op->len)
        return 0;
    /* The caller may reuse its buffer on return: the op keeps a copy. */
    if (!(op->inject = malloc(op->len)))
        return -FI_ENOMEM;
    struct iovec dst = {op->inject, op->len};
    fmfi_iov_copy(&dst, 1, 0, x->iov, x->iovcnt, 0, op->len);
    return 0;
}

static int ready(struct fmfi_ep *ep, const struct xfer *x, fm_addr *peer)
{
    if (!ep->enabled)
        return -FI_EOPBADSTATE;
    int rc = check_iov(x);
    if (rc)
        return rc;
    if (peer && (*peer = fmfi_av_fm(ep->av, x->addr)) == FM_ADDR_NONE)
        return -FI_EINVAL;
    return 0;
}

/* A small send goes straight into the peer's ring when nothing is queued
 * before it: no op is made. Returns 1 if it went whole, 0 if the op path
 * must take it, or an error. */
static int send_now(struct fmfi_ep *ep, fm_addr peer, const struct fmfi_hdr *h,
                    const struct xfer *x, size_t *taken)
{
    if (!fmfi_list_empty(&ep->tx_queue) || h->op != FMFI_EAGER || (h->flags & FMFI_F_ACKREQ))
        return 0;
    struct iovec iov[1 + FMFI_IOV_MAX];
    iov[0] = (struct iovec){(void *)h, HDR};
    if (x->iovcnt)
        memcpy(iov + 1, x->iov, x->iovcnt * sizeof(*iov));
    ssize_t g = fm_send(ep->fm, peer, iov, (int)x->iovcnt + 1);
    if (g >= (ssize_t)HDR && (size_t)g < HDR + h->len) {
        *taken = (size_t)g - HDR; /* a prefix is in the ring: CONT messages carry the rest */
        return 0;
    }
    if (g == FM_EAGAIN || (g >= 0 && (size_t)g != HDR + h->len))
        return 0;
    if (g < 0)
        return fmfi_fm_err((int)g);
    fmfi_cntr_inc(ep->send_cntr);
    bool wanted = !ep->tx_sel || (x->flags & FI_COMPLETION);
    if (ep->tx_cq && wanted && !x->silent) {
        struct fmfi_comp c = {.op_context = x->context,
                              .flags = FI_SEND | (x->tagged ? FI_TAGGED : FI_MSG),
                              .src = FI_ADDR_NOTAVAIL};
        fmfi_cq_push(ep->tx_cq, &c);
    }
    return 1;
}

static ssize_t do_send(struct fmfi_ep *ep, const struct xfer *x)
{
    fm_addr peer;
    fmfi_lock(ep->dom);
    int rc = ready(ep, x, &peer);
    size_t len = rc ? 0 : fmfi_iov_len(x->iov, x->iovcnt);
    bool dgram = ep->type == FI_EP_DGRAM; /* a datagram goes whole, eagerly */
    if (!rc && (((x->flags & FI_INJECT) && len > ep->inject_size) ||
                (dgram && len > FMFI_DGRAM_MAX)))
        rc = -FI_EMSGSIZE;
    /* An inject goes eagerly whatever its length: it cannot wait for a
     * rendezvous (an inject_size raised by the hints past the eager limit
     * made every fi_inject of that length answer -FI_EAGAIN for ever). */
    bool eager = dgram || (x->flags & FI_INJECT) ||
                 len <= (fmfi_av_local(ep->av, x->addr) ? fmfi_params.eager_local_max
                                                        : fmfi_params.eager_max);
    struct fmfi_hdr h = {
        .op = eager ? FMFI_EAGER : FMFI_RTS,
        .flags = (uint8_t)((x->tagged ? FMFI_F_TAGGED : 0) |
                           ((x->flags & FI_REMOTE_CQ_DATA) ? FMFI_F_DATA : 0) |
                           /* not for an inject, which send_now must take at
                            * once: its completion, if asked for, is at
                            * transmission */
                           ((x->flags & (FI_DELIVERY_COMPLETE | FI_INJECT)) ==
                                    FI_DELIVERY_COMPLETE
                                ? FMFI_F_ACKREQ
                                : 0)),
        .len = len,
        .tag = x->tag,
        .data = x->data,
    };
    size_t taken = 0;
    if (!rc)
        rc = send_now(ep, peer, &h, x, &taken);
    /* Back-pressure instead of buffering without bound: an inject that
     * cannot go now would be copied, so the caller progresses and retries
     * (fi_inject may say FI_EAGAIN), and so does any send past the queue's
     * advertised size. */
    if (rc == 0 && !taken && (x->flags & FI_INJECT || ep->tx_ops >= FMFI_QUEUE_SIZE)) {
        fmfi_ep_progress(ep);
        rc = send_now(ep, peer, &h, x, &taken);
        if (rc == 0 && !taken && (x->flags & FI_INJECT || ep->tx_ops >= FMFI_QUEUE_SIZE))
            rc = -FI_EAGAIN;
    }
    if (rc == 0) {
        struct fmfi_op *op = fmfi_op_new(ep);
        if (!op)
            rc = -FI_ENOMEM;
        else if ((rc = op_iov(op, x)) != 0)
            fmfi_op_free(ep, op);
        else {
            op->kind = OP_SEND;
            op->tagged = x->tagged;
            op->silent = x->silent;
            op->flags = x->flags;
            op->context = x->context;
            op->peer = peer;
            op->hdr = h;
            if (taken) {
                op->state = ST_PARTIAL;
                op->done = taken;
            }
            fmfi_tx_start(ep, op);
        }
    }
    fmfi_unlock(ep->dom);
    return rc < 0 ? rc : 0;
}

static ssize_t do_recv(struct fmfi_ep *ep, const struct xfer *x)
{
    fmfi_lock(ep->dom);
    int rc = ready(ep, x, NULL);
    struct fmfi_op *op = rc ? NULL : fmfi_op_new(ep);
    if (!rc && !op)
        rc = -FI_ENOMEM;
    if (!rc && (x->flags & FI_MULTI_RECV) && x->iovcnt != 1)
        rc = -FI_EINVAL;
    if (!rc) {
        op->kind = OP_RECV;
        op->tagged = x->tagged;
        op->flags = x->flags;
        op->context = x->context;
        op->tag = x->tag;
        op->ignore = x->ignore;
        op->multi = (x->flags & FI_MULTI_RECV) != 0;
        if (x->iovcnt)
            memcpy(op->iov, x->iov, x->iovcnt * sizeof(*x->iov));
        op->iovcnt = x->iovcnt;
        op->len = fmfi_iov_len(x->iov, x->iovcnt);
        bool directed = (ep->caps & FI_DIRECTED_RECV) && x->addr != FI_ADDR_UNSPEC;
        op->peer = directed ? fmfi_av_fm(ep->av, x->addr) : FM_ADDR_NONE;
        if (directed && op->peer == FM_ADDR_NONE)
            rc = -FI_EINVAL;
        else if (x->flags & FI_PEEK)
            fmfi_rx_peek(ep, op);
        else if (x->flags & FI_CLAIM)
            fmfi_rx_claim(ep, op);
        else
            fmfi_rx_post(ep, op);
    }
    if (rc && op)
        fmfi_op_free(ep, op);
    fmfi_unlock(ep->dom);
    return rc;
}

static ssize_t do_rma(struct fmfi_ep *ep, const struct xfer *x, bool write)
{
    fm_addr peer;
    fmfi_lock(ep->dom);
    int rc = ready(ep, x, &peer);
    if (!rc && ep->tx_ops >= FMFI_QUEUE_SIZE)
        rc = -FI_EAGAIN;
    struct fmfi_op *op = rc ? NULL : fmfi_op_new(ep);
    if (!rc && !op)
        rc = -FI_ENOMEM;
    if (!rc && !(rc = op_iov(op, x))) {
        if ((x->flags & FI_INJECT) && op->len > ep->inject_size)
            rc = -FI_EMSGSIZE;
    }
    if (!rc) {
        op->kind = write ? OP_WRITE : OP_READ;
        op->silent = x->silent;
        op->flags = x->flags;
        op->context = x->context;
        op->peer = peer;
        op->hdr = (struct fmfi_hdr){
            .op = write ? FMFI_WRITE : FMFI_READ_REQ,
            .flags = (x->flags & FI_REMOTE_CQ_DATA) && write ? FMFI_F_DATA : 0,
            .len = op->len,
            .tag = x->rkey,
            .off = x->raddr,
            .data = x->data,
        };
        fmfi_tx_start(ep, op);
    } else if (op) {
        fmfi_op_free(ep, op);
    }
    fmfi_unlock(ep->dom);
    return rc;
}

#define EP(e) fmfi_container(e, struct fmfi_ep, ep)
#define ONE(buf, len) (&(struct iovec){(void *)(buf), (len)})

/* ---- fi_ops_msg --------------------------------------------------------------------- */

static ssize_t m_recv(struct fid_ep *e, void *buf, size_t len, void *desc, fi_addr_t src,
                      void *context)
{
    (void)desc;
    struct xfer x = {ONE(buf, len), 1, src, .flags = EP(e)->rx_op_flags, .context = context};
    return do_recv(EP(e), &x);
}

static ssize_t m_recvv(struct fid_ep *e, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t src, void *context)
{
    (void)desc;
    struct xfer x = {iov, count, src, .flags = EP(e)->rx_op_flags, .context = context};
    return do_recv(EP(e), &x);
}

static ssize_t m_recvmsg(struct fid_ep *e, const struct fi_msg *m, uint64_t flags)
{
    struct xfer x = {m->msg_iov, m->iov_count, m->addr, .flags = flags, .context = m->context};
    return do_recv(EP(e), &x);
}

static ssize_t m_send(struct fid_ep *e, const void *buf, size_t len, void *desc,
                      fi_addr_t dest, void *context)
{
    (void)desc;
    struct xfer x = {ONE(buf, len), 1, dest, .flags = EP(e)->tx_op_flags, .context = context};
    return do_send(EP(e), &x);
}

static ssize_t m_sendv(struct fid_ep *e, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t dest, void *context)
{
    (void)desc;
    struct xfer x = {iov, count, dest, .flags = EP(e)->tx_op_flags, .context = context};
    return do_send(EP(e), &x);
}

static ssize_t m_sendmsg(struct fid_ep *e, const struct fi_msg *m, uint64_t flags)
{
    struct xfer x = {m->msg_iov, m->iov_count, m->addr, .data = m->data, .flags = flags,
                     .context = m->context};
    return do_send(EP(e), &x);
}

static ssize_t m_inject(struct fid_ep *e, const void *buf, size_t len, fi_addr_t dest)
{
    struct xfer x = {ONE(buf, len), 1, dest, .flags = EP(e)->tx_op_flags | FI_INJECT,
                     .silent = true};
    return do_send(EP(e), &x);
}

static ssize_t m_senddata(struct fid_ep *e, const void *buf, size_t len, void *desc,
                          uint64_t data, fi_addr_t dest, void *context)
{
    (void)desc;
    struct xfer x = {ONE(buf, len), 1, dest, .data = data,
                     .flags = EP(e)->tx_op_flags | FI_REMOTE_CQ_DATA, .context = context};
    return do_send(EP(e), &x);
}

static ssize_t m_injectdata(struct fid_ep *e, const void *buf, size_t len, uint64_t data,
                            fi_addr_t dest)
{
    struct xfer x = {ONE(buf, len), 1, dest, .data = data,
                     .flags = EP(e)->tx_op_flags | FI_INJECT | FI_REMOTE_CQ_DATA, .silent = true};
    return do_send(EP(e), &x);
}

static struct fi_ops_msg msg_ops = {
    .size = sizeof(struct fi_ops_msg),
    .recv = m_recv,
    .recvv = m_recvv,
    .recvmsg = m_recvmsg,
    .send = m_send,
    .sendv = m_sendv,
    .sendmsg = m_sendmsg,
    .inject = m_inject,
    .senddata = m_senddata,
    .injectdata = m_injectdata,
};

/* ---- fi_ops_tagged -------------------------------------------------------------------- */

static ssize_t t_recv(struct fid_ep *e, void *buf, size_t len, void *desc, fi_addr_t src,
                      uint64_t tag, uint64_t ignore, void *context)
{
    (void)desc;
    struct xfer x = {ONE(buf, len), 1, src, tag, ignore, .flags = EP(e)->rx_op_flags,
                     .context = context, .tagged = true};
    return do_recv(EP(e), &x);
}

static ssize_t t_recvv(struct fid_ep *e, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t src, uint64_t tag, uint64_t ignore, void *context)
{
    (void)desc;
    struct xfer x = {iov, count, src, tag, ignore, .flags = EP(e)->rx_op_flags,
                     .context = context, .tagged = true};
    return do_recv(EP(e), &x);
}

static ssize_t t_recvmsg(struct fid_ep *e, const struct fi_msg_tagged *m, uint64_t flags)
{
    struct xfer x = {m->msg_iov, m->iov_count, m->addr, m->tag, m->ignore, .flags = flags,
                     .context = m->context, .tagged = true};
    return do_recv(EP(e), &x);
}

static ssize_t t_send(struct fid_ep *e, const void *buf, size_t len, void *desc,
                      fi_addr_t dest, uint64_t tag, void *context)
{
    (void)desc;
    struct xfer x = {ONE(buf, len), 1, dest, tag, .flags = EP(e)->tx_op_flags,
                     .context = context, .tagged = true};
    return do_send(EP(e), &x);
}

static ssize_t t_sendv(struct fid_ep *e, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t dest, uint64_t tag, void *context)
{
    (void)desc;
    struct xfer x = {iov, count, dest, tag, .flags = EP(e)->tx_op_flags, .context = context,
                     .tagged = true};
    return do_send(EP(e), &x);
}

static ssize_t t_sendmsg(struct fid_ep *e, const struct fi_msg_tagged *m, uint64_t flags)
{
    struct xfer x = {m->msg_iov, m->iov_count, m->addr, m->tag, .data = m->data,
                     .flags = flags, .context = m->context, .tagged = true};
    return do_send(EP(e), &x);
}

static ssize_t t_inject(struct fid_ep *e, const void *buf, size_t len, fi_addr_t dest,
                        uint64_t tag)
{
    struct xfer x = {ONE(buf, len), 1, dest, tag, .flags = EP(e)->tx_op_flags | FI_INJECT,
                     .tagged = true, .silent = true};
    return do_send(EP(e), &x);
}

static ssize_t t_senddata(struct fid_ep *e, const void *buf, size_t len, void *desc,
                          uint64_t data, fi_addr_t dest, uint64_t tag, void *context)
{
    (void)desc;
    struct xfer x = {ONE(buf, len), 1, dest, tag, .data = data,
                     .flags = EP(e)->tx_op_flags | FI_REMOTE_CQ_DATA, .context = context,
                     .tagged = true};
    return do_send(EP(e), &x);
}

static ssize_t t_injectdata(struct fid_ep *e, const void *buf, size_t len, uint64_t data,
                            fi_addr_t dest, uint64_t tag)
{
    struct xfer x = {ONE(buf, len), 1, dest, tag, .data = data,
                     .flags = EP(e)->tx_op_flags | FI_INJECT | FI_REMOTE_CQ_DATA, .silent = true,
                     .tagged = true};
    return do_send(EP(e), &x);
}

static struct fi_ops_tagged tagged_ops = {
    .size = sizeof(struct fi_ops_tagged),
    .recv = t_recv,
    .recvv = t_recvv,
    .recvmsg = t_recvmsg,
    .send = t_send,
    .sendv = t_sendv,
    .sendmsg = t_sendmsg,
    .inject = t_inject,
    .senddata = t_senddata,
    .injectdata = t_injectdata,
};

/* ---- fi_ops_rma ------------------------------------------------------------------------- */

static ssize_t r_read(struct fid_ep *e, void *buf, size_t len, void *desc, fi_addr_t src,
                      uint64_t addr, uint64_t key, void *context)
{
    (void)desc;
    struct xfer x = {ONE(buf, len), 1, src, .flags = EP(e)->tx_op_flags, .context = context,
                     .rkey = key, .raddr = addr};
    return do_rma(EP(e), &x, false);
}

static ssize_t r_readv(struct fid_ep *e, const struct iovec *iov, void **desc, size_t count,
                       fi_addr_t src, uint64_t addr, uint64_t key, void *context)
{
    (void)desc;
    struct xfer x = {iov, count, src, .flags = EP(e)->tx_op_flags, .context = context,
                     .rkey = key, .raddr = addr};
    return do_rma(EP(e), &x, false);
}

/* One remote buffer per op (rma_iov_limit 1). */
static int rma_msg(const struct fi_msg_rma *m, uint64_t flags, struct xfer *x)
{
    if (!m || m->rma_iov_count != 1 || !m->rma_iov)
        return -FI_EINVAL;
    *x = (struct xfer){m->msg_iov, m->iov_count, m->addr, .data = m->data, .flags = flags,
                       .context = m->context, .rkey = m->rma_iov[0].key,
                       .raddr = m->rma_iov[0].addr};
    return fmfi_iov_len(m->msg_iov, m->iov_count) > m->rma_iov[0].len ? -FI_EINVAL : 0;
}

static ssize_t r_readmsg(struct fid_ep *e, const struct fi_msg_rma *m, uint64_t flags)
{
    struct xfer x;
    int rc = rma_msg(m, flags, &x);
    return rc ? rc : do_rma(EP(e), &x, false);
}

static ssize_t r_write(struct fid_ep *e, const void *buf, size_t len, void *desc,
                       fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
    (void)desc;
    struct xfer x = {ONE(buf, len), 1, dest, .flags = EP(e)->tx_op_flags, .context = context,
                     .rkey = key, .raddr = addr};
    return do_rma(EP(e), &x, true);
}

static ssize_t r_writev(struct fid_ep *e, const struct iovec *iov, void **desc, size_t count,
                        fi_addr_t dest, uint64_t addr, uint64_t key, void *context)
{
    (void)desc;
    struct xfer x = {iov, count, dest, .flags = EP(e)->tx_op_flags, .context = context,
                     .rkey = key, .raddr = addr};
    return do_rma(EP(e), &x, true);
}

static ssize_t r_writemsg(struct fid_ep *e, const struct fi_msg_rma *m, uint64_t flags)
{
    struct xfer x;
    int rc = rma_msg(m, flags, &x);
    return rc ? rc : do_rma(EP(e), &x, true);
}

static ssize_t r_inject(struct fid_ep *e, const void *buf, size_t len, fi_addr_t dest,
                        uint64_t addr, uint64_t key)
{
    struct xfer x = {ONE(buf, len), 1, dest, .flags = EP(e)->tx_op_flags | FI_INJECT,
                     .silent = true, .rkey = key, .raddr = addr};
    return do_rma(EP(e), &x, true);
}

static ssize_t r_writedata(struct fid_ep *e, const void *buf, size_t len, void *desc,
                           uint64_t data, fi_addr_t dest, uint64_t addr, uint64_t key,
                           void *context)
{
    (void)desc;
    struct xfer x = {ONE(buf, len), 1, dest, .data = data,
                     .flags = EP(e)->tx_op_flags | FI_REMOTE_CQ_DATA, .context = context,
                     .rkey = key, .raddr = addr};
    return do_rma(EP(e), &x, true);
}

static ssize_t r_injectdata(struct fid_ep *e, const void *buf, size_t len, uint64_t data,
                            fi_addr_t dest, uint64_t addr, uint64_t key)
{
    struct xfer x = {ONE(buf, len), 1, dest, .data = data,
                     .flags = EP(e)->tx_op_flags | FI_INJECT | FI_REMOTE_CQ_DATA, .silent = true,
                     .rkey = key, .raddr = addr};
    return do_rma(EP(e), &x, true);
}

static struct fi_ops_rma rma_ops = {
    .size = sizeof(struct fi_ops_rma),
    .read = r_read,
    .readv = r_readv,
    .readmsg = r_readmsg,
    .write = r_write,
    .writev = r_writev,
    .writemsg = r_writemsg,
    .inject = r_inject,
    .writedata = r_writedata,
    .injectdata = r_injectdata,
};

void fmfi_ep_set_xfer_ops(struct fmfi_ep *ep)
{
    ep->ep.msg = &msg_ops;
    ep->ep.tagged = &tagged_ops;
    ep->ep.rma = &rma_ops;
    ep->ep.atomic = &fmfi_no_atomic_ops;
    ep->ep.collective = &fmfi_no_collective_ops;
}
