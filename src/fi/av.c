/* Address vectors over fastmsg's endpoint names. An fi_addr is an index
 * (for FI_AV_MAP too: the value is opaque to the consumer), and a reverse
 * map from fastmsg addresses gives FI_SOURCE its fi_addr. */
#include "core/core_api.h"
#include "core/name.h"
#include "fmfi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A fastmsg name's own length (src/core/name.h): fixed part, 6 bytes per
 * rail, CRC; the rest of the FMFI_ADDRLEN bytes is padding. */
static size_t name_len(const uint8_t *p)
{
    return 32 + 6 * (size_t)(p[2] & 0x0f) + 4;
}

fm_addr fmfi_av_fm(const struct fmfi_av *av, fi_addr_t a)
{
    return a < av->count ? av->addr[a] : FM_ADDR_NONE;
}

static size_t rev_slot(fm_addr a, size_t cap)
{
    return (size_t)((a * 0x9E3779B97F4A7C15ull) >> 20) & (cap - 1);
}

fi_addr_t fmfi_av_fi(const struct fmfi_av *av, fm_addr a)
{
    if (!av || !av->rcap)
        return FI_ADDR_NOTAVAIL;
    for (size_t i = rev_slot(a, av->rcap);; i = (i + 1) & (av->rcap - 1)) {
        if (av->rev[i].key == a)
            return av->rev[i].val;
        if (av->rev[i].key == FM_ADDR_NONE)
            return FI_ADDR_NOTAVAIL;
    }
}

static void rev_put(struct fmfi_av *av, fm_addr a, fi_addr_t v)
{
    size_t i = rev_slot(a, av->rcap);
    while (av->rev[i].key != FM_ADDR_NONE && av->rev[i].key != a)
        i = (i + 1) & (av->rcap - 1);
    av->rev[i].key = a;
    av->rev[i].val = v;
}

/* Keeps the reverse map at most half full; rebuilt from the table, which
 * also drops removed addresses. */
static int rev_grow(struct fmfi_av *av, size_t need)
{
    if (need * 2 <= av->rcap)
        return 0;
    size_t cap = 64;
    while (cap < need * 2)
        cap *= 2;
    void *rev = calloc(cap, sizeof(*av->rev));
    if (!rev)
        return -FI_ENOMEM;
    free(av->rev);
    av->rev = rev;
    av->rcap = cap;
    for (size_t i = 0; i < av->count; i++)
        if (av->addr[i] != FM_ADDR_NONE)
            rev_put(av, av->addr[i], i);
    return 0;
}

static int av_insert(struct fid_av *fav, const void *addr, size_t count, fi_addr_t *fi_addr,
                     uint64_t flags, void *context)
{
    struct fmfi_av *av = fmfi_container(fav, struct fmfi_av, av);
    (void)context;
    if ((!addr && count) || (flags & ~FI_MORE))
        return -FI_EINVAL;
    fmfi_lock(av->dom);
    int rc = 0;
    if (av->count + count > av->cap) {
        size_t cap = av->cap ? av->cap : 64;
        while (cap < av->count + count)
            cap *= 2;
        fm_addr *a = realloc(av->addr, cap * sizeof(*a));
        uint8_t *l = a ? realloc(av->local, cap) : NULL;
        if (a)
            av->addr = a;
        if (l)
            av->local = l;
        if (!a || !l)
            rc = -FI_ENOMEM;
        else
            av->cap = cap;
    }
    if (!rc)
        rc = rev_grow(av, av->count + count);
    int inserted = 0;
    for (size_t i = 0; !rc && i < count; i++) {
        const uint8_t *name = (const uint8_t *)addr + i * FMFI_ADDRLEN;
        fm_addr a;
        if (fm_addr_insert(av->dom->ctx, name, name_len(name), &a) != 0) {
            FMFI_WARN(FI_LOG_AV, "address %zu of %zu is not a fastmsg name\n", i, count);
            if (fi_addr)
                fi_addr[i] = FI_ADDR_NOTAVAIL;
            continue;
        }
        fi_addr_t v = av->count++;
        av->addr[v] = a;
        struct fm_name n;
        av->local[v] = fm_name_decode(name, name_len(name), &n) == 0 &&
                       n.node == fm_core_node(av->dom->ctx);
        rev_put(av, a, v);
        if (fi_addr)
            fi_addr[i] = v;
        inserted++;
    }
    fmfi_unlock(av->dom);
    return rc ? rc : inserted;
}

static int av_insertsvc(struct fid_av *av, const char *node, const char *service,
                        fi_addr_t *fi_addr, uint64_t flags, void *context)
{
    (void)av, (void)node, (void)service, (void)fi_addr, (void)flags, (void)context;
    return -FI_ENOSYS;
}

static int av_insertsym(struct fid_av *av, const char *node, size_t nodecnt,
                        const char *service, size_t svccnt, fi_addr_t *fi_addr, uint64_t flags,
                        void *context)
{
    (void)av, (void)node, (void)nodecnt, (void)service, (void)svccnt, (void)fi_addr;
    (void)flags, (void)context;
    return -FI_ENOSYS;
}

/* Removal forgets the slot, not the fastmsg peer: messages already sent by
 * it still arrive (with FI_ADDR_NOTAVAIL as their source). */
static int av_remove(struct fid_av *fav, fi_addr_t *fi_addr, size_t count, uint64_t flags)
{
    struct fmfi_av *av = fmfi_container(fav, struct fmfi_av, av);
    if (flags || (!fi_addr && count))
        return -FI_EINVAL;
    fmfi_lock(av->dom);
    int rc = 0;
    for (size_t i = 0; i < count; i++) {
        if (fi_addr[i] >= av->count || av->addr[fi_addr[i]] == FM_ADDR_NONE) {
            rc = -FI_EINVAL;
            continue;
        }
        av->addr[fi_addr[i]] = FM_ADDR_NONE;
    }
    size_t live = av->rcap / 2;
    av->rcap = 0;
    if (rev_grow(av, live) != 0)
        rc = -FI_ENOMEM;
    fmfi_unlock(av->dom);
    return rc;
}

static int av_lookup(struct fid_av *fav, fi_addr_t fi_addr, void *addr, size_t *addrlen)
{
    struct fmfi_av *av = fmfi_container(fav, struct fmfi_av, av);
    if (!addrlen)
        return -FI_EINVAL;
    uint8_t name[FMFI_ADDRLEN] = {0};
    size_t len = sizeof(name);
    fmfi_lock(av->dom);
    fm_addr a = fmfi_av_fm(av, fi_addr);
    int rc = a == FM_ADDR_NONE ? -FI_EINVAL : fmfi_fm_err(fm_addr_name(av->dom->ctx, a, name, &len));
    fmfi_unlock(av->dom);
    if (rc)
        return rc;
    if (addr)
        memcpy(addr, name, *addrlen < FMFI_ADDRLEN ? *addrlen : FMFI_ADDRLEN);
    *addrlen = FMFI_ADDRLEN;
    return 0;
}

/* "fastmsg://" and the name in hex, as long as buf allows; *len is set to
 * the length the whole string needs. */
static const char *av_straddr(struct fid_av *av, const void *addr, char *buf, size_t *len)
{
    (void)av;
    char s[16 + 2 * FMFI_ADDRLEN + 1] = "fastmsg://";
    const uint8_t *p = addr;
    size_t n = name_len(p) <= FMFI_ADDRLEN ? name_len(p) : FMFI_ADDRLEN;
    for (size_t i = 0; i < n; i++)
        snprintf(s + 10 + 2 * i, 3, "%02x", p[i]);
    size_t need = strlen(s) + 1;
    if (buf && *len)
        snprintf(buf, *len, "%s", s);
    *len = need;
    return buf;
}

static struct fi_ops_av av_ops = {
    .size = sizeof(struct fi_ops_av),
    .insert = av_insert,
    .insertsvc = av_insertsvc,
    .insertsym = av_insertsym,
    .remove = av_remove,
    .lookup = av_lookup,
    .straddr = av_straddr,
};

static int av_close(struct fid *fid)
{
    struct fmfi_av *av = fmfi_container(fid, struct fmfi_av, av.fid);
    if (__atomic_load_n(&av->refs, __ATOMIC_RELAXED))
        return -FI_EBUSY;
    __atomic_sub_fetch(&av->dom->refs, 1, __ATOMIC_RELAXED);
    free(av->addr);
    free(av->local);
    free(av->rev);
    free(av);
    return 0;
}

static struct fi_ops av_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = av_close,
    .bind = fmfi_no_bind,
    .control = fmfi_no_control,
    .ops_open = fmfi_no_ops_open,
};

int fmfi_av_open(struct fid_domain *fdom, struct fi_av_attr *attr, struct fid_av **out,
                 void *context)
{
    struct fmfi_domain *d = fmfi_container(fdom, struct fmfi_domain, dom);
    if (!attr || !out)
        return -FI_EINVAL;
    /* Names are shared by no other means than the consumer's: no named
     * AVs, no read-only sharing, no asynchronous inserts. */
    if (attr->name || (attr->flags & (FI_EVENT | FI_READ | FI_SYMMETRIC)) || attr->rx_ctx_bits)
        return -FI_ENOSYS;
    if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE)
        return -FI_EINVAL;
    struct fmfi_av *av = calloc(1, sizeof(*av));
    if (!av)
        return -FI_ENOMEM;
    av->dom = d;
    av->type = attr->type == FI_AV_UNSPEC ? FI_AV_TABLE : attr->type;
    av->av.fid.fclass = FI_CLASS_AV;
    av->av.fid.context = context;
    av->av.fid.ops = &av_fi_ops;
    av->av.ops = &av_ops;
    __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
    *out = &av->av;
    return 0;
}
