/* fastmsg as a benchmark transport: the public API only. */
#include "xport.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct fm_xport {
    struct xport x;
    struct job *job;
    fm_ep *ep;
    fm_ep *server;      /* channel SERVER_CHANNEL: the connect test's server */
    uint32_t next_chan; /* fresh channels for the connect test's clients */
    int by_name;        /* the connect test's clients look the server up */
};

#define SERVER_CHANNEL 3
#define SERVER_TYPE 0x4e414d45u /* "NAME": the server's name is {type, 1}, cluster scope */
#define SERVER_WAIT_S 30        /* for the name to reach the client's node */

static void die(const char *what, long rc)
{
    fprintf(stderr, "fmperf: %s: %s\n", what, fm_strerror((int)rc));
    exit(1);
}

/* 16-byte lanes: a reader as fast as the loads the CPU can issue. */
typedef uint64_t lanes __attribute__((vector_size(16)));

uint64_t xport_consume(const void *p, size_t len)
{
    const unsigned char *b = p;
    lanes a[4] = {{0, 0}, {0, 0}, {0, 0}, {0, 0}}, w[4];
    size_t i = 0;
    for (; i + sizeof(w) <= len; i += sizeof(w)) {
        memcpy(w, b + i, sizeof(w));
        a[0] ^= w[0];
        a[1] ^= w[1];
        a[2] ^= w[2];
        a[3] ^= w[3];
    }
    lanes t = a[0] ^ a[1] ^ a[2] ^ a[3];
    uint64_t acc = t[0] ^ t[1];
    for (; i < len; i++)
        acc ^= b[i];
    return acc;
}

void xport_fm_send(fm_ep *ep, fm_addr dst, const void *buf, size_t len)
{
    size_t off = 0;
    for (;;) {
        struct iovec v = {(char *)buf + off, len - off};
        ssize_t n = fm_send(ep, dst, &v, 1);
        if (n == FM_EAGAIN) {
            int rc = fm_wait(ep, -1);
            if (rc < 0)
                die("fm_wait", rc);
            continue;
        }
        if (n < 0)
            die("fm_send", n);
        off += (size_t)n;
        if (off == len)
            return;
    }
}

static volatile uint64_t sink;

void xport_fm_recv(fm_ep *ep, void *buf, size_t len)
{
    size_t got = 0;
    for (;;) {
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        ssize_t n = fm_recv(ep, seg, &nseg, NULL);
        if (n == FM_EAGAIN) {
            int rc = fm_wait(ep, -1);
            if (rc < 0)
                die("fm_wait", rc);
            continue;
        }
        if (n < 0)
            die("fm_recv", n);
        if ((size_t)n > len - got) {
            fprintf(stderr, "fmperf: received %zd bytes where %zu were left\n", n, len - got);
            exit(1);
        }
        for (int i = 0; i < nseg; i++) {
            if (buf)
                memcpy((char *)buf + got, seg[i].iov_base, seg[i].iov_len);
            else
                sink ^= xport_consume(seg[i].iov_base, seg[i].iov_len);
            got += seg[i].iov_len;
        }
        fm_recv_done(ep);
        if (got == len)
            return;
    }
}

fm_addr job_addr(const struct job *j, int rank, uint32_t channel)
{
    if (!j->named)
        return fm_addr_of(j->ctx, rank, channel);
    return channel < JOB_CHANNELS ? j->peer[channel] : FM_ADDR_NONE;
}

void job_ctl_send(struct job *j, int to, const void *buf, size_t len)
{
    xport_fm_send(j->ctl, job_addr(j, to, 1), buf, len);
}

/* Control messages that arrived from another rank than the one awaited. */
struct stashed {
    struct stashed *next;
    int from;
    size_t len;
    unsigned char data[];
};
static struct stashed *stash;

/* Control messages are short (one fm message each). */
void job_ctl_recv(struct job *j, int from, void *buf, size_t len)
{
    for (struct stashed **p = &stash; *p; p = &(*p)->next) {
        if ((*p)->from != from)
            continue;
        struct stashed *s = *p;
        if (s->len != len) {
            fprintf(stderr, "fmperf: control message of %zu bytes, expected %zu\n", s->len, len);
            exit(1);
        }
        memcpy(buf, s->data, len);
        *p = s->next;
        free(s);
        return;
    }
    for (;;) {
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        fm_addr src;
        ssize_t n = fm_recv(j->ctl, seg, &nseg, &src);
        if (n == FM_EAGAIN) {
            fm_wait(j->ctl, -1);
            continue;
        }
        if (n < 0)
            die("fm_recv", n);
        struct stashed *s = malloc(sizeof(*s) + (size_t)n);
        if (!s)
            die("malloc", FM_ENOMEM);
        s->from = j->named ? 1 - j->rank : fm_addr_rank(j->ctx, src); /* named: the one peer */
        s->len = (size_t)n;
        s->next = NULL;
        size_t off = 0;
        for (int i = 0; i < nseg; i++) {
            memcpy(s->data + off, seg[i].iov_base, seg[i].iov_len);
            off += seg[i].iov_len;
        }
        fm_recv_done(j->ctl);
        if (s->from == from && s->len == len) {
            memcpy(buf, s->data, len);
            free(s);
            return;
        }
        struct stashed **tail = &stash;
        while (*tail)
            tail = &(*tail)->next;
        *tail = s;
    }
}

void job_barrier(struct job *j)
{
    char b = 0;
    if (j->rank == 0) {
        for (int i = 1; i < j->size; i++)
            job_ctl_recv(j, i, &b, 1);
        for (int i = 1; i < j->size; i++)
            job_ctl_send(j, i, &b, 1);
    } else {
        job_ctl_send(j, 0, &b, 1);
        job_ctl_recv(j, 0, &b, 1);
    }
}

static int fm_x_send(struct xport *x, int to, const void *buf, size_t len)
{
    struct fm_xport *f = (struct fm_xport *)x;
    xport_fm_send(f->ep, job_addr(f->job, to, 0), buf, len);
    return 0;
}

static int fm_x_recv(struct xport *x, int from, void *buf, size_t len)
{
    struct fm_xport *f = (struct fm_xport *)x;
    (void)from;
    xport_fm_recv(f->ep, x->in_place ? NULL : buf, len);
    return 0;
}

/* The endpoint already receives from every sender, in arrival order: one
 * message (or prefix of one) per call. */
static size_t fm_x_recv_any(struct xport *x, void *buf, size_t len, int *from, int timeout_ms)
{
    struct fm_xport *f = (struct fm_xport *)x;
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    fm_addr src;
    ssize_t n = fm_recv(f->ep, seg, &nseg, &src);
    if (n == FM_EAGAIN) {
        int rc = fm_wait(f->ep, timeout_ms);
        if (rc == FM_ETIMEDOUT)
            return 0;
        if (rc < 0)
            die("fm_wait", rc);
        n = fm_recv(f->ep, seg, &nseg, &src);
        if (n == FM_EAGAIN)
            return 0;
    }
    if (n < 0)
        die("fm_recv", n);
    size_t off = 0;
    for (int i = 0; i < nseg; i++) {
        size_t k = seg[i].iov_len;
        if (x->in_place)
            sink ^= xport_consume(seg[i].iov_base, k);
        else if (off < len)
            memcpy((char *)buf + off, seg[i].iov_base, k < len - off ? k : len - off);
        off += k;
    }
    *from = f->job->named ? 1 - f->job->rank : fm_addr_rank(f->job->ctx, src);
    fm_recv_done(f->ep);
    return (size_t)n;
}

static void fm_x_close(struct xport *x)
{
    struct fm_xport *f = (struct fm_xport *)x;
    fm_ep_close(f->server);
    fm_ep_close(f->ep);
    free(f);
}

/* The connect test's server: rank `to`, or the publisher of its name. */
static fm_addr server_addr(struct fm_xport *f, int to)
{
    if (!f->by_name)
        return job_addr(f->job, to, SERVER_CHANNEL);
    fm_addr a;
    int rc = fm_name_lookup(f->job->ctx, SERVER_TYPE, 1, 0, &a);
    if (rc)
        die("fm_name_lookup", rc);
    return a;
}

/* A "connection" in fastmsg is a pair of endpoints: open one on a fresh
 * channel, talk, close it (which ends its flows). */
static int fm_x_exchange(struct xport *x, int to, void *buf, size_t len)
{
    struct fm_xport *f = (struct fm_xport *)x;
    fm_ep *ep;
    int rc = fm_ep_open(f->job->ctx, f->next_chan++, &ep);
    if (rc)
        die("fm_ep_open", rc);
    xport_fm_send(ep, server_addr(f, to), buf, len);
    xport_fm_recv(ep, buf, len);
    fm_ep_close(ep);
    return 0;
}

static int fm_x_serve(struct xport *x, int from, void *buf, size_t len)
{
    struct fm_xport *f = (struct fm_xport *)x;
    size_t got = 0;
    fm_addr src = FM_ADDR_NONE;
    (void)from;
    do {
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        ssize_t n = fm_recv(f->server, seg, &nseg, &src);
        if (n == FM_EAGAIN) {
            fm_wait(f->server, -1);
            continue;
        }
        if (n < 0)
            die("fm_recv", n);
        for (int i = 0; i < nseg; i++) {
            memcpy((char *)buf + got, seg[i].iov_base, seg[i].iov_len);
            got += seg[i].iov_len;
        }
        fm_recv_done(f->server);
    } while (got < len);
    xport_fm_send(f->server, src, buf, len);
    return 0;
}

/* --names: rank 1's server publishes its name; rank 0 waits until that is
 * the only publication of the name it sees (replication takes a moment
 * between hosts, and a previous run's may linger there). */
static void publish_server(struct fm_xport *f)
{
    struct job *j = f->job;
    if (j->rank == 1) {
        int rc = fm_name_publish(f->server, SERVER_TYPE, 1, 1, FM_SCOPE_CLUSTER);
        if (rc)
            die("fm_name_publish", rc);
        return;
    }
    if (j->rank != 0)
        return;
    fm_addr want = job_addr(j, 1, SERVER_CHANNEL);
    struct fm_name_entry e[2];
    ssize_t n = 0;
    for (int tries = 0; tries < SERVER_WAIT_S * 1000; tries++) {
        n = fm_name_lookup_all(j->ctx, SERVER_TYPE, 1, 1, e, 2);
        if (n < 0)
            die("fm_name_lookup_all", n);
        if (n == 1 && e[0].addr == want)
            return;
        usleep(1000);
    }
    fprintf(stderr,
            "fmperf: after %d s, %zd publishers of {0x%x, 1} instead of rank 1's server alone "
            "(another run in this domain? set FM_KEY)\n",
            SERVER_WAIT_S, n, SERVER_TYPE);
    exit(1);
}

struct xport *xport_fm_open(struct job *j, int in_place, int by_name)
{
    struct fm_xport *f = calloc(1, sizeof(*f));
    if (!f)
        die("calloc", FM_ENOMEM);
    int rc = fm_ep_open(j->ctx, 0, &f->ep);
    if (!rc)
        rc = fm_ep_open(j->ctx, SERVER_CHANNEL, &f->server);
    if (rc)
        die("fm_ep_open", rc);
    job_introduce(j, 0, f->ep);
    job_introduce(j, SERVER_CHANNEL, f->server);
    f->job = j;
    f->next_chan = 1u << 20;
    f->by_name = by_name;
    if (by_name)
        publish_server(f);
    f->x = (struct xport){.name = "fastmsg", .in_place = in_place, .send = fm_x_send,
                          .recv = fm_x_recv, .close = fm_x_close, .exchange = fm_x_exchange,
                          .serve = fm_x_serve, .recv_any = fm_x_recv_any};
    return &f->x;
}
