/* The measured patterns. Every rank calls them; rank 0 gets the figures. */
#ifndef FMPERF_PATTERNS_H
#define FMPERF_PATTERNS_H

#include "xport.h"

#include <stddef.h>
#include <stdio.h>

/* bw: where rank 0 writes a line per window ("end time in ns of
 * CLOCK_REALTIME, MB/s"), to follow a transfer through an event; incast: a
 * line where each transport's measured interval begins and ends ("ns
 * transport measure|end"); or NULL. */
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

/* Names (fastmsg only), on an endpoint the caller opened on NAMES_CHANNEL. */
#define NAMES_CHANNEL 4
#define NAMES_LOOKUP_BATCH 10000 /* lookups timed together */

/* names-lookup, on rank 0: publishes instances [from, to) of a type, one
 * node-scope name each (those of earlier calls stay), then times
 * fm_name_lookup of published instances (out[0]) and of absent ones
 * (out[1]), and fm_name_lookup_all of one published instance (out[2]), in
 * batches: ns per call, median and p99 of the batches' means. */
void pat_names_lookup(struct job *j, fm_ep *ep, uint32_t from, uint32_t to, long iters,
                      struct figure out[3]);
/* names-event: rank 1 publishes and withdraws one name, rank 0 is
 * subscribed to it; us from just before fm_name_publish to rank 0 receiving
 * FM_NAME_PUBLISHED (out[0]), the same for withdraw (out[1]). One kernel:
 * the two compare CLOCK_MONOTONIC times. */
void pat_names_event(struct job *j, fm_ep *ep, long iters, struct figure out[2]);
/* mcast: ranks 1..N publish {type, rank}; rank 0 waits until it sees all of
 * them. Once, before pat_mcast. */
void pat_mcast_join(struct job *j, fm_ep *ep);
/* Rank 0's time (us) of one fm_name_mcast of `size` bytes to ranks 1..N
 * (out[0]) and of N fm_send calls to the same addresses (out[1]); the
 * others count what they receive. */
void pat_mcast(struct job *j, fm_ep *ep, void *buf, size_t size, long iters,
               struct figure out[2]);

/* Seed 000's figure 2: two pairs of ranks, pairs[p] = {sender, receiver},
 * stream windows at once over what they share: each sender's bandwidth in
 * MB/s, in out[0] and out[1] on rank 0. */
void pat_multiplex(struct xport *x, struct job *j, const int (*pairs)[2], void *buf, size_t size,
                   long iters, int window, struct figure out[2]);

/* incast: ranks 1..N-2 each stream windows of `size`-byte messages into
 * rank 0, acknowledged per window as in bw, for `seconds`; the last rank, the
 * victim, meanwhile ping-pongs 8 bytes with rank 0. Figures of rank 0 over
 * the measured interval (after a warmup): */
struct incast_result {
    double goodput;       /* MB/s of all senders together */
    double min, max;      /* MB/s of the slowest and of the fastest sender */
    double jain;          /* Jain's fairness index over the senders' MB/s */
    struct figure victim; /* the victim's one-way latency (round trip / 2), us */
    long pings;           /* round trips the victim measured */
};
void pat_incast(struct xport *x, struct job *j, void *buf, size_t size, int window,
                double seconds, struct incast_result *out);

#endif
