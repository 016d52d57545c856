/* RMA emulated by the target's progress: a write is copied into the
 * registered region named by its key and acked; a read is answered with
 * the region's bytes. A bad key, access or bound is refused, and the
 * initiator's op fails with FI_EACCES; the target loses nothing. */
#include "fmfi.h"

#define HDR sizeof(struct fmfi_hdr)

void fmfi_rma_written(struct fmfi_ep *ep, fm_addr src, const struct fmfi_hdr *h, bool ok)
{
    if (ok) {
        fmfi_cntr_inc(ep->rwrite_cntr);
        if ((h->flags & FMFI_F_DATA) && ep->rx_cq) {
            struct fmfi_comp c = {
                .flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA,
                .len = h->len,
                .data = h->data,
                .src = (ep->caps & FI_SOURCE) ? fmfi_av_fi(ep->av, src) : FI_ADDR_NOTAVAIL,
            };
            fmfi_cq_push(ep->rx_cq, &c);
        }
    }
    fmfi_ack(ep, src, h->id, !ok);
}

void fmfi_rma_write_in(struct fmfi_ep *ep, fm_addr src, const struct fmfi_hdr *h,
                       const struct iovec *seg, int nseg, size_t plen)
{
    if (plen > h->len) {
        ep->dropped++;
        return;
    }
    uint8_t *dst = fmfi_mr_target(ep->dom, h->tag, h->off, h->len, FI_REMOTE_WRITE, NULL);
    if (dst) {
        struct iovec d = {dst, h->len};
        fmfi_iov_copy(&d, 1, 0, seg, (size_t)nseg, HDR, plen);
    }
    if (plen == h->len) {
        fmfi_rma_written(ep, src, h, dst != NULL);
        return;
    }
    struct fmfi_inbound *in = fmfi_inbound_add(ep, src);
    if (!in) {
        fmfi_rma_written(ep, src, h, false);
        return;
    }
    in->rma_dst = dst;
    in->hdr = *h;
    in->off = plen;
}

void fmfi_rma_read_in(struct fmfi_ep *ep, fm_addr src, const struct fmfi_hdr *h)
{
    uint8_t *from = fmfi_mr_target(ep->dom, h->tag, h->off, h->len, FI_REMOTE_READ, NULL);
    struct fmfi_hdr resp = {.op = FMFI_READ_RESP, .id = h->id, .flags = from ? 0 : FMFI_F_ERR};
    fmfi_send_ctl(ep, src, &resp, from, from ? h->len : 0);
    if (from)
        fmfi_cntr_inc(ep->rread_cntr);
}
