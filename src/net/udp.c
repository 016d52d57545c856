#include "udp.h"

#include "core/util.h"
#include "fastmsg.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <linux/errqueue.h>
#include <net/if.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef UDP_SEGMENT
#define UDP_SEGMENT 103
#endif
#ifndef UDP_GRO
#define UDP_GRO 104
#endif

#define IP_UDP_OVERHEAD 28
/* Largest packet on links with a large MTU (loopback): beyond this, bigger
 * datagrams buy little and make held out-of-order packets expensive. */
#define PACKET_CAP 16384
#define GSO_MAX_SEGMENTS 64
#define GSO_MAX_BYTES 65000

/* ---- choosing the address ---------------------------------------------------- */

static int parse_subnet(const char *s, uint32_t *net, uint32_t *mask)
{
    char buf[64];
    snprintf(buf, sizeof(buf), "%s", s);
    char *slash = strchr(buf, '/');
    if (!slash)
        return -1;
    *slash = '\0';
    char *end;
    long bits = strtol(slash + 1, &end, 10);
    struct in_addr a;
    if (*end || bits < 0 || bits > 32 || inet_pton(AF_INET, buf, &a) != 1)
        return -1;
    *mask = bits ? htonl(~0u << (32 - bits)) : 0;
    *net = a.s_addr & *mask;
    return 0;
}

static int pick_address(const char *spec, struct sockaddr_in *out, uint32_t *netmask,
                        char *ifname, size_t iflen, char *err, size_t errlen)
{
    struct ifaddrs *all, *it, *found = NULL, *loop = NULL;
    uint32_t net = 0, mask = 0;
    struct in_addr want;
    int is_auto = strcmp(spec, "auto") == 0;
    int is_subnet = !is_auto && parse_subnet(spec, &net, &mask) == 0;
    int is_addr = !is_auto && !is_subnet && inet_pton(AF_INET, spec, &want) == 1;
    if (getifaddrs(&all) < 0) {
        snprintf(err, errlen, "udp: getifaddrs: %s", strerror(errno));
        return FM_ESYS;
    }
    for (it = all; it; it = it->ifa_next) {
        if (!it->ifa_addr || it->ifa_addr->sa_family != AF_INET || !(it->ifa_flags & IFF_UP))
            continue;
        uint32_t a = ((struct sockaddr_in *)it->ifa_addr)->sin_addr.s_addr;
        int lo = (it->ifa_flags & IFF_LOOPBACK) != 0;
        if (is_auto) {
            if (lo && !loop)
                loop = it;
            if (!lo) {
                found = it;
                break;
            }
        } else if ((is_subnet && (a & mask) == net) || (is_addr && a == want.s_addr) ||
                   (!is_subnet && !is_addr && strcmp(it->ifa_name, spec) == 0)) {
            found = it;
            break;
        }
    }
    if (!found)
        found = loop;
    if (!found) {
        snprintf(err, errlen,
                 "udp: no interface that is up matches FM_RAILS=%s (give an interface name, an "
                 "IPv4 address of this host, or a subnet like 10.1.0.0/24)",
                 spec);
        freeifaddrs(all);
        return FM_EUNREACH;
    }
    *out = *(struct sockaddr_in *)found->ifa_addr;
    out->sin_port = 0;
    *netmask = found->ifa_netmask ? ((struct sockaddr_in *)found->ifa_netmask)->sin_addr.s_addr
                                  : 0xFFFFFFFFu;
    snprintf(ifname, iflen, "%s", found->ifa_name);
    freeifaddrs(all);
    return 0;
}

/* ---- socket --------------------------------------------------------------------- */

static void set_buffer(int fd, int opt_force, int opt, int bytes)
{
    /* Root may exceed net.core.[rw]mem_max; others get what the limit allows. */
    if (setsockopt(fd, SOL_SOCKET, opt_force, &bytes, sizeof(bytes)) < 0)
        setsockopt(fd, SOL_SOCKET, opt, &bytes, sizeof(bytes));
}

/* What send_batch builds for the kernel: tens of KiB, too much for the
 * stack of whichever thread sends. */
struct fm_udp_tx {
    struct mmsghdr msg[FM_UDP_SEND_MAX];
    struct iovec iov[FM_UDP_SEND_MAX * 4]; /* a packet is at most 4 pieces */
    union {
        char buf[CMSG_SPACE(sizeof(uint16_t))];
        struct cmsghdr align;
    } ctl[FM_UDP_SEND_MAX];
    struct fm_udp_conn *conn[FM_UDP_SEND_MAX];
    /* Datagrams of several packets, each sealed into one piece: the
     * kernel's copy cost about 50 ns an iovec in this VM (a 16 KiB GSO send
     * as 24 pieces took 5.1 us, as one 3.9), and the copy here rides on the
     * pass that computes each packet's checksum. */
    unsigned char *stage;
    size_t stage_size;
};

/* A batch's worth of stage at MTU 1500 (377 KB), not 4 MB at loopback's
 * 16 KiB packets: what does not fit goes in pieces. */
#define STAGE_MAX (512u << 10)

int fm_udp_open(struct fm_udp *u, const char *spec, char *err, size_t errlen)
{
    memset(u, 0, sizeof(*u));
    u->fd = -1;
    u->msg_used = FM_UDP_BATCH; /* every receive header is set up before the first */
    int rc = pick_address(spec, &u->addr, &u->netmask, u->ifname, sizeof(u->ifname), err,
                          errlen);
    if (rc)
        return rc;
    u->fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    socklen_t alen = sizeof(u->addr);
    if (u->fd < 0 || bind(u->fd, (struct sockaddr *)&u->addr, sizeof(u->addr)) < 0 ||
        getsockname(u->fd, (struct sockaddr *)&u->addr, &alen) < 0) {
        snprintf(err, errlen, "udp: cannot bind a socket to %s: %s",
                 inet_ntoa(u->addr.sin_addr), strerror(errno));
        goto err_close;
    }
    int one = 1;
    set_buffer(u->fd, SO_RCVBUFFORCE, SO_RCVBUF, 8 << 20);
    set_buffer(u->fd, SO_SNDBUFFORCE, SO_SNDBUF, 8 << 20);
    setsockopt(u->fd, IPPROTO_IP, IP_RECVERR, &one, sizeof(one));
    int zero = 0;
    u->gso = setsockopt(u->fd, SOL_UDP, UDP_SEGMENT, &zero, sizeof(zero)) == 0;
    u->gro = setsockopt(u->fd, SOL_UDP, UDP_GRO, &one, sizeof(one)) == 0;
    struct ifreq ifr;
    memset(&ifr, 0, sizeof(ifr));
    memcpy(ifr.ifr_name, u->ifname, FM_MIN(sizeof(ifr.ifr_name) - 1, strlen(u->ifname)));
    u->mtu = ioctl(u->fd, SIOCGIFMTU, &ifr) == 0 ? ifr.ifr_mtu : 1500;
    int packet = FM_MIN(u->mtu - IP_UDP_OVERHEAD, PACKET_CAP);
    int payload = packet - (int)sizeof(struct fm_wire_hdr) - (int)sizeof(struct fm_wire_data);
    if (payload < 64) {
        snprintf(err, errlen, "udp: the MTU of %s (%d) is too small", u->ifname, u->mtu);
        goto err_close;
    }
    u->payload = (uint32_t)payload & ~7u;
    u->datagram_max = (size_t)packet;
    u->send_packets = u->gso ? (uint32_t)FM_MIN(GSO_MAX_SEGMENTS, GSO_MAX_BYTES / packet) : 1;
    /* Without GRO a datagram comes whole: room for the largest a peer may
     * send (its MTU may be larger than this interface's), not our own. */
    u->bufsize = u->gro ? 65536 : PACKET_CAP;
    u->buf = malloc(u->bufsize * FM_UDP_BATCH);
    u->tx = malloc(sizeof(*u->tx));
    if (u->tx) {
        u->tx->stage_size = FM_MIN(FM_UDP_SEND_MAX * u->datagram_max, STAGE_MAX);
        u->tx->stage = malloc(u->tx->stage_size);
    }
    if (!u->buf || !u->tx || !u->tx->stage) {
        snprintf(err, errlen, "udp: out of memory");
        goto err_close;
    }
    fm_info("udp", "bound %s:%u on %s (MTU %d, %u bytes per packet%s%s)",
            inet_ntoa(u->addr.sin_addr), ntohs(u->addr.sin_port), u->ifname, u->mtu,
            u->payload, u->gso ? ", GSO" : "", u->gro ? ", GRO" : "");
    return 0;

err_close:
    if (u->fd >= 0)
        close(u->fd);
    u->fd = -1;
    return FM_ESYS;
}

void fm_udp_close(struct fm_udp *u)
{
    for (int i = 0; i < FM_UDP_CONNECTED; i++)
        if (u->conn[i].to.sin_family)
            close(u->conn[i].fd);
    if (u->fd >= 0)
        close(u->fd);
    free(u->buf);
    if (u->tx)
        free(u->tx->stage);
    free(u->tx);
    free(u->reordered);
    u->fd = -1;
    u->buf = NULL;
    u->tx = NULL;
    u->reordered = NULL;
}

/* ---- sending -------------------------------------------------------------------- */

/* Misses after which the least used connected socket makes room. */
#define CONN_REVIEW_MISSES 4096

static int conn_open(struct fm_udp *u, struct fm_udp_conn *c, const struct sockaddr_in *to)
{
    /* On the rail's address, so that packets leave by the rail's interface. */
    struct sockaddr_in local = {.sin_family = AF_INET, .sin_addr = u->addr.sin_addr};
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&local, sizeof(local)) < 0 ||
        connect(fd, (const struct sockaddr *)to, sizeof(*to)) < 0) {
        close(fd);
        return -1;
    }
    set_buffer(fd, SO_SNDBUFFORCE, SO_SNDBUF, 8 << 20);
    *c = (struct fm_udp_conn){.to = *to, .fd = fd};
    return 0;
}

/* HELLOs and PINGs teach the peer our address (the source of the
 * packet), and so does anything on a rail the peer has not heard us on
 * yet: they leave from the port in our card. */
static int from_card_port(const struct fm_pkt_out *p)
{
    return p->raw || !p->side_ok || p->hdr.op == FM_OP_HELLO ||
           p->hdr.op == FM_OP_HELLO_ACK || p->hdr.op == FM_OP_PING;
}

/* The socket packet p goes out by: the peer's connected one (made on the
 * way, while slots are free or a review freed one), or the rail's own. */
static struct fm_udp_conn *conn_for(struct fm_udp *u, const struct fm_pkt_out *p)
{
    if (!u->connect_peers || from_card_port(p))
        return NULL;
    struct fm_udp_conn *free_slot = NULL;
    for (int i = 0; i < FM_UDP_CONNECTED; i++) {
        struct fm_udp_conn *c = &u->conn[i];
        if (!c->to.sin_family)
            free_slot = free_slot ? free_slot : c;
        else if (c->to.sin_addr.s_addr == p->to.sin_addr.s_addr && c->to.sin_port == p->to.sin_port)
            return c;
    }
    if (free_slot) {
        if (conn_open(u, free_slot, &p->to) == 0)
            return free_slot;
        /* Out of descriptors, say: not a socket call per packet from now on. */
        u->connect_peers = 0;
        return NULL;
    }
    u->conn_misses++;
    return NULL;
}

/* All slots taken and many packets went without one: the least used
 * slot goes, for whoever sends most among the rest to take it. Runs
 * between batches, when no message points to a slot. */
static void conn_review(struct fm_udp *u)
{
    struct fm_udp_conn *least = &u->conn[0];
    for (int i = 0; i < FM_UDP_CONNECTED; i++) {
        if (u->conn[i].packets < least->packets)
            least = &u->conn[i];
        u->conn[i].packets = 0;
    }
    if (least->refused)
        return; /* its peer's session ends first (fm_udp_settle) */
    close(least->fd);
    least->to.sin_family = 0;
    u->conn_misses = 0;
}

/* The errors an ICMP destination unreachable comes back as. */
static int unreachable_errno(int e)
{
    return e == ECONNREFUSED || e == EHOSTUNREACH || e == ENETUNREACH;
}

static int same_dest(const struct fm_pkt_out *a, const struct fm_pkt_out *b)
{
    return a->to.sin_addr.s_addr == b->to.sin_addr.s_addr && a->to.sin_port == b->to.sin_port;
}

/*
 * Applies FM_FAULT to a batch before it is sent, keeping the batch (and
 * GSO) intact: dropped packets leave it, duplicated ones appear twice,
 * reordered ones swap with the next. The batch is a list of pointers, so
 * that none of this copies a packet's description; a corrupted packet is
 * the exception: it is sealed and copied first, so that the bit flips in
 * the copy, never in the mirror ring a retransmission reads from. Returns
 * the new count in u->faulted.
 */
static int apply_faults(struct fm_udp *u, struct fm_net *net, struct fm_pkt_out *const *pkts,
                        int n)
{
    int m = 0, ncopies = 0;
    for (int i = 0; i < n; i++) {
        int corrupt;
        enum fm_fault_action a = fm_fault_roll(u->fault, &corrupt);
        if (a == FM_FAULT_DROP) {
            fm_net_count_drop(net, FM_DROP_FAULT);
            continue;
        }
        struct fm_pkt_out *p = pkts[i];
        if (corrupt && ncopies < (int)FM_ARRAY_LEN(u->copies)) {
            size_t len = fm_pkt_seal_into(p, u->copies[ncopies]);
            fm_fault_corrupt(u->fault, u->copies[ncopies], len);
            struct fm_pkt_out *c = &u->corrupted[ncopies];
            *c = *p;
            c->raw = 1;
            c->bytes[0] = u->copies[ncopies++];
            c->nbytes[0] = (uint16_t)len;
            p = c;
        }
        u->faulted[m++] = p;
        if (a == FM_FAULT_DUP)
            u->faulted[m++] = p;
        else if (a == FM_FAULT_REORDER && m >= 2) {
            struct fm_pkt_out *t = u->faulted[m - 1];
            u->faulted[m - 1] = u->faulted[m - 2];
            u->faulted[m - 2] = t;
        }
    }
    return m;
}

static void drain_errors(struct fm_udp *u, struct fm_net *net, uint64_t now);
static int send_batch(struct fm_udp *u, struct fm_pkt_out *const *pkts, int n);

int fm_udp_send(struct fm_udp *u, struct fm_net *net, struct fm_pkt_out *const *pkts, int n)
{
    n = FM_MIN(n, FM_UDP_SEND_MAX);
    if (fm_unlikely(u->fault) && u->fault->on_send) {
        int m = apply_faults(u, net, pkts, n);
        for (int i = 0; i < m; i += FM_UDP_SEND_MAX)
            send_batch(u, u->faulted + i, FM_MIN(m - i, FM_UDP_SEND_MAX));
        return n;
    }
    return send_batch(u, pkts, n);
}

/* A lone datagram of at most this many bytes is copied into one buffer
 * (unless it is in one piece already) and sent with send/sendto: that
 * skips importing a message header and an iovec array, which costs 0.2-0.4
 * us a call in this VM (80 bytes over loopback: 3.1-3.2 us with send
 * against 3.4-3.5 us with sendmmsg), against about 40 ns to copy 1.4 KiB. */
#define FLAT_SEND_MAX 2048

/* Sends m that way: 1 if it went, -1 on an error, 0 if it is in pieces
 * too long for it (sendmmsg takes it then). */
static int send_flat(int fd, const struct msghdr *m)
{
    unsigned char buf[FLAT_SEND_MAX];
    const void *flat = buf;
    size_t len = 0;
    if (m->msg_iovlen == 1) { /* in one piece already (staged) */
        flat = m->msg_iov[0].iov_base;
        len = m->msg_iov[0].iov_len;
    }
    for (size_t i = 0; i < m->msg_iovlen && flat == buf; i++) {
        if (m->msg_iov[i].iov_len > FLAT_SEND_MAX - len)
            return 0;
        memcpy(buf + len, m->msg_iov[i].iov_base, m->msg_iov[i].iov_len);
        len += m->msg_iov[i].iov_len;
    }
    ssize_t r = m->msg_name ? sendto(fd, flat, len, 0, m->msg_name, m->msg_namelen)
                            : send(fd, flat, len, 0);
    return r < 0 ? -1 : 1;
}

/* A GSO send to pkts[i]'s peer whose first segment, pkts[i..j), is `full`
 * bytes: extended with the packets after it that fit (full ones, then one
 * that may be shorter, the last). Returns where it ends; *total, its
 * length so far, grows with it. */
static int gso_run(struct fm_pkt_out *const *pkts, int i, int j, int n, size_t full,
                   size_t *total)
{
    int k = j;
    for (; k < n && k - i < GSO_MAX_SEGMENTS; k++) {
        const struct fm_pkt_out *p = pkts[k];
        size_t len = fm_pkt_len(p);
        if (p->raw || !same_dest(pkts[i], p) || from_card_port(p) != from_card_port(pkts[i]) ||
            (k > j && fm_pkt_len(pkts[k - 1]) != full) || len > full ||
            *total + len > GSO_MAX_BYTES)
            break;
        *total += len;
    }
    return k;
}

/* Whether the GSO run of pkts[i], `full` bytes a segment, that a limit
 * of its datagram ended before pkts[k], would go on into another. */
static int run_goes_on(struct fm_pkt_out *const *pkts, int i, int k, int n, size_t full)
{
    if (k == n || fm_pkt_len(pkts[k - 1]) != full)
        return 0;
    const struct fm_pkt_out *p = pkts[k];
    return p->hdr.op == FM_OP_DATA && !p->raw && same_dest(pkts[i], p) &&
           from_card_port(p) == from_card_port(pkts[i]) && fm_pkt_len(p) <= full;
}

/* As gso_run; and when the run goes on past the datagram's limit but not
 * past a second one, the two datagrams share it equally. The receiver
 * works through a datagram while the sender's kernel still carries the
 * next, so what it does after the last one came is the part not hidden: a
 * 64 KiB message left as 44 packets and 1, and its receiver started on it
 * only once all of it had arrived. */
static int gso_extend(struct fm_pkt_out *const *pkts, int i, int j, int n, size_t full,
                      size_t *total)
{
    int k = gso_run(pkts, i, j, n, full, total);
    /* (Not in a stream, where the receiver would only take smaller bites,
     * and send more ACKs: 0.85x of the bandwidth from 64 KiB up.) */
    if (!fm_pkt_alone(pkts[k - 1]) || !run_goes_on(pkts, i, k, n, full))
        return k;
    size_t next_total = fm_pkt_len(pkts[k]);
    int next_end = gso_run(pkts, k, k + 1, n, next_total, &next_total);
    if (run_goes_on(pkts, k, next_end, n, full))
        return k; /* a third datagram follows: the last two share */
    int segments = 1 + (k - j), keep = (segments + (next_end - k) + 1) / 2;
    for (; segments > keep; segments--)
        *total -= fm_pkt_len(pkts[--k]);
    return k;
}

/* Whether the datagram of pkts[i..j) leaves before the next one is sealed:
 * both end in a lone message's packets (fm_pkt_alone). Its receiver starts
 * on one while the sender seals the next, and the stage keeps one
 * datagram, in cache when the kernel reads it. One-way times against one
 * call for all: 128-256 KiB 0.89-0.92x, 64 KiB 0.96x. (In a stream,
 * where nobody waits for a message whole, a call a datagram cost
 * 0.93-0.97x of the bandwidth.) */
static int goes_alone(struct fm_pkt_out *const *pkts, int i, int j, int n)
{
    return j - i > 1 && j < n && fm_pkt_alone(pkts[j - 1]) && fm_pkt_alone(pkts[j]);
}

/* Turns pkts[0..n) into datagrams in u->tx, up to the end or the first
 * that goes_alone; returns how many packets they hold, *nmsg how many
 * datagrams. */
static int build_datagrams(struct fm_udp *u, struct fm_pkt_out *const *pkts, int n, int *nmsg_out)
{
    struct mmsghdr *msg = u->tx->msg;
    struct iovec *iov = u->tx->iov;
    struct fm_udp_conn **conn = u->tx->conn;
    int nmsg = 0, niov = 0, i = 0;
    size_t staged_bytes = 0;
    while (i < n) {
        /* A run of full packets to one peer goes as one GSO send. */
        size_t full = fm_pkt_len(pkts[i]);
        int j = i + 1;
        size_t total = full;
        if (u->gso && pkts[i]->hdr.op == FM_OP_DATA && !pkts[i]->raw)
            j = gso_extend(pkts, i, j, n, full, &total);
        /* Else small packets to one peer share a datagram (a FLOW, its first
         * DATA and an ACK): each datagram costs both kernels a packet's
         * work, whatever its size. */
        int bundle = j == i + 1 && !pkts[i]->raw;
        while (bundle && j < n && !pkts[j]->raw && same_dest(pkts[i], pkts[j]) &&
               from_card_port(pkts[j]) == from_card_port(pkts[i]) &&
               total + fm_pkt_len(pkts[j]) <= u->datagram_max) {
            total += fm_pkt_len(pkts[j]);
            j++;
        }
        if (j > i + 1 && bundle)
            full = total; /* one datagram: no GSO */
        /* A bundle exactly as long as a full packet (the engine cut a new
         * flow's first DATA to fit it with the FLOW, stops and ends ahead
         * of it: first_cut) is the first segment of the data's GSO send. */
        if (j > i + 1 && bundle && u->gso && full == u->datagram_max)
            j = gso_extend(pkts, i, j, n, full, &total);
        struct msghdr *m = &msg[nmsg].msg_hdr;
        memset(m, 0, sizeof(*m));
        conn[nmsg] = conn_for(u, pkts[i]);
        if (conn[nmsg]) {
            conn[nmsg]->packets += (uint32_t)(j - i);
        } else {
            m->msg_name = &pkts[i]->to;
            m->msg_namelen = sizeof(pkts[i]->to);
        }
        m->msg_iov = &iov[niov];
        int staged = j - i > 1 && staged_bytes + total <= u->tx->stage_size;
        size_t stage_at = staged_bytes;
        for (int k = i; k < j; k++) {
            if (conn[nmsg])
                pkts[k]->hdr.flags |= FM_HDR_SIDE_PORT; /* receivers learn no address from it */
            if (staged)
                staged_bytes += fm_pkt_seal_into(pkts[k], u->tx->stage + staged_bytes);
            else
                niov += fm_pkt_seal(pkts[k], &iov[niov]);
        }
        if (staged)
            iov[niov++] = (struct iovec){u->tx->stage + stage_at, staged_bytes - stage_at};
        m->msg_iovlen = (size_t)(&iov[niov] - m->msg_iov);
        if (j - i > 1 && full < total) {
            m->msg_control = u->tx->ctl[nmsg].buf;
            m->msg_controllen = sizeof(u->tx->ctl[nmsg].buf);
            struct cmsghdr *c = CMSG_FIRSTHDR(m);
            c->cmsg_level = SOL_UDP;
            c->cmsg_type = UDP_SEGMENT;
            c->cmsg_len = CMSG_LEN(sizeof(uint16_t));
            uint16_t seg = (uint16_t)full;
            memcpy(CMSG_DATA(c), &seg, sizeof(seg));
        }
        msg[nmsg++].msg_len = 0;
        int alone = goes_alone(pkts, i, j, n);
        i = j;
        if (alone)
            break;
    }
    *nmsg_out = nmsg;
    return i;
}

/* Sends u->tx's nmsg datagrams, a call for each run that leaves by the
 * same socket; a connected socket whose send was refused is marked. */
static void send_datagrams(struct fm_udp *u, int nmsg)
{
    struct mmsghdr *msg = u->tx->msg;
    struct fm_udp_conn **conn = u->tx->conn;
    for (int sent = 0, end; sent < nmsg; sent = end) {
        for (end = sent + 1; end < nmsg && conn[end] == conn[sent]; end++)
            ;
        int fd = conn[sent] ? conn[sent]->fd : u->fd, retries = 0;
        for (int k = sent; k < end;) {
            const struct msghdr *m = &msg[k].msg_hdr;
            int r = end - k == 1 && !m->msg_control ? send_flat(fd, m) : 0;
            if (!r)
                r = sendmmsg(fd, msg + k, (unsigned)(end - k), 0);
            if (r < 0 && errno == EINTR)
                continue;
            /* The rail's socket reports an earlier packet's ICMP error as
             * this send's, which did not go: it goes again, and the error
             * queue is read after the batch (left unread, it kept the
             * socket readable for epoll, and fm_wait spinning). */
            if (r < 0 && !conn[sent] && errno != EAGAIN && errno != ENOBUFS)
                u->errors_queued = 1;
            if (r < 0 && !conn[sent] && retries++ < 4 &&
                (unreachable_errno(errno) || errno == EPROTO))
                continue;
            /* A GSO send larger than the path's MTU (a route's, below the
             * interface's) fails every time: the rail sends packet by
             * packet from now on, and what did not go is retransmitted. */
            if (r < 0 && errno == EMSGSIZE && m->msg_control && u->gso) {
                u->gso = 0;
                fm_warn("udp", "rail %d: a GSO send is larger than the path allows; "
                        "sending packet by packet", u->rail);
                break;
            }
            if (r < 0) {
                /* A full socket buffer or an error queued for a peer: what
                 * did not go counts as lost and is retransmitted. */
                if (errno != EAGAIN && errno != ENOBUFS && !unreachable_errno(errno))
                    fm_log_limited(FM_LOG_WARN, "udp", 5, "sendmmsg: %s", strerror(errno));
                if (conn[sent] && errno == ECONNREFUSED) {
                    conn[sent]->refused = 1;
                    u->refusals = 1;
                }
                break;
            }
            k += r;
        }
    }
}

static int send_batch(struct fm_udp *u, struct fm_pkt_out *const *pkts, int n)
{
    if (fm_unlikely(u->conn_misses >= CONN_REVIEW_MISSES))
        conn_review(u);
    for (int done = 0, nmsg; done < n;) {
        done += build_datagrams(u, pkts + done, n - done, &nmsg);
        send_datagrams(u, nmsg);
    }
    return n;
}

/* A connected socket's refused send is the ICMP port unreachable of an
 * earlier packet (connected sockets report it so): the peer's process is
 * gone. Unreachable hosts and networks are not taken for dead: the error
 * may be our own link's, down for a while. */
void fm_udp_settle(struct fm_udp *u, struct fm_net *net)
{
    if (u->refusals) {
        u->refusals = 0;
        for (int i = 0; i < FM_UDP_CONNECTED; i++) {
            struct fm_udp_conn *c = &u->conn[i];
            if (c->to.sin_family && c->refused) {
                c->refused = 0;
                fm_net_unreachable(net, u->rail, &c->to, 1, fm_now_ns());
            }
        }
    }
    if (u->errors_queued)
        drain_errors(u, net, fm_now_ns());
}

/* ---- receiving ------------------------------------------------------------------ */

/* Reads ICMP errors: each names the destination a packet could not reach.
 * All of them: one left queued keeps the socket readable. */
static void drain_errors(struct fm_udp *u, struct fm_net *net, uint64_t now)
{
    u->errors_queued = 0;
    for (int i = 0; i < 1024; i++) {
        struct sockaddr_in to;
        char c[512], data[64];
        struct iovec iov = {data, sizeof(data)};
        struct msghdr m = {.msg_name = &to, .msg_namelen = sizeof(to), .msg_iov = &iov,
                           .msg_iovlen = 1, .msg_control = c, .msg_controllen = sizeof(c)};
        if (recvmsg(u->fd, &m, MSG_ERRQUEUE | MSG_DONTWAIT) < 0)
            return;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&m); cm; cm = CMSG_NXTHDR(&m, cm)) {
            if (cm->cmsg_level != IPPROTO_IP || cm->cmsg_type != IP_RECVERR)
                continue;
            struct sock_extended_err ee;
            memcpy(&ee, CMSG_DATA(cm), sizeof(ee));
            if (ee.ee_origin == SO_EE_ORIGIN_ICMP && unreachable_errno((int)ee.ee_errno))
                fm_net_unreachable(net, u->rail, &to, ee.ee_errno == ECONNREFUSED, now);
        }
    }
}

/* FM_FAULT's packet held back to come after the next one: it comes now,
 * when the socket has nothing more (else a packet held behind a loss waited
 * for the next one, a retransmission timeout away, and stalled streams
 * under heavy faults as no network would). */
static void release_reordered(struct fm_udp *u, struct fm_net *net, uint64_t now)
{
    void *r = u->reordered;
    u->reordered = NULL;
    fm_net_input(net, r, u->reordered_len, u->rail, &u->reordered_from, now);
    free(r);
}

static void input(struct fm_udp *u, struct fm_net *net, unsigned char *p, size_t len,
                  const struct sockaddr_in *from, uint64_t now)
{
    if (fm_unlikely(u->fault) && u->fault->on_recv) {
        enum fm_fault_action a = fm_fault_next(u->fault, p, len);
        if (a == FM_FAULT_DROP) {
            fm_net_count_drop(net, FM_DROP_FAULT);
            return;
        }
        if (a == FM_FAULT_REORDER && !u->reordered) {
            u->reordered = malloc(len);
            if (u->reordered) {
                memcpy(u->reordered, p, len);
                u->reordered_len = len;
                u->reordered_from = *from;
                return;
            }
        }
        if (a == FM_FAULT_DUP) {
            unsigned char copy[FM_WIRE_MAX];
            memcpy(copy, p, len);
            fm_net_input(net, copy, len, u->rail, from, now);
        }
        fm_net_input(net, p, len, u->rail, from, now);
        if (u->reordered && a != FM_FAULT_REORDER)
            release_reordered(u, net, now);
        return;
    }
    fm_net_input(net, p, len, u->rail, from, now);
}

/*
 * A socket found empty last time (a ping-pong's or an idle peer's) is read
 * with recvfrom: recvmmsg imports a message header and an iovec per call
 * and tries a second slot to find the queue empty, 0.2-0.4 us in this VM,
 * on the way of the message that ends the wait, and on every look at an
 * empty socket while polling. A datagram so read may be a GRO aggregate of
 * unknown segment size; its segments are whole packets, which the walk by
 * each packet's length finds as well. Once data came, recvmmsg batches.
 */
static int recv_one(struct fm_udp *u)
{
    socklen_t fromlen = sizeof(u->from[0]);
    ssize_t n = recvfrom(u->fd, u->iov[0].iov_base, u->iov[0].iov_len, MSG_DONTWAIT,
                         (struct sockaddr *)&u->from[0], &fromlen);
    if (n < 0)
        return -1;
    u->msg[0].msg_len = (unsigned)n;
    u->msg[0].msg_hdr.msg_controllen = 0; /* no GRO size: walked by packet */
    return 1;
}

int fm_udp_recv(struct fm_udp *u, struct fm_net *net, uint64_t now)
{
    int handled = 0, error_taken = 0;
    u->busy = 0;
    for (int batch = 0; batch < 1; batch++) { /* the caller loops, sending ACKs between */
        /* Only the headers a datagram filled changed (and, to be safe, the
         * one after them): a poll of an empty socket, the common case while
         * spinning, resets one instead of the whole batch. */
        for (int i = 0; i < FM_MIN(u->msg_used + 1, FM_UDP_BATCH); i++) {
            u->iov[i] = (struct iovec){u->buf + (size_t)i * u->bufsize, u->bufsize};
            u->msg[i].msg_hdr = (struct msghdr){
                .msg_name = &u->from[i], .msg_namelen = sizeof(u->from[i]),
                .msg_iov = &u->iov[i], .msg_iovlen = 1, .msg_control = u->ctl[i],
                .msg_controllen = sizeof(u->ctl[i])};
        }
        int r = u->was_empty ? recv_one(u)
                             : recvmmsg(u->fd, u->msg, FM_UDP_BATCH, MSG_DONTWAIT, NULL);
        u->msg_used = r > 0 ? r : 0;
        u->was_empty = r <= 0;
        if (fm_unlikely(r <= 0 && u->reordered))
            release_reordered(u, net, now);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            /* An ICMP error of ours, reported in place of the datagrams
             * queued behind it: they are read on, and its queue later
             * (fm_udp_settle), so that a peer's last packets come before
             * its loss. */
            if (errno != EAGAIN && errno != EWOULDBLOCK && !error_taken) {
                u->errors_queued = 1;
                u->was_empty = 0;
                error_taken = 1;
                batch--;
                continue;
            }
            break;
        }
        for (int i = 0; i < r; i++) {
            size_t len = u->msg[i].msg_len;
            unsigned char *p = u->iov[i].iov_base;
            size_t seg = len;
            struct msghdr *m = &u->msg[i].msg_hdr;
            for (struct cmsghdr *c = CMSG_FIRSTHDR(m); c; c = CMSG_NXTHDR(m, c))
                if (c->cmsg_level == SOL_UDP && c->cmsg_type == UDP_GRO) {
                    int g;
                    memcpy(&g, CMSG_DATA(c), sizeof(g));
                    if (g > 0)
                        seg = (size_t)g;
                }
            /* GRO hands several same-size datagrams over as one, and a
             * datagram may carry several packets. */
            for (size_t off = 0; off < len; off += seg) {
                size_t dlen = FM_MIN(seg, len - off);
                for (size_t k = 0, n; k < dlen; k += n) {
                    n = fm_wire_packet_len(p + off + k, dlen - k);
                    input(u, net, p + off + k, n, &u->from[i], now);
                    handled++;
                }
            }
        }
        if (r < FM_UDP_BATCH)
            break;
        u->busy = 1; /* a full batch: more is queued */
    }
    fm_net_input_done(net);
    return handled;
}
