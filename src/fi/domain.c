/* The domain (a fastmsg context and the lock every call takes) and its
 * memory regions, which RMA emulation resolves by key. */
#include "fmfi.h"

#include <stdlib.h>
#include <string.h>

static int domain_close(struct fid *fid)
{
    struct fmfi_domain *d = fmfi_container(fid, struct fmfi_domain, dom.fid);
    if (d->refs || !fmfi_list_empty(&d->eps) || d->nmr)
        return -FI_EBUSY;
    fmfi_ctx_put();
    pthread_mutex_destroy(&d->lock);
    __atomic_sub_fetch(&d->fab->refs, 1, __ATOMIC_RELAXED);
    free(d);
    return 0;
}

static struct fi_ops domain_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = domain_close,
    .bind = fmfi_no_bind,
    .control = fmfi_no_control,
    .ops_open = fmfi_no_ops_open,
};

static int no_scalable_ep(struct fid_domain *d, struct fi_info *info, struct fid_ep **sep,
                          void *context)
{
    (void)d, (void)info, (void)sep, (void)context;
    return -FI_ENOSYS;
}

static int no_poll_open(struct fid_domain *d, struct fi_poll_attr *attr, struct fid_poll **p)
{
    (void)d, (void)attr, (void)p;
    return -FI_ENOSYS;
}

static int no_stx(struct fid_domain *d, struct fi_tx_attr *attr, struct fid_stx **stx,
                  void *context)
{
    (void)d, (void)attr, (void)stx, (void)context;
    return -FI_ENOSYS;
}

static int no_srx(struct fid_domain *d, struct fi_rx_attr *attr, struct fid_ep **rx,
                  void *context)
{
    (void)d, (void)attr, (void)rx, (void)context;
    return -FI_ENOSYS;
}

static int no_query_atomic(struct fid_domain *d, enum fi_datatype dt, enum fi_op op,
                           struct fi_atomic_attr *attr, uint64_t flags)
{
    (void)d, (void)dt, (void)op, (void)attr, (void)flags;
    return -FI_ENOSYS;
}

static int no_query_collective(struct fid_domain *d, enum fi_collective_op coll,
                               struct fi_collective_attr *attr, uint64_t flags)
{
    (void)d, (void)coll, (void)attr, (void)flags;
    return -FI_ENOSYS;
}

static int endpoint2(struct fid_domain *d, struct fi_info *info, struct fid_ep **ep,
                     uint64_t flags, void *context)
{
    if (flags)
        return -FI_EINVAL;
    return fmfi_ep_open(d, info, ep, context);
}

static struct fi_ops_domain domain_ops = {
    .size = sizeof(struct fi_ops_domain),
    .av_open = fmfi_av_open,
    .cq_open = fmfi_cq_open,
    .endpoint = fmfi_ep_open,
    .scalable_ep = no_scalable_ep,
    .cntr_open = fmfi_cntr_open,
    .poll_open = no_poll_open,
    .stx_ctx = no_stx,
    .srx_ctx = no_srx,
    .query_atomic = no_query_atomic,
    .query_collective = no_query_collective,
    .endpoint2 = endpoint2,
};

static struct fi_ops_mr domain_mr_ops = {
    .size = sizeof(struct fi_ops_mr),
    .reg = fmfi_mr_reg,
    .regv = fmfi_mr_regv,
    .regattr = fmfi_mr_regattr,
};

int fmfi_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
                     void *context)
{
    struct fmfi_fabric *fab = fmfi_container(fabric, struct fmfi_fabric, fab);
    if (!info || !dom)
        return -FI_EINVAL;
    if (info->domain_attr && info->domain_attr->name &&
        strcmp(info->domain_attr->name, FMFI_NAME) != 0)
        return -FI_EINVAL;
    struct fmfi_domain *d = calloc(1, sizeof(*d));
    if (!d)
        return -FI_ENOMEM;
    int rc = fmfi_ctx_get(&d->ctx);
    if (rc) {
        free(d);
        return rc;
    }
    pthread_mutex_init(&d->lock, NULL);
    fmfi_list_init(&d->eps);
    d->fab = fab;
    d->api_version = fab->api_version;
    if (info->domain_attr) {
        d->mr_mode = info->domain_attr->mr_mode;
        d->threading = info->domain_attr->threading;
    }
    d->locked = d->threading != FI_THREAD_DOMAIN;
    /* Before 1.5, BASIC meant virtual addresses and provider keys. */
    if (d->mr_mode & FI_MR_BASIC)
        d->mr_mode |= FI_MR_VIRT_ADDR | FI_MR_PROV_KEY;
    d->next_key = 1;
    d->dom.fid.fclass = FI_CLASS_DOMAIN;
    d->dom.fid.context = context;
    d->dom.fid.ops = &domain_fi_ops;
    d->dom.ops = &domain_ops;
    d->dom.mr = &domain_mr_ops;
    __atomic_add_fetch(&fab->refs, 1, __ATOMIC_RELAXED);
    *dom = &d->dom;
    return 0;
}

/* ---- memory regions -------------------------------------------------------------- */

static struct fmfi_mr **mr_slot(struct fmfi_domain *d, uint64_t key)
{
    return &d->mr_table[(key * 0x9E3779B97F4A7C15ull) >> 56];
}

static struct fmfi_mr *mr_find(struct fmfi_domain *d, uint64_t key)
{
    for (struct fmfi_mr *m = *mr_slot(d, key); m; m = m->next)
        if (m->mr.key == key)
            return m;
    return NULL;
}

static int mr_close(struct fid *fid)
{
    struct fmfi_mr *m = fmfi_container(fid, struct fmfi_mr, mr.fid);
    struct fmfi_domain *d = m->dom;
    fmfi_lock(d);
    for (struct fmfi_mr **p = mr_slot(d, m->mr.key); *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            break;
        }
    d->nmr--;
    fmfi_unlock(d);
    free(m);
    return 0;
}

static struct fi_ops mr_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = mr_close,
    .bind = fmfi_no_bind,
    .control = fmfi_no_control,
    .ops_open = fmfi_no_ops_open,
};

int fmfi_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                    struct fid_mr **mr)
{
    if (fid->fclass != FI_CLASS_DOMAIN || !attr || !mr || attr->iov_count > 1 || flags)
        return -FI_EINVAL;
    struct fmfi_domain *d = fmfi_container(fid, struct fmfi_domain, dom.fid);
    struct fmfi_mr *m = calloc(1, sizeof(*m));
    if (!m)
        return -FI_ENOMEM;
    if (attr->iov_count) {
        m->base = attr->mr_iov[0].iov_base;
        m->len = attr->mr_iov[0].iov_len;
    }
    m->access = attr->access;
    m->dom = d;
    m->mr.fid.fclass = FI_CLASS_MR;
    m->mr.fid.context = attr->context;
    m->mr.fid.ops = &mr_fi_ops;
    m->mr.mem_desc = m;
    /* Without virtual addresses a remote names an offset from the region's
     * start, which the registration may itself offset. */
    m->offset = attr->offset;
    fmfi_lock(d);
    uint64_t key = attr->requested_key;
    if (d->mr_mode & FI_MR_PROV_KEY) {
        while (mr_find(d, d->next_key))
            d->next_key++;
        key = d->next_key++;
    } else if (mr_find(d, key)) {
        fmfi_unlock(d);
        free(m);
        return -FI_ENOKEY;
    }
    m->mr.key = key;
    struct fmfi_mr **slot = mr_slot(d, key);
    m->next = *slot;
    *slot = m;
    d->nmr++;
    fmfi_unlock(d);
    *mr = &m->mr;
    return 0;
}

int fmfi_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
                 uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
                 void *context)
{
    struct fi_mr_attr attr = {
        .mr_iov = iov,
        .iov_count = count,
        .access = access,
        .offset = offset,
        .requested_key = requested_key,
        .context = context,
    };
    return fmfi_mr_regattr(fid, &attr, flags, mr);
}

int fmfi_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
                uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context)
{
    struct iovec iov = {(void *)buf, len};
    return fmfi_mr_regv(fid, &iov, 1, access, offset, requested_key, flags, mr, context);
}

uint8_t *fmfi_mr_target(struct fmfi_domain *d, uint64_t key, uint64_t addr, size_t len,
                        uint64_t access, struct fmfi_mr **out)
{
    struct fmfi_mr *m = mr_find(d, key);
    if (!m || (m->access & access) != access)
        return NULL;
    uint64_t off = (d->mr_mode & FI_MR_VIRT_ADDR) ? addr - (uint64_t)(uintptr_t)m->base
                                                 : addr - m->offset;
    if (off > m->len || len > m->len - off)
        return NULL;
    if (out)
        *out = m;
    return m->base + off;
}
