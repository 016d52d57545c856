/* The ring on its own, in one process: records, wrap-around, padding,
 * back-pressure, and a long randomized stream checked byte by byte. */
#include "core/ring.h"
#include "testing/fmtest.h"

#include <stdlib.h>

#define RING 4096

static struct fm_ring_ctl ctl __attribute__((aligned(64)));
static unsigned char data[RING] __attribute__((aligned(64)));
static struct fm_ring r = {&ctl, data, RING};

static void reset(void)
{
    memset(&ctl, 0, sizeof(ctl));
    memset(data, 0xA5, sizeof(data)); /* stale bytes must never look like a header */
    data[0] = data[1] = data[2] = data[3] = data[4] = data[5] = data[6] = data[7] = 0;
}

/* Reads the next DATA record (skipping PAD) into out; returns its length or -1. */
static long take(uint64_t *rd, unsigned char *out)
{
    for (;;) {
        uint64_t h = fm_ring_peek(&r, *rd);
        if (!h)
            return -1;
        CHECK(fm_ring_hdr_valid(&r, h));
        uint32_t len = FM_REC_LEN(h);
        if (FM_REC_TYPE(h) == FM_REC_PAD) {
            *rd += FM_REC_SIZE(len);
            fm_ring_release(&r, *rd);
            continue;
        }
        struct iovec seg[2];
        int n = fm_ring_segments(&r, *rd, len, seg);
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            memcpy(out + off, seg[i].iov_base, seg[i].iov_len);
            off += seg[i].iov_len;
        }
        CHECK_EQ(off, len);
        *rd += FM_REC_SIZE(len);
        return len;
    }
}

static void test_basic(void)
{
    reset();
    uint64_t rd = 0;
    unsigned char out[RING];
    CHECK_EQ(fm_ring_peek(&r, 0), 0);
    const char *msg = "hello";
    struct iovec v[2] = {{(void *)msg, 3}, {(void *)(msg + 3), 2}};
    CHECK_EQ(fm_ring_room(&r, 5), 5);
    fm_ring_write(&r, FM_REC_DATA, v, 2, 5);
    fm_ring_write(&r, FM_REC_DATA, NULL, 0, 0); /* empty message */
    CHECK_EQ(take(&rd, out), 5);
    CHECK(memcmp(out, "hello", 5) == 0);
    CHECK_EQ(take(&rd, out), 0);
    CHECK_EQ(take(&rd, out), -1);
}

static void test_full_and_release(void)
{
    reset();
    unsigned char out[RING], buf[1000];
    memset(buf, 7, sizeof(buf));
    struct iovec v = {buf, sizeof(buf)};
    int n = 0;
    while (fm_ring_room(&r, sizeof(buf)) >= (int64_t)sizeof(buf)) {
        fm_ring_write(&r, FM_REC_DATA, &v, 1, sizeof(buf));
        n++;
    }
    CHECK_EQ(n, 4); /* 4 * 1008 + 8 <= 4096 < 5 * 1008 + 8 */
    /* The largest prefix that still fits, including the terminator slot. */
    CHECK_EQ(fm_ring_room(&r, sizeof(buf)), RING - 4 * 1008 - 16);
    uint64_t rd = 0;
    CHECK_EQ(take(&rd, out), 1000);
    /* Not released yet: no more room. */
    CHECK(fm_ring_room(&r, sizeof(buf)) < (int64_t)sizeof(buf));
    fm_ring_release(&r, rd);
    CHECK_EQ(fm_ring_room(&r, sizeof(buf)), 1000);
}

static void test_wrap_split(void)
{
    reset();
    unsigned char out[RING], buf[3000];
    for (size_t i = 0; i < sizeof(buf); i++)
        buf[i] = (unsigned char)i;
    struct iovec v = {buf, 3000};
    uint64_t rd = 0;
    fm_ring_write(&r, FM_REC_DATA, &v, 1, 3000);
    CHECK_EQ(take(&rd, out), 3000);
    fm_ring_release(&r, rd);
    /* The next record starts at 3008 and wraps: two segments. */
    fm_ring_write(&r, FM_REC_DATA, &v, 1, 2000);
    uint64_t h = fm_ring_peek(&r, rd);
    struct iovec seg[2];
    CHECK_EQ(fm_ring_segments(&r, rd, FM_REC_LEN(h), seg), 2);
    CHECK_EQ(seg[0].iov_len, RING - 3016);
    CHECK_EQ(take(&rd, out), 2000);
    CHECK(memcmp(out, buf, 2000) == 0);
}

static void test_grant_pads(void)
{
    reset();
    unsigned char out[RING], buf[3000];
    struct iovec v = {buf, 3000};
    uint64_t rd = 0;
    fm_ring_write(&r, FM_REC_DATA, &v, 1, 3000);
    CHECK_EQ(take(&rd, out), 3000);
    fm_ring_release(&r, rd);
    /* 1080 bytes left before the end, 3008 free at the start: pad and grant there. */
    void *p;
    int64_t g = fm_ring_grant(&r, 2000, &p);
    CHECK_EQ(g, 2000);
    CHECK(p == (void *)(data + 8));
    memset(p, 0x42, 2000);
    fm_ring_publish(&r, FM_REC_DATA, 1500);
    CHECK_EQ(take(&rd, out), 1500);
    CHECK_EQ(out[0], 0x42);
    CHECK_EQ(out[1499], 0x42);
}

/* A long stream of random-size messages through producer/consumer turns. */
static void test_random_stream(void)
{
    reset();
    srand(12345);
    uint64_t sent = 0, recvd = 0, rd = 0;
    unsigned char buf[RING], out[RING];
    for (int round = 0; round < 200000; round++) {
        if (rand() % 2) {
            size_t len = (size_t)(rand() % 1500);
            int64_t room = fm_ring_room(&r, len);
            if (room < (int64_t)len)
                continue;
            for (size_t i = 0; i < len; i++)
                buf[i] = fmt_pattern(1, sent + i);
            if (rand() % 4 == 0) {
                void *p;
                int64_t g = fm_ring_grant(&r, len, &p);
                if (g < (int64_t)len)
                    continue;
                memcpy(p, buf, len);
                fm_ring_publish(&r, FM_REC_DATA, (uint32_t)len);
            } else {
                struct iovec v = {buf, len};
                fm_ring_write(&r, FM_REC_DATA, &v, 1, len);
            }
            sent += len;
        } else {
            long n = take(&rd, out);
            if (n < 0)
                continue;
            for (long i = 0; i < n; i++)
                if (out[i] != fmt_pattern(1, recvd + (uint64_t)i))
                    fmt_fail(__FILE__, __LINE__, "byte %llu differs",
                             (unsigned long long)(recvd + (uint64_t)i));
            recvd += (uint64_t)n;
            fm_ring_release(&r, rd);
        }
    }
    CHECK(sent > 1000000);
    long n;
    while ((n = take(&rd, out)) >= 0)
        recvd += (uint64_t)n;
    CHECK_EQ(recvd, sent);
}

static void test_header_validation(void)
{
    CHECK(fm_ring_hdr_valid(&r, FM_REC_MAKE(FM_REC_DATA, 0)));
    CHECK(!fm_ring_hdr_valid(&r, FM_REC_MAKE(9, 10)));
    CHECK(!fm_ring_hdr_valid(&r, FM_REC_MAKE(FM_REC_DATA, RING)));
    CHECK(!fm_ring_hdr_valid(&r, FM_REC_MAKE(FM_REC_SRC, 5)));
    CHECK(!fm_ring_hdr_valid(&r, FM_REC_MAKE(FM_REC_DATA, 1) | (1ull << 50)));
}

int main(void)
{
    test_basic();
    test_full_and_release();
    test_wrap_split();
    test_grant_pads();
    test_random_stream();
    test_header_validation();
    return 0;
}
