#include "pmi_conn.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int fm_parse_count(const char *s, int *out)
{
    char *end;
    if (!s)
        return -1;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > (1 << 30))
        return -1;
    *out = (int)v;
    return 0;
}

int fm_env_int(const char *name, int *out) { return fm_parse_count(getenv(name), out); }

/* PMI_PORT is "host:port"; the host may be a name or an IPv4/IPv6 address. */
static int connect_port(const char *hostport, char *why, size_t whylen)
{
    char host[256];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || (size_t)(colon - hostport) >= sizeof(host) || !colon[1]) {
        snprintf(why, whylen, "PMI_PORT='%s' is not host:port", hostport);
        return -1;
    }
    memcpy(host, hostport, (size_t)(colon - hostport));
    host[colon - hostport] = '\0';
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc) {
        snprintf(why, whylen, "cannot resolve PMI_PORT host '%s': %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *a = res; a && fd < 0; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
            err = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(why, whylen, "cannot connect to the launcher at PMI_PORT=%s: %s", hostport,
                 strerror(err));
        return -1;
    }
    int one = 1; /* requests are small and each waits for its reply */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

int fm_pmi_conn_open(struct fm_pmi_conn *c, const char *who, char *err, size_t errlen)
{
    char why[384];
    c->len = 0;
    c->by_port = 0;
    c->id = -1;
    if (fm_env_int("PMI_FD", &c->fd) == 0)
        return 0;
    const char *port = getenv("PMI_PORT");
    if (port) {
        if (fm_env_int("PMI_ID", &c->id) != 0) {
            snprintf(err, errlen, "%s bootstrap: PMI_PORT is set but PMI_ID is not a number",
                     who);
            return -1;
        }
        c->fd = connect_port(port, why, sizeof(why));
        if (c->fd < 0) {
            snprintf(err, errlen, "%s bootstrap: %s", who, why);
            return -1;
        }
        c->by_port = 1;
        return 0;
    }
    c->fd = -1;
    snprintf(err, errlen,
             "%s bootstrap: neither PMI_FD nor PMI_PORT is set: this process was not started "
             "by a PMI launcher (fmrun, mpiexec.hydra, srun --mpi=pmi2)",
             who);
    return -1;
}

void fm_pmi_conn_close(struct fm_pmi_conn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

int fm_pmi_conn_write(struct fm_pmi_conn *c, const char *p, size_t len)
{
    while (len) {
        ssize_t n = write(c->fd, p, len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

/* Reads more into the buffer; -1 at end of stream, on error, or when full. */
static int fill(struct fm_pmi_conn *c)
{
    for (;;) {
        if (c->len == sizeof(c->buf))
            return -1;
        ssize_t n = read(c->fd, c->buf + c->len, sizeof(c->buf) - c->len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        c->len += (size_t)n;
        return 0;
    }
}

static void consume(struct fm_pmi_conn *c, size_t n)
{
    c->len -= n;
    memmove(c->buf, c->buf + n, c->len);
}

int fm_pmi_conn_line(struct fm_pmi_conn *c, char *line, size_t max)
{
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl) {
            size_t n = (size_t)(nl - c->buf);
            if (n >= max)
                return -1;
            memcpy(line, c->buf, n);
            line[n] = '\0';
            consume(c, n + 1);
            return 0;
        }
        if (c->len >= max || fill(c) < 0)
            return -1;
    }
}

int fm_pmi_conn_bytes(struct fm_pmi_conn *c, char *out, size_t n)
{
    if (n > sizeof(c->buf))
        return -1;
    while (c->len < n)
        if (fill(c) < 0)
            return -1;
    memcpy(out, c->buf, n);
    consume(c, n);
    return 0;
}

void fm_pmi_conn_await_close(struct fm_pmi_conn *c, int timeout_ms)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        long waited = (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        if (waited >= timeout_ms)
            return;
        int ready = poll(&p, 1, (int)(timeout_ms - waited));
        if (ready < 0 && errno == EINTR)
            continue;
        if (ready <= 0)
            return;
        char sink[256];
        ssize_t n = read(c->fd, sink, sizeof(sink));
        if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN))
            return;
    }
}
