/*
 * Completion queues: a ring of struct fmfi_comp, written out in the CQ's
 * format when read, and a list of error entries beside it.
 *
 * Every format's entry is a prefix of struct fi_cq_tagged_entry, and
 * struct fmfi_comp starts with exactly those fields, so writing an entry
 * is one copy of entry_size bytes. Reads run the domain's progress when
 * the ring is empty (manual progress), all under fmfi_lock, which is also
 * what endpoints hold when they push completions.
 */
#include "fmfi.h"

#include "core/core_api.h"
#include "core/util.h"

#include <stdlib.h>
#include <string.h>

/* The longest fmfi_wait sleeps at once: fi_cq_signal cannot wake it, so a
 * signaled sread notices within this. */
#define WAIT_SLICE_MS 100
#define CQ_DEFAULT_SIZE FMFI_QUEUE_SIZE
#define CQ_MAX_PREALLOC (1u << 16) /* larger sizes grow on demand */

#define SAME_FIELD(f)                                                                              \
    _Static_assert(offsetof(struct fmfi_comp, f) == offsetof(struct fi_cq_tagged_entry, f),        \
                   "fmfi_comp." #f " must sit where fi_cq_tagged_entry has it")
SAME_FIELD(op_context);
SAME_FIELD(flags);
SAME_FIELD(len);
SAME_FIELD(buf);
SAME_FIELD(data);
SAME_FIELD(tag);
_Static_assert(sizeof(struct fi_cq_tagged_entry) <= offsetof(struct fmfi_comp, src),
               "fmfi_comp must begin with a whole fi_cq_tagged_entry");

static struct fmfi_cq *cq_of(struct fid_cq *fid)
{
    return fmfi_container(fid, struct fmfi_cq, cq);
}

/* Doubles the ring, keeping entries at the same masked positions. */
static int cq_grow(struct fmfi_cq *cq)
{
    size_t cap = cq->cap, h = cq->head & (cap - 1);
    struct fmfi_comp *r = realloc(cq->ring, 2 * cap * sizeof(*r));
    if (!r)
        return -FI_ENOMEM;
    /* The wrapped part [0, h) moves past the old end. */
    memcpy(r + cap, r, h * sizeof(*r));
    cq->ring = r;
    cq->head = h;
    cq->tail = h + cap;
    cq->cap = 2 * cap;
    return 0;
}

int fmfi_cq_push(struct fmfi_cq *cq, const struct fmfi_comp *c)
{
    if (fm_unlikely(cq->tail - cq->head == cq->cap) && cq_grow(cq)) {
        FMFI_WARN(FI_LOG_CQ, "out of memory: a completion is lost\n");
        return -FI_ENOMEM;
    }
    cq->ring[cq->tail++ & (cq->cap - 1)] = *c;
    return 0;
}

int fmfi_cq_push_err(struct fmfi_cq *cq, const struct fmfi_comp *c, int err, size_t olen)
{
    struct fmfi_cq_err *e = calloc(1, sizeof(*e));
    if (!e) {
        FMFI_WARN(FI_LOG_CQ, "out of memory: an error completion is lost\n");
        return -FI_ENOMEM;
    }
    e->e.op_context = c->op_context;
    e->e.flags = c->flags;
    e->e.len = c->len;
    e->e.buf = c->buf;
    e->e.data = c->data;
    e->e.tag = c->tag;
    e->e.olen = olen;
    e->e.err = err;
    e->e.prov_errno = err; /* so that fi_cq_strerror names it */
    fmfi_list_push(&cq->errs, &e->link);
    cq->nerrs++;
    return 0;
}

/* fi_cq_read's work, with dom->lock held. Errors go first: fi_cq(3) has
 * reads fail with -FI_EAVAIL while any error entry is queued. A count of 0
 * only drives progress. */
static ssize_t cq_read_locked(struct fmfi_cq *cq, void *buf, size_t count, fi_addr_t *src)
{
    if (cq->tail == cq->head || !count)
        fmfi_progress(cq->dom);
    if (cq->nerrs)
        return -FI_EAVAIL;
    size_t avail = cq->tail - cq->head;
    if (!avail)
        return -FI_EAGAIN;
    size_t n = FM_MIN(avail, count), mask = cq->cap - 1, esz = cq->entry_size;
    char *out = buf;
    for (size_t i = 0; i < n; i++) {
        const struct fmfi_comp *c = &cq->ring[(cq->head + i) & mask];
        memcpy(out + i * esz, c, esz);
        if (src)
            src[i] = c->src;
    }
    cq->head += n;
    return (ssize_t)n;
}

/* How long a queue stays empty under reads before a read waits for traffic
 * (FI_FASTMSG_IDLE_SLEEP), and for how long at most. An MPI library polls
 * its queue in a loop, yielding between reads when the node is
 * oversubscribed; but a rank that yields stays ready to run and keeps its
 * share of a CPU. With four ranks on two CPUs (seed 004's mm between two
 * namespace hosts, Open MPI) the waiting ranks' polls took a third of the
 * time, and a 32 MB broadcast took 0.55-0.76 s against 0.02 s with two
 * ranks. Waits shorter than IDLE_NS, such as lu's for each pivot row
 * (about 300 us), keep polling: sleeping after 64 empty reads made lu 15 %
 * slower. */
#define IDLE_NS 1000000u
#define IDLE_SLEEP_MS 1

static bool idle_sleeps(struct fmfi_cq *cq)
{
    int mode = fmfi_params.idle_sleep;
    /* The clock is read on one empty read in 16: in a VM a reading costs
     * a few percent of a read that yields. */
    if (!mode || (++cq->empty_reads & 15))
        return false;
    uint64_t now = fm_now_ns();
    if (!cq->idle_since) {
        cq->idle_since = now;
        return false;
    }
    return now - cq->idle_since >= IDLE_NS &&
           (mode > 0 || (cq->dom->ctx && fm_core_crowded(cq->dom->ctx)));
}

static ssize_t cq_readfrom(struct fid_cq *fid, void *buf, size_t count, fi_addr_t *src)
{
    struct fmfi_cq *cq = cq_of(fid);
    fmfi_lock(cq->dom);
    ssize_t n = cq_read_locked(cq, buf, count, src);
    if (n == -FI_EAGAIN && count && idle_sleeps(cq)) {
        fmfi_wait(cq->dom, IDLE_SLEEP_MS);
        n = cq_read_locked(cq, buf, count, src);
    }
    if (n != -FI_EAGAIN)
        cq->idle_since = cq->empty_reads = 0;
    fmfi_unlock(cq->dom);
    return n;
}

static ssize_t cq_read(struct fid_cq *fid, void *buf, size_t count)
{
    return cq_readfrom(fid, buf, count, NULL);
}

/* The wait condition is only an optimization (fi_cq(3)): any completion
 * ends the wait. */
static ssize_t cq_sreadfrom(struct fid_cq *fid, void *buf, size_t count, fi_addr_t *src,
                            const void *cond, int timeout)
{
    (void)cond;
    struct fmfi_cq *cq = cq_of(fid);
    uint64_t end = timeout < 0 ? UINT64_MAX : fm_now_ns() + (uint64_t)timeout * 1000000u;
    fmfi_lock(cq->dom);
    ssize_t n;
    while ((n = cq_read_locked(cq, buf, count, src)) == -FI_EAGAIN) {
        if (__atomic_exchange_n(&cq->signaled, 0, __ATOMIC_ACQ_REL))
            break;
        uint64_t now = fm_now_ns();
        if (now >= end)
            break;
        uint64_t left_ms = (end - now + 999999u) / 1000000u;
        fmfi_wait(cq->dom, (int)FM_MIN(left_ms, (uint64_t)WAIT_SLICE_MS));
    }
    fmfi_unlock(cq->dom);
    return n;
}

static ssize_t cq_sread(struct fid_cq *fid, void *buf, size_t count, const void *cond, int timeout)
{
    return cq_sreadfrom(fid, buf, count, NULL, cond, timeout);
}

static int cq_signal(struct fid_cq *fid)
{
    __atomic_store_n(&cq_of(fid)->signaled, 1, __ATOMIC_RELEASE);
    return 0;
}

/* The caller's struct fi_cq_err_entry is the one of the API version it asked
 * for: before 1.5 it ends at err_data, from 1.20 on src_addr follows
 * err_data_size. We never have error data to give. */
static ssize_t cq_readerr(struct fid_cq *fid, struct fi_cq_err_entry *buf, uint64_t flags)
{
    (void)flags;
    struct fmfi_cq *cq = cq_of(fid);
    fmfi_lock(cq->dom);
    if (fmfi_list_empty(&cq->errs)) {
        fmfi_unlock(cq->dom);
        return -FI_EAGAIN;
    }
    struct fmfi_cq_err *e = fmfi_container(cq->errs.next, struct fmfi_cq_err, link);
    fmfi_list_del(&e->link);
    cq->nerrs--;
    fmfi_unlock(cq->dom);

    uint32_t version = cq->dom->api_version;
    if (FI_VERSION_LT(version, FI_VERSION(1, 5))) {
        memcpy(buf, &e->e, offsetof(struct fi_cq_err_entry, err_data_size));
    } else {
        /* A caller's own err_data buffer stays its own, with 0 bytes in it;
         * without one, err_data is the provider's (none: NULL). */
        void *user_data = buf->err_data_size ? buf->err_data : NULL;
        *buf = e->e;
        buf->err_data = user_data;
        buf->err_data_size = 0;
        if (FI_VERSION_GE(version, FI_VERSION(1, 20))) {
            fi_addr_t none = FI_ADDR_NOTAVAIL; /* src_addr: only for FI_AV_AUTH_KEY */
            memcpy(buf + 1, &none, sizeof(none));
        }
    }
    free(e);
    return 1;
}

static const char *cq_strerror(struct fid_cq *fid, int prov_errno, const void *err_data, char *buf,
                               size_t len)
{
    (void)fid;
    (void)err_data;
    return fmfi_strerror(prov_errno, buf, len);
}

static int cq_close(struct fid *fid)
{
    struct fmfi_cq *cq = fmfi_container(fid, struct fmfi_cq, cq.fid);
    if (__atomic_load_n(&cq->refs, __ATOMIC_ACQUIRE))
        return -FI_EBUSY;
    while (!fmfi_list_empty(&cq->errs)) {
        struct fmfi_list *l = cq->errs.next;
        fmfi_list_del(l);
        free(fmfi_container(l, struct fmfi_cq_err, link));
    }
    __atomic_sub_fetch(&cq->dom->refs, 1, __ATOMIC_RELEASE);
    free(cq->ring);
    free(cq);
    return 0;
}

static struct fi_ops cq_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = cq_close,
    .bind = fmfi_no_bind,
    .control = fmfi_no_control, /* FI_GETWAIT too: there is no wait object to hand out */
    .ops_open = fmfi_no_ops_open,
};

static struct fi_ops_cq cq_ops = {
    .size = sizeof(struct fi_ops_cq),
    .read = cq_read,
    .readfrom = cq_readfrom,
    .readerr = cq_readerr,
    .sread = cq_sread,
    .sreadfrom = cq_sreadfrom,
    .signal = cq_signal,
    .strerror = cq_strerror,
};

static size_t entry_size(enum fi_cq_format format)
{
    switch (format) {
    case FI_CQ_FORMAT_UNSPEC:
    case FI_CQ_FORMAT_CONTEXT: return sizeof(struct fi_cq_entry);
    case FI_CQ_FORMAT_MSG: return sizeof(struct fi_cq_msg_entry);
    case FI_CQ_FORMAT_DATA: return sizeof(struct fi_cq_data_entry);
    case FI_CQ_FORMAT_TAGGED: return sizeof(struct fi_cq_tagged_entry);
    default: return 0;
    }
}

int fmfi_cq_open(struct fid_domain *domain, struct fi_cq_attr *attr, struct fid_cq **cq_fid,
                 void *context)
{
    struct fmfi_domain *dom = fmfi_container(domain, struct fmfi_domain, dom);
    struct fi_cq_attr defaults = {0};
    if (!attr)
        attr = &defaults;
    size_t esz = entry_size(attr->format);
    if (!esz) {
        FMFI_WARN(FI_LOG_CQ, "unknown CQ format %d\n", (int)attr->format);
        return -FI_EINVAL;
    }
    int rc = fmfi_wait_obj_ok(attr->wait_obj, FI_LOG_CQ);
    if (rc)
        return rc;
    /* FI_AFFINITY's signaling_vector is a hint fi_cq(3) lets us ignore: we
     * have no interrupts. */
    if (attr->flags & ~FI_AFFINITY) {
        FMFI_WARN(FI_LOG_CQ, "CQ flags 0x%llx not supported\n",
                  (unsigned long long)(attr->flags & ~FI_AFFINITY));
        return -FI_ENOSYS;
    }

    size_t want = attr->size ? FM_MIN(attr->size, (size_t)CQ_MAX_PREALLOC) : CQ_DEFAULT_SIZE;
    size_t cap = 16;
    while (cap < want)
        cap *= 2;
    struct fmfi_cq *cq = calloc(1, sizeof(*cq));
    if (!cq)
        return -FI_ENOMEM;
    cq->ring = malloc(cap * sizeof(*cq->ring));
    if (!cq->ring) {
        free(cq);
        return -FI_ENOMEM;
    }
    cq->cq.fid.fclass = FI_CLASS_CQ;
    cq->cq.fid.context = context;
    cq->cq.fid.ops = &cq_fid_ops;
    cq->cq.ops = &cq_ops;
    cq->dom = dom;
    cq->format = attr->format == FI_CQ_FORMAT_UNSPEC ? FI_CQ_FORMAT_CONTEXT : attr->format;
    cq->entry_size = esz;
    cq->cap = cap;
    fmfi_list_init(&cq->errs);
    __atomic_add_fetch(&dom->refs, 1, __ATOMIC_RELAXED);
    *cq_fid = &cq->cq;
    return 0;
}
