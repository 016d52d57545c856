/*
 * PMI-2 client (srun --mpi=pmi2, MPICH's mpiexec.hydra). After a PMI-1
 * style "init" line that agrees on version 2, requests and replies are
 * length-prefixed frames. The fence is an allgather the launcher runs, and
 * a get is answered by the launcher's local agent from what it gathered, so
 * a rank's address lookups never cross the network.
 */
#include "boot.h"
#include "nodemap.h"
#include "pmi_wire.h"

#include "core/log.h"
#include "fastmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A request being built and the reply it gets. */
struct pmi2_call {
    size_t len;
    char req[FM_PMI2_MSG_MAX];
    char reply[FM_PMI2_MSG_MAX + 1];
    struct fm_pmi_msg r;
};

static int add(struct pmi2_call *c, const char *key, const char *val)
{
    return fm_pmi2_append(c->req, sizeof(c->req), &c->len, key, val);
}

static void start(struct pmi2_call *c, const char *cmd)
{
    c->len = 0;
    add(c, "cmd", cmd);
}

/* Sends the request as one frame: its length, then its bytes. */
static int send_frame(struct fm_boot *b, const struct pmi2_call *c)
{
    char hdr[FM_PMI2_HDR + 1];
    snprintf(hdr, sizeof(hdr), "%-6zu", c->len);
    if (fm_pmi_conn_write(&b->pmi, hdr, FM_PMI2_HDR) < 0 ||
        fm_pmi_conn_write(&b->pmi, c->req, c->len) < 0)
        return -1;
    return 0;
}

/*
 * Sends the request and reads the reply, which must be cmd=expect with
 * rc=0. Returns 0, FM_EBOOT on a broken exchange (with a message), or 1 if
 * the launcher answered with an error code (message in errmsg).
 */
static int call(struct fm_boot *b, struct pmi2_call *c, const char *expect)
{
    if (send_frame(b, c) < 0) {
        fm_error("boot", "pmi2: the connection to the launcher is gone");
        return FM_EBOOT;
    }
    char hdr[FM_PMI2_HDR + 1], *end = hdr;
    long n = 0;
    if (fm_pmi_conn_bytes(&b->pmi, hdr, FM_PMI2_HDR) == 0) {
        hdr[FM_PMI2_HDR] = '\0';
        n = strtol(hdr, &end, 10);
    }
    if (end == hdr || (*end && *end != ' ') || n <= 0 || n > FM_PMI2_MSG_MAX ||
        fm_pmi_conn_bytes(&b->pmi, c->reply, (size_t)n) < 0) {
        fm_error("boot", "pmi2: the launcher closed the connection or sent a broken frame");
        return FM_EBOOT;
    }
    const char *cmd, *rc;
    if (fm_pmi2_parse(c->reply, (size_t)n, &c->r) < 0 || !(cmd = fm_pmi_get(&c->r, "cmd")) ||
        strcmp(cmd, expect) != 0) {
        fm_error("boot", "pmi2: expected cmd=%s from the launcher, got something else", expect);
        return FM_EBOOT;
    }
    rc = fm_pmi_get(&c->r, "rc");
    return rc && strcmp(rc, "0") != 0 ? 1 : 0;
}

static const char *errmsg(const struct pmi2_call *c)
{
    const char *m = fm_pmi_get(&c->r, "errmsg");
    return m ? m : "no reason given";
}

static int pmi2_put(struct fm_boot *b, const char *key, const char *val)
{
    struct pmi2_call c;
    char k[128];
    snprintf(k, sizeof(k), "fm%d.%s", b->rank, key);
    start(&c, "kvs-put");
    if (strlen(val) >= FM_BOOT_VAL_MAX || add(&c, "key", k) || add(&c, "value", val))
        return FM_EINVAL;
    int rc = call(b, &c, "kvs-put-response");
    if (rc == 1)
        fm_error("boot", "pmi2: the launcher refused kvs-put: %s", errmsg(&c));
    return rc ? FM_EBOOT : 0;
}

/*
 * Slurm's kvs-fence returns when every rank has entered it; hydra's returns
 * at once and instead holds back a get of a key it does not have until
 * every rank has fenced as often as the caller. A get of a key nobody puts
 * makes the fence a barrier under both, which fm_init needs.
 */
static int pmi2_fence(struct fm_boot *b)
{
    struct pmi2_call c;
    start(&c, "kvs-fence");
    int rc = call(b, &c, "kvs-fence-response");
    if (rc == 1)
        fm_error("boot", "pmi2: the fence failed: %s", errmsg(&c));
    if (rc)
        return FM_EBOOT;
    start(&c, "kvs-get");
    add(&c, "jobid", b->job);
    add(&c, "key", "fm.never-put");
    return call(b, &c, "kvs-get-response") ? FM_EBOOT : 0;
}

/* A get that may legitimately find nothing: found=FALSE is FM_EBOOT, quietly. */
static int get_value(struct fm_boot *b, struct pmi2_call *c, const char *expect, char *val,
                     size_t len)
{
    int rc = call(b, c, expect);
    if (rc)
        return FM_EBOOT;
    const char *found = fm_pmi_get(&c->r, "found"), *v = fm_pmi_get(&c->r, "value");
    if (!found || strcmp(found, "TRUE") != 0 || !v || strlen(v) >= len)
        return FM_EBOOT;
    memcpy(val, v, strlen(v) + 1);
    return 0;
}

static int pmi2_get(struct fm_boot *b, int rank, const char *key, char *val, size_t len)
{
    struct pmi2_call c;
    char k[128], src[16];
    snprintf(k, sizeof(k), "fm%d.%s", rank, key);
    snprintf(src, sizeof(src), "%d", rank);
    start(&c, "kvs-get");
    if (add(&c, "jobid", b->job) || add(&c, "srcid", src) || add(&c, "key", k))
        return FM_EINVAL;
    return get_value(b, &c, "kvs-get-response", val, len);
}

static int pmi2_finalize(struct fm_boot *b)
{
    struct pmi2_call c;
    int rc = 0;
    if (b->pmi.fd >= 0) {
        start(&c, "finalize");
        rc = call(b, &c, "finalize-response") ? FM_EBOOT : 0;
        fm_pmi_conn_close(&b->pmi);
    }
    return rc;
}

/* PMI-2's abort has no reply and carries no status: the launcher ends the
 * job, and the status is this process's own exit. */
static void pmi2_abort(struct fm_boot *b, int status)
{
    struct pmi2_call c;
    (void)status;
    start(&c, "abort");
    add(&c, "isworld", "TRUE");
    add(&c, "msg", "fm_abort");
    if (b->pmi.fd >= 0 && send_frame(b, &c) == 0)
        fm_pmi_conn_await_close(&b->pmi, FM_BOOT_ABORT_WAIT_MS);
}

static const struct fm_boot_ops pmi2_ops = {
    .name = "pmi2",
    .put = pmi2_put,
    .fence = pmi2_fence,
    .get = pmi2_get,
    .finalize = pmi2_finalize,
    .abort = pmi2_abort,
};

static int int_of(const struct pmi2_call *c, const char *key, int *out)
{
    return fm_parse_count(fm_pmi_get(&c->r, key), out);
}

/* The PMI-1 style line that switches the connection to PMI-2. */
static int agree_on_v2(struct fm_boot *b, char *err, size_t errlen)
{
    static const char init[] = "cmd=init pmi_version=2 pmi_subversion=0\n";
    char line[FM_PMI_LINE_MAX + 1];
    struct fm_pmi_msg r;
    const char *cmd, *ver;
    if (fm_pmi_conn_write(&b->pmi, init, sizeof(init) - 1) < 0 ||
        fm_pmi_conn_line(&b->pmi, line, sizeof(line)) < 0 || fm_pmi_parse(line, &r) < 0 ||
        !(cmd = fm_pmi_get(&r, "cmd")) || strcmp(cmd, "response_to_init") != 0) {
        snprintf(err, errlen, "pmi2 bootstrap: the launcher did not answer the PMI init");
        return -1;
    }
    ver = fm_pmi_get(&r, "pmi_version");
    if (!ver || strcmp(ver, "2") != 0) {
        snprintf(err, errlen,
                 "pmi2 bootstrap: the launcher speaks PMI version %s, not 2 (fmrun serves "
                 "PMI-1 only): unset FM_BOOTSTRAP or set it to pmi1",
                 ver ? ver : "unknown");
        return -1;
    }
    return 0;
}

int fm_boot_pmi2_open(struct fm_boot *b, char *err, size_t errlen)
{
    struct pmi2_call c;
    char map[FM_BOOT_VAL_MAX], id[32];
    const char *jobid = getenv("PMI_JOBID");
    if (fm_pmi_conn_open(&b->pmi, "pmi2", err, errlen) < 0)
        return FM_EBOOT;
    b->ops = &pmi2_ops;
    if (agree_on_v2(b, err, errlen) < 0)
        goto err_close;
    start(&c, "fullinit");
    if (jobid && add(&c, "pmijobid", jobid)) {
        snprintf(err, errlen, "pmi2 bootstrap: PMI_JOBID is too long");
        goto err_close;
    }
    if (b->pmi.by_port) {
        /* hydra's port mode: PMI_ID is the rank, and the connection is
         * identified by the fullinit itself. */
        snprintf(id, sizeof(id), "%d", b->pmi.id);
        add(&c, "pmirank", id);
    } else {
        if (fm_env_int("PMI_RANK", &b->rank)) {
            snprintf(err, errlen, "pmi2 bootstrap: PMI_FD is set but PMI_RANK is not a number");
            goto err_close;
        }
        snprintf(id, sizeof(id), "%d", b->rank);
        add(&c, "pmirank", id);
    }
    add(&c, "threaded", "FALSE");
    int rc = call(b, &c, "fullinit-response");
    if (rc || int_of(&c, "rank", &b->rank) || int_of(&c, "size", &b->size) || b->size < 1 ||
        b->rank >= b->size) {
        snprintf(err, errlen, "pmi2 bootstrap: the launcher refused fullinit: %s",
                 rc == 1 ? errmsg(&c) : "no rank and size in its answer");
        goto err_close;
    }
    start(&c, "job-getid");
    const char *job;
    if (call(b, &c, "job-getid-response") || !(job = fm_pmi_get(&c.r, "jobid")) || !*job ||
        strlen(job) >= sizeof(b->job)) {
        snprintf(err, errlen, "pmi2 bootstrap: no usable job id from the launcher");
        goto err_close;
    }
    snprintf(b->job, sizeof(b->job), "%s", job);
    b->node_of = calloc((size_t)b->size, sizeof(int));
    if (!b->node_of) {
        snprintf(err, errlen, "pmi2 bootstrap: out of memory for %d ranks", b->size);
        goto err_close;
    }
    /* Without a mapping the core compares node cards instead. */
    start(&c, "info-getjobattr");
    add(&c, "key", "PMI_process_mapping");
    if (get_value(b, &c, "info-getjobattr-response", map, sizeof(map)) != 0 ||
        fm_nodemap_parse(map, b->size, b->node_of) != 0) {
        free(b->node_of);
        b->node_of = NULL;
    }
    return 0;

err_close:
    fm_pmi_conn_close(&b->pmi);
    b->ops = NULL;
    return FM_EBOOT;
}
