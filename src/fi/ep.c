/* Endpoints: the object, its bindings, its name, and the domain's progress
 * and wait over every endpoint. */
#include "fmfi.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

/* fastmsg channels the provider's endpoints open: the first free one from
 * here, so that a process's first endpoint has the same channel everywhere. */
#define FMFI_CHANNEL_BASE 0x66690000u

int fmfi_progress(struct fmfi_domain *dom)
{
    int events = 0;
    struct fmfi_list *pos;
    fmfi_list_each(pos, &dom->eps)
    {
        events += fmfi_ep_progress(fmfi_container(pos, struct fmfi_ep, dom_link));
    }
    return events;
}

void fmfi_wait(struct fmfi_domain *dom, int timeout_ms)
{
    fm_ep *fm = NULL;
    if (!fmfi_list_empty(&dom->eps))
        fm = fmfi_container(dom->eps.next, struct fmfi_ep, dom_link)->fm;
    /* fastmsg wakes one endpoint: with several, each sleeps briefly in turn. */
    bool several = dom->eps.next->next != &dom->eps;
    if (several && (timeout_ms < 0 || timeout_ms > 1))
        timeout_ms = 1;
    fmfi_unlock(dom);
    if (fm)
        fm_wait(fm, timeout_ms);
    else if (timeout_ms)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    fmfi_lock(dom);
}

/* ---- binding --------------------------------------------------------------------- */

static int bind_cq(struct fmfi_ep *ep, struct fmfi_cq *cq, uint64_t flags)
{
    if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION))
        return -FI_EBADFLAGS;
    if (flags & FI_TRANSMIT) {
        ep->tx_cq = cq;
        ep->tx_sel = flags & FI_SELECTIVE_COMPLETION;
        __atomic_add_fetch(&cq->refs, 1, __ATOMIC_RELAXED);
    }
    if (flags & FI_RECV) {
        ep->rx_cq = cq;
        ep->rx_sel = flags & FI_SELECTIVE_COMPLETION;
        __atomic_add_fetch(&cq->refs, 1, __ATOMIC_RELAXED);
    }
    return 0;
}

static int bind_cntr(struct fmfi_ep *ep, struct fmfi_cntr *c, uint64_t flags)
{
    struct {
        uint64_t flag;
        struct fmfi_cntr **slot;
    } map[] = {{FI_SEND, &ep->send_cntr},        {FI_RECV, &ep->recv_cntr},
               {FI_READ, &ep->read_cntr},        {FI_WRITE, &ep->write_cntr},
               {FI_REMOTE_READ, &ep->rread_cntr}, {FI_REMOTE_WRITE, &ep->rwrite_cntr}};
    if (!flags || (flags & ~(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
                             FI_REMOTE_WRITE)))
        return -FI_EBADFLAGS;
    for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
        if (flags & map[i].flag) {
            *map[i].slot = c;
            __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED);
        }
    return 0;
}

static int ep_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    struct fmfi_ep *ep = fmfi_container(fid, struct fmfi_ep, ep.fid);
    if (!bfid)
        return -FI_EINVAL;
    int rc = 0;
    fmfi_lock(ep->dom);
    if (ep->enabled && bfid->fclass != FI_CLASS_EQ) {
        rc = -FI_EOPBADSTATE;
    } else if (bfid->fclass == FI_CLASS_AV) {
        if (ep->av)
            rc = -FI_EINVAL;
        else {
            ep->av = fmfi_container(bfid, struct fmfi_av, av.fid);
            __atomic_add_fetch(&ep->av->refs, 1, __ATOMIC_RELAXED);
        }
    } else if (bfid->fclass == FI_CLASS_CQ) {
        rc = bind_cq(ep, fmfi_container(bfid, struct fmfi_cq, cq.fid), flags);
    } else if (bfid->fclass == FI_CLASS_CNTR) {
        rc = bind_cntr(ep, fmfi_container(bfid, struct fmfi_cntr, cntr.fid), flags);
    } else if (bfid->fclass != FI_CLASS_EQ) {
        rc = -FI_ENOSYS; /* an RDM endpoint reports nothing through an EQ */
    }
    fmfi_unlock(ep->dom);
    return rc;
}

/* ---- enabling: the fastmsg endpoint ----------------------------------------------- */

/* The fastmsg endpoint: opened by fi_enable, or by fi_getname before it. */
static int open_fm(struct fmfi_ep *ep)
{
    for (uint32_t ch = FMFI_CHANNEL_BASE; !ep->fm; ch++) {
        int rc = fm_ep_open(ep->dom->ctx, ch, &ep->fm);
        if (rc && rc != FM_EBUSY)
            return fmfi_fm_err(rc);
    }
    return 0;
}

static int ep_enable(struct fmfi_ep *ep)
{
    if (ep->enabled)
        return 0;
    if (!ep->av || (!ep->tx_cq && !ep->send_cntr) || (!ep->rx_cq && !ep->recv_cntr))
        return -FI_ENOCQ;
    int rc = open_fm(ep);
    if (rc)
        return rc;
    ep->enabled = true;
    fmfi_list_push(&ep->dom->eps, &ep->dom_link);
    return 0;
}

static int ep_control(struct fid *fid, int command, void *arg)
{
    struct fmfi_ep *ep = fmfi_container(fid, struct fmfi_ep, ep.fid);
    int rc = 0;
    fmfi_lock(ep->dom);
    switch (command) {
    case FI_ENABLE:
        rc = ep_enable(ep);
        break;
    case FI_GETOPSFLAG:
    case FI_SETOPSFLAG: {
        uint64_t *f = arg;
        if (!f || !(*f & (FI_TRANSMIT | FI_RECV)) ||
            ((*f & FI_TRANSMIT) && (*f & FI_RECV))) {
            rc = -FI_EINVAL;
            break;
        }
        uint64_t *slot = (*f & FI_TRANSMIT) ? &ep->tx_op_flags : &ep->rx_op_flags;
        if (command == FI_SETOPSFLAG)
            *slot = *f & ~(FI_TRANSMIT | FI_RECV);
        else
            *f = (*f & (FI_TRANSMIT | FI_RECV)) | *slot;
        break;
    }
    default:
        rc = -FI_ENOSYS;
    }
    fmfi_unlock(ep->dom);
    return rc;
}

/* ---- closing ------------------------------------------------------------------------- */

static void unref_cntr(struct fmfi_cntr *c)
{
    if (c)
        __atomic_sub_fetch(&c->refs, 1, __ATOMIC_RELAXED);
}

static int ep_close(struct fid *fid)
{
    struct fmfi_ep *ep = fmfi_container(fid, struct fmfi_ep, ep.fid);
    struct fmfi_domain *dom = ep->dom;
    fmfi_lock(dom);
    fmfi_ep_drain(ep);
    if (ep->enabled)
        fmfi_list_del(&ep->dom_link);
    if (ep->fm)
        fm_ep_close(ep->fm);
    if (ep->av)
        __atomic_sub_fetch(&ep->av->refs, 1, __ATOMIC_RELAXED);
    if (ep->tx_cq)
        __atomic_sub_fetch(&ep->tx_cq->refs, 1, __ATOMIC_RELAXED);
    if (ep->rx_cq)
        __atomic_sub_fetch(&ep->rx_cq->refs, 1, __ATOMIC_RELAXED);
    struct fmfi_cntr *cs[] = {ep->send_cntr,  ep->recv_cntr,  ep->read_cntr,
                              ep->write_cntr, ep->rread_cntr, ep->rwrite_cntr};
    for (size_t i = 0; i < sizeof(cs) / sizeof(cs[0]); i++)
        unref_cntr(cs[i]);
    while (!fmfi_list_empty(&ep->free_ops)) {
        struct fmfi_list *l = ep->free_ops.next;
        fmfi_list_del(l);
        free(fmfi_container(l, struct fmfi_op, link));
    }
    free(ep->inb);
    free(ep->lost);
    __atomic_sub_fetch(&dom->refs, 1, __ATOMIC_RELAXED);
    fmfi_unlock(dom);
    free(ep);
    return 0;
}

/* ---- options, cancel, sizes --------------------------------------------------------- */

static ssize_t ep_cancel(fid_t fid, void *context)
{
    struct fmfi_ep *ep = fmfi_container(fid, struct fmfi_ep, ep.fid);
    fmfi_lock(ep->dom);
    int rc = fmfi_rx_cancel(ep, context);
    fmfi_unlock(ep->dom);
    return rc;
}

static int ep_getopt(fid_t fid, int level, int name, void *val, size_t *len)
{
    struct fmfi_ep *ep = fmfi_container(fid, struct fmfi_ep, ep.fid);
    if (level != FI_OPT_ENDPOINT)
        return -FI_ENOPROTOOPT;
    if (name == FI_OPT_MIN_MULTI_RECV) {
        if (!val || !len || *len < sizeof(size_t))
            return -FI_ETOOSMALL;
        *(size_t *)val = ep->min_multi_recv;
        *len = sizeof(size_t);
        return 0;
    }
    return -FI_ENOPROTOOPT;
}

/* FI_OPT_CUDA_API_PERMITTED (1.18): the provider never calls CUDA, so any
 * answer is honoured. Its value is written out: 1.17's headers lack it. */
#define FMFI_OPT_CUDA_API_PERMITTED 5

static int ep_setopt(fid_t fid, int level, int name, const void *val, size_t len)
{
    struct fmfi_ep *ep = fmfi_container(fid, struct fmfi_ep, ep.fid);
    if (level != FI_OPT_ENDPOINT)
        return -FI_ENOPROTOOPT;
    if (name == FI_OPT_MIN_MULTI_RECV) {
        if (!val || len != sizeof(size_t))
            return -FI_EINVAL;
        ep->min_multi_recv = *(const size_t *)val;
        return 0;
    }
    if (name == FMFI_OPT_CUDA_API_PERMITTED && FI_VERSION_GE(ep->dom->api_version, FI_VERSION(1, 18)))
        return val && len == sizeof(bool) ? 0 : -FI_EINVAL;
    return -FI_ENOPROTOOPT;
}

static ssize_t ep_size_left(struct fid_ep *ep)
{
    (void)ep;
    return FMFI_QUEUE_SIZE;
}

static int no_ctx(struct fid_ep *sep, int index, void *attr, struct fid_ep **ep, void *context)
{
    (void)sep, (void)index, (void)attr, (void)ep, (void)context;
    return -FI_ENOSYS;
}

static struct fi_ops_ep ep_ops = {
    .size = sizeof(struct fi_ops_ep),
    .cancel = ep_cancel,
    .getopt = ep_getopt,
    .setopt = ep_setopt,
    .tx_ctx = (void *)no_ctx,
    .rx_ctx = (void *)no_ctx,
    .rx_size_left = ep_size_left,
    .tx_size_left = ep_size_left,
};

/* ---- the name ------------------------------------------------------------------------ */

static int ep_getname(fid_t fid, void *addr, size_t *addrlen)
{
    struct fmfi_ep *ep = fmfi_container(fid, struct fmfi_ep, ep.fid);
    if (!addrlen)
        return -FI_EINVAL;
    if (*addrlen < FMFI_ADDRLEN) {
        *addrlen = FMFI_ADDRLEN;
        return -FI_ETOOSMALL;
    }
    fmfi_lock(ep->dom);
    int rc = open_fm(ep);
    uint8_t name[FMFI_ADDRLEN] = {0};
    size_t len = sizeof(name);
    if (!rc)
        rc = fmfi_fm_err(fm_ep_name(ep->fm, name, &len));
    fmfi_unlock(ep->dom);
    if (rc)
        return rc;
    memcpy(addr, name, FMFI_ADDRLEN); /* padded: AV inserts stride by FMFI_ADDRLEN */
    *addrlen = FMFI_ADDRLEN;
    return 0;
}

static struct fi_ops_cm ep_cm_ops;
static pthread_once_t ep_cm_once = PTHREAD_ONCE_INIT;

static void ep_cm_init(void)
{
    ep_cm_ops = fmfi_no_cm_ops;
    ep_cm_ops.getname = ep_getname;
}

static struct fi_ops ep_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = ep_close,
    .bind = ep_bind,
    .control = ep_control,
    .ops_open = fmfi_no_ops_open,
};

int fmfi_ep_open(struct fid_domain *fdom, struct fi_info *info, struct fid_ep **out,
                 void *context)
{
    struct fmfi_domain *dom = fmfi_container(fdom, struct fmfi_domain, dom);
    if (!info || !out || !info->ep_attr)
        return -FI_EINVAL;
    enum fi_ep_type type = info->ep_attr->type;
    if (type != FI_EP_RDM && type != FI_EP_DGRAM)
        return -FI_EINVAL;
    struct fmfi_ep *ep = calloc(1, sizeof(*ep));
    if (!ep)
        return -FI_ENOMEM;
    pthread_once(&ep_cm_once, ep_cm_init);
    ep->dom = dom;
    ep->type = type;
    ep->caps = info->caps;
    ep->tx_op_flags = info->tx_attr ? info->tx_attr->op_flags : 0;
    ep->inject_size = info->tx_attr && info->tx_attr->inject_size ? info->tx_attr->inject_size
                                                                   : FMFI_INJECT_SIZE;
    ep->rx_op_flags = info->rx_attr ? info->rx_attr->op_flags : 0;
    ep->min_multi_recv = 64;
    struct fmfi_list *lists[] = {&ep->tx_queue,   &ep->tx_wait,    &ep->rx_wait,
                                 &ep->ctl_queue,  &ep->posted_msg, &ep->posted_tag,
                                 &ep->unexp_msg,  &ep->unexp_tag,  &ep->claimed,
                                 &ep->free_ops,   &ep->free_unexp, &ep->dom_link,
                                 &ep->spent_multi};
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++)
        fmfi_list_init(lists[i]);
    ep->ep.fid.fclass = FI_CLASS_EP;
    ep->ep.fid.context = context;
    ep->ep.fid.ops = &ep_fi_ops;
    ep->ep.ops = &ep_ops;
    ep->ep.cm = &ep_cm_ops;
    fmfi_ep_set_xfer_ops(ep);
    __atomic_add_fetch(&dom->refs, 1, __ATOMIC_RELAXED);
    *out = &ep->ep;
    return 0;
}
