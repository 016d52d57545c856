/*
 * Memory that runs out at the wrong moment loses nothing. Rank 1 arms one
 * allocation failure, then rank 0 sends it 64 messages on a new channel:
 * - `table` (over shared memory): rank 1's first look at the ring rank 0
 *   claimed cannot allocate the endpoint's ring table; the look must come
 *   again, where the ring was left unread and its sender blocked;
 * - `flow` (over UDP): rank 1 cannot allocate the ring of rank 0's new
 *   flow; the FLOW packet must not be acknowledged, so that it comes again,
 *   where the flow's messages were acknowledged and lost.
 * calloc and posix_memalign are this program's own, glibc's under them, so
 * that one fails once on demand. Run with fmrun -n 2. Sanitizers bring
 * their own allocator: there the test is skipped (77).
 */
#include "testing/fmtest.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

#define CH_CTL 1
#define CH_DATA 2
#define MESSAGES 64
/* A ring table is 12 KB with the default limits; nothing else this large
 * is allocated by calloc between arming the failure and rank 0's first
 * message. */
#define TABLE_MIN 4096u
/* A flow's ring is FM_NET_RING_MIN (32 KiB) at least; rank 1's own flows
 * hold theirs before the failure is armed. */
#define RING_MIN 32768u

static size_t calloc_fail_at; /* the next calloc of this many bytes fails (0: none) */
static size_t memalign_fail_at; /* the same for posix_memalign */
static int failures;

#ifndef SANITIZED
/* Whether an allocation of n bytes is the one armed in *at (and disarms it). */
static int fails_now(size_t *at, size_t n)
{
    size_t want = __atomic_load_n(at, __ATOMIC_ACQUIRE);
    if (want && n >= want &&
        __atomic_compare_exchange_n(at, &want, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELEASE);
        return 1;
    }
    return 0;
}

extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_memalign(size_t align, size_t size);

void *calloc(size_t n, size_t size)
{
    if (n && size <= SIZE_MAX / n && fails_now(&calloc_fail_at, n * size)) {
        errno = ENOMEM;
        return NULL;
    }
    return __libc_calloc(n, size);
}

int posix_memalign(void **p, size_t align, size_t size)
{
    if (fails_now(&memalign_fail_at, size))
        return ENOMEM;
    void *m = __libc_memalign(align, size);
    if (!m)
        return ENOMEM;
    *p = m;
    return 0;
}
#endif

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* One message within `ms`, or the test fails: a ring nobody reads is a hang. */
static void recv_within(fm_ep *ep, uint32_t want, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    for (;;) {
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        ssize_t n = fm_recv(ep, seg, &nseg, NULL);
        if (n == FM_EAGAIN) {
            if (now_ms() >= end)
                fmt_fail(__FILE__, __LINE__, "message %u did not come in %d ms", want, ms);
            int rc = fm_wait(ep, 50);
            CHECK(rc == 0 || rc == FM_ETIMEDOUT);
            continue;
        }
        CHECK_EQ(n, (long)sizeof(want));
        uint32_t got;
        memcpy(&got, seg[0].iov_base, sizeof(got));
        CHECK_EQ(got, want);
        CHECK_RC(fm_recv_done(ep), 0);
        return;
    }
}

int main(int argc, char **argv)
{
#ifdef SANITIZED
    return 77;
#endif
    if (argc != 2 || (strcmp(argv[1], "table") && strcmp(argv[1], "flow"))) {
        fprintf(stderr, "usage: alloc_fail table|flow\n");
        return 2;
    }
    size_t *armed = argv[1][0] == 't' ? &calloc_fail_at : &memalign_fail_at;
    fm_ctx *ctx = fmt_init();
    int rank = fm_rank(ctx);
    fm_ep *ctl, *data;
    CHECK_RC(fm_ep_open(ctx, CH_CTL, &ctl), 0);
    CHECK_RC(fm_ep_open(ctx, CH_DATA, &data), 0);
    char b = 0;
    if (rank == 1) {
        /* Both control endpoints hold their ring tables before the failure. */
        CHECK(fmt_send_all(ctl, fm_addr_of(ctx, 0, CH_CTL), &b, 1) > 0);
        CHECK_EQ(fmt_recv_copy(ctl, &b, 1, NULL), 1);
        __atomic_store_n(armed, armed == &calloc_fail_at ? TABLE_MIN : RING_MIN,
                         __ATOMIC_RELEASE);
        CHECK(fmt_send_all(ctl, fm_addr_of(ctx, 0, CH_CTL), &b, 1) > 0); /* go */
        for (uint32_t i = 0; i < MESSAGES; i++)
            recv_within(data, i, 10000);
        CHECK_EQ(__atomic_load_n(&failures, __ATOMIC_ACQUIRE), 1);
        CHECK(fmt_send_all(ctl, fm_addr_of(ctx, 0, CH_CTL), &b, 1) > 0); /* done */
    } else if (rank == 0) {
        CHECK_EQ(fmt_recv_copy(ctl, &b, 1, NULL), 1);
        CHECK(fmt_send_all(ctl, fm_addr_of(ctx, 1, CH_CTL), &b, 1) > 0);
        CHECK_EQ(fmt_recv_copy(ctl, &b, 1, NULL), 1); /* go */
        for (uint32_t i = 0; i < MESSAGES; i++)
            CHECK_EQ(fmt_send_all(data, fm_addr_of(ctx, 1, CH_DATA), &i, sizeof(i)), 1);
        CHECK_EQ(fmt_recv_copy(ctl, &b, 1, NULL), 1); /* done */
    }
    fm_ep_close(data);
    fm_ep_close(ctl);
    CHECK_RC(fm_finalize(ctx), 0);
    return 0;
}
