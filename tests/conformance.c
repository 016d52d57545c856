/*
 * The core API conformance suite: every case holds for every transport.
 * Run one case per job: fmrun -n N conformance CASE (tests/CMakeLists.txt
 * lists the cases with their rank counts and environments).
 */
#include "net/udp_link.h"
#include "testing/fmtest.h"

#include <dirent.h>
#include <pthread.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define CH 7 /* the channel most cases use */
#define FM_MIN_(a, b) ((a) < (b) ? (a) : (b))

static fm_ctx *ctx;
static fm_ep *ep;

static int rank, size;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Receives one message that must be `len` bytes of pattern `seed` from `from`. */
static void expect_msg(int from, uint64_t seed, size_t len)
{
    unsigned char *buf = malloc(len + 1);
    fm_addr src;
    long n = fmt_recv_copy(ep, buf, len + 1, &src);
    CHECK_EQ(n, (long)len);
    CHECK_EQ(fm_addr_rank(ctx, src), from);
    for (size_t i = 0; i < len; i++)
        if (buf[i] != fmt_pattern(seed, i))
            fmt_fail(__FILE__, __LINE__, "byte %zu of a %zu-byte message differs", i, len);
    free(buf);
}

static void send_pattern(int to, uint64_t seed, size_t len)
{
    unsigned char *buf = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        buf[i] = fmt_pattern(seed, i);
    struct iovec v = {buf, len};
    ssize_t n;
    while ((n = fm_send(ep, fm_addr_of(ctx, to, CH), &v, 1)) == FM_EAGAIN)
        fm_wait(ep, 100);
    CHECK_EQ(n, (long)len);
    free(buf);
}

/* A simple barrier over the API itself: everyone tells rank 0, rank 0 answers. */
static void barrier(void)
{
    char b = 0;
    if (rank == 0) {
        for (int i = 1; i < size; i++)
            CHECK_EQ(fmt_recv_copy(ep, &b, 1, NULL), 1);
        for (int i = 1; i < size; i++)
            CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, i, CH), &b, 1), 1);
    } else {
        CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 0, CH), &b, 1), 1);
        CHECK_EQ(fmt_recv_copy(ep, &b, 1, NULL), 1);
    }
}

/* Every pair of ranks (and every rank with itself) exchanges messages of
 * each size in turn. Only per-sender order may be assumed: a fast sender's
 * next size can arrive before a slow sender's current one. */
static void case_pingpong(void)
{
    static const size_t sizes[] = {0, 1, 8, 63, 64, 65, 1000, 4000}; /* <= FM_SHM_MAX_MSG */
    const int nsizes = (int)(sizeof(sizes) / sizeof(sizes[0]));
    int next[64] = {0}; /* index of the size expected next from each rank */
    CHECK(size <= 64);
    for (int s = 0; s < nsizes; s++) {
        for (int to = 0; to < size; to++)
            send_pattern(to, (uint64_t)rank * 1000 + (uint64_t)s, sizes[s]);
        for (int k = 0; k < size; k++) {
            unsigned char buf[16384];
            fm_addr src;
            long n = fmt_recv_copy(ep, buf, sizeof(buf), &src);
            int from = fm_addr_rank(ctx, src);
            CHECK(from >= 0 && from < size);
            CHECK_EQ(src, fm_addr_of(ctx, from, CH));
            int idx = next[from]++;
            CHECK(idx < nsizes);
            CHECK_EQ(n, (long)sizes[idx]);
            for (long i = 0; i < n; i++)
                CHECK_EQ(buf[i], fmt_pattern((uint64_t)from * 1000 + (uint64_t)idx, (uint64_t)i));
        }
    }
    for (int i = 0; i < size; i++)
        CHECK_EQ(next[i], nsizes);
}

/* Many senders, one receiver: each sender's messages arrive in order. */
static void case_order_many(void)
{
    const uint32_t per_sender = 20000;
    if (rank == 0) {
        uint32_t *next = calloc((size_t)size, sizeof(uint32_t));
        for (uint64_t k = 0; k < (uint64_t)per_sender * (uint64_t)(size - 1); k++) {
            uint32_t msg[2];
            fm_addr src;
            CHECK_EQ(fmt_recv_copy(ep, msg, sizeof(msg), &src), sizeof(msg));
            int from = fm_addr_rank(ctx, src);
            CHECK_EQ(msg[0], (uint32_t)from);
            CHECK_EQ(msg[1], next[from]);
            next[from]++;
        }
        for (int i = 1; i < size; i++)
            CHECK_EQ(next[i], per_sender);
        free(next);
    } else {
        for (uint32_t i = 0; i < per_sender; i++) {
            uint32_t msg[2] = {(uint32_t)rank, i};
            CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 0, CH), msg, sizeof(msg)), 1);
        }
    }
}

/*
 * Many sending endpoints, one receiving endpoint: rank 1 opens MANY_EPS
 * endpoints and sends from each in turn, some messages larger than a
 * quarter of a small ring (their flows end and successors with larger
 * rings follow, each found behind its predecessor). Each endpoint's bytes
 * arrive whole and in order (a send may go in parts: the receiver checks
 * each sender's stream, not the messages' bounds).
 */
#define MANY_EPS 40
#define MANY_ROUNDS 30
static size_t many_len(uint32_t round) { return round % 5 == 4 ? 12000 : 8 + round; }
static unsigned char many_byte(uint32_t e, uint64_t off)
{
    return (unsigned char)(e * 131 + off * 7 + (off >> 8));
}

static void case_many_endpoints(void)
{
    static unsigned char buf[16384];
    const uint32_t to = 99; /* not CH: the barrier's messages go there */
    uint64_t total = 0;
    for (uint32_t r = 0; r < MANY_ROUNDS; r++)
        total += many_len(r);
    fm_ep *dst = NULL;
    if (rank == 0)
        CHECK_RC(fm_ep_open(ctx, to, &dst), 0);
    barrier();
    if (rank == 1) {
        fm_ep *eps[MANY_EPS];
        uint64_t sent[MANY_EPS] = {0};
        for (uint32_t e = 0; e < MANY_EPS; e++)
            CHECK_RC(fm_ep_open(ctx, 100 + e, &eps[e]), 0);
        for (uint32_t r = 0; r < MANY_ROUNDS; r++) {
            for (uint32_t e = 0; e < MANY_EPS; e++) {
                size_t len = many_len(r);
                for (size_t i = 0; i < len; i++)
                    buf[i] = many_byte(e, sent[e] + i);
                CHECK(fmt_send_all(eps[e], fm_addr_of(ctx, 0, to), buf, len) >= 1);
                sent[e] += len;
            }
        }
        barrier(); /* the receiver has everything: the endpoints may go */
        for (uint32_t e = 0; e < MANY_EPS; e++)
            CHECK_RC(fm_ep_close(eps[e]), 0);
    } else if (rank == 0) {
        uint64_t got[MANY_EPS] = {0}, all = 0;
        while (all < total * MANY_EPS) {
            fm_addr src;
            long n = fmt_recv_copy(dst, buf, sizeof(buf), &src);
            CHECK(n > 0);
            CHECK_EQ(fm_addr_rank(ctx, src), 1);
            uint32_t e = (uint32_t)(src - fm_addr_of(ctx, 1, 100));
            CHECK(e < MANY_EPS);
            for (long i = 0; i < n; i++)
                CHECK_EQ(buf[i], many_byte(e, got[e] + (uint64_t)i));
            got[e] += (uint64_t)n;
            all += (uint64_t)n;
        }
        for (uint32_t e = 0; e < MANY_EPS; e++)
            CHECK_EQ(got[e], total);
        barrier();
        CHECK_RC(fm_ep_close(dst), 0);
    } else {
        barrier();
    }
}

/*
 * Partial sends: with a small ring, one fm_send of a large gathered buffer
 * takes a prefix; the rest goes as further messages and the receiver
 * reassembles the exact bytes. Wrap-around splits some messages in two.
 */
/* Receives `total` bytes of the stream fmt_pattern(seed, ...) from any
 * sender, checking each byte; returns how many messages came in more than
 * one segment (wrapped around the ring). */
static size_t recv_stream(uint64_t seed, size_t total)
{
    size_t got = 0, split = 0;
    while (got < total) {
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        fm_addr src;
        ssize_t n = fm_recv(ep, seg, &nseg, &src);
        if (n == FM_EAGAIN) {
            fm_wait(ep, 100);
            continue;
        }
        CHECK(n > 0);
        CHECK(nseg >= 1 && nseg <= FM_SEGS_MAX);
        split += nseg > 1;
        for (int s = 0; s < nseg; s++) {
            const unsigned char *p = seg[s].iov_base;
            for (size_t i = 0; i < seg[s].iov_len; i++)
                if (p[i] != fmt_pattern(seed, got + i))
                    fmt_fail(__FILE__, __LINE__, "stream byte %zu differs", got + i);
            got += seg[s].iov_len;
        }
        CHECK_RC(fm_recv_done(ep), 0);
    }
    CHECK_EQ(got, total);
    return split;
}

/* Sends `total` bytes of the stream fmt_pattern(seed, ...) to rank 1 in
 * messages whose lengths cycle through sizes (at most 64 KiB each). */
static void send_stream(uint64_t seed, size_t total, const size_t *sizes, size_t nsizes)
{
    unsigned char *buf = malloc(65536);
    CHECK(buf != NULL);
    size_t off = 0;
    for (size_t k = 0; off < total; k++) {
        size_t len = FM_MIN_(total - off, sizes[k % nsizes]);
        for (size_t i = 0; i < len; i++)
            buf[i] = fmt_pattern(seed, off + i);
        struct iovec v = {buf, len};
        ssize_t n;
        while ((n = fm_send(ep, fm_addr_of(ctx, 1, CH), &v, 1)) == FM_EAGAIN)
            fm_wait(ep, 100);
        CHECK(n > 0);
        off += (size_t)n;
    }
    free(buf);
}

static void case_partial_wrap(void)
{
    const size_t total = 3 * 1000 * 1000 + 7;
    if (rank == 0) {
        unsigned char *buf = malloc(total);
        for (size_t i = 0; i < total; i++)
            buf[i] = fmt_pattern(42, i);
        /* Three iovec pieces of odd sizes, re-sliced as the sends progress;
         * every other send one piece (large ones then leave from this
         * memory before the link copies them: udp_link.c). */
        size_t off = 0, partial = 0;
        for (int round = 0; off < total; round++) {
            size_t a = FM_MIN_(total - off, 1001);
            size_t b = FM_MIN_(total - off - a, 33333);
            struct iovec v[3] = {{buf + off, a}, {buf + off + a, b},
                                 {buf + off + a + b, total - off - a - b}};
            if (round % 2)
                v[0].iov_len = total - off;
            ssize_t n = fm_send(ep, fm_addr_of(ctx, 1, CH), v, round % 2 ? 1 : 3);
            if (n == FM_EAGAIN) {
                fm_wait(ep, 100);
                continue;
            }
            CHECK(n > 0);
            partial += (size_t)n < total - off;
            off += (size_t)n;
        }
        CHECK(partial > 0);
        free(buf);
    } else if (rank == 1) {
        CHECK(recv_stream(42, total) > 0); /* some messages came in two pieces */
    }
}

/*
 * Small messages in a burst, then a large one at once: the large one's
 * first packet may begin with the small ones, still waiting to be
 * gathered, so the network path's packets do not start where the large
 * message does (the udp link then sends it from the caller's memory with
 * that packet's bytes in the ring: udp_link.c). Every byte is checked.
 */
static void case_mixed(void)
{
    static const size_t sizes[] = {64, 64, 8, 20000, 64, 40000, 1000, 17000, 24, 65536};
    const size_t total = 4u << 20;
    if (rank == 0)
        send_stream(7, total, sizes, sizeof(sizes) / sizeof(sizes[0]));
    else if (rank == 1)
        recv_stream(7, total);
}

/* Several held messages stay valid and are released oldest first. */
static void case_held(void)
{
    if (rank == 0) {
        for (uint64_t i = 0; i < 5; i++)
            send_pattern(1, 100 + i, 3000 + i);
    } else if (rank == 1) {
        struct iovec seg[5][FM_SEGS_MAX];
        int nseg[5];
        ssize_t len[5];
        CHECK_RC(fm_recv_done(ep), FM_EINVAL); /* nothing held */
        for (int i = 0; i < 5; i++) {
            fm_addr src;
            while ((len[i] = fm_recv(ep, seg[i], &nseg[i], &src)) == FM_EAGAIN)
                fm_wait(ep, 100);
            CHECK_EQ(len[i], 3000 + i);
        }
        /* All five still readable in place, then released one by one. */
        for (int i = 0; i < 5; i++) {
            size_t off = 0;
            for (int s = 0; s < nseg[i]; s++)
                for (size_t k = 0; k < seg[i][s].iov_len; k++, off++)
                    CHECK_EQ(((unsigned char *)seg[i][s].iov_base)[k],
                             fmt_pattern(100 + (uint64_t)i, off));
            CHECK_EQ(off, (size_t)len[i]);
        }
        for (int i = 0; i < 5; i++) {
            CHECK_RC(fm_recv_done(ep), 0);
            /* Releasing the oldest leaves the newer ones intact. */
            for (int j = i + 1; j < 5; j++)
                CHECK_EQ(((unsigned char *)seg[j][0].iov_base)[0],
                         fmt_pattern(100 + (uint64_t)j, 0));
        }
        CHECK_RC(fm_recv_done(ep), FM_EINVAL);
    }
}

/* A message read in place holds `len` bytes of pattern `seed`. */
static void check_held(const struct iovec *seg, int nseg, uint64_t seed, size_t len)
{
    size_t off = 0;
    for (int s = 0; s < nseg; s++)
        for (size_t k = 0; k < seg[s].iov_len; k++, off++)
            if (((const unsigned char *)seg[s].iov_base)[k] != fmt_pattern(seed, off))
                fmt_fail(__FILE__, __LINE__, "byte %zu of a held message differs", off);
    CHECK_EQ(off, len);
}

/*
 * A message held while its ring ends: over the network, a message larger
 * than a quarter of the flow's small ring ends the flow (its successor
 * gets a larger one), and the successor is read once the ended ring is read
 * and released. The receiver holds the first message through the end, for
 * a while, then releases it: the second must come.
 */
static void case_held_grow(void)
{
    enum { SMALL = 100, LARGE = 24 << 10 };
    /* First a round trip: then the sender knows how far a ring may grow. */
    if (rank == 0) {
        send_pattern(1, 6, 1);
        expect_msg(1, 6, 1);
        send_pattern(1, 7, SMALL);
        send_pattern(1, 8, LARGE);
    } else if (rank == 1) {
        expect_msg(0, 6, 1);
        send_pattern(0, 6, 1);
        struct iovec seg[2][FM_SEGS_MAX];
        int nseg[2], got = 0;
        ssize_t len[2];
        uint64_t t0 = now_ns();
        while (got < 2 && now_ns() - t0 < 300000000u) {
            len[got] = fm_recv(ep, seg[got], &nseg[got], NULL);
            if (len[got] == FM_EAGAIN)
                fm_wait(ep, 10);
            else
                CHECK(len[got++] > 0);
        }
        CHECK(got >= 1);
        CHECK_EQ(len[0], SMALL);
        check_held(seg[0], nseg[0], 7, SMALL);
        if (got == 2) {
            CHECK_EQ(len[1], LARGE);
            check_held(seg[1], nseg[1], 8, LARGE);
        }
        for (int i = 0; i < got; i++)
            CHECK_RC(fm_recv_done(ep), 0);
        if (got == 1)
            expect_msg(0, 8, LARGE);
    }
}

/* A receiver that does not read: the sender gets FM_EAGAIN after a bounded
 * amount, nothing is lost, and fm_wait wakes the sender when space frees. */
static void case_backpressure(void)
{
    char b;
    fm_ep *data = NULL;
    if (rank == 1)
        CHECK_RC(fm_ep_open(ctx, 0, &data), 0);
    barrier();
    if (rank == 0) {
        uint32_t sent = 0;
        unsigned char msg[512];
        for (;;) {
            memset(msg, (int)(sent & 0xff), sizeof(msg));
            struct iovec v = {msg, sizeof(msg)};
            ssize_t n = fm_send(ep, fm_addr_of(ctx, 1, 0), &v, 1);
            if (n == FM_EAGAIN)
                break;
            CHECK_EQ(n, (long)sizeof(msg));
            sent++;
            CHECK(sent < 100000); /* bounded: the ring, not an unbounded queue */
        }
        CHECK(sent > 0);
        /* Tell rank 1 (on another channel) how many went, then keep sending:
         * each fm_wait must end because rank 1 frees space. */
        CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 1, CH), &sent, sizeof(sent)), 1);
        for (uint32_t i = 0; i < 2 * sent; i++) {
            memset(msg, (int)((sent + i) & 0xff), sizeof(msg));
            struct iovec v = {msg, sizeof(msg)};
            ssize_t n;
            while ((n = fm_send(ep, fm_addr_of(ctx, 1, 0), &v, 1)) == FM_EAGAIN)
                CHECK_RC(fm_wait(ep, 10000), 0);
            CHECK_EQ(n, (long)sizeof(msg));
        }
        CHECK_EQ(fmt_recv_copy(ep, &b, 1, NULL), 1);
    } else if (rank == 1) {
        uint32_t sent;
        CHECK_EQ(fmt_recv_copy(ep, &sent, sizeof(sent), NULL), sizeof(sent));
        sleep(1); /* the sender now waits in fm_wait */
        for (uint32_t i = 0; i < 3 * sent; i++) {
            unsigned char msg[512];
            CHECK_EQ(fmt_recv_copy(data, msg, sizeof(msg), NULL), (long)sizeof(msg));
            CHECK_EQ(msg[0], i & 0xff);
            CHECK_EQ(msg[511], i & 0xff);
        }
        CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 0, CH), &b, 1), 1);
        CHECK_RC(fm_ep_close(data), 0);
    }
}

/* Sends larger than a quarter of the ring, into a ring that cannot grow
 * (the receiver's FM_NET_RX_MEM, set by the test): they go in parts, and
 * fm_wait wakes the sender as soon as a part fits. It once waited for room
 * for the whole message, which that ring never has: for ever with no
 * timeout (64 senders of bench/incast.sh, where the receiver's memory ran
 * short for a while). */
static void case_wait_parts(void)
{
    enum { MSG = 64 << 10, TOTAL = 4 << 20 };
    static unsigned char buf[MSG];
    char b = 'b';
    if (rank == 0) {
        /* A small message first: the ACK that answers it tells the sender
         * how small the receiver keeps its rings (the wait runs the
         * network until then; nothing comes to receive). */
        CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 1, CH), &b, 1), 1);
        CHECK_RC(fm_wait(ep, 300), FM_ETIMEDOUT);
        for (size_t off = 0; off < TOTAL;) {
            size_t len = TOTAL - off < MSG ? TOTAL - off : MSG;
            for (size_t i = 0; i < len; i++)
                buf[i] = (unsigned char)((off + i) * 7);
            struct iovec v = {buf, len};
            ssize_t n;
            while ((n = fm_send(ep, fm_addr_of(ctx, 1, CH), &v, 1)) == FM_EAGAIN)
                CHECK_RC(fm_wait(ep, 10000), 0); /* rank 1 reads: space frees */
            CHECK(n > 0);
            off += (size_t)n;
        }
        CHECK_EQ(fmt_recv_copy(ep, &b, 1, NULL), 1);
    } else if (rank == 1) {
        CHECK_EQ(fmt_recv_copy(ep, &b, 1, NULL), 1);
        /* A second without reading, the network running: acknowledgements
         * go, the sender fills the ring and waits. */
        for (int i = 0; i < 1000; i++) {
            fm_progress(ctx);
            usleep(1000);
        }
        for (size_t off = 0; off < TOTAL;) {
            long n = fmt_recv_copy(ep, buf, sizeof(buf), NULL);
            CHECK(n > 0);
            for (long i = 0; i < n; i++)
                if (buf[i] != (unsigned char)((off + (size_t)i) * 7))
                    CHECK_EQ(buf[i], (unsigned char)((off + (size_t)i) * 7));
            off += (size_t)n;
        }
        CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 0, CH), &b, 1), 1);
    }
}

/* Empty messages are messages: from an empty iovec, a zero-length piece,
 * and an empty prepare/commit. */
static void case_zero_length(void)
{
    if (rank == 0) {
        char x = 'x';
        struct iovec empty = {&x, 0};
        fm_addr to = fm_addr_of(ctx, 1, CH);
        ssize_t n;
        while ((n = fm_send(ep, to, NULL, 0)) == FM_EAGAIN)
            fm_wait(ep, 100);
        CHECK_EQ(n, 0);
        while ((n = fm_send(ep, to, &empty, 1)) == FM_EAGAIN)
            fm_wait(ep, 100);
        CHECK_EQ(n, 0);
        void *buf;
        while ((n = fm_send_prepare(ep, to, 0, &buf)) == FM_EAGAIN)
            fm_wait(ep, 100);
        CHECK_EQ(n, 0);
        CHECK_RC(fm_send_commit(ep, 0), 0);
        send_pattern(1, 5, 5);
    } else if (rank == 1) {
        for (int i = 0; i < 3; i++) {
            struct iovec seg[FM_SEGS_MAX];
            int nseg = -1;
            fm_addr src;
            ssize_t n;
            while ((n = fm_recv(ep, seg, &nseg, &src)) == FM_EAGAIN)
                fm_wait(ep, 100);
            CHECK_EQ(n, 0);
            CHECK_EQ(nseg, 0);
            CHECK_EQ(fm_addr_rank(ctx, src), 0);
            CHECK_RC(fm_recv_done(ep), 0);
        }
        expect_msg(0, 5, 5);
    }
}

/* The zero-copy send path: build in place, commit less than granted,
 * and a grant abandoned by the next call. */
static void case_prepare(void)
{
    if (rank == 0) {
        fm_addr to = fm_addr_of(ctx, 1, CH);
        for (int round = 0; round < 2000; round++) {
            size_t want = 1 + (size_t)round * 37 % 20000;
            void *buf;
            ssize_t g;
            while ((g = fm_send_prepare(ep, to, want, &buf)) == FM_EAGAIN)
                fm_wait(ep, 100);
            CHECK(g >= 1 && (size_t)g <= want);
            if (round % 10 == 3) {
                /* Abandon this grant: nothing must arrive from it. */
                memset(buf, 0xEE, (size_t)g);
                continue;
            }
            size_t len = (size_t)g - (size_t)(round % 2 && g > 1);
            for (size_t i = 0; i < len; i++)
                ((unsigned char *)buf)[i] = fmt_pattern((uint64_t)round, i);
            CHECK_RC(fm_send_commit(ep, len), 0);
            CHECK_RC(fm_send_commit(ep, 0), FM_EINVAL); /* already committed */
        }
        CHECK_RC(fm_send_commit(ep, 0), FM_EINVAL);
        send_pattern(1, 9, 1); /* end marker */
    } else if (rank == 1) {
        for (int round = 0; round < 2000; round++) {
            if (round % 10 == 3)
                continue;
            unsigned char buf[20000];
            long n = fmt_recv_copy(ep, buf, sizeof(buf), NULL);
            CHECK(n >= 0);
            for (long i = 0; i < n; i++)
                CHECK_EQ(buf[i], fmt_pattern((uint64_t)round, (uint64_t)i));
        }
        expect_msg(0, 9, 1);
    }
}

/* Channels separate message spaces; a channel not open yet means EAGAIN. */
static void case_channels(void)
{
    fm_ep *a, *b;
    CHECK_RC(fm_ep_open(ctx, 100, &a), 0);
    CHECK_RC(fm_ep_open(ctx, 200, &b), 0);
    CHECK_EQ(fm_ep_addr(a), fm_addr_of(ctx, rank, 100));
    barrier();
    int peer = (rank + 1) % size;
    char m = 'A';
    struct iovec v = {&m, 1};
    /* 301 is open nowhere: the message waits (net) or is refused (shm). */
    ssize_t early = fm_send(a, fm_addr_of(ctx, peer, 301), &v, 1);
    CHECK(early == FM_EAGAIN || early == 1);
    CHECK_EQ(fmt_send_all(a, fm_addr_of(ctx, peer, 200), &m, 1), 1);
    m = 'B';
    CHECK_EQ(fmt_send_all(b, fm_addr_of(ctx, peer, 100), &m, 1), 1);
    fm_addr src;
    char got;
    CHECK_EQ(fmt_recv_copy(b, &got, 1, &src), 1);
    CHECK_EQ(got, 'A');
    CHECK_EQ(src, fm_addr_of(ctx, (rank + size - 1) % size, 100));
    CHECK_EQ(fmt_recv_copy(a, &got, 1, &src), 1);
    CHECK_EQ(got, 'B');
    CHECK_EQ(src, fm_addr_of(ctx, (rank + size - 1) % size, 200));
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    if (rank != 0) /* rank 0 may already hold the next barrier's messages */
        CHECK_RC(fm_recv(ep, seg, &nseg, &src), FM_EAGAIN);
    barrier();
    /* A channel opened late receives what was sent while it was closed. */
    if (rank == 0) {
        m = 'L';
        CHECK_EQ(fmt_send_all(a, fm_addr_of(ctx, 1, 300), &m, 1), 1);
    } else if (rank == 1) {
        fm_ep *late;
        usleep(200 * 1000);
        CHECK_RC(fm_ep_open(ctx, 300, &late), 0);
        CHECK_EQ(fmt_recv_copy(late, &got, 1, &src), 1);
        CHECK_EQ(got, 'L');
        CHECK_EQ(src, fm_addr_of(ctx, 0, 100));
        CHECK_RC(fm_ep_close(late), 0);
    }
    barrier();
    CHECK_RC(fm_ep_close(a), 0);
    CHECK_RC(fm_ep_close(b), 0);
}

/* Every invalid argument gets its code. */
static void case_invalid(void)
{
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    fm_addr src;
    char x = 0;
    struct iovec v = {&x, 1}, nullbase = {NULL, 1};
    fm_addr self = fm_addr_of(ctx, rank, CH);
    fm_ep *e;
    void *buf;

    CHECK_RC(fm_init(NULL), FM_EINVAL);
    CHECK_RC(fm_finalize(NULL), FM_EINVAL);
    CHECK_RC(fm_rank(NULL), FM_EINVAL);
    CHECK_RC(fm_size(NULL), FM_EINVAL);
    CHECK_RC(fm_progress(NULL), FM_EINVAL);
    CHECK_RC(fm_ep_open(NULL, 1, &e), FM_EINVAL);
    CHECK_RC(fm_ep_open(ctx, 1, NULL), FM_EINVAL);
    CHECK_RC(fm_ep_open(ctx, CH, &e), FM_EBUSY);
    CHECK_RC(fm_ep_close(NULL), FM_EINVAL);
    CHECK_EQ(fm_ep_addr(NULL), FM_ADDR_NONE);

    CHECK_EQ(fm_addr_of(NULL, 0, 1), FM_ADDR_NONE);
    CHECK_EQ(fm_addr_of(ctx, -1, 1), FM_ADDR_NONE);
    CHECK_EQ(fm_addr_of(ctx, size, 1), FM_ADDR_NONE);
    CHECK_EQ(fm_addr_rank(ctx, FM_ADDR_NONE), -1);
    CHECK_EQ(fm_addr_rank(ctx, ~(fm_addr)0), -1);
    CHECK_EQ(fm_addr_rank(ctx, self), rank);

    CHECK_RC(fm_send(NULL, self, &v, 1), FM_EINVAL);
    CHECK_RC(fm_send(ep, self, &v, -1), FM_EINVAL);
    CHECK_RC(fm_send(ep, self, &v, IOV_MAX + 1), FM_EINVAL);
    CHECK_RC(fm_send(ep, self, NULL, 1), FM_EINVAL);
    CHECK_RC(fm_send(ep, self, &nullbase, 1), FM_EINVAL);
    CHECK_RC(fm_send(ep, FM_ADDR_NONE, &v, 1), FM_EINVAL);
    CHECK_RC(fm_send(ep, ((fm_addr)(uint32_t)(size + 5) << 32) | CH, &v, 1), FM_EINVAL);
    struct iovec huge[2] = {{&x, SIZE_MAX / 2 + 1}, {&x, SIZE_MAX / 2 + 1}};
    CHECK_RC(fm_send(ep, self, huge, 2), FM_EMSGSIZE);

    CHECK_RC(fm_send_prepare(NULL, self, 1, &buf), FM_EINVAL);
    CHECK_RC(fm_send_prepare(ep, self, 1, NULL), FM_EINVAL);
    CHECK_RC(fm_send_prepare(ep, FM_ADDR_NONE, 1, &buf), FM_EINVAL);
    CHECK_RC(fm_send_commit(NULL, 0), FM_EINVAL);
    CHECK_RC(fm_send_commit(ep, 0), FM_EINVAL); /* nothing prepared */
    ssize_t g = fm_send_prepare(ep, self, 16, &buf);
    CHECK_EQ(g, 16);
    CHECK_RC(fm_send_commit(ep, 17), FM_EINVAL); /* more than granted */
    CHECK_RC(fm_send_commit(ep, 16), 0);

    CHECK_RC(fm_recv(NULL, seg, &nseg, &src), FM_EINVAL);
    CHECK_RC(fm_recv(ep, NULL, &nseg, &src), FM_EINVAL);
    CHECK_RC(fm_recv(ep, seg, NULL, &src), FM_EINVAL);
    ssize_t got;
    while ((got = fm_recv(ep, seg, &nseg, NULL)) == FM_EAGAIN) /* src is optional */
        fm_wait(ep, 100);
    CHECK_EQ(got, 16);
    CHECK_RC(fm_recv_done(ep), 0);
    CHECK_RC(fm_recv_done(ep), FM_EINVAL);
    CHECK_RC(fm_recv_done(NULL), FM_EINVAL);
    CHECK_RC(fm_wait(NULL, 0), FM_EINVAL);
    CHECK_RC(fm_wait(ep, -2), FM_EINVAL);
    CHECK_RC(fm_wait(ep, 0), FM_ETIMEDOUT);

    /* FM_EP_MAX endpoints, then FM_ELIMIT. */
    fm_ep *eps[64];
    int n = 0;
    int rc;
    while ((rc = fm_ep_open(ctx, 1000 + (uint32_t)n, &eps[n])) == 0)
        n++;
    CHECK_RC(rc, FM_ELIMIT);
    CHECK_EQ(n, 8 - 1); /* FM_EP_MAX=8, one is open already */
    while (n > 0)
        CHECK_RC(fm_ep_close(eps[--n]), 0);

    /* Every code has its own name. */
    int codes[] = {FM_EAGAIN, FM_EINVAL, FM_EMSGSIZE, FM_ENOMEM, FM_EPEERLOST, FM_ETIMEDOUT,
                   FM_EBUSY, FM_ELIMIT, FM_EUNREACH, FM_EBOOT, FM_ESYS};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        CHECK(codes[i] < 0);
        CHECK(strcmp(fm_strerror(codes[i]), "unknown error") != 0);
        for (size_t j = 0; j < i; j++)
            CHECK(strcmp(fm_strerror(codes[i]), fm_strerror(codes[j])) != 0);
    }
    CHECK(strcmp(fm_strerror(0), "success") == 0);
    CHECK(strcmp(fm_strerror(-99999), "unknown error") == 0);
}

/*
 * A ping-pong of small messages, 50 exchanges 20 ms apart: no PING beyond
 * the heartbeats. A sender whose receiver had not yet released its ring's
 * space (it does an eighth of a ring at a time) pinged for credit 1, 2, 4
 * ms after nearly every message: 396 PINGs a side in 100 exchanges.
 */
static void case_quiet_pingpong(void)
{
    char m[64] = {0};
    fm_addr peer = fm_addr_of(ctx, 1 - rank, CH);
    for (int i = 0; i < 50; i++) {
        if (rank == 0) {
            CHECK_EQ(fmt_send_all(ep, peer, m, sizeof(m)), 1);
            CHECK_EQ(fmt_recv_copy(ep, m, sizeof(m), NULL), (long)sizeof(m));
            usleep(20 * 1000);
        } else {
            CHECK_EQ(fmt_recv_copy(ep, m, sizeof(m), NULL), (long)sizeof(m));
            CHECK_EQ(fmt_send_all(ep, peer, m, sizeof(m)), 1);
        }
    }
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    CHECK_RC(fm_udp_link_counters(ctx, nc, dr), 0);
    CHECK(nc[FM_NC_PINGS] <= 8); /* heartbeats: 1 s at 750 ms apart, and slack */
}

/*
 * A rank that only sends, a message every 50 ms for five timeouts (run
 * with FM_NET_TIMEOUT_MS=400), never waiting or receiving: its peer is not
 * lost. Each message left at once, so its send never read the sockets,
 * and the timers took the peer for silent while its ACKs waited unread:
 * FM_EPEERLOST after a timeout.
 */
static void case_send_only(void)
{
    const int count = 40;
    char m[64] = {0};
    if (rank == 0) {
        for (int i = 0; i < count; i++) {
            struct iovec v = {m, sizeof(m)};
            CHECK_EQ(fm_send(ep, fm_addr_of(ctx, 1, CH), &v, 1), (ssize_t)sizeof(m));
            usleep(50 * 1000);
        }
    } else if (rank == 1) {
        for (int i = 0; i < count; i++)
            CHECK_EQ(fmt_recv_copy(ep, m, sizeof(m), NULL), (long)sizeof(m));
    }
}

/*
 * Messages from peers that then left, for a channel this rank never opens,
 * hold at most a quarter of FM_NET_RX_MEM (run with 5 ranks and 256 KiB):
 * four flows of 32 KiB are parked, and once their senders are gone at most
 * two stay (all four stayed until fm_finalize, and a server whose clients
 * come and go grew with each). Network path only.
 */
static void case_parked_departed(void)
{
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    if (rank != 0) {
        char m[64] = {0};
        CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 0, CH + 5), m, sizeof(m)), 1);
        barrier(); /* parked at rank 0 */
        return;    /* and leave */
    }
    uint64_t t0 = now_ns();
    do {
        CHECK(now_ns() - t0 < 10000000000ull);
        fm_progress(ctx);
        usleep(1000);
        CHECK_RC(fm_udp_link_counters(ctx, nc, dr), 0);
    } while (nc[FM_NC_RING_RX_BYTES] < (uint64_t)(size - 1) * 32768 + 2 * 32768);
    barrier();
    t0 = now_ns();
    do { /* until they left, and the rings they sent the barrier in retired */
        CHECK(now_ns() - t0 < 10000000000ull);
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        ssize_t n = fm_recv(ep, seg, &nseg, NULL);
        CHECK(n == FM_EAGAIN || n == FM_EPEERLOST);
        usleep(1000);
        CHECK_RC(fm_udp_link_counters(ctx, nc, dr), 0);
    } while (nc[FM_NC_RING_RX_BYTES] > 256 * 1024 / 4);
}

/*
 * A grant given up uncommitted (a send after fm_send_prepare) lets go of
 * its flow: 64 KiB messages then grow it as usual. Over the network its
 * pin stayed, the flow never grew, and every 64 KiB message went in eight
 * parts of a quarter of a 32 KiB ring.
 */
static void case_grant_abandoned(void)
{
    const size_t len = 65536, nmsg = 40;
    if (rank == 0) {
        void *g;
        ssize_t n;
        while ((n = fm_send_prepare(ep, fm_addr_of(ctx, 1, CH), 100, &g)) == FM_EAGAIN)
            fm_wait(ep, 10);
        CHECK(n > 0); /* and never committed */
        unsigned char *buf = malloc(len);
        CHECK(buf != NULL);
        long parts = 0;
        for (size_t k = 0; k < nmsg; k++) {
            for (size_t i = 0; i < len; i++)
                buf[i] = fmt_pattern(12, k * len + i);
            long m = fmt_send_all(ep, fm_addr_of(ctx, 1, CH), buf, len);
            CHECK(m >= 1);
            parts += m;
        }
        CHECK(parts < (long)(2 * nmsg));
        free(buf);
    } else if (rank == 1) {
        recv_stream(12, nmsg * len);
    }
}

/*
 * A peer's last messages come before its loss, also when the last one
 * went in a flow that succeeds the first (its ring grew). Rank 1 sends 100
 * bytes, then 16000, and kills itself; rank 0 reads nothing until a send
 * tells it the peer is lost, then must read both and only then
 * FM_EPEERLOST; a grant taken before the loss and committed after it
 * returns FM_EPEERLOST. Two faults lost the second: the refused send ended the
 * session before its packets, waiting in the socket, were read; and
 * fm_recv reported the loss when the first flow's ring retired, before it
 * looked at the successor. Run with fmrun --keep-going.
 */
static void case_lost_order(void)
{
    const size_t lens[2] = {100, 16000};
    if (rank == 1) {
        char *buf = malloc(lens[1]);
        CHECK(buf != NULL);
        for (int i = 0; i < 2; i++) { /* the second waits for a grown ring, whole */
            memset(buf, 'a' + i, lens[i]);
            struct iovec v = {buf, lens[i]};
            ssize_t n;
            while ((n = fm_send(ep, fm_addr_of(ctx, 0, CH), &v, 1)) == FM_EAGAIN)
                fm_wait(ep, 10);
            CHECK_EQ(n, (ssize_t)lens[i]);
            for (int k = 0; k < 50; k++) { /* acknowledged: the peer's bound known */
                fm_progress(ctx);
                usleep(2000);
            }
        }
        kill(getpid(), SIGKILL);
    }
    if (rank != 0)
        return;
    fm_ep *other; /* a grant from before the loss, committed after it */
    CHECK_RC(fm_ep_open(ctx, CH + 2, &other), 0);
    void *g;
    ssize_t n;
    while ((n = fm_send_prepare(other, fm_addr_of(ctx, 1, CH), 8, &g)) == FM_EAGAIN)
        fm_wait(other, 10);
    CHECK_EQ(n, 8);
    char b = 'x';
    struct iovec v = {&b, 1};
    uint64_t t0 = now_ns();
    for (n = 0; n != FM_EPEERLOST; n = fm_send(ep, fm_addr_of(ctx, 1, CH + 1), &v, 1)) {
        CHECK(now_ns() - t0 < 10000000000ull);
        usleep(1000);
    }
    CHECK_RC(fm_send_commit(other, 8), FM_EPEERLOST); /* it said 0, the message dropped */
    CHECK_RC(fm_ep_close(other), 0);
    for (int i = 0; i < 2; i++) {
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        n = fm_recv(ep, seg, &nseg, NULL);
        CHECK_EQ(n, (ssize_t)lens[i]);
        CHECK_EQ(*(char *)seg[0].iov_base, 'a' + i);
        CHECK_RC(fm_recv_done(ep), 0);
    }
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    CHECK_RC(fm_recv(ep, seg, &nseg, NULL), FM_EPEERLOST);
}

/*
 * A peer killed while the next message goes out over several rails. A send
 * that finds the peer gone ends its session, and its rings with it, while
 * the same output's packets for the other rails still point into them
 * (rank 0 died of SIGSEGV with two rails: tests/rails_test.sh runs this).
 * Rank 1 reads 6 MB, which grew its ring, answers and kills itself; rank
 * 0, after a pause, sends a small message and a large one gathered from
 * two pieces, and finalizes. Run with fmrun --keep-going.
 */
static void case_peer_killed(void)
{
    const size_t len = 60000;
    const int nmsg = 100;
    unsigned char *buf = calloc(1, len);
    CHECK(buf != NULL);
    fm_addr peer = fm_addr_of(ctx, 1 - rank, CH);
    if (rank == 0) {
        for (int i = 0; i < nmsg; i++)
            CHECK(fmt_send_all(ep, peer, buf, len) >= 1);
        CHECK_EQ(fmt_recv_copy(ep, buf, len, NULL), 2);
        usleep(300 * 1000); /* it dies meanwhile */
        struct iovec small[2] = {{buf, 8}, {buf + 8, 8}};
        struct iovec large[2] = {{buf, 8}, {buf + 8, len - 8}};
        ssize_t n = fm_send(ep, peer, small, 2);
        CHECK(n == 16 || n == FM_EPEERLOST);
        n = fm_send(ep, peer, large, 2);
        CHECK(n > 0 || n == FM_EPEERLOST);
        printf("peer_killed: rank 0 went on\n");
    } else if (rank == 1) {
        for (size_t got = 0; got < nmsg * len;) {
            long n = fmt_recv_copy(ep, buf, len, NULL);
            CHECK(n > 0);
            got += (size_t)n;
        }
        CHECK_EQ(fmt_send_all(ep, peer, "ok", 2), 1);
        for (int k = 0; k < 20; k++) { /* its acknowledgements go */
            fm_progress(ctx);
            usleep(1000);
        }
        kill(getpid(), SIGKILL);
    }
    free(buf);
}

/*
 * A rank killed in the middle of a transfer. The last rank streams to rank 0
 * and kills itself; rank 0 must get the messages sent before that in order
 * (all of them through shared memory), then
 * FM_EPEERLOST from fm_recv naming it, and sends towards it must fail with
 * FM_EPEERLOST too, all within 1 s of the death. Other ranks see the loss
 * reported once by fm_recv. Run with fmrun --keep-going.
 */
static void case_kill(void)
{
    int victim = size - 1;
    fm_ep *after; /* survivors talk here, apart from the victim's stream */
    CHECK_RC(fm_ep_open(ctx, CH + 1, &after), 0);
    barrier();
    /* Everyone has talked to the victim: over the network a rank hears of
     * the death of the peers it has a session with. */
    char hello = 'h';
    if (rank == victim) {
        for (int r = 0; r < victim; r++)
            CHECK_EQ(fmt_send_all(after, fm_addr_of(ctx, r, CH + 1), &hello, 1), 1);
    } else {
        CHECK_EQ(fmt_recv_copy(after, &hello, 1, NULL), 1);
        CHECK_EQ(hello, 'h');
    }
    if (rank == victim) {
        uint32_t seq = 0;
        for (; seq < 50000; seq++)
            CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 0, CH), &seq, sizeof(seq)), 1);
        /* Die holding a half-written stream: no goodbye beyond the count. */
        kill(getpid(), SIGKILL);
    }
    uint64_t t_last = 0;
    if (rank == 0) {
        uint32_t expect = 0;
        for (;;) {
            uint32_t seq;
            fm_addr src;
            long n = fmt_recv_copy(ep, &seq, sizeof(seq), &src);
            if (n == FM_EPEERLOST) {
                CHECK_EQ(fm_addr_rank(ctx, src), victim);
                break;
            }
            CHECK_EQ(n, sizeof(seq));
            CHECK_EQ(seq, expect);
            expect++;
            t_last = now_ns();
        }
        /* In shared memory a message sent is in the receiver's ring; over the
         * network, what the victim had not yet put on the wire dies with it:
         * then an in-order prefix arrives. */
        const char *tr = getenv("FM_TRANSPORTS");
        if (!tr || strstr(tr, "shm"))
            CHECK_EQ(expect, 50000);
        else
            CHECK(expect <= 50000);
        CHECK(now_ns() - t_last < 1000000000u);
    } else {
        /* Others learn it from fm_recv too, once. */
        fm_addr src;
        char b;
        CHECK_RC(fmt_recv_copy(ep, &b, 1, &src), FM_EPEERLOST);
        CHECK_EQ(fm_addr_rank(ctx, src), victim);
    }
    /* Sends towards the dead rank fail at once and keep failing. */
    uint64_t t0 = now_ns();
    char b = 1;
    struct iovec v = {&b, 1};
    CHECK_RC(fm_send(ep, fm_addr_of(ctx, victim, CH), &v, 1), FM_EPEERLOST);
    CHECK_RC(fm_send(ep, fm_addr_of(ctx, victim, 12345), &v, 1), FM_EPEERLOST);
    void *buf;
    CHECK_RC(fm_send_prepare(ep, fm_addr_of(ctx, victim, CH), 1, &buf), FM_EPEERLOST);
    CHECK(now_ns() - t0 < 1000000000u);
    /* Reported once per endpoint: now nothing. */
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    fm_addr src;
    CHECK_RC(fm_recv(ep, seg, &nseg, &src), FM_EAGAIN);
    /* The survivors still talk. */
    int to = (rank + 1) % victim, from = (rank + victim - 1) % victim;
    char m = (char)rank;
    CHECK_EQ(fmt_send_all(after, fm_addr_of(ctx, to, CH + 1), &m, 1), 1);
    /* This endpoint was open when the victim died: it hears of it once too. */
    int lost_seen = 0, got = 0;
    while (!lost_seen || !got) {
        long n = fmt_recv_copy(after, &m, 1, &src);
        if (n == FM_EPEERLOST) {
            CHECK_EQ(fm_addr_rank(ctx, src), victim);
            CHECK(!lost_seen++);
            continue;
        }
        CHECK_EQ(n, 1);
        CHECK_EQ(m, (char)from);
        CHECK_EQ(fm_addr_rank(ctx, src), from);
        CHECK(!got++);
    }
    CHECK_RC(fm_ep_close(after), 0);
}

/*
 * Two endpoints of one process send large messages to the same peer in
 * turn, one try each, as a program serving both would: each one's flow
 * grows for them, and both get through. (The ring a grown flow's successor
 * gets was kept once a session: each endpoint's growth overwrote the
 * other's, whose successor started small and grew again, for ever.)
 */
static void case_two_grow(void)
{
    enum { LEN = 65536, TOTAL = 20 * LEN };
    fm_ep *e[2];
    char b = 0;
    for (int k = 0; k < 2; k++)
        CHECK_RC(fm_ep_open(ctx, CH + 1 + k, &e[k]), 0);
    unsigned char *buf[2];
    for (int k = 0; k < 2; k++) {
        buf[k] = malloc(TOTAL);
        CHECK(buf[k] != NULL);
    }
    size_t off[2] = {0, 0};
    uint64_t t0 = now_ns();
    if (rank == 0) {
        for (int k = 0; k < 2; k++)
            for (size_t i = 0; i < TOTAL; i++)
                buf[k][i] = fmt_pattern(31 + (uint64_t)k, i);
        /* The session is up and the peer's ring bound known: growth is due. */
        CHECK_EQ(fmt_send_all(e[0], fm_addr_of(ctx, 1, CH + 1), &b, 1), 1);
        CHECK_EQ(fmt_recv_copy(e[0], &b, 1, NULL), 1);
        t0 = now_ns();
        while (off[0] < TOTAL || off[1] < TOTAL) {
            for (int k = 0; k < 2; k++) {
                if (off[k] == TOTAL)
                    continue;
                struct iovec v = {buf[k] + off[k], FM_MIN_(LEN, TOTAL - off[k])};
                ssize_t n = fm_send(e[k], fm_addr_of(ctx, 1, CH + 1 + k), &v, 1);
                if (n == FM_EAGAIN) {
                    fm_progress(ctx);
                    continue;
                }
                CHECK(n > 0);
                off[k] += (size_t)n;
            }
            if (now_ns() - t0 > 10000000000ull)
                fmt_fail(__FILE__, __LINE__, "%zu and %zu of %d bytes sent in 10 s", off[0],
                         off[1], TOTAL);
        }
    } else if (rank == 1) {
        CHECK_EQ(fmt_recv_copy(e[0], &b, 1, NULL), 1);
        CHECK_EQ(fmt_send_all(e[0], fm_addr_of(ctx, 0, CH + 1), &b, 1), 1);
        while (off[0] < TOTAL || off[1] < TOTAL) {
            int got = 0;
            for (int k = 0; k < 2; k++) {
                struct iovec seg[FM_SEGS_MAX];
                int nseg;
                ssize_t n = fm_recv(e[k], seg, &nseg, NULL);
                if (n == FM_EAGAIN)
                    continue;
                CHECK(n > 0 && off[k] + (size_t)n <= TOTAL);
                for (int i = 0; i < nseg; i++)
                    for (size_t j = 0; j < seg[i].iov_len; j++, off[k]++)
                        if (((unsigned char *)seg[i].iov_base)[j] !=
                            fmt_pattern(31 + (uint64_t)k, off[k]))
                            fmt_fail(__FILE__, __LINE__, "byte %zu of stream %d differs",
                                     off[k], k);
                CHECK_RC(fm_recv_done(e[k]), 0);
                got = 1;
            }
            if (!got)
                fm_wait(e[off[0] < TOTAL ? 0 : 1], 1);
            if (now_ns() - t0 > 20000000000ull)
                fmt_fail(__FILE__, __LINE__, "%zu and %zu of %d bytes came in 20 s", off[0],
                         off[1], TOTAL);
        }
    }
    barrier();
    for (int k = 0; k < 2; k++) {
        free(buf[k]);
        CHECK_RC(fm_ep_close(e[k]), 0);
    }
}

/*
 * Over the network, a peer that stops answering without dying (hung,
 * stopped, behind a dead host: no ICMP comes back) is lost after the
 * timeout for a rank asleep in fm_wait. Rank 0 stops calling the library
 * for five timeouts, then leaves without a goodbye; rank 1 waits for it
 * and must hear FM_EPEERLOST within three (one, and one more if a late
 * wake-up of its own forgave the silence once). A waiting rank's
 * heartbeats used to forgive it every time: the loss came with the exit.
 */
static void case_hung(void)
{
    const char *t = getenv("FM_NET_TIMEOUT_MS");
    uint64_t timeout = (uint64_t)(t ? atoi(t) : 3000) * 1000000u;
    char b = 'x';
    if (rank == 0) {
        CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 1, CH), &b, 1), 1);
        CHECK_EQ(fmt_recv_copy(ep, &b, 1, NULL), 1); /* our message was acknowledged */
        struct timespec ts = {.tv_sec = (time_t)(5 * timeout / 1000000000u),
                              .tv_nsec = (long)(5 * timeout % 1000000000u)};
        while (nanosleep(&ts, &ts) != 0)
            ;
        _exit(0);
    } else if (rank == 1) {
        CHECK_EQ(fmt_recv_copy(ep, &b, 1, NULL), 1);
        CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, 0, CH), &b, 1), 1);
        uint64_t t0 = now_ns();
        fm_addr src;
        CHECK_RC(fmt_recv_copy(ep, &b, 1, &src), FM_EPEERLOST);
        CHECK_EQ(fm_addr_rank(ctx, src), 0);
        CHECK(now_ns() - t0 < 3 * timeout);
    }
}

/* A rank that leaves through fm_finalize is not a failure: sends to it fail
 * with FM_EPEERLOST, but fm_recv reports nothing. */
static void case_finalize(void)
{
    barrier();
    if (rank == 1) {
        CHECK_RC(fm_finalize(ctx), 0);
        exit(0);
    }
    if (rank == 0) {
        char b = 1;
        struct iovec v = {&b, 1};
        uint64_t t0 = now_ns();
        ssize_t n;
        while ((n = fm_send(ep, fm_addr_of(ctx, 1, CH), &v, 1)) >= 0 || n == FM_EAGAIN) {
            CHECK(now_ns() - t0 < 2000000000u);
            if (n == FM_EAGAIN)
                fm_wait(ep, 10);
        }
        CHECK_RC(n, FM_EPEERLOST);
        usleep(100 * 1000);
        CHECK(fm_progress(ctx) >= 0); /* its exit is not a loss: */
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        CHECK_RC(fm_recv(ep, seg, &nseg, NULL), FM_EAGAIN);
    }
}

/* An idle rank in fm_wait uses almost no CPU, and wakes for a message. */
static void case_wait_idle(void)
{
    barrier();
    if (rank == 1) {
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        uint64_t t0 = now_ns();
        int rc = fm_wait(ep, 1500);
        uint64_t wall = now_ns() - t0;
        getrusage(RUSAGE_SELF, &r1);
        CHECK_RC(rc, 0); /* woken by rank 0's message */
        double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
                     (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
                     (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6 +
                     (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
        CHECK(wall > 500000000u); /* it really waited */
        CHECK(cpu < 0.05 * (double)wall / 1e9);
        expect_msg(0, 1, 10);
        /* With nothing coming, fm_wait times out. */
        CHECK_RC(fm_wait(ep, 50), FM_ETIMEDOUT);
    } else if (rank == 0) {
        usleep(1000 * 1000);
        send_pattern(1, 1, 10);
    }
}

/* A rank waits while what it sent is not acknowledged yet, because its peer
 * computes without calling the library: it must sleep, not poll. (Over
 * the network, a deadline left past after the tail probe kept fm_wait at
 * 99.7 % of a CPU.) */
static void case_wait_unacked(void)
{
    barrier();
    if (rank == 0) {
        send_pattern(1, 2, 100);
        struct rusage r0, r1;
        getrusage(RUSAGE_SELF, &r0);
        uint64_t t0 = now_ns();
        CHECK_RC(fm_wait(ep, 800), FM_ETIMEDOUT); /* nothing comes */
        uint64_t wall = now_ns() - t0;
        getrusage(RUSAGE_SELF, &r1);
        double cpu = (double)(r1.ru_utime.tv_sec - r0.ru_utime.tv_sec) +
                     (double)(r1.ru_stime.tv_sec - r0.ru_stime.tv_sec) +
                     (double)(r1.ru_utime.tv_usec - r0.ru_utime.tv_usec) / 1e6 +
                     (double)(r1.ru_stime.tv_usec - r0.ru_stime.tv_usec) / 1e6;
        CHECK(cpu < 0.05 * (double)wall / 1e9);
        send_pattern(1, 3, 10); /* then the peer's turn to wait, as rank 1 reads */
    } else if (rank == 1) {
        usleep(1000 * 1000); /* computes: no call, no acknowledgement */
        expect_msg(0, 2, 100);
        expect_msg(0, 3, 10);
    }
}

/* Every rank sends to the next and receives from the previous, many times:
 * progress with more ranks than cores. */
static void case_ring(void)
{
    int next = (rank + 1) % size, prev = (rank + size - 1) % size;
    for (uint32_t round = 0; round < 2000; round++) {
        uint32_t msg[2] = {(uint32_t)rank, round};
        CHECK_EQ(fmt_send_all(ep, fm_addr_of(ctx, next, CH), msg, sizeof(msg)), 1);
        fm_addr src;
        CHECK_EQ(fmt_recv_copy(ep, msg, sizeof(msg), &src), sizeof(msg));
        CHECK_EQ(msg[0], (uint32_t)prev);
        CHECK_EQ(msg[1], round);
    }
}

/*
 * The link between two hosts goes down in the middle of a two-way stream
 * (the test harness does it): both ranks must get FM_EPEERLOST, neither
 * sooner than half the configured timeout after the last message, nor much
 * later than the timeout. Run with fmrun --keep-going.
 */
/*
 * A long byte stream from rank 0 to rank 1 in messages of changing sizes
 * (FMT_STREAM_BYTES, default 16M): every byte arrives once and in order,
 * whatever the links under it do meanwhile (the rails test sets rails down
 * and up during it).
 */
static void case_stream(void)
{
    static const size_t sizes[] = {64,   128,  256,   512,   1024, 2048,
                                   4096, 8192, 16384, 32768, 65536};
    const char *e = getenv("FMT_STREAM_BYTES");
    const size_t total = e ? (size_t)strtoull(e, NULL, 0) : (size_t)16 << 20;
    if (rank == 0)
        send_stream(9, total, sizes, sizeof(sizes) / sizeof(sizes[0]));
    else if (rank == 1)
        recv_stream(9, total);
}

/*
 * Ring memory follows use (network path): 64 KiB messages grow the flow's
 * ring; after a pause of more than a second the big ring goes, and the
 * small messages after it come in a small one, in order. The counters are
 * read by tests/ring_sizes_test.sh.
 */
static void case_ring_idle(void)
{
    const size_t big = 65536, nbig = 16, nsmall = 16, small = 64;
    const size_t total = nbig * big + nsmall * small;
    if (rank == 0) {
        unsigned char *buf = malloc(big);
        CHECK(buf != NULL);
        size_t off = 0;
        for (size_t k = 0; k < nbig + nsmall; k++) {
            size_t len = k < nbig ? big : small;
            for (size_t i = 0; i < len; i++)
                buf[i] = fmt_pattern(11, off + i);
            CHECK(fmt_send_all(ep, fm_addr_of(ctx, 1, CH), buf, len) >= 1);
            off += len;
            if (k + 1 == nbig) { /* idle: timers run in fm_wait */
                uint64_t end = now_ns() + 2500000000ull;
                while (now_ns() < end)
                    fm_wait(ep, 100);
            }
        }
        free(buf);
    } else if (rank == 1) {
        recv_stream(11, total);
    }
}

/* Small messages, a pause, more: with FM_NET_FLOW_IDLE_MS below the pause
 * the flow ends in it (tests/ring_sizes_test.sh reads the count), and
 * what follows goes by a new flow, in order. */
static void case_flow_idle(void)
{
    const size_t n = 32, len = 64;
    if (rank == 0) {
        unsigned char buf[64];
        for (size_t k = 0; k < n; k++) {
            for (size_t i = 0; i < len; i++)
                buf[i] = fmt_pattern(12, k * len + i);
            CHECK(fmt_send_all(ep, fm_addr_of(ctx, 1, CH), buf, len) >= 1);
            if (k + 1 == n / 2) { /* idle: timers run in fm_wait */
                uint64_t end = now_ns() + 1500000000ull;
                while (now_ns() < end)
                    fm_wait(ep, 100);
            }
        }
    } else if (rank == 1) {
        recv_stream(12, n * len);
    }
}

static void case_linkdown(void)
{
    const char *t = getenv("FM_NET_TIMEOUT_MS");
    uint64_t timeout = (t ? (uint64_t)atoi(t) : 3000) * 1000000u;
    int peer = 1 - rank;
    uint64_t last = now_ns(), msgs = 0;
    for (;;) {
        char m[64] = {0};
        struct iovec v = {m, sizeof(m)};
        ssize_t n = fm_send(ep, fm_addr_of(ctx, peer, CH), &v, 1);
        if (n == FM_EPEERLOST)
            break;
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        fm_addr src;
        ssize_t r = fm_recv(ep, seg, &nseg, &src);
        if (r == FM_EPEERLOST)
            break;
        if (r >= 0) {
            CHECK_RC(fm_recv_done(ep), 0);
            last = now_ns();
            msgs++;
        } else {
            fm_wait(ep, 10);
        }
        CHECK(now_ns() - last < timeout + 2000000000u); /* never a hang */
    }
    uint64_t silent = now_ns() - last;
    CHECK(msgs > 100); /* the stream ran before the link went */
    CHECK(silent >= timeout / 2);
    CHECK(silent < timeout + 1000000000u);
}

/*
 * A rank that computes for longer than the network timeout without a
 * fastmsg call, then answers: with FM_PROGRESS_THREAD=1 its heartbeats go
 * on in the background and its peer does not declare it lost. (Over the
 * network without the thread, the peer would; shared memory needs none.)
 */
static void case_compute(void)
{
    const char *t = getenv("FM_NET_TIMEOUT_MS");
    uint64_t busy = (uint64_t)(t ? atoi(t) : 3000) * 2500000u; /* 2.5 timeouts, in ns */
    barrier();
    if (rank == 0) {
        uint64_t t0 = now_ns();
        volatile uint64_t x = 0;
        while (now_ns() - t0 < busy)
            x++;
        expect_msg(1, 11, 100);
        send_pattern(1, 12, 100);
    } else if (rank == 1) {
        send_pattern(0, 11, 100);
        expect_msg(0, 12, 100);
    }
}

static long rss_kib(void)
{
    long pages = 0, rss = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return rss * (sysconf(_SC_PAGESIZE) / 1024);
}

/*
 * Connection per message, as seed 002's TCP loop does it: rank 0 opens an
 * endpoint on a fresh channel, sends, gets the reply there, and closes it.
 * Whatever a transport sets up per pair of endpoints must go away with
 * them: memory stays flat over thousands of such exchanges.
 */
static void case_connect_loop(void)
{
    const int rounds = 3000;
    long before = 0;
    for (int i = 0; i < rounds; i++) {
        if (i == 100)
            before = rss_kib();
        if (rank == 0) {
            fm_ep *e;
            uint32_t ch = 100000 + (uint32_t)i;
            CHECK_RC(fm_ep_open(ctx, ch, &e), 0);
            uint32_t v = (uint32_t)i;
            CHECK_EQ(fmt_send_all(e, fm_addr_of(ctx, 1, CH), &v, sizeof(v)), 1);
            fm_addr src;
            CHECK_EQ(fmt_recv_copy(e, &v, sizeof(v), &src), sizeof(v));
            CHECK_EQ(v, (uint32_t)i + 1);
            CHECK_RC(fm_ep_close(e), 0);
        } else if (rank == 1) {
            uint32_t v;
            fm_addr src;
            CHECK_EQ(fmt_recv_copy(ep, &v, sizeof(v), &src), sizeof(v));
            CHECK_EQ(src, fm_addr_of(ctx, 0, 100000 + v));
            v++;
            CHECK_EQ(fmt_send_all(ep, src, &v, sizeof(v)), 1);
        }
    }
    long grown = rss_kib() - before;
#if defined(__SANITIZE_ADDRESS__) /* its quarantine keeps freed memory; LSan checks leaks */
    (void)grown;
#else
    if (grown > 64 * 1024)
        fmt_fail(__FILE__, __LINE__, "memory grew by %ld KiB over %d connections", grown, rounds);
#endif
}

/* Segments are private to the user and never named in /dev/shm. */
static void case_private(void)
{
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d))) {
        char path[300], target[300];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
        ssize_t n = readlink(path, target, sizeof(target) - 1);
        if (n <= 0)
            continue;
        target[n] = '\0';
        if (!strstr(target, "memfd:fastmsg"))
            continue;
        struct stat st;
        CHECK(stat(path, &st) == 0);
        CHECK_EQ(st.st_mode & 0777, 0600);
        CHECK_EQ(st.st_uid, geteuid());
        found++;
    }
    closedir(d);
    CHECK_EQ(found, size); /* our own segment and one per peer on this node */
}

/* Under a memory limit smaller than one ring, the first send fails with
 * FM_ENOMEM (and a message naming the variable to lower), not a SIGBUS. */
static void case_nomem(void)
{
    char b = 1;
    struct iovec v = {&b, 1};
    CHECK_RC(fm_send(ep, fm_addr_of(ctx, rank, CH), &v, 1), FM_ENOMEM);
    CHECK_RC(fm_send(ep, fm_addr_of(ctx, rank, CH), &v, 1), FM_ENOMEM);
}

/* Without a launcher the program is a singleton that can talk to itself. */
static void case_singleton(void)
{
    CHECK_EQ(size, 1);
    CHECK_EQ(rank, 0);
    send_pattern(0, 3, 1000);
    expect_msg(0, 3, 1000);
}

/* Every rank's address has a name, and the name gives back the address:
 * the ranks of a job are peers by name too, with no domain key needed. */
static void case_names(void)
{
    for (int r = 0; r < size; r++) {
        unsigned char name[FM_NAME_MAX];
        size_t len = sizeof(name);
        fm_addr a = fm_addr_of(ctx, r, CH), back;
        CHECK_RC(fm_addr_name(ctx, a, name, &len), 0);
        CHECK(len <= FM_NAME_MAX);
        CHECK_RC(fm_addr_insert(ctx, name, len, &back), 0);
        CHECK_EQ(back, a);
        CHECK_EQ(fm_addr_rank(ctx, back), r);
        CHECK_RC(fm_addr_remove(ctx, a), FM_EINVAL); /* a rank's address stays */
    }
    unsigned char mine[FM_NAME_MAX], via_addr[FM_NAME_MAX];
    size_t n1 = sizeof(mine), n2 = sizeof(via_addr);
    CHECK_RC(fm_ep_name(ep, mine, &n1), 0);
    CHECK_RC(fm_addr_name(ctx, fm_ep_addr(ep), via_addr, &n2), 0);
    CHECK_EQ(n1, n2);
    CHECK(memcmp(mine, via_addr, n1) == 0);
    /* A message to an address from a name arrives as one to the rank. */
    barrier();
    if (rank == 0 && size > 1) {
        unsigned char name[FM_NAME_MAX];
        size_t len = sizeof(name);
        fm_addr to;
        CHECK_RC(fm_addr_name(ctx, fm_addr_of(ctx, 1, CH), name, &len), 0);
        CHECK_RC(fm_addr_insert(ctx, name, len, &to), 0);
        CHECK_EQ(fmt_send_all(ep, to, "named", 5), 1);
    } else if (rank == 1) {
        char buf[8];
        fm_addr src;
        CHECK_EQ(fmt_recv_copy(ep, buf, sizeof(buf), &src), 5);
        CHECK(memcmp(buf, "named", 5) == 0);
        CHECK_EQ(src, fm_addr_of(ctx, 0, CH));
    }
}

/* ---- threaded cases: endpoints opened and closed while traffic flows ---- */

static volatile int threads_stop;

/* Another thread runs the library's progress, as FM_PROGRESS_THREAD does. */
static void *progress_loop(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&threads_stop, __ATOMIC_ACQUIRE))
        fm_progress(ctx);
    return NULL;
}

#define CHURN_CH 5
#define CHURN_SECONDS 4

/*
 * Rank 0 opens and closes an endpoint on CHURN_CH in a loop while another
 * thread progresses; rank 1 sends to it from fresh endpoints, so every
 * send opens a new flow that may arrive as the endpoint closes (the
 * use-after-free of the structure review, Appendix A). Messages that find
 * the channel closed are discarded by contract; what is received must be
 * intact, and the final exchange on CH must still work.
 */
static void case_churn(void)
{
    barrier();
    uint64_t end = now_ns() + (uint64_t)CHURN_SECONDS * 1000000000u;
    if (rank == 0) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, progress_loop, NULL) == 0);
        long opened = 0;
        while (now_ns() < end) {
            fm_ep *e;
            if (fm_ep_open(ctx, CHURN_CH, &e) != 0)
                continue;
            opened++;
            struct iovec seg[FM_SEGS_MAX];
            int nseg;
            ssize_t n;
            while ((n = fm_recv(e, seg, &nseg, NULL)) >= 0 || n == FM_EPEERLOST) {
                if (n < 0)
                    continue;
                CHECK_EQ(n, 1);
                CHECK_EQ(((unsigned char *)seg[0].iov_base)[0], 0xA5);
                fm_recv_done(e);
            }
            CHECK_RC(fm_ep_close(e), 0);
        }
        __atomic_store_n(&threads_stop, 1, __ATOMIC_RELEASE);
        pthread_join(t, NULL);
        CHECK(opened > 0);
        expect_msg(1, 21, 64);
    } else if (rank == 1) {
        unsigned char b = 0xA5;
        struct iovec v = {&b, 1};
        for (uint32_t ch = 100; now_ns() < end; ch++) {
            fm_ep *e;
            CHECK_RC(fm_ep_open(ctx, ch, &e), 0);
            for (int i = 0; i < 3; i++) {
                ssize_t n = fm_send(e, fm_addr_of(ctx, 0, CHURN_CH), &v, 1);
                CHECK(n == 1 || n == FM_EAGAIN);
                fm_progress(ctx);
            }
            CHECK_RC(fm_ep_close(e), 0);
        }
        send_pattern(0, 21, 64);
    }
}

/* One thread of ep_threads: its own endpoints, opened and closed in turn,
 * each exchanging a byte-checked stream with the same thread of the peer. */
struct ep_thread {
    pthread_t t;
    int index;
};

#define EP_THREADS 3
#define EP_THREAD_ROUNDS 40

static void *ep_thread_main(void *arg)
{
    struct ep_thread *me = arg;
    int peer = rank ^ 1;
    for (int round = 0; round < EP_THREAD_ROUNDS; round++) {
        uint32_t ch = 1000u + (uint32_t)(me->index * 100000 + round);
        fm_ep *e;
        CHECK_RC(fm_ep_open(ctx, ch, &e), 0);
        uint64_t seed = (uint64_t)(me->index * 1000 + round);
        size_t len = 1 + (size_t)(seed * 7919 % 20000);
        unsigned char *buf = malloc(len);
        for (size_t i = 0; i < len; i++)
            buf[i] = fmt_pattern(seed, i);
        CHECK(fmt_send_all(e, fm_addr_of(ctx, peer, ch), buf, len) > 0);
        size_t got = 0;
        while (got < len) {
            fm_addr src;
            long n = fmt_recv_copy(e, buf, len, &src);
            CHECK(n >= 0);
            CHECK_EQ(src, fm_addr_of(ctx, peer, ch));
            for (long i = 0; i < n; i++)
                if (buf[i] != fmt_pattern(seed, got + (size_t)i))
                    fmt_fail(__FILE__, __LINE__, "thread %d round %d: byte %zu differs",
                             me->index, round, got + (size_t)i);
            got += (size_t)n;
        }
        free(buf);
        /* Both sides have received everything before either closes. */
        char b = 0;
        CHECK_EQ(fmt_send_all(e, fm_addr_of(ctx, peer, ch), &b, 1), 1);
        CHECK_EQ(fmt_recv_copy(e, &b, 1, NULL), 1);
        CHECK_RC(fm_ep_close(e), 0);
    }
    return NULL;
}

/* Several threads of each of two ranks open, use and close endpoints at
 * once, next to a thread that only progresses. */
static void case_ep_threads(void)
{
    if (rank > 1)
        return;
    pthread_t prog;
    CHECK(pthread_create(&prog, NULL, progress_loop, NULL) == 0);
    struct ep_thread th[EP_THREADS];
    for (int i = 0; i < EP_THREADS; i++) {
        th[i].index = i;
        CHECK(pthread_create(&th[i].t, NULL, ep_thread_main, &th[i]) == 0);
    }
    for (int i = 0; i < EP_THREADS; i++)
        pthread_join(th[i].t, NULL);
    __atomic_store_n(&threads_stop, 1, __ATOMIC_RELEASE);
    pthread_join(prog, NULL);
}

static const struct {
    const char *name;
    void (*fn)(void);
} cases[] = {
    {"pingpong", case_pingpong},   {"order_many", case_order_many},
    {"partial_wrap", case_partial_wrap}, {"mixed", case_mixed}, {"held", case_held},
    {"held_grow", case_held_grow},
    {"backpressure", case_backpressure}, {"wait_parts", case_wait_parts},
    {"zero_length", case_zero_length},
    {"prepare", case_prepare},     {"channels", case_channels},
    {"invalid", case_invalid},     {"kill", case_kill}, {"peer_killed", case_peer_killed},
    {"lost_order", case_lost_order}, {"grant_abandoned", case_grant_abandoned},
    {"parked_departed", case_parked_departed}, {"send_only", case_send_only},
    {"many_endpoints", case_many_endpoints},
    {"quiet_pingpong", case_quiet_pingpong},
    {"finalize", case_finalize},   {"wait_idle", case_wait_idle},
    {"wait_unacked", case_wait_unacked}, {"hung", case_hung},
    {"two_grow", case_two_grow},
    {"ring", case_ring},           {"private", case_private},
    {"singleton", case_singleton}, {"nomem", case_nomem},
    {"linkdown", case_linkdown},   {"connect_loop", case_connect_loop},
    {"compute", case_compute},     {"stream", case_stream},
    {"churn", case_churn},         {"ep_threads", case_ep_threads},
    {"names", case_names},         {"ring_idle", case_ring_idle},
    {"flow_idle", case_flow_idle},
};

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s CASE (under fmrun)\n", argv[0]);
        return 2;
    }
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (strcmp(cases[i].name, argv[1]) != 0)
            continue;
        ctx = fmt_init();
        rank = fm_rank(ctx);
        size = fm_size(ctx);
        CHECK_RC(fm_ep_open(ctx, CH, &ep), 0);
        cases[i].fn();
        CHECK_RC(fm_finalize(ctx), 0);
        return 0;
    }
    fprintf(stderr, "%s: no case '%s'\n", argv[0], argv[1]);
    return 2;
}
