#include "pmi_listen.h"

#include "boot/pmi_wire.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct pending {
    int fd;
    size_t len;
    char buf[128]; /* "cmd=initack pmiid=N\n" is all that may come first */
};

struct pmi_listen {
    int fd;
    int ranks;
    int npending;
    struct pending *p; /* at most `ranks` */
};

struct pmi_listen *pmi_listen_open(const char *addr, int ranks, char *where, size_t wlen,
                                   char *err, size_t errlen)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *res;
    int rc = getaddrinfo(addr, NULL, &hints, &res);
    if (rc) {
        snprintf(err, errlen, "cannot resolve the PMI address '%s': %s", addr, gai_strerror(rc));
        return NULL;
    }
    struct sockaddr_in sin = *(struct sockaddr_in *)res->ai_addr;
    freeaddrinfo(res);
    struct pmi_listen *l = calloc(1, sizeof(*l));
    if (!l || !(l->p = calloc((size_t)ranks, sizeof(*l->p)))) {
        free(l);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    l->ranks = ranks;
    l->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sin.sin_port = 0;
    socklen_t sl = sizeof(sin);
    if (l->fd < 0 || bind(l->fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
        listen(l->fd, ranks < 4096 ? ranks : 4096) < 0 ||
        getsockname(l->fd, (struct sockaddr *)&sin, &sl) < 0) {
        snprintf(err, errlen, "cannot listen for PMI on %s: %s", addr, strerror(errno));
        pmi_listen_close(l);
        return NULL;
    }
    char ip[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &sin.sin_addr, ip, sizeof(ip));
    snprintf(where, wlen, "%s:%u", ip, ntohs(sin.sin_port));
    return l;
}

void pmi_listen_close(struct pmi_listen *l)
{
    if (!l)
        return;
    for (int i = 0; i < l->npending; i++)
        close(l->p[i].fd);
    if (l->fd >= 0)
        close(l->fd);
    free(l->p);
    free(l);
}

int pmi_listen_pollfds(const struct pmi_listen *l, struct pollfd *pfd)
{
    pfd[0] = (struct pollfd){.fd = l->fd, .events = POLLIN};
    for (int i = 0; i < l->npending; i++)
        pfd[1 + i] = (struct pollfd){.fd = l->p[i].fd, .events = POLLIN};
    return 1 + l->npending;
}

static void forget(struct pmi_listen *l, int i, int close_it)
{
    if (close_it)
        close(l->p[i].fd);
    l->p[i] = l->p[--l->npending];
}

static void accept_all(struct pmi_listen *l)
{
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            return; /* EAGAIN, or a connection that gave up meanwhile */
        if (l->npending == l->ranks) {
            close(fd); /* more strangers than ranks: not ours */
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        l->p[l->npending++] = (struct pending){.fd = fd};
    }
}

int pmi_listen_input(struct pmi_listen *l, int fd, int *conn, const int *taken)
{
    if (fd == l->fd) {
        accept_all(l);
        return -1;
    }
    int i = 0;
    while (i < l->npending && l->p[i].fd != fd)
        i++;
    if (i == l->npending)
        return -1;
    struct pending *p = &l->p[i];
    ssize_t n = read(fd, p->buf + p->len, sizeof(p->buf) - 1 - p->len);
    if (n < 0 && errno == EINTR)
        return -1;
    if (n <= 0) {
        forget(l, i, 1);
        return -1;
    }
    p->len += (size_t)n;
    char *nl = memchr(p->buf, '\n', p->len);
    if (!nl) {
        if (p->len == sizeof(p->buf) - 1)
            forget(l, i, 1);
        return -1;
    }
    /* Nothing may follow before the reply: the rank waits for it. */
    struct fm_pmi_msg m;
    const char *cmd, *id;
    char *end = p->buf;
    *nl = '\0';
    long rank = -1;
    if (nl + 1 == p->buf + p->len && fm_pmi_parse(p->buf, &m) == 0 &&
        (cmd = fm_pmi_get(&m, "cmd")) && strcmp(cmd, "initack") == 0 &&
        (id = fm_pmi_get(&m, "pmiid")))
        rank = strtol(id, &end, 10);
    if (rank < 0 || rank >= l->ranks || *end || taken[rank]) {
        forget(l, i, 1);
        return -1;
    }
    *conn = fd;
    forget(l, i, 0);
    return (int)rank;
}
