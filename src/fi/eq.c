/*
 * A minimal event queue. RDM endpoints here have no connections and
 * registration completes at once, so nothing in the provider posts events:
 * consumers open an EQ anyway (fi_pingpong, MPI libraries), and may write
 * their own events into it with fi_eq_write.
 */
#include "fmfi.h"

#include "core/util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct fmfi_eq {
    struct fid_eq eq;
    struct fmfi_fabric *fab;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signaled on every write */
    struct fmfi_list events;
};

struct eq_event {
    struct fmfi_list link;
    uint32_t event;
    size_t len;
    uint8_t data[];
};

static struct fmfi_eq *eq_of(struct fid_eq *fid)
{
    return fmfi_container(fid, struct fmfi_eq, eq);
}

/* At most one event per read, cut to len as fi_eq(3) allows; FI_PEEK leaves
 * it queued. With eq->lock held. */
static ssize_t eq_read_locked(struct fmfi_eq *eq, uint32_t *event, void *buf, size_t len,
                              uint64_t flags)
{
    if (fmfi_list_empty(&eq->events))
        return -FI_EAGAIN;
    struct eq_event *e = fmfi_container(eq->events.next, struct eq_event, link);
    size_t n = FM_MIN(len, e->len);
    if (event)
        *event = e->event;
    if (n)
        memcpy(buf, e->data, n);
    if (!(flags & FI_PEEK)) {
        fmfi_list_del(&e->link);
        free(e);
    }
    return (ssize_t)n;
}

static ssize_t eq_read(struct fid_eq *fid, uint32_t *event, void *buf, size_t len, uint64_t flags)
{
    struct fmfi_eq *eq = eq_of(fid);
    pthread_mutex_lock(&eq->lock);
    ssize_t n = eq_read_locked(eq, event, buf, len, flags);
    pthread_mutex_unlock(&eq->lock);
    return n;
}

static ssize_t eq_sread(struct fid_eq *fid, uint32_t *event, void *buf, size_t len, int timeout,
                        uint64_t flags)
{
    struct fmfi_eq *eq = eq_of(fid);
    struct timespec end;
    clock_gettime(CLOCK_MONOTONIC, &end);
    if (timeout > 0) {
        end.tv_sec += timeout / 1000;
        end.tv_nsec += (long)(timeout % 1000) * 1000000;
        if (end.tv_nsec >= 1000000000) {
            end.tv_sec++;
            end.tv_nsec -= 1000000000;
        }
    }
    pthread_mutex_lock(&eq->lock);
    int rc = 0;
    while (fmfi_list_empty(&eq->events) && timeout && rc != ETIMEDOUT)
        rc = timeout < 0 ? pthread_cond_wait(&eq->cond, &eq->lock)
                         : pthread_cond_timedwait(&eq->cond, &eq->lock, &end);
    ssize_t n = eq_read_locked(eq, event, buf, len, flags);
    pthread_mutex_unlock(&eq->lock);
    return n;
}

/* The provider never queues errors (see the top of the file). */
static ssize_t eq_readerr(struct fid_eq *fid, struct fi_eq_err_entry *buf, uint64_t flags)
{
    (void)fid;
    (void)buf;
    (void)flags;
    return -FI_EAGAIN;
}

static ssize_t eq_write(struct fid_eq *fid, uint32_t event, const void *buf, size_t len,
                        uint64_t flags)
{
    (void)flags;
    struct fmfi_eq *eq = eq_of(fid);
    struct eq_event *e = malloc(sizeof(*e) + len);
    if (!e)
        return -FI_ENOMEM;
    e->event = event;
    e->len = len;
    if (len)
        memcpy(e->data, buf, len);
    pthread_mutex_lock(&eq->lock);
    fmfi_list_push(&eq->events, &e->link);
    pthread_cond_broadcast(&eq->cond);
    pthread_mutex_unlock(&eq->lock);
    return (ssize_t)len;
}

static const char *eq_strerror(struct fid_eq *fid, int prov_errno, const void *err_data, char *buf,
                               size_t len)
{
    (void)fid;
    (void)err_data;
    return fmfi_strerror(prov_errno, buf, len);
}

static int eq_close(struct fid *fid)
{
    struct fmfi_eq *eq = fmfi_container(fid, struct fmfi_eq, eq.fid);
    while (!fmfi_list_empty(&eq->events)) {
        struct fmfi_list *l = eq->events.next;
        fmfi_list_del(l);
        free(fmfi_container(l, struct eq_event, link));
    }
    pthread_cond_destroy(&eq->cond);
    pthread_mutex_destroy(&eq->lock);
    __atomic_sub_fetch(&eq->fab->refs, 1, __ATOMIC_RELEASE);
    free(eq);
    return 0;
}

static struct fi_ops eq_fid_ops = {
    .size = sizeof(struct fi_ops),
    .close = eq_close,
    .bind = fmfi_no_bind,
    .control = fmfi_no_control, /* FI_GETWAIT: no wait object to hand out */
    .ops_open = fmfi_no_ops_open,
};

static struct fi_ops_eq eq_ops = {
    .size = sizeof(struct fi_ops_eq),
    .read = eq_read,
    .readerr = eq_readerr,
    .write = eq_write,
    .sread = eq_sread,
    .strerror = eq_strerror,
};

int fmfi_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq_fid,
                 void *context)
{
    struct fmfi_fabric *fab = fmfi_container(fabric, struct fmfi_fabric, fab);
    struct fi_eq_attr defaults = {0};
    if (!attr)
        attr = &defaults;
    int rc = fmfi_wait_obj_ok(attr->wait_obj, FI_LOG_EQ);
    if (rc)
        return rc;
    /* FI_WRITE: fi_eq_write always works; FI_AFFINITY: a hint, no interrupts. */
    if (attr->flags & ~(FI_WRITE | FI_AFFINITY)) {
        FMFI_WARN(FI_LOG_EQ, "EQ flags 0x%llx not supported\n",
                  (unsigned long long)(attr->flags & ~(FI_WRITE | FI_AFFINITY)));
        return -FI_ENOSYS;
    }

    struct fmfi_eq *eq = calloc(1, sizeof(*eq));
    if (!eq)
        return -FI_ENOMEM;
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* sread timeouts ignore clock steps */
    pthread_cond_init(&eq->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&eq->lock, NULL);
    fmfi_list_init(&eq->events);
    eq->eq.fid.fclass = FI_CLASS_EQ;
    eq->eq.fid.context = context;
    eq->eq.fid.ops = &eq_fid_ops;
    eq->eq.ops = &eq_ops;
    eq->fab = fab;
    __atomic_add_fetch(&fab->refs, 1, __ATOMIC_RELAXED);
    *eq_fid = &eq->eq;
    return 0;
}
