/*
 * What a receive costs at an endpoint many peers have written to. Every rank
 * but 0 opens E quiet endpoints, each of which sends rank 0's endpoint one
 * message and then nothing more, so that endpoint keeps a ring per sender
 * (E x (size - 1) of them). Rank 0 then times an fm_recv that finds nothing,
 * and an 8 B ping-pong with rank 1 beside the quiet rings.
 *
 *   FM_EP_MAX=64 FM_TRANSPORTS=udp fmrun -n 17 many_rings 63 [ITERS]
 *   bash bench/many_rings.sh      (builds it, 17 and 1,009 rings, 3 rounds)
 *
 * Prints one JSON line: rings, empty_recv_ns and latency_us (medians of 7).
 */
#include <fastmsg.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAIN 1u     /* the measured endpoint's channel, on every rank */
#define QUIET 100u  /* the first quiet endpoint's channel */
#define SAMPLES 7

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void die(const char *what, long rc)
{
    fprintf(stderr, "many_rings: %s: %s\n", what, fm_strerror((int)rc));
    exit(1);
}

static void send8(fm_ep *ep, fm_addr dst)
{
    char buf[8] = {0};
    struct iovec iov = {buf, sizeof(buf)};
    ssize_t rc;
    while ((rc = fm_send(ep, dst, &iov, 1)) == FM_EAGAIN)
        fm_wait(ep, 100);
    if (rc < 0)
        die("fm_send", rc);
}

static void recv1(fm_ep *ep)
{
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    ssize_t rc;
    while ((rc = fm_recv(ep, seg, &nseg, NULL)) == FM_EAGAIN)
        ;
    if (rc < 0)
        die("fm_recv", rc);
    fm_recv_done(ep);
}

static void recv1_waiting(fm_ep *ep)
{
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    ssize_t rc;
    while ((rc = fm_recv(ep, seg, &nseg, NULL)) == FM_EAGAIN)
        fm_wait(ep, -1);
    if (rc < 0)
        die("fm_recv", rc);
    fm_recv_done(ep);
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v)
{
    qsort(v, SAMPLES, sizeof(*v), by_value);
    return v[SAMPLES / 2];
}

int main(int argc, char **argv)
{
    int quiet = argc > 1 ? atoi(argv[1]) : 63;
    long iters = argc > 2 ? atol(argv[2]) : 20000;
    fm_ctx *ctx;
    fm_ep *ep;
    long rc = fm_init(&ctx);
    if (rc)
        die("fm_init", rc);
    int rank = fm_rank(ctx), size = fm_size(ctx);
    if (size < 2 || quiet < 0)
        die("needs 2 ranks or more", FM_EINVAL);
    if ((rc = fm_ep_open(ctx, MAIN, &ep)))
        die("fm_ep_open", rc);
    fm_addr root = fm_addr_of(ctx, 0, MAIN);

    if (rank != 0) {
        fm_ep **q = calloc((size_t)quiet + 1, sizeof(*q));
        for (int i = 0; i < quiet; i++) {
            if ((rc = fm_ep_open(ctx, QUIET + (uint32_t)i, &q[i])))
                die("fm_ep_open (quiet)", rc);
            send8(q[i], root);
        }
        recv1_waiting(ep); /* rank 0 has every quiet message */
        if (rank == 1)
            for (int s = 0; s < SAMPLES; s++)
                for (long i = 0; i < iters; i++) {
                    send8(ep, root);
                    recv1(ep);
                }
        recv1_waiting(ep); /* the end */
        for (int i = 0; i < quiet; i++)
            fm_ep_close(q[i]);
        free(q);
    } else {
        long rings = (long)quiet * (size - 1);
        for (long i = 0; i < rings; i++)
            recv1_waiting(ep);
        double empty[SAMPLES], lat[SAMPLES];
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        for (int s = 0; s < SAMPLES; s++) {
            double t0 = now_ns();
            for (long i = 0; i < iters; i++)
                if ((rc = fm_recv(ep, seg, &nseg, NULL)) != FM_EAGAIN)
                    die("an empty fm_recv", rc < 0 ? rc : FM_EINVAL);
            empty[s] = (now_ns() - t0) / (double)iters;
        }
        for (int r = 1; r < size; r++)
            send8(ep, fm_addr_of(ctx, r, MAIN));
        fm_addr one = fm_addr_of(ctx, 1, MAIN);
        for (int s = 0; s < SAMPLES; s++) {
            double t0 = now_ns();
            for (long i = 0; i < iters; i++) {
                recv1(ep);
                send8(ep, one);
            }
            lat[s] = (now_ns() - t0) / (double)iters / 2e3;
        }
        for (int r = 1; r < size; r++)
            send8(ep, fm_addr_of(ctx, r, MAIN));
        printf("{\"test\":\"many_rings\",\"rings\":%ld,\"empty_recv_ns\":%.1f,"
               "\"latency_us\":%.3f}\n",
               rings + (size > 1), median(empty), median(lat));
    }
    fm_ep_close(ep);
    rc = fm_finalize(ctx);
    if (rc)
        die("fm_finalize", rc);
    return 0;
}
