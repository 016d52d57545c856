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
};

/* The job as fmperf sees it: fastmsg context and a control endpoint used
 * for barriers and for setting up the kernel peers. */
struct job {
    fm_ctx *ctx;
    fm_ep *ctl;
    int rank, size;
};

/* Blocking helpers on the control endpoint (channel 1). */
void job_ctl_send(struct job *j, int to, const void *buf, size_t len);
void job_ctl_recv(struct job *j, int from, void *buf, size_t len);
void job_barrier(struct job *j);

/* fastmsg over whatever path the library picks (data on channel 0). */
struct xport *xport_fm_open(struct job *j, int in_place);
/* Kernel sockets between the ranks of each pair (or every rank and its
 * successor when ring is set), over loopback within a host; busy-poll when
 * the ranks have a core each. */
struct xport *xport_sock_open(struct job *j, const char *kind, int ring,
                              const int (*pairs)[2], int npairs, int busy_poll, int in_place);

/* Reads len bytes the way an application would use data in place. */
uint64_t xport_consume(const void *p, size_t len);

#endif
