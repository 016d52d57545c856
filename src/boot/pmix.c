/*
 * PMIx client (Open MPI's mpirun, srun --mpi=pmix). libpmix is loaded when
 * a job asks for it, so the library runs where libpmix is not installed;
 * only its header is needed at build time. Puts are committed and then
 * gathered by one fence that collects the data, after which every get is
 * answered from the local PMIx server's copy.
 */
#include "boot.h"

#include "core/log.h"
#include "fastmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef FM_HAVE_PMIX

#include <dlfcn.h>
#include <pmix.h>

#define FM_LIBPMIX "libpmix.so.2"

static struct {
    void *lib;
    pmix_proc_t me;
    pmix_status_t (*init)(pmix_proc_t *, pmix_info_t *, size_t);
    pmix_status_t (*finalize)(const pmix_info_t *, size_t);
    pmix_status_t (*put)(pmix_scope_t, const char *, pmix_value_t *);
    pmix_status_t (*commit)(void);
    pmix_status_t (*fence)(const pmix_proc_t *, size_t, const pmix_info_t *, size_t);
    pmix_status_t (*get)(const pmix_proc_t *, const char *, const pmix_info_t *, size_t,
                         pmix_value_t **);
    pmix_status_t (*abort)(int, const char *, pmix_proc_t *, size_t);
    void (*value_destruct)(pmix_value_t *);
    const char *(*error_string)(pmix_status_t);
} px;

static const char *why(pmix_status_t s) { return px.error_string ? px.error_string(s) : "?"; }

static void release(pmix_value_t *v)
{
    px.value_destruct(v);
    free(v);
}

static int pmix_put(struct fm_boot *b, const char *key, const char *val)
{
    char k[PMIX_MAX_KEYLEN + 1];
    (void)b;
    snprintf(k, sizeof(k), "fm.%s", key);
    pmix_value_t v = {.type = PMIX_STRING, .data.string = (char *)val};
    pmix_status_t s = px.put(PMIX_GLOBAL, k, &v);
    if (s != PMIX_SUCCESS) {
        fm_error("boot", "pmix: PMIx_Put(%s): %s", k, why(s));
        return FM_EBOOT;
    }
    return 0;
}

static int pmix_fence(struct fm_boot *b)
{
    (void)b;
    pmix_info_t collect;
    memset(&collect, 0, sizeof(collect));
    snprintf(collect.key, sizeof(collect.key), "%s", PMIX_COLLECT_DATA);
    collect.value.type = PMIX_BOOL;
    collect.value.data.flag = true;
    pmix_status_t s = px.commit();
    if (s == PMIX_SUCCESS)
        s = px.fence(NULL, 0, &collect, 1);
    if (s != PMIX_SUCCESS) {
        fm_error("boot", "pmix: the fence failed: %s", why(s));
        return FM_EBOOT;
    }
    return 0;
}

static int pmix_get(struct fm_boot *b, int rank, const char *key, char *val, size_t len)
{
    char k[PMIX_MAX_KEYLEN + 1];
    pmix_proc_t p = px.me;
    pmix_value_t *v = NULL;
    (void)b;
    p.rank = (pmix_rank_t)rank;
    snprintf(k, sizeof(k), "fm.%s", key);
    if (px.get(&p, k, NULL, 0, &v) != PMIX_SUCCESS || !v)
        return FM_EBOOT;
    int rc = FM_EBOOT;
    if (v->type == PMIX_STRING && v->data.string && strlen(v->data.string) < len) {
        memcpy(val, v->data.string, strlen(v->data.string) + 1);
        rc = 0;
    }
    release(v);
    return rc;
}

static int pmix_finalize(struct fm_boot *b)
{
    (void)b;
    pmix_status_t s = px.finalize(NULL, 0);
    /* libpmix stays loaded: its threads and atexit handlers may still run. */
    return s == PMIX_SUCCESS ? 0 : FM_EBOOT;
}

/* Returns when the PMIx server has acted on it (it may end this process
 * first); the status becomes the job's where the launcher reports one. */
static void pmix_abort(struct fm_boot *b, int status)
{
    (void)b;
    px.abort(status, "fm_abort", NULL, 0);
}

static const struct fm_boot_ops pmix_ops = {
    .name = "pmix",
    .put = pmix_put,
    .fence = pmix_fence,
    .get = pmix_get,
    .finalize = pmix_finalize,
    .abort = pmix_abort,
};

static int load(char *err, size_t errlen)
{
    if (px.lib)
        return 0;
    /* Global: libpmix's own plugins resolve their symbols against it. */
    void *lib = dlopen(FM_LIBPMIX, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        snprintf(err, errlen,
                 "pmix bootstrap: PMIX_NAMESPACE is set but %s cannot be loaded (%s): install "
                 "libpmix (Debian: libpmix2) or start the job with a PMI launcher",
                 FM_LIBPMIX, dlerror());
        return -1;
    }
    const char *missing = NULL;
#define SYM(field, name)                                                                         \
    if (!(*(void **)&px.field = dlsym(lib, name)) && !missing)                                  \
        missing = name;
    SYM(init, "PMIx_Init")
    SYM(finalize, "PMIx_Finalize")
    SYM(put, "PMIx_Put")
    SYM(commit, "PMIx_Commit")
    SYM(fence, "PMIx_Fence")
    SYM(get, "PMIx_Get")
    SYM(abort, "PMIx_Abort")
    SYM(value_destruct, "PMIx_Value_destruct")
    SYM(error_string, "PMIx_Error_string")
#undef SYM
    if (missing) {
        snprintf(err, errlen, "pmix bootstrap: %s has no %s: it is older than PMIx 4",
                 FM_LIBPMIX, missing);
        dlclose(lib);
        return -1;
    }
    px.lib = lib;
    return 0;
}

/* Ranks sharing this node, from PMIX_LOCAL_PEERS ("0,1,5"): node 0 for
 * them and a distinct node for every other rank, which is all the core
 * needs to know. */
static int local_peers(struct fm_boot *b, char *err, size_t errlen)
{
    pmix_proc_t job = px.me;
    pmix_value_t *v = NULL;
    job.rank = PMIX_RANK_WILDCARD;
    b->node_of = malloc(sizeof(int) * (size_t)b->size);
    if (!b->node_of) {
        snprintf(err, errlen, "pmix bootstrap: out of memory for %d ranks", b->size);
        return -1;
    }
    for (int r = 0; r < b->size; r++)
        b->node_of[r] = 1 + r;
    b->node_of[b->rank] = 0;
    if (px.get(&job, PMIX_LOCAL_PEERS, NULL, 0, &v) != PMIX_SUCCESS || !v) {
        free(b->node_of); /* the core falls back to node cards */
        b->node_of = NULL;
        return 0;
    }
    if (v->type == PMIX_STRING && v->data.string) {
        for (const char *p = v->data.string; *p;) {
            char *end;
            long r = strtol(p, &end, 10);
            if (end == p)
                break;
            if (r >= 0 && r < b->size)
                b->node_of[r] = 0;
            p = *end == ',' ? end + 1 : end;
        }
    }
    release(v);
    return 0;
}

int fm_boot_pmix_open(struct fm_boot *b, char *err, size_t errlen)
{
    if (!getenv("PMIX_NAMESPACE")) {
        snprintf(err, errlen,
                 "pmix bootstrap: PMIX_NAMESPACE is not set: this process was not started by a "
                 "PMIx launcher (Open MPI's mpirun, srun --mpi=pmix)%s",
                 getenv("PMI_FD") || getenv("PMI_PORT")
                     ? "; it was started by a PMI launcher: unset FM_BOOTSTRAP or set it to pmi1"
                     : "");
        return FM_EBOOT;
    }
    if (load(err, errlen) < 0)
        return FM_EBOOT;
    pmix_status_t s = px.init(&px.me, NULL, 0);
    if (s != PMIX_SUCCESS) {
        snprintf(err, errlen, "pmix bootstrap: PMIx_Init failed: %s", why(s));
        return FM_EBOOT;
    }
    b->ops = &pmix_ops;
    pmix_proc_t job = px.me;
    pmix_value_t *v = NULL;
    job.rank = PMIX_RANK_WILDCARD;
    s = px.get(&job, PMIX_JOB_SIZE, NULL, 0, &v);
    if (s != PMIX_SUCCESS || !v || v->type != PMIX_UINT32 || v->data.uint32 < 1 ||
        v->data.uint32 > (1u << 30)) {
        snprintf(err, errlen, "pmix bootstrap: no job size from the PMIx server: %s", why(s));
        if (v)
            release(v);
        goto err_fin;
    }
    b->size = (int)v->data.uint32;
    release(v);
    b->rank = (int)px.me.rank;
    snprintf(b->job, sizeof(b->job), "%s", px.me.nspace);
    if (b->rank >= b->size) {
        snprintf(err, errlen, "pmix bootstrap: rank %d is not in a job of %d", b->rank, b->size);
        goto err_fin;
    }
    if (local_peers(b, err, errlen) < 0)
        goto err_fin;
    return 0;

err_fin:
    px.finalize(NULL, 0);
    b->ops = NULL;
    return FM_EBOOT;
}

#else /* !FM_HAVE_PMIX */

int fm_boot_pmix_open(struct fm_boot *b, char *err, size_t errlen)
{
    (void)b;
    snprintf(err, errlen,
             "pmix bootstrap: this fastmsg was built without PMIx headers (install libpmix-dev "
             "and rebuild), or start the job with a PMI launcher");
    return FM_EBOOT;
}

#endif
