/*
 * Kernel sockets as the baseline transport, on loopback between ranks of one
 * network namespace and over the data network otherwise: TCP (a stream per
 * pair of ranks, TCP_NODELAY) and UDP (datagrams of at most 64000 bytes,
 * with a credit per window because UDP has no flow control of its own).
 * Busy-polled with non-blocking calls when every rank has a core, blocking
 * otherwise, so the baseline is as fast as the kernel path gets here.
 */
#include "xport.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define UDP_CHUNK 64000
#define UDP_WINDOW (1u << 20) /* bytes in flight before the sender waits for credit */

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif

struct sock_xport {
    struct xport x;
    int udp;
    int proto;      /* stream sockets: 0 (TCP) or IPPROTO_MPTCP */
    int kept[4];    /* MPTCP: listeners kept for joining subflows */
    int nkept;
    int busy;
    int *sfd;       /* socket to send to rank i */
    int *rfd;       /* socket to receive from rank i */
    int credit_fd;  /* UDP: where credits for our sends arrive */
    int *credit_to; /* UDP: socket to send credits to rank i */
    uint64_t *sent, *acked;     /* UDP, per destination: bytes sent / credited */
    uint64_t *recvd, *credited; /* UDP, per source */
    int size;
    int listen_fd;          /* TCP connect test: rank 1's listening socket */
    uint32_t server_ip;     /* rank 0: where it is */
    uint16_t server_port;
    struct pollfd *pfd;     /* recv_any: a socket per sender, polled together */
    int *pfd_rank;          /* the rank each of them comes from */
    int npfd;
    int cursor;             /* the next entry of the last poll's ready ones */
};

static void die_errno(const char *what)
{
    fprintf(stderr, "fmperf: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int wait_fd(int fd, short ev)
{
    struct pollfd p = {.fd = fd, .events = ev};
    return poll(&p, 1, 10000);
}

/* write() all of it, spinning or blocking as configured. */
static void write_all(struct sock_xport *s, int fd, const char *p, size_t len)
{
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL | (s->busy ? MSG_DONTWAIT : 0));
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == ENOBUFS) {
                if (!s->busy && wait_fd(fd, POLLOUT) == 0) {
                    fprintf(stderr, "fmperf: %s peer stuck sending\n", s->x.name);
                    exit(1);
                }
                continue;
            }
            die_errno("send");
        }
        p += n;
        len -= (size_t)n;
    }
}

/* One recv() of up to len bytes, spinning or blocking; returns the count. */
static size_t read_some(struct sock_xport *s, int fd, char *p, size_t len)
{
    for (;;) {
        ssize_t n = recv(fd, p, len, s->busy ? MSG_DONTWAIT : 0);
        if (n > 0)
            return (size_t)n;
        if (n == 0) {
            fprintf(stderr, "fmperf: %s peer closed the connection\n", s->x.name);
            exit(1);
        }
        if (errno == EINTR || errno == EAGAIN)
            continue;
        if (errno == ETIMEDOUT) {
            fprintf(stderr, "fmperf: %s peer: nothing for 10 s (a datagram lost?)\n",
                    s->x.name);
            exit(1);
        }
        die_errno("recv");
    }
}

static int sock_send(struct xport *x, int to, const void *buf, size_t len)
{
    struct sock_xport *s = (struct sock_xport *)x;
    if (!s->udp) {
        write_all(s, s->sfd[to], buf, len);
        return 0;
    }
    size_t off = 0;
    do {
        size_t n = len - off < UDP_CHUNK ? len - off : UDP_CHUNK;
        while (s->sent[to] + n - s->acked[to] > UDP_WINDOW) {
            uint64_t credit;
            read_some(s, s->credit_fd, (char *)&credit, sizeof(credit));
            if (credit > s->acked[to])
                s->acked[to] = credit;
        }
        write_all(s, s->sfd[to], (const char *)buf + off, n);
        s->sent[to] += n;
        off += n;
    } while (off < len);
    return 0;
}

static int sock_recv(struct xport *x, int from, void *buf, size_t len)
{
    struct sock_xport *s = (struct sock_xport *)x;
    size_t got = 0;
    while (got < len) {
        size_t n = read_some(s, s->rfd[from], (char *)buf + got, len - got);
        got += n;
        if (s->udp) {
            s->recvd[from] += n;
            if (s->recvd[from] - s->credited[from] >= UDP_WINDOW / 4) {
                s->credited[from] = s->recvd[from];
                write_all(s, s->credit_to[from], (const char *)&s->recvd[from],
                          sizeof(uint64_t));
            }
        }
    }
    return 0;
}

/* recv_any's poll set: every rank this one receives from, once. */
static void build_poll_set(struct sock_xport *s)
{
    s->pfd = calloc((size_t)s->size, sizeof(*s->pfd));
    s->pfd_rank = calloc((size_t)s->size, sizeof(int));
    if (!s->pfd || !s->pfd_rank)
        die_errno("calloc");
    for (int i = 0; i < s->size; i++)
        if (s->rfd[i] >= 0) {
            s->pfd[s->npfd] = (struct pollfd){.fd = s->rfd[i], .events = POLLIN};
            s->pfd_rank[s->npfd++] = i;
        }
    s->cursor = s->npfd; /* nothing ready yet */
}

/* Polls all senders, then reads each ready one once before polling again,
 * so a sender whose data keeps arriving cannot starve the others. */
static size_t sock_recv_any(struct xport *x, void *buf, size_t len, int *from, int timeout_ms)
{
    struct sock_xport *s = (struct sock_xport *)x;
    if (!s->pfd)
        build_poll_set(s);
    int polled = 0;
    for (;;) {
        for (; s->cursor < s->npfd; s->cursor++) {
            struct pollfd *p = &s->pfd[s->cursor];
            if (!p->revents)
                continue;
            p->revents = 0;
            ssize_t n = recv(p->fd, buf, len, MSG_DONTWAIT);
            if (n == 0) {
                fprintf(stderr, "fmperf: %s peer closed the connection\n", s->x.name);
                exit(1);
            }
            if (n < 0 && (errno == EAGAIN || errno == EINTR))
                continue;
            if (n < 0)
                die_errno("recv");
            *from = s->pfd_rank[s->cursor++];
            return (size_t)n;
        }
        if (polled)
            return 0;
        /* Busy: spin on zero-timeout polls until the time is up. */
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int n;
        do {
            n = poll(s->pfd, (nfds_t)s->npfd, s->busy ? 0 : timeout_ms);
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while (s->busy && n == 0 &&
                 (t.tv_sec - t0.tv_sec) * 1000 + (t.tv_nsec - t0.tv_nsec) / 1000000 <
                     timeout_ms);
        if (n < 0 && errno != EINTR)
            die_errno("poll");
        s->cursor = 0;
        polled = 1;
    }
}

static void sock_close(struct xport *x)
{
    struct sock_xport *s = (struct sock_xport *)x;
    free(s->pfd);
    free(s->pfd_rank);
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    for (int i = 0; i < s->nkept; i++)
        close(s->kept[i]);
    for (int i = 0; i < s->size; i++) {
        if (s->sfd[i] >= 0)
            close(s->sfd[i]);
        if (s->rfd[i] >= 0 && s->rfd[i] != s->sfd[i])
            close(s->rfd[i]);
        if (s->credit_to[i] >= 0)
            close(s->credit_to[i]);
    }
    if (s->credit_fd >= 0)
        close(s->credit_fd);
    free(s->sfd);
    free(s->rfd);
    free(s->credit_to);
    free(s->sent);
    free(s->acked);
    free(s->recvd);
    free(s->credited);
    free(s);
}

/* A socket bound to every local address on a free port; returns it and
 * the port. */
static int bound_socket(int type, int proto, uint16_t *port)
{
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, proto);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY)};
    socklen_t alen = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &alen) < 0)
        die_errno("bind");
    if (type == SOCK_DGRAM) {
        int big = 8 << 20; /* root may go past rmem_max; others get what they get */
        if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)) < 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
        if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &big, sizeof(big)) < 0)
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    }
    *port = ntohs(a.sin_port);
    return fd;
}

static void connect_to(int fd, uint32_t ip, uint16_t port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = ip};
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0)
        die_errno("connect");
}

/* How a peer reaches this rank: loopback from the same network namespace,
 * otherwise the address of the data network (FM_RAILS's, or the first
 * interface that is up and not loopback). */
struct where {
    uint64_t netns;
    uint32_t ip;
};

static struct where here(void)
{
    struct where w = {0, htonl(INADDR_LOOPBACK)};
    struct stat st;
    if (stat("/proc/self/ns/net", &st) == 0)
        w.netns = (uint64_t)st.st_ino;
    const char *rails = getenv("FM_RAILS");
    uint32_t net = 0, mask = 0;
    char buf[64];
    if (rails && strchr(rails, '/')) {
        snprintf(buf, sizeof(buf), "%s", rails);
        char *slash = strchr(buf, '/');
        *slash = '\0';
        struct in_addr a;
        int bits = atoi(slash + 1);
        if (inet_pton(AF_INET, buf, &a) == 1 && bits > 0 && bits <= 32) {
            mask = htonl(~0u << (32 - bits));
            net = a.s_addr & mask;
        }
    }
    struct ifaddrs *all;
    if (getifaddrs(&all) < 0)
        return w;
    for (struct ifaddrs *it = all; it; it = it->ifa_next) {
        if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || !(it->ifa_flags & IFF_UP) ||
            (it->ifa_flags & IFF_LOOPBACK))
            continue;
        uint32_t a = ((struct sockaddr_in *)it->ifa_addr)->sin_addr.s_addr;
        if (mask && (a & mask) != net)
            continue;
        w.ip = a;
        break;
    }
    freeifaddrs(all);
    return w;
}

/* The address to reach a peer that sent its `where`. */
static uint32_t reach(const struct where *peer)
{
    struct where me = here();
    return me.netns == peer->netns ? htonl(INADDR_LOOPBACK) : peer->ip;
}

static void tune(struct sock_xport *s, int fd)
{
    int one = 1;
    if (!s->udp)
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* FMPERF_TCP_CC picks the congestion control of the TCP peer's streams
     * (bench/net.sh's loss runs use CUBIC; a network namespace's sysctl only
     * offers the host's allowed list, the socket option takes any). */
    const char *cc = getenv("FMPERF_TCP_CC");
    if (!s->udp && cc && *cc &&
        setsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, cc, (socklen_t)strlen(cc)) < 0) {
        fprintf(stderr, "fmperf: FMPERF_TCP_CC=%s: %s\n", cc, strerror(errno));
        exit(2);
    }
    struct timeval tv = {.tv_sec = 10};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

/* What a receiving rank tells its sender: where it is and its ports. */
struct card {
    struct where where;
    uint16_t ports[2];
};

/*
 * Connects rank `me` to `peer`: `me` listens (TCP) or binds (UDP) and tells
 * `peer` its ports over the control endpoint, `peer` connects. Used once
 * per direction of a ring and once for a pair.
 */
static void link_pair(struct sock_xport *s, struct job *j, int sender, int receiver)
{
    int me = j->rank;
    if (me == receiver) {
        struct card c = {.where = here()};
        int lfd = bound_socket(s->udp ? SOCK_DGRAM : SOCK_STREAM, s->proto, &c.ports[0]);
        int cfd = -1;
        if (s->udp)
            cfd = bound_socket(SOCK_DGRAM, 0, &c.ports[1]); /* where we send credits from */
        else if (listen(lfd, 4) < 0)
            die_errno("listen");
        job_ctl_send(j, sender, &c, sizeof(c));
        struct card theirs;
        if (s->udp) {
            job_ctl_recv(j, sender, &theirs, sizeof(theirs));
            connect_to(cfd, reach(&theirs.where), theirs.ports[0]);
            s->credit_to[sender] = cfd;
            s->rfd[sender] = lfd;
        } else {
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0)
                die_errno("accept");
            /* MPTCP's further subflows (MP_JOIN) arrive at the listener:
             * it stays open while the connection lives. */
            if (s->proto && s->nkept < (int)(sizeof(s->kept) / sizeof(s->kept[0])))
                s->kept[s->nkept++] = lfd;
            else
                close(lfd);
            s->rfd[sender] = fd;
        }
        tune(s, s->rfd[sender]);
    } else if (me == sender) {
        struct card theirs;
        job_ctl_recv(j, receiver, &theirs, sizeof(theirs));
        uint16_t mine;
        int fd = s->udp ? bound_socket(SOCK_DGRAM, 0, &mine)
                        : socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, s->proto);
        if (fd < 0)
            die_errno(s->proto ? "socket (MPTCP: is net.mptcp.enabled 1?)" : "socket");
        connect_to(fd, reach(&theirs.where), theirs.ports[0]);
        tune(s, fd);
        s->sfd[receiver] = fd;
        if (s->udp) {
            if (s->credit_fd < 0) {
                s->credit_fd = bound_socket(SOCK_DGRAM, 0, &mine);
                tune(s, s->credit_fd);
            }
            struct sockaddr_in a;
            socklen_t alen = sizeof(a);
            getsockname(s->credit_fd, (struct sockaddr *)&a, &alen);
            struct card c = {.where = here(), .ports = {ntohs(a.sin_port), 0}};
            job_ctl_send(j, receiver, &c, sizeof(c));
        }
    }
}

/* TCP's connect/send/recv/close loop of seed 002 (blocking calls: the
 * handshake is what is measured). */
static int tcp_exchange(struct xport *x, int to, void *buf, size_t len)
{
    struct sock_xport *s = (struct sock_xport *)x;
    (void)to;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, s->proto), one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    connect_to(fd, s->server_ip, s->server_port);
    int busy = s->busy;
    s->busy = 0;
    write_all(s, fd, buf, len);
    for (size_t got = 0; got < len;)
        got += read_some(s, fd, (char *)buf + got, len - got);
    s->busy = busy;
    close(fd);
    return 0;
}

static int tcp_serve(struct xport *x, int from, void *buf, size_t len)
{
    struct sock_xport *s = (struct sock_xport *)x;
    (void)from;
    int fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC), one = 1;
    if (fd < 0)
        die_errno("accept");
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    int busy = s->busy;
    s->busy = 0;
    for (size_t got = 0; got < len;)
        got += read_some(s, fd, (char *)buf + got, len - got);
    write_all(s, fd, buf, len);
    s->busy = busy;
    close(fd);
    return 0;
}

struct xport *xport_sock_open(struct job *j, const char *kind, int ring,
                              const int (*pairs)[2], int npairs, int busy_poll, int in_place)
{
    struct sock_xport *s = calloc(1, sizeof(*s));
    int n = j->size;
    s->size = n;
    s->udp = strcmp(kind, "udp") == 0;
    s->proto = strcmp(kind, "mptcp") == 0 ? IPPROTO_MPTCP : 0;
    s->busy = busy_poll;
    s->credit_fd = -1;
    s->sfd = malloc(sizeof(int) * (size_t)n);
    s->rfd = malloc(sizeof(int) * (size_t)n);
    s->credit_to = malloc(sizeof(int) * (size_t)n);
    s->sent = calloc((size_t)n, sizeof(uint64_t));
    s->acked = calloc((size_t)n, sizeof(uint64_t));
    s->recvd = calloc((size_t)n, sizeof(uint64_t));
    s->credited = calloc((size_t)n, sizeof(uint64_t));
    for (int i = 0; i < n; i++)
        s->sfd[i] = s->rfd[i] = s->credit_to[i] = -1;
    if (ring) {
        /* Each rank receives from its predecessor: link in two phases so
         * that no rank waits on a peer that waits on it. */
        for (int phase = 0; phase < 2; phase++)
            for (int r = 0; r < n; r++)
                if (r % 2 == phase)
                    link_pair(s, j, (r + n - 1) % n, r);
    } else {
        for (int p = 0; p < npairs; p++) {
            int a = pairs[p][0], b = pairs[p][1];
            link_pair(s, j, a, b);
            if (s->udp) {
                link_pair(s, j, b, a);
            } else if (j->rank == a) {
                /* One connection both ways, so replies carry the
                 * acknowledgements as in any request-response use of TCP. */
                s->rfd[b] = s->sfd[b];
            } else if (j->rank == b) {
                s->sfd[a] = s->rfd[a];
            }
        }
    }
    /* The connect test's server: rank 1 listens, rank 0 learns where. */
    s->listen_fd = -1;
    if (!s->udp && !ring) {
        if (j->rank == 1) {
            struct card c = {.where = here()};
            s->listen_fd = bound_socket(SOCK_STREAM, s->proto, &c.ports[0]);
            if (listen(s->listen_fd, 64) < 0)
                die_errno("listen");
            job_ctl_send(j, 0, &c, sizeof(c));
        } else if (j->rank == 0) {
            struct card c;
            job_ctl_recv(j, 1, &c, sizeof(c));
            s->server_ip = reach(&c.where);
            s->server_port = c.ports[0];
        }
    }
    job_barrier(j);
    /* In-place reading makes no difference to sockets: the kernel copies. */
    s->x = (struct xport){.name = kind, .in_place = in_place, .stream = 1,
                          .send = sock_send, .recv = sock_recv, .close = sock_close,
                          .exchange = s->udp ? NULL : tcp_exchange,
                          .serve = s->udp ? NULL : tcp_serve,
                          .recv_any = s->udp ? NULL : sock_recv_any};
    return &s->x;
}
