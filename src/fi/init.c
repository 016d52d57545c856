/* The provider's entry point, its tunables, the fabric object and the
 * process's fastmsg context. */
#include "core/ctx.h"
#include "fmfi.h"

#include <stdlib.h>
#include <string.h>

struct fmfi_params fmfi_params = {
    .eager_max = 32768,
    .eager_local_max = 8192,
    .cma = 1,
    .idle_sleep = -1,
};

/* An MPI rank may compute for minutes without a call: a watchdog thread
 * keeps its network sessions answering meanwhile (FM_PROGRESS_THREAD). */
static const char *const ctx_defaults[] = {"FM_PROGRESS_THREAD=2", NULL};

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static fm_ctx *the_ctx;
static int ctx_refs;

int fmfi_ctx_get(fm_ctx **ctx)
{
    int rc = 0;
    pthread_mutex_lock(&ctx_lock);
    if (!the_ctx) {
        rc = fm_init_singleton(&the_ctx, ctx_defaults);
        if (rc)
            FMFI_WARN(FI_LOG_DOMAIN, "fastmsg did not start: %s\n", fm_strerror(rc));
    }
    if (!rc) {
        ctx_refs++;
        *ctx = the_ctx;
    }
    pthread_mutex_unlock(&ctx_lock);
    return rc ? fmfi_fm_err(rc) : 0;
}

void fmfi_ctx_put(void)
{
    pthread_mutex_lock(&ctx_lock);
    if (--ctx_refs == 0) {
        fm_finalize(the_ctx);
        the_ctx = NULL;
    }
    pthread_mutex_unlock(&ctx_lock);
}

/* ---- fabric ------------------------------------------------------------------ */

static int fabric_close(struct fid *fid)
{
    struct fmfi_fabric *f = fmfi_container(fid, struct fmfi_fabric, fab.fid);
    if (f->refs)
        return -FI_EBUSY;
    free(f);
    return 0;
}

static struct fi_ops fabric_fi_ops = {
    .size = sizeof(struct fi_ops),
    .close = fabric_close,
    .bind = fmfi_no_bind,
    .control = fmfi_no_control,
    .ops_open = fmfi_no_ops_open,
};

static int no_passive_ep(struct fid_fabric *fabric, struct fi_info *info, struct fid_pep **pep,
                         void *context)
{
    (void)fabric, (void)info, (void)pep, (void)context;
    return -FI_ENOSYS;
}

static int no_wait_open(struct fid_fabric *fabric, struct fi_wait_attr *attr,
                        struct fid_wait **waitset)
{
    (void)fabric, (void)attr, (void)waitset;
    return -FI_ENOSYS;
}

static int no_trywait(struct fid_fabric *fabric, struct fid **fids, int count)
{
    (void)fabric, (void)fids, (void)count;
    return -FI_ENOSYS;
}

static struct fi_ops_fabric fabric_ops = {
    .size = sizeof(struct fi_ops_fabric),
    .domain = fmfi_domain_open,
    .passive_ep = no_passive_ep,
    .eq_open = fmfi_eq_open,
    .wait_open = no_wait_open,
    .trywait = no_trywait,
};

int fmfi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context)
{
    if (!attr || !fabric)
        return -FI_EINVAL;
    if (attr->name && strcmp(attr->name, FMFI_NAME) != 0)
        return -FI_ENODATA;
    struct fmfi_fabric *f = calloc(1, sizeof(*f));
    if (!f)
        return -FI_ENOMEM;
    f->fab.fid.fclass = FI_CLASS_FABRIC;
    f->fab.fid.context = context;
    f->fab.fid.ops = &fabric_fi_ops;
    f->fab.ops = &fabric_ops;
    f->api_version = attr->api_version ? attr->api_version : fmfi_prov.fi_version;
    *fabric = &f->fab;
    return 0;
}

/* ---- the provider -------------------------------------------------------------- */

static void prov_cleanup(void) {}

struct fi_provider fmfi_prov = {
    .version = FMFI_PROV_VERSION,
    .name = FMFI_NAME,
    .getinfo = fmfi_getinfo,
    .fabric = fmfi_fabric_open,
    .cleanup = prov_cleanup,
};

static void read_params(void)
{
    fi_param_define(&fmfi_prov, "eager_max", FI_PARAM_SIZE_T,
                    "Largest message sent eagerly; larger ones wait for the receiver "
                    "(rendezvous), so unexpected large messages are never buffered "
                    "(default: 32768, at most 64 MiB)");
    fi_param_define(&fmfi_prov, "eager_local_max", FI_PARAM_SIZE_T,
                    "The same, to a process on this node, which the receiver then reads "
                    "once with process_vm_readv (default: 8192)");
    fi_param_define(&fmfi_prov, "cma", FI_PARAM_BOOL,
                    "Let a receiver on the same node copy a large message straight from "
                    "the sender's memory with process_vm_readv (default: yes)");
    fi_param_define(&fmfi_prov, "idle_sleep", FI_PARAM_INT,
                    "Once reads have found a completion queue empty for 1 ms, fi_cq_read "
                    "waits up to 1 ms for the endpoints' traffic, so that a rank with "
                    "nothing to do leaves the CPU to one that works: 1 always, 0 never, "
                    "-1 only while the CPUs are crowded, more ranks or tasks ready to "
                    "run than CPUs (default: -1)");
    int idle;
    if (fi_param_get_int(&fmfi_prov, "idle_sleep", &idle) == 0)
        fmfi_params.idle_sleep = idle < 0 ? -1 : idle > 0;
    size_t eager;
    if (fi_param_get_size_t(&fmfi_prov, "eager_max", &eager) == 0)
        fmfi_params.eager_max = eager < FMFI_EAGER_CEILING ? eager : FMFI_EAGER_CEILING;
    if (fi_param_get_size_t(&fmfi_prov, "eager_local_max", &eager) == 0)
        fmfi_params.eager_local_max = eager < FMFI_EAGER_CEILING ? eager : FMFI_EAGER_CEILING;
    int cma;
    if (fi_param_get_bool(&fmfi_prov, "cma", &cma) == 0)
        fmfi_params.cma = cma;
}

/* The API version declared is the running libfabric's own: a consumer asks
 * for at most that (MPICH asks for exactly it), and getinfo honours the
 * rules of whichever version was asked for (info.c). */
FI_EXT_INI
{
    uint32_t v = fi_version();
    fmfi_prov.fi_version = FI_VERSION_GE(v, FI_VERSION(1, 5)) ? v : FI_VERSION(1, 5);
    read_params();
    return &fmfi_prov;
}
