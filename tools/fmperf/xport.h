/*
 * What a benchmark pattern needs from a transport: blocking send and receive
 * of an application message of a given size between two ranks. fastmsg
 * implements it on the core API (partial sends, zero-copy receive); the
 * kernel peers implement it on TCP and UDP sockets, so every pattern runs
 * the same way over each.
 */
#ifndef FMPERF_XPORT_H
#define FMPERF_XPORT_H

#include "fastmsg.h"

#include <stddef.h>
#include <stdint.h>

struct xport {
    const char *name; /* shm, tcp, udp */
    int in_place;     /* the receiver reads data where it lies instead of copying it */
    int stream;       /* moves bytes, not messages (the socket peers, UDP's chunks too):
                       * it has no empty message to send */
    /* Sends `len` bytes to `to` as one message (or as many as the transport
     * needs); returns 0 or a negative error. */
    int (*send)(struct xport *x, int to, const void *buf, size_t len);
    /* Receives `len` bytes sent by `from` into buf (or reads them in place). */
    int (*recv)(struct xport *x, int from, void *buf, size_t len);
    void (*close)(struct xport *x);
    /* Connection per message (the connect test), NULL where the transport
     * has no connections. exchange: open a connection to `to`, send len
     * bytes, receive len back, close. serve: take one connection from
     * `from`, receive len bytes, send them back, close. */
    int (*exchange)(struct xport *x, int to, void *buf, size_t len);
    int (*serve)(struct xport *x, int from, void *buf, size_t len);
    /* Receiving from many senders at once (the incast test): the next bytes
     * that arrived from any rank, taking the ready senders in turn so that
     * none waits behind another's stream. Copies at most len of them to buf
     * (reads them in place with in_place) and returns how many arrived, with
     * the sender in *from; 0 when nothing came within timeout_ms. NULL where
     * the transport cannot (UDP's credits are per awaited sender). */
    size_t (*recv_any)(struct xport *x, void *buf, size_t len, int *from, int timeout_ms);
};

/* fmperf's channels: 0 data, 1 control, 2 idle test, 3 connect test's server,
 * 4 names tests (found by name: never introduced). */
#define JOB_CHANNELS 4

/* The job as fmperf sees it: fastmsg context and a control endpoint used
 * for barriers and for setting up the kernel peers. Under a launcher the
 * ranks are the job's; joined by name, two programs play ranks 0 and 1 and
 * reach each other at the addresses their names gave. */
struct job {
    fm_ctx *ctx;
    fm_ep *ctl;
    int rank, size;
    int named;                  /* joined by name (named.c), not by a launcher */
    fm_addr peer[JOB_CHANNELS]; /* named: the other side's endpoint on each channel */
};

/* The address of `rank`'s endpoint on `channel` (joined by name, the one
 * peer's: a pattern never sends to itself). */
fm_addr job_addr(const struct job *j, int rank, uint32_t channel);

/* Blocking helpers on the control endpoint (channel 1). */
void job_ctl_send(struct job *j, int to, const void *buf, size_t len);
void job_ctl_recv(struct job *j, int from, void *buf, size_t len);
void job_barrier(struct job *j);

/* Joins two programs started without a launcher through the file `path`
 * (named.c): side 0 writes the name of its control endpoint there, side 1
 * reads it; then j is a job of size 2 in which this program is rank `side`. */
void job_join_by_name(struct job *j, const char *path, int side);
/* Joined by name, tells the peer the name of `ep`, this program's endpoint
 * on `channel`, and inserts the name of the peer's: both sides call it for
 * each endpoint a pattern sends to. Under a launcher it does nothing. */
void job_introduce(struct job *j, uint32_t channel, fm_ep *ep);

/* fastmsg over whatever path the library picks (data on channel 0). With
 * by_name, rank 1's connect server publishes a name, and each exchange
 * looks it up instead of addressing the rank. */
struct xport *xport_fm_open(struct job *j, int in_place, int by_name);
/* Blocking fastmsg helpers: sends len bytes from ep to dst as one message,
 * or several prefixes while the rings are full (an empty message when len is
 * 0); receives len bytes, copying them to buf unless buf is NULL (in place). */
void xport_fm_send(fm_ep *ep, fm_addr dst, const void *buf, size_t len);
void xport_fm_recv(fm_ep *ep, void *buf, size_t len);
/* Kernel sockets between the ranks of each pair (or every rank and its
 * successor when ring is set), over loopback within a host; busy-poll when
 * the ranks have a core each. */
struct xport *xport_sock_open(struct job *j, const char *kind, int ring,
                              const int (*pairs)[2], int npairs, int busy_poll, int in_place);

/* Reads len bytes the way an application would use data in place. */
uint64_t xport_consume(const void *p, size_t len);

#endif
