/*
 * fi_getinfo for the provider: the endpoint types fastmsg offers (RDM, then
 * DGRAM), with the true attributes of the implementation, matched against
 * the consumer's hints.
 *
 * libfabric's core filters providers by name only: checking every other
 * hint, and echoing the threading, progress and AV type asked for, is ours
 * (MPICH aborts unless FI_THREAD_DOMAIN comes back as asked). An entry whose
 * attributes cannot honour a hint is dropped, and why is logged at
 * FI_LOG_CORE info level (FI_LOG_LEVEL=info FI_LOG_SUBSYS=core).
 *
 * fastmsg names are opaque FMFI_ADDRLEN-byte blobs from fi_getname, which
 * consumers exchange out of band (fi_pingpong and fabtests' -E/-b send them
 * over a TCP control socket), so no host and port lead to an endpoint's
 * name: src_addr and dest_addr stay NULL, and service and FI_SOURCE are
 * ignored. A node is checked, though: one that does not resolve has no
 * fabric path to it (-FI_ENODATA, as fabtests' negative tests expect),
 * where an info for it would only fail later, at fi_av_insert. A dest_addr
 * in the hints (fi_pingpong's client sets the server's name there) is not
 * needed: the consumer inserts the name into its AV itself.
 */
#include "fmfi.h"

/* OFI_CORE_PROV_ONLY in libfabric's include/ofi_util.h: the same bit from
 * 1.17 to 2.x. */
#define FMFI_CORE_PROV_ONLY (1ULL << 59)

#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define COMM_CAPS (FI_LOCAL_COMM | FI_REMOTE_COMM)
#define RMA_DIRS (FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE)
#define RDM_CAPS                                                                                   \
    (FI_MSG | FI_TAGGED | FI_RMA | RMA_DIRS | FI_SEND | FI_RECV | FI_DIRECTED_RECV | FI_SOURCE |   \
     FI_MULTI_RECV | COMM_CAPS)
#define DGRAM_CAPS (FI_MSG | FI_SEND | FI_RECV | FI_SOURCE | FI_MULTI_RECV | COMM_CAPS)
#define TX_CAPS (FI_MSG | FI_TAGGED | FI_RMA | FI_READ | FI_WRITE | FI_SEND)
#define RX_CAPS                                                                                    \
    (FI_MSG | FI_TAGGED | FI_RMA | FI_REMOTE_READ | FI_REMOTE_WRITE | FI_RECV | FI_DIRECTED_RECV | \
     FI_SOURCE | FI_MULTI_RECV)
#define TX_OP_FLAGS                                                                                \
    (FI_COMPLETION | FI_INJECT_COMPLETE | FI_TRANSMIT_COMPLETE | FI_DELIVERY_COMPLETE)
#define RX_OP_FLAGS (FI_COMPLETION | FI_MULTI_RECV)
/* All operations to one target go through one FIFO and are applied in
 * order. Completions are not ordered (a send waiting for its CTS completes
 * after a later eager one), so comp_order is always 0. */
#define MSG_ORDER                                                                                  \
    (FI_ORDER_RAR | FI_ORDER_RAW | FI_ORDER_RAS | FI_ORDER_WAR | FI_ORDER_WAW | FI_ORDER_WAS |     \
     FI_ORDER_SAR | FI_ORDER_SAW | FI_ORDER_SAS)
/* The RMA-only halves of RAR/RAW/WAR/WAW, which API 1.8 named. */
#define MSG_ORDER_RMA (FI_ORDER_RMA_RAR | FI_ORDER_RMA_RAW | FI_ORDER_RMA_WAR | FI_ORDER_RMA_WAW)
#define INJECT_MAX 65536 /* injected data is copied: a hint may ask for up to this */
#define MR_KEY_SIZE 8
#define EP_CNT 8 /* fastmsg's endpoints per process (FM_EP_MAX) */
#define CQ_CNT 64
#define CNTR_CNT 64
#define MR_CNT 65536
/* API 1.21: the consumer serialises control with data calls. Newer than
 * the headers we build against. */
#define PROGRESS_CONTROL_UNIFIED ((enum fi_progress)3)

/* An endpoint type we offer, and the attributes that differ by type. */
struct kind {
    enum fi_ep_type type;
    const char *name; /* for log lines */
    uint64_t caps;
    size_t max_msg_size;
    uint64_t tag_format;
    size_t cq_data_size;
    size_t rma_iov_limit;
};

static const struct kind kinds[] = {
    {FI_EP_RDM, "FI_EP_RDM", RDM_CAPS, (size_t)1 << 40, FMFI_TAG_FORMAT, FMFI_CQ_DATA_SIZE, 1},
    {FI_EP_DGRAM, "FI_EP_DGRAM", DGRAM_CAPS, FMFI_DGRAM_MAX, 0, 0, 0},
};

/* The hints, with zeroed attributes standing in for those not given. */
struct asked {
    uint64_t caps;
    uint32_t addr_format;
    const struct fi_tx_attr *tx;
    const struct fi_rx_attr *rx;
    const struct fi_ep_attr *ep;
    const struct fi_domain_attr *dom;
    const struct fi_fabric_attr *fab;
    bool has_addr; /* the hints carry a source or destination address */
};

static void read_hints(const struct fi_info *hints, struct asked *a)
{
    static const struct fi_tx_attr no_tx;
    static const struct fi_rx_attr no_rx;
    static const struct fi_ep_attr no_ep;
    static const struct fi_domain_attr no_dom;
    static const struct fi_fabric_attr no_fab;
    *a = (struct asked){0, 0, &no_tx, &no_rx, &no_ep, &no_dom, &no_fab};
    if (!hints)
        return;
    a->caps = hints->caps;
    a->addr_format = hints->addr_format;
    a->has_addr = hints->src_addr || hints->dest_addr;
    if (hints->tx_attr)
        a->tx = hints->tx_attr;
    if (hints->rx_attr)
        a->rx = hints->rx_attr;
    if (hints->ep_attr)
        a->ep = hints->ep_attr;
    if (hints->domain_attr)
        a->dom = hints->domain_attr;
    if (hints->fabric_attr)
        a->fab = hints->fabric_attr;
}

/* Logs why the hints do not match (entries of kind k, or any if NULL);
 * returns false. */
__attribute__((format(printf, 2, 3))) static bool refuse(const struct kind *k, const char *fmt, ...)
{
    if (!fi_log_enabled(&fmfi_prov, FI_LOG_INFO, FI_LOG_CORE))
        return false;
    char why[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    FI_INFO(&fmfi_prov, FI_LOG_CORE, "%s%s%s\n", k ? k->name : "", k ? ": " : "", why);
    return false;
}

static bool within(const struct kind *k, const char *what, size_t asked, size_t max)
{
    return asked <= max || refuse(k, "%s %zu asked, at most %zu offered", what, asked, max);
}

static bool caps_within(const struct kind *k, const char *what, uint64_t asked, uint64_t offered)
{
    uint64_t extra = asked & ~offered;
    char s[512];
    return !extra ||
           refuse(k, "%s not offered: %s", what, fi_tostr_r(s, sizeof(s), &extra, FI_TYPE_CAPS));
}

static uint64_t msg_order(uint32_t version)
{
    return MSG_ORDER | (FI_VERSION_GE(version, FI_VERSION(1, 8)) ? MSG_ORDER_RMA : 0);
}

static bool order_ok(uint32_t version, const struct kind *k, const char *side, uint64_t asked,
                     uint64_t comp_order)
{
    uint64_t extra = asked & ~msg_order(version);
    char s[256];
    if (extra)
        return refuse(k, "%s msg_order not offered: %s", side,
                      fi_tostr_r(s, sizeof(s), &extra, FI_TYPE_MSG_ORDER));
    if (comp_order)
        return refuse(k, "%s comp_order %#llx: completions are not ordered", side,
                      (unsigned long long)comp_order);
    return true;
}

/* The caps an entry gets: those asked for, read as fi_getinfo(3) says (a
 * primary capability without direction means both ways; neither LOCAL_COMM
 * nor REMOTE_COMM means both), or all ours when none are. */
static uint64_t caps_for(const struct kind *k, uint64_t asked)
{
    if (!asked)
        return k->caps;
    if ((asked & (FI_MSG | FI_TAGGED)) && !(asked & (FI_SEND | FI_RECV)))
        asked |= FI_SEND | FI_RECV;
    if ((asked & FI_RMA) && !(asked & RMA_DIRS))
        asked |= RMA_DIRS;
    if (!(asked & COMM_CAPS))
        asked |= COMM_CAPS;
    return asked;
}

/* The mr_mode for the hints' (fi_mr(3)), or -1 when none fits. We need no
 * registration mode, so from API 1.5 on every bit is cleared; the old
 * FI_MR_BASIC and FI_MR_SCALABLE, which must come alone, are granted as
 * asked, and before 1.5 an unspecified mode (either of them) is scalable.
 * API 2.0 removed them. */
static int mr_mode_for(uint32_t version, int asked)
{
    const int old = FI_MR_BASIC | FI_MR_SCALABLE;
    if (FI_VERSION_GE(version, FI_VERSION(2, 0)) && (asked & old)) {
        FI_WARN(&fmfi_prov, FI_LOG_CORE, "mr_mode %#x: no FI_MR_BASIC/SCALABLE in API 2\n", asked);
        return -1;
    }
    if (FI_VERSION_LT(version, FI_VERSION(1, 5)) && !asked)
        return FI_MR_SCALABLE;
    if (asked == FI_MR_BASIC || asked == FI_MR_SCALABLE)
        return asked;
    if (FI_VERSION_GE(version, FI_VERSION(1, 5)) && !(asked & old))
        return 0;
    FI_WARN(&fmfi_prov, FI_LOG_CORE, "mr_mode %#x invalid for API %u.%u\n", asked,
            FI_MAJOR(version), FI_MINOR(version));
    return -1;
}

/* Whether a provider list ("fastmsg", "^other", ...) names us. The core
 * has already skipped us unless it does; this checks its first name not
 * excluded with '^'. */
static bool names_us(const char *list)
{
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ";");
        if (*p != '^')
            return len == strlen(FMFI_NAME) && !strncasecmp(p, FMFI_NAME, len);
        p += len + (p[len] == ';');
    }
    return true;
}

static bool fabric_matches(const struct fi_fabric_attr *f)
{
    if (f->prov_name && !names_us(f->prov_name))
        return refuse(NULL, "provider %s asked", f->prov_name);
    if (f->name && strcmp(f->name, FMFI_NAME))
        return refuse(NULL, "fabric %s asked", f->name);
    if (f->fabric && f->fabric->ops->domain != fmfi_domain_open)
        return refuse(NULL, "the fabric given is another provider's");
    return within(NULL, "prov_version", f->prov_version, FMFI_PROV_VERSION);
}

/* Progress happens only inside the consumer's calls (every operation, CQ
 * or counter read runs the domain's progress): FI_PROGRESS_MANUAL.
 * fi_domain(3) lets a provider meet FI_PROGRESS_AUTO with a thread of its
 * own; we have none, and a consumer asking AUTO may wait outside libfabric
 * (an RMA target computing) and never be served, so AUTO does not match. */
static bool progress_ok(uint32_t version, const char *which, enum fi_progress p, bool control)
{
    if (p == FI_PROGRESS_UNSPEC || p == FI_PROGRESS_MANUAL)
        return true;
    /* CONTROL_UNIFIED only spares us locking control calls: we lock anyway. */
    if (control && p == PROGRESS_CONTROL_UNIFIED && FI_VERSION_GE(version, FI_VERSION(1, 21)))
        return true;
    return refuse(NULL, "%s_progress %d asked: progress is manual only", which, (int)p);
}

static bool domain_matches(uint32_t version, const struct fi_domain_attr *d)
{
    if (d->domain && d->domain->ops->endpoint != fmfi_ep_open)
        return refuse(NULL, "the domain given is another provider's");
    if (d->name && strcmp(d->name, FMFI_NAME))
        return refuse(NULL, "domain %s asked", d->name);
    /* Every threading level is honoured: the domain always locks. */
    if (d->threading > FI_THREAD_ENDPOINT)
        return refuse(NULL, "threading %d unknown", (int)d->threading);
    if (!progress_ok(version, "control", d->control_progress, true) ||
        !progress_ok(version, "data", d->data_progress, false))
        return false;
    if (d->resource_mgmt > FI_RM_ENABLED)
        return refuse(NULL, "resource_mgmt %d unknown", (int)d->resource_mgmt);
    if (d->av_type > FI_AV_TABLE)
        return refuse(NULL, "av_type %d unknown", (int)d->av_type);
    if (d->auth_key_size)
        return refuse(NULL, "authorization keys are not supported");
    return caps_within(NULL, "domain caps", d->caps, COMM_CAPS) &&
           within(NULL, "mr_key_size", d->mr_key_size, MR_KEY_SIZE) &&
           within(NULL, "ep_cnt", d->ep_cnt, EP_CNT) &&
           within(NULL, "max_ep_tx_ctx", d->max_ep_tx_ctx, 1) &&
           within(NULL, "max_ep_rx_ctx", d->max_ep_rx_ctx, 1) &&
           within(NULL, "max_ep_stx_ctx", d->max_ep_stx_ctx, 0) &&
           within(NULL, "max_ep_srx_ctx", d->max_ep_srx_ctx, 0) &&
           within(NULL, "cntr_cnt", d->cntr_cnt, CNTR_CNT) &&
           within(NULL, "mr_iov_limit", d->mr_iov_limit, 1) &&
           within(NULL, "mr_cnt", d->mr_cnt, MR_CNT) &&
           within(NULL, "max_err_data", d->max_err_data, 0);
}

/* Hints that do not depend on the endpoint type. */
static bool common_matches(uint32_t version, const struct asked *a)
{
    /* Intel MPI asks for FI_SOCKADDR_IN out of habit, then treats names as
     * opaque blobs of fi_getname's length: a format asked for without an
     * address to read in it is answered with ours. */
    if (a->addr_format != FI_FORMAT_UNSPEC && a->has_addr)
        return refuse(NULL, "addr_format %u asked with an address: names are opaque "
                            "(FI_FORMAT_UNSPEC)", a->addr_format);
    return fabric_matches(a->fab) && domain_matches(version, a->dom);
}

static size_t inject_max(const struct kind *k)
{
    return k->max_msg_size < INJECT_MAX ? k->max_msg_size : INJECT_MAX;
}

static bool ep_matches(const struct kind *k, const struct fi_ep_attr *e)
{
    char s[64];
    if (e->type != FI_EP_UNSPEC && e->type != k->type)
        return refuse(k, "%s asked", fi_tostr_r(s, sizeof(s), &e->type, FI_TYPE_EP_TYPE));
    if (e->protocol != FI_PROTO_UNSPEC)
        return refuse(k, "protocol %u asked", e->protocol);
    if (e->max_order_raw_size || e->max_order_war_size || e->max_order_waw_size)
        return refuse(k, "data ordering (max_order_*_size) is not offered");
    if (e->auth_key_size)
        return refuse(k, "authorization keys are not supported");
    /* Any mem_tag_format fits: matching takes any 64-bit tag and mask. */
    return within(k, "max_msg_size", e->max_msg_size, k->max_msg_size) &&
           within(k, "protocol_version", e->protocol_version, 1) &&
           within(k, "ep tx_ctx_cnt", e->tx_ctx_cnt, 1) &&
           within(k, "ep rx_ctx_cnt", e->rx_ctx_cnt, 1);
}

static bool tx_matches(uint32_t version, const struct kind *k, const struct fi_tx_attr *t)
{
    return caps_within(k, "tx caps", t->caps, k->caps & TX_CAPS) &&
           order_ok(version, k, "tx", t->msg_order, t->comp_order) &&
           within(k, "inject_size", t->inject_size, inject_max(k)) &&
           within(k, "tx iov_limit", t->iov_limit, FMFI_IOV_MAX) &&
           within(k, "rma_iov_limit", t->rma_iov_limit, k->rma_iov_limit);
}

static bool rx_matches(uint32_t version, const struct kind *k, const struct fi_rx_attr *r)
{
    return caps_within(k, "rx caps", r->caps, k->caps & RX_CAPS) &&
           order_ok(version, k, "rx", r->msg_order, r->comp_order) &&
           within(k, "rx iov_limit", r->iov_limit, FMFI_IOV_MAX);
}

static bool kind_matches(uint32_t version, const struct kind *k, const struct asked *a)
{
    return ep_matches(k, a->ep) && caps_within(k, "caps", a->caps, k->caps) &&
           tx_matches(version, k, a->tx) && rx_matches(version, k, a->rx) &&
           within(k, "cq_data_size", a->dom->cq_data_size, k->cq_data_size);
}

/* Queue sizes are a hint, not a limit: a consumer asking for more gets it. */
static size_t queue_size(size_t asked)
{
    return asked > FMFI_QUEUE_SIZE ? asked : FMFI_QUEUE_SIZE;
}

static void fill_tx(struct fi_tx_attr *t, uint32_t version, uint64_t caps, const struct kind *k,
                    const struct fi_tx_attr *h)
{
    t->caps = caps & TX_CAPS;
    t->op_flags = h->op_flags & TX_OP_FLAGS;
    t->msg_order = msg_order(version);
    t->inject_size = h->inject_size > FMFI_INJECT_SIZE ? h->inject_size : FMFI_INJECT_SIZE;
    t->size = queue_size(h->size);
    t->iov_limit = FMFI_IOV_MAX;
    t->rma_iov_limit = k->rma_iov_limit;
}

static void fill_rx(struct fi_rx_attr *r, uint32_t version, uint64_t caps,
                    const struct fi_rx_attr *h)
{
    r->caps = caps & RX_CAPS;
    r->op_flags = h->op_flags & RX_OP_FLAGS;
    r->msg_order = msg_order(version);
    r->size = queue_size(h->size);
    r->iov_limit = FMFI_IOV_MAX;
}

static void fill_ep(struct fi_ep_attr *e, const struct kind *k, const struct fi_ep_attr *h)
{
    e->type = k->type;
    e->protocol = FI_PROTO_UNSPEC;
    e->protocol_version = 1;
    e->max_msg_size = k->max_msg_size;
    /* A requested format is served as it is. */
    e->mem_tag_format = k->tag_format && h->mem_tag_format ? h->mem_tag_format : k->tag_format;
    e->tx_ctx_cnt = 1;
    e->rx_ctx_cnt = 1;
}

static void fill_domain(struct fi_domain_attr *d, const struct kind *k,
                        const struct fi_domain_attr *h, int mr_mode)
{
    d->domain = h->domain;
    d->threading = h->threading ? h->threading : FI_THREAD_SAFE;
    d->control_progress = h->control_progress ? h->control_progress : FI_PROGRESS_MANUAL;
    d->data_progress = FI_PROGRESS_MANUAL;
    d->resource_mgmt = h->resource_mgmt ? h->resource_mgmt : FI_RM_ENABLED;
    d->av_type = h->av_type; /* MAP and TABLE both work */
    d->mr_mode = mr_mode;
    d->mr_key_size = MR_KEY_SIZE;
    d->cq_data_size = k->cq_data_size;
    d->cq_cnt = CQ_CNT;
    d->ep_cnt = EP_CNT;
    d->tx_ctx_cnt = 1;
    d->rx_ctx_cnt = 1;
    d->max_ep_tx_ctx = 1;
    d->max_ep_rx_ctx = 1;
    d->cntr_cnt = CNTR_CNT;
    d->mr_iov_limit = 1;
    d->caps = COMM_CAPS;
    d->mr_cnt = MR_CNT;
}

/* prov_name stays NULL: the core sets it on every entry a provider returns
 * (and would take a name already there for a utility provider's layering). */
static struct fi_info *make_info(uint32_t version, const struct kind *k, const struct asked *a,
                                 int mr_mode)
{
    struct fi_info *fi = fi_allocinfo();
    if (!fi)
        return NULL;
    fi->caps = caps_for(k, a->caps);
    fi->addr_format = FI_FORMAT_UNSPEC;
    fill_tx(fi->tx_attr, version, fi->caps, k, a->tx);
    fill_rx(fi->rx_attr, version, fi->caps, a->rx);
    fill_ep(fi->ep_attr, k, a->ep);
    fill_domain(fi->domain_attr, k, a->dom, mr_mode);
    fi->domain_attr->name = strdup(FMFI_NAME);
    fi->fabric_attr->fabric = a->fab->fabric;
    fi->fabric_attr->name = strdup(FMFI_NAME);
    fi->fabric_attr->prov_version = FMFI_PROV_VERSION;
    fi->fabric_attr->api_version = version;
    if (!fi->domain_attr->name || !fi->fabric_attr->name) {
        fi_freeinfo(fi);
        return NULL;
    }
    return fi;
}

/* Whether a host name or address resolves (no port asked: see the top). */
static bool resolves(const char *node)
{
    struct addrinfo want = {.ai_family = AF_UNSPEC}, *res = NULL;
    int rc = getaddrinfo(node, NULL, &want, &res);
    if (rc) {
        refuse(NULL, "node '%s' does not resolve: %s", node, gai_strerror(rc));
        return false;
    }
    freeaddrinfo(res);
    return true;
}

int fmfi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                 const struct fi_info *hints, struct fi_info **info)
{
    (void)service; /* see the top of the file */
    if (node && !resolves(node))
        return -FI_ENODATA;
    /* libfabric's utility providers ask with this (internal) flag for core
     * providers to layer on; fastmsg's endpoints are reliable already, so
     * ofi_rxd over our DGRAM would only add a second reliability layer,
     * and it would be listed, and chosen, before our own RDM. */
    if (flags & FMFI_CORE_PROV_ONLY)
        return -FI_ENODATA;
    struct asked a;
    read_hints(hints, &a);
    int mr_mode = mr_mode_for(version, a.dom->mr_mode);
    if (mr_mode < 0 || !common_matches(version, &a))
        return -FI_ENODATA;
    struct fi_info *head = NULL, **tail = &head;
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        if (!kind_matches(version, &kinds[i], &a))
            continue;
        *tail = make_info(version, &kinds[i], &a, mr_mode);
        if (!*tail) {
            fi_freeinfo(head);
            return -FI_ENOMEM;
        }
        tail = &(*tail)->next;
    }
    if (!head)
        return -FI_ENODATA;
    *info = head;
    return 0;
}
