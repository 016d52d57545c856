/*
 * PMI-1 client (fmrun, MPICH's mpiexec.hydra, srun --mpi=pmi2 also answers
 * it). Requests and replies alternate, one line each, over the socket in
 * PMI_FD or a TCP connection to PMI_PORT.
 */
#include "boot.h"
#include "nodemap.h"
#include "pmi_wire.h"

#include "core/log.h"
#include "fastmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sends a request and parses the reply, which must be cmd=expect. */
static int transact(struct fm_boot *b, const char *req, const char *expect, char *line,
                    struct fm_pmi_msg *reply)
{
    if (fm_pmi_conn_write(&b->pmi, req, strlen(req)) < 0) {
        fm_error("boot", "pmi1: the connection to the launcher is gone");
        return FM_EBOOT;
    }
    if (fm_pmi_conn_line(&b->pmi, line, FM_PMI_LINE_MAX + 1) < 0) {
        fm_error("boot", "pmi1: the launcher closed the connection or sent a line too long");
        return FM_EBOOT;
    }
    const char *cmd;
    if (fm_pmi_parse(line, reply) < 0 || !(cmd = fm_pmi_get(reply, "cmd")) ||
        strcmp(cmd, expect) != 0) {
        fm_error("boot", "pmi1: expected cmd=%s from the launcher, got something else", expect);
        return FM_EBOOT;
    }
    const char *rc = fm_pmi_get(reply, "rc");
    if (rc && strcmp(rc, "0") != 0) {
        /* A missing key is an answer, not a failure worth a message. */
        if (strcmp(expect, "get_result") != 0) {
            const char *msg = fm_pmi_get(reply, "msg");
            fm_error("boot", "pmi1: the launcher refused %.*s: %s", (int)strcspn(req, " \n"),
                     req, msg ? msg : "no reason given");
        }
        return FM_EBOOT;
    }
    return 0;
}

static int pmi1_put(struct fm_boot *b, const char *key, const char *val)
{
    char req[FM_PMI_LINE_MAX], line[FM_PMI_LINE_MAX + 1];
    struct fm_pmi_msg r;
    if (!fm_pmi_token_ok(key) || !fm_pmi_token_ok(val))
        return FM_EINVAL;
    int n = snprintf(req, sizeof(req), "cmd=put kvsname=%s key=fm%d.%s value=%s\n", b->job,
                     b->rank, key, val);
    if (n < 0 || (size_t)n >= sizeof(req))
        return FM_EINVAL;
    return transact(b, req, "put_result", line, &r);
}

static int pmi1_fence(struct fm_boot *b)
{
    char line[FM_PMI_LINE_MAX + 1];
    struct fm_pmi_msg r;
    return transact(b, "cmd=barrier_in\n", "barrier_out", line, &r);
}

static int get_raw(struct fm_boot *b, const char *key, char *val, size_t len)
{
    char req[FM_PMI_LINE_MAX], line[FM_PMI_LINE_MAX + 1];
    struct fm_pmi_msg r;
    snprintf(req, sizeof(req), "cmd=get kvsname=%s key=%s\n", b->job, key);
    int rc = transact(b, req, "get_result", line, &r);
    if (rc)
        return rc;
    const char *v = fm_pmi_get(&r, "value");
    if (!v || strlen(v) >= len)
        return FM_EBOOT;
    memcpy(val, v, strlen(v) + 1);
    return 0;
}

static int pmi1_get(struct fm_boot *b, int rank, const char *key, char *val, size_t len)
{
    char k[128];
    snprintf(k, sizeof(k), "fm%d.%s", rank, key);
    return get_raw(b, k, val, len);
}

static int pmi1_finalize(struct fm_boot *b)
{
    char line[FM_PMI_LINE_MAX + 1];
    struct fm_pmi_msg r;
    int rc = 0;
    if (b->pmi.fd >= 0) {
        rc = transact(b, "cmd=finalize\n", "finalize_ack", line, &r);
        fm_pmi_conn_close(&b->pmi);
    }
    return rc;
}

/* fmrun and hydra end the job with exitcode as its status. fmrun closes
 * the connection once it has the request, so this process does not exit
 * before its launcher knows why. */
static void pmi1_abort(struct fm_boot *b, int status)
{
    char req[64];
    snprintf(req, sizeof(req), "cmd=abort exitcode=%d\n", status);
    if (b->pmi.fd >= 0 && fm_pmi_conn_write(&b->pmi, req, strlen(req)) == 0)
        fm_pmi_conn_await_close(&b->pmi, FM_BOOT_ABORT_WAIT_MS);
}

static const struct fm_boot_ops pmi1_ops = {
    .name = "pmi1",
    .put = pmi1_put,
    .fence = pmi1_fence,
    .get = pmi1_get,
    .finalize = pmi1_finalize,
    .abort = pmi1_abort,
};

/* Reads the "cmd=set name=N" the launcher sends after initack in port mode. */
static int read_set(struct fm_boot *b, const char *name, int *out)
{
    char line[FM_PMI_LINE_MAX + 1];
    struct fm_pmi_msg r;
    const char *cmd;
    if (fm_pmi_conn_line(&b->pmi, line, sizeof(line)) < 0 || fm_pmi_parse(line, &r) < 0 ||
        !(cmd = fm_pmi_get(&r, "cmd")) || strcmp(cmd, "set") != 0)
        return -1;
    return fm_parse_count(fm_pmi_get(&r, name), out);
}

/* Port mode: the process says which one it is and learns its rank. */
static int port_handshake(struct fm_boot *b)
{
    char req[64], line[FM_PMI_LINE_MAX + 1];
    struct fm_pmi_msg r;
    int debug;
    snprintf(req, sizeof(req), "cmd=initack pmiid=%d\n", b->pmi.id);
    if (transact(b, req, "initack", line, &r) || read_set(b, "size", &b->size) ||
        read_set(b, "rank", &b->rank) || read_set(b, "debug", &debug))
        return -1;
    return 0;
}

int fm_boot_pmi1_open(struct fm_boot *b, char *err, size_t errlen)
{
    char line[FM_PMI_LINE_MAX + 1], map[FM_BOOT_VAL_MAX];
    struct fm_pmi_msg r;
    if (fm_pmi_conn_open(&b->pmi, "pmi1", err, errlen) < 0)
        return FM_EBOOT;
    b->ops = &pmi1_ops;
    if (b->pmi.by_port) {
        if (port_handshake(b) < 0) {
            snprintf(err, errlen,
                     "pmi1 bootstrap: the launcher at PMI_PORT=%s did not accept PMI_ID=%d",
                     getenv("PMI_PORT"), b->pmi.id);
            goto err_close;
        }
    } else if (fm_env_int("PMI_RANK", &b->rank) || fm_env_int("PMI_SIZE", &b->size)) {
        snprintf(err, errlen, "pmi1 bootstrap: PMI_FD is set but PMI_RANK and PMI_SIZE are not "
                              "numbers (start the program with fmrun or mpiexec.hydra)");
        goto err_close;
    }
    if (b->size < 1 || b->rank >= b->size) {
        snprintf(err, errlen, "pmi1 bootstrap: rank %d is not in a job of %d", b->rank, b->size);
        goto err_close;
    }
    if (transact(b, "cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init", line,
                 &r) ||
        transact(b, "cmd=get_my_kvsname\n", "my_kvsname", line, &r)) {
        snprintf(err, errlen, "pmi1 bootstrap: the launcher does not speak PMI-1");
        goto err_close;
    }
    const char *kvs = fm_pmi_get(&r, "kvsname");
    if (!kvs || !*kvs || strlen(kvs) >= sizeof(b->job)) {
        snprintf(err, errlen, "pmi1 bootstrap: no usable kvsname from the launcher");
        goto err_close;
    }
    snprintf(b->job, sizeof(b->job), "%s", kvs);
    b->node_of = calloc((size_t)b->size, sizeof(int));
    if (!b->node_of) {
        snprintf(err, errlen, "pmi1 bootstrap: out of memory for %d ranks", b->size);
        goto err_close;
    }
    /* Without a mapping the core compares node cards instead. */
    if (get_raw(b, "PMI_process_mapping", map, sizeof(map)) != 0 ||
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
