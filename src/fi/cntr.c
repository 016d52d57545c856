/*
 * Completion counters. Endpoints bump them with atomics under the domain's
 * lock (fmfi_cntr_inc); the consumer may add or set from any thread, so
 * every access is atomic. Reads run the domain's progress first, so a
 * consumer spinning on fi_cntr_read moves its operations forward.
 */
#include "fmfi.h"

#include "core/util.h"

#include <stdlib.h>

/* The longest fmfi_wait sleeps at once: a fi_cntr_add or fi_cntr_set from
 * another thread cannot wake it, so a waiter sees it within this. */
#define WAIT_SLICE_MS 100

static struct fmfi_cntr *cntr_of(struct fid_cntr *fid)
{
    return fmfi_container(fid, struct fmfi_cntr, cntr);
}

static void cntr_progress(struct fmfi_cntr *c)
{
    fmfi_lock(c->dom);
    fmfi_progress(c->dom);
    fmfi_unlock(c->dom);
}

static uint64_t cntr_read(struct fid_cntr *fid)
{
    struct fmfi_cntr *c = cntr_of(fid);
    cntr_progress(c);
    return __atomic_load_n(&c->value, __ATOMIC_ACQUIRE);
}

static uint64_t cntr_readerr(struct fid_cntr *fid)
{
    struct fmfi_cntr *c = cntr_of(fid);
    cntr_progress(c);
    return __atomic_load_n(&c->errors, __ATOMIC_ACQUIRE);
}

static int cntr_add(struct fid_cntr *fid, uint64_t value)
{
    __atomic_add_fetch(&cntr_of(fid)->value, value, __ATOMIC_RELEASE);
    return 0;
}

static int cntr_set(struct fid_cntr *fid, uint64_t value)
{
    __atomic_store_n(&cntr_of(fid)->value, value, __ATOMIC_RELEASE);
    return 0;
}

static int cntr_adderr(struct fid_cntr *fid, uint64_t value)
{
    __atomic_add_fetch(&cntr_of(fid)->errors, value, __ATOMIC_RELEASE);
    return 0;
}

static int cntr_seterr(struct fid_cntr *fid, uint64_t value)
{
    __atomic_store_n(&cntr_of(fid)->errors, value, __ATOMIC_RELEASE);
    return 0;
}

/* fi_cntr(3): 0 once the value reaches threshold, -FI_EAVAIL as soon as an
 * error is counted meanwhile, -FI_ETIMEDOUT after timeout ms (< 0: never). */
static int cntr_wait(struct fid_cntr *fid, uint64_t threshold, int timeout)
{
    struct fmfi_cntr *c = cntr_of(fid);
    uint64_t end = timeout < 0 ? UINT64_MAX : fm_now_ns() + (uint64_t)timeout * 1000000u;
    uint64_t errors = __atomic_load_n(&c->errors, __ATOMIC_ACQUIRE);
    int rc;
    fmfi_lock(c->dom);
    for (;;) {
        fmfi_progress(c->dom);
        if (__atomic_load_n(&c->value, __ATOMIC_ACQUIRE) >= threshold) {
            rc = 0;
            break;
        }
        if (__atomic_load_n(&c->errors, __ATOMIC_ACQUIRE) != errors) {
            rc = -FI_EAVAIL;
            break;
        }
        uint64_t now = fm_now_ns();
        if (now >= end) {
            rc = -FI_ETIMEDOUT;
            break;
        }
        uint64_t left_ms = (end - now + 999999u) / 1000000u;
        fmfi_wait(c->dom, (int)FM_MIN(left_ms, (uint64_t)WAIT_SLICE_MS));
    }
    fmfi_unlock(c->dom);
    return rc;
}

static int cntr_close(struct fid *fid)
{
    struct fmfi_cntr *c = fmfi_container(fid, struct fmfi_cntr, cntr.fid);
    if (__atomic_load_n(&c->refs, __ATOMIC_ACQUIRE))
        return -FI_EBUSY;
    __atomic_sub_fetch(&c->dom->refs, 1, __ATOMIC_RELEASE);
    free(c);
    return 0;
}

static struct fi_ops cntr_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = cntr_close,
    .bind = fmfi_no_bind,
    .control = fmfi_no_control,
    .ops_open = fmfi_no_ops_open,
};

static struct fi_ops_cntr cntr_ops = {
    .size = sizeof(struct fi_ops_cntr),
    .read = cntr_read,
    .readerr = cntr_readerr,
    .add = cntr_add,
    .set = cntr_set,
    .wait = cntr_wait,
    .adderr = cntr_adderr,
    .seterr = cntr_seterr,
};

int fmfi_cntr_open(struct fid_domain *domain, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
                   void *context)
{
    struct fmfi_domain *dom = fmfi_container(domain, struct fmfi_domain, dom);
    struct fi_cntr_attr defaults = {0};
    if (!attr)
        attr = &defaults;
    if (attr->events != FI_CNTR_EVENTS_COMP) {
        FMFI_WARN(FI_LOG_CNTR, "counter events %d not supported\n", (int)attr->events);
        return -FI_ENOSYS;
    }
    int rc = fmfi_wait_obj_ok(attr->wait_obj, FI_LOG_CNTR);
    if (rc)
        return rc;
    if (attr->flags) {
        FMFI_WARN(FI_LOG_CNTR, "counter flags 0x%llx not supported\n",
                  (unsigned long long)attr->flags);
        return -FI_ENOSYS;
    }

    struct fmfi_cntr *c = calloc(1, sizeof(*c));
    if (!c)
        return -FI_ENOMEM;
    c->cntr.fid.fclass = FI_CLASS_CNTR;
    c->cntr.fid.context = context;
    c->cntr.fid.ops = &cntr_fid_ops;
    c->cntr.ops = &cntr_ops;
    c->dom = dom;
    __atomic_add_fetch(&dom->refs, 1, __ATOMIC_RELAXED);
    *cntr = &c->cntr;
    return 0;
}
