/* The measured patterns. Every rank calls them; rank 0 gets the figures. */
#ifndef FMPERF_PATTERNS_H
#define FMPERF_PATTERNS_H

#include "xport.h"

#include <stddef.h>
#include <stdio.h>

/* bw: where rank 0 writes a line per window ("end time in ns of
 * CLOCK_REALTIME, MB/s"), to follow a transfer through an event; or NULL. */
extern FILE *pat_trace;

/* A figure with its spread: the median and the 99th percentile. */
struct figure {
    double median;
    double p99;
};

/* Ping-pong of `size` bytes between ranks 0 and 1: one-way time in us. */
struct figure pat_latency(struct xport *x, struct job *j, void *buf, size_t size, long iters);
/* Windows of `window` messages from rank 0 to rank 1, each window
 * acknowledged: application bandwidth in MB/s (10^6 B/s). */
struct figure pat_bw(struct xport *x, struct job *j, void *buf, size_t size, long iters,
                     int window);
/* Seed 001's MsgRate: rank 0 only sends, rank 1 only receives, in Mmsg/s. */
struct figure pat_msgrate(struct xport *x, struct job *j, void *buf, size_t size, long iters,
                          int reps);
/* Every rank sends to the next and receives from the previous: us per round. */
struct figure pat_ring(struct xport *x, struct job *j, void *buf, size_t size, long iters,
                       int reps);
/* Connection per message (seed 002): rank 0 opens a connection to rank 1,
 * sends `size` bytes, gets them back, closes; us per exchange. */
struct figure pat_connect(struct xport *x, struct job *j, void *buf, size_t size, long iters);
/* CPU share (percent) of rank 1 while it waits 1 s in fm_wait for nothing. */
struct figure pat_idle(struct job *j);

/* Seed 000's figure 2: two pairs of ranks, pairs[p] = {sender, receiver},
 * stream windows at once over what they share: each sender's bandwidth in
 * MB/s, in out[0] and out[1] on rank 0. */
void pat_multiplex(struct xport *x, struct job *j, const int (*pairs)[2], void *buf, size_t size,
                   long iters, int window, struct figure out[2]);

#endif
