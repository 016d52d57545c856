/*
 * The UDP link: one socket per rail, datagrams in batches (sendmmsg,
 * recvmmsg), UDP GSO to hand the kernel up to 64 KiB of same-size packets
 * in one call and GRO to get them back in one, and ICMP errors through
 * IP_RECVERR so a dead peer process shows up at its next packet.
 */
#ifndef FM_NET_UDP_H
#define FM_NET_UDP_H

#include "engine.h"
#include "fault.h"

#include <netinet/in.h>
#include <stdint.h>

#define FM_UDP_BATCH 32    /* datagrams per recvmmsg */
/* Packets per fm_udp_send, and per output of the engine: 64 left 1 MiB
 * streams about 10 % slower (more calls, and the engine's pass over its
 * sessions and timers per call); 1024 gave no more than 256. */
#define FM_UDP_SEND_MAX 256
#define FM_UDP_CONNECTED 8 /* peers sent to through a connected socket of their own */

/* A socket connected to one peer, for sending only: the kernel keeps its
 * route, where a send from the unconnected socket looks it up every time
 * (0.45 us of a 4.3 us one-way trip between two namespaces). It has its
 * own port, so HELLOs and PINGs, whose source the peer takes for our
 * address, never go through it, and what does is marked FM_HDR_SIDE_PORT
 * so that no receiver learns an address from it (docs/udp.md). */
struct fm_udp_tx;

struct fm_udp_conn {
    struct sockaddr_in to; /* sin_family 0: a free slot */
    int fd;
    uint32_t packets;      /* sent through it since the last review */
    uint8_t refused;       /* a send through it was refused: fm_udp_settle ends the session */
};

struct fm_udp {
    int fd;
    int rail;                /* its index among the process's rails */
    struct sockaddr_in addr; /* bound address, as peers reach it */
    uint32_t netmask;        /* of that address's subnet (network order) */
    char ifname[32];         /* interface of that address */
    int mtu;
    uint32_t payload;        /* stream bytes per DATA packet (a multiple of 8) */
    size_t datagram_max;     /* bytes of the largest datagram (MTU less IP and UDP) */
    int gso, gro;            /* kernel offloads in use */
    uint32_t send_packets;   /* full packets one datagram carries: GSO's segments, else 1 */
    int busy;                /* the last receive left datagrams queued */
    int errors_queued;       /* a send took an ICMP error: its queue is to be read */
    int refusals;            /* a connected socket was refused (fm_udp_settle) */
    int connect_peers;       /* peers may get connected senders (one rail only: rails.c) */
    struct fm_udp_conn conn[FM_UDP_CONNECTED];
    uint32_t conn_misses;    /* packets to peers without a slot since the last review */
    struct fm_fault *fault;  /* FM_FAULT, or NULL */
    struct fm_udp_tx *tx;    /* the send batch's headers and gather lists (udp.c) */
    /* receive batch */
    unsigned char *buf;      /* FM_UDP_BATCH buffers of bufsize */
    size_t bufsize;
    struct mmsghdr msg[FM_UDP_BATCH];
    int msg_used;            /* headers the last recvmmsg filled: reset before the next */
    int was_empty;           /* the last receive found nothing: the next uses recvfrom */
    struct iovec iov[FM_UDP_BATCH];
    struct sockaddr_in from[FM_UDP_BATCH];
    char ctl[FM_UDP_BATCH][64];
    struct fm_pkt_out *faulted[2 * FM_UDP_SEND_MAX]; /* fault injection: the batch as sent */
    struct fm_pkt_out corrupted[4];                  /* corrupted packets, sealed as copies */
    unsigned char copies[4][FM_WIRE_MAX];            /* their bytes */
    void *reordered;         /* fault injection: a packet held back one turn */
    size_t reordered_len;
    struct sockaddr_in reordered_from;
};

/*
 * Opens the socket on the address `spec` names: "auto" (the first interface
 * that is up and not loopback, else loopback), an interface name, an IPv4
 * address, or a subnet "a.b.c.d/n". Fills err and returns FM_E* on failure.
 */
int fm_udp_open(struct fm_udp *u, const char *spec, char *err, size_t errlen);
void fm_udp_close(struct fm_udp *u);

/* Sends up to FM_UDP_SEND_MAX packets, given by pointer (a packet's
 * description is 624 bytes, a third of its payload: lists of them are not
 * copied); returns how many were handed over. Packets the kernel refuses
 * (a full buffer) count as lost. */
int fm_udp_send(struct fm_udp *u, struct fm_net *net, struct fm_pkt_out *const *pkts, int n);
/* Whether sends or receives learned of an unreachable peer (a refused
 * send, an ICMP error queued) that fm_udp_settle must act on. */
static inline int fm_udp_unsettled(const struct fm_udp *u)
{
    return u->refusals || u->errors_queued;
}
/* Acts on it: such a peer loses its session, and its rings with it. Call
 * it only after every rail's share of an output went (their packets point
 * into those rings) and every rail's socket was read to its end (what the
 * peer sent before it went waits there). */
void fm_udp_settle(struct fm_udp *u, struct fm_net *net);

/* Receives what is there (up to a few batches) into the engine; returns
 * the number of datagrams handled. */
int fm_udp_recv(struct fm_udp *u, struct fm_net *net, uint64_t now);

#endif
