/*
 * PMI-1 client over the socket the launcher passes in PMI_FD (fmrun, MPICH's
 * mpiexec.hydra). Requests and replies alternate, one line each.
 */
#include "boot.h"
#include "nodemap.h"
#include "pmi_wire.h"

#include "core/log.h"
#include "fastmsg.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Reply buffer: a reply may arrive in pieces; one line is taken at a time. */
static char rbuf[FM_PMI_LINE_MAX + 1];
static size_t rlen;

static int write_all(int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads one reply line into line[] (NUL-terminated, without newline). */
static int read_line(int fd, char *line)
{
    for (;;) {
        char *nl = memchr(rbuf, '\n', rlen);
        if (nl) {
            size_t n = (size_t)(nl - rbuf);
            memcpy(line, rbuf, n);
            line[n] = '\0';
            rlen -= n + 1;
            memmove(rbuf, nl + 1, rlen);
            return 0;
        }
        if (rlen == FM_PMI_LINE_MAX)
            return -1; /* a line longer than the protocol allows */
        ssize_t n = read(fd, rbuf + rlen, FM_PMI_LINE_MAX - rlen);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        rlen += (size_t)n;
    }
}

/* Sends a request and parses the reply, which must be cmd=expect. */
static int transact(struct fm_boot *b, const char *req, const char *expect, char *line,
                    struct fm_pmi_msg *reply)
{
    if (write_all(b->fd, req, strlen(req)) < 0) {
        fm_error("boot", "pmi1: cannot write to the launcher (PMI_FD=%d): %s", b->fd,
                 strerror(errno));
        return FM_EBOOT;
    }
    if (read_line(b->fd, line) < 0) {
        fm_error("boot", "pmi1: the launcher closed PMI_FD=%d or sent a line too long", b->fd);
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
    if (b->fd >= 0) {
        rc = transact(b, "cmd=finalize\n", "finalize_ack", line, &r);
        close(b->fd);
        b->fd = -1;
    }
    return rc;
}

static const struct fm_boot_ops pmi1_ops = {
    .name = "pmi1",
    .put = pmi1_put,
    .fence = pmi1_fence,
    .get = pmi1_get,
    .finalize = pmi1_finalize,
};

static int env_int(const char *name, int *out)
{
    const char *s = getenv(name);
    char *end;
    if (!s)
        return -1;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > (1 << 30))
        return -1;
    *out = (int)v;
    return 0;
}

int fm_boot_pmi1_open(struct fm_boot *b, char *err, size_t errlen)
{
    char line[FM_PMI_LINE_MAX + 1], map[FM_BOOT_VAL_MAX];
    struct fm_pmi_msg r;
    rlen = 0;
    if (env_int("PMI_FD", &b->fd) || env_int("PMI_RANK", &b->rank) ||
        env_int("PMI_SIZE", &b->size) || b->size < 1 || b->rank >= b->size) {
        snprintf(err, errlen,
                 "pmi1 bootstrap: PMI_FD, PMI_RANK and PMI_SIZE must be set to numbers "
                 "(start the program with fmrun or mpiexec.hydra)");
        b->fd = -1;
        return FM_EBOOT;
    }
    b->ops = &pmi1_ops;
    if (transact(b, "cmd=init pmi_version=1 pmi_subversion=1\n", "response_to_init", line,
                 &r) ||
        transact(b, "cmd=get_my_kvsname\n", "my_kvsname", line, &r)) {
        snprintf(err, errlen, "pmi1 bootstrap: the launcher on PMI_FD=%d does not speak PMI-1",
                 b->fd);
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
    close(b->fd);
    b->fd = -1;
    b->ops = NULL;
    return FM_EBOOT;
}
