/*
 * Services by name between programs that no launcher joined and that know
 * only a service type (tests/services_test.sh runs them on one host and
 * between network namespaces):
 *
 *   services serve TYPE INST SCOPE   publishes {TYPE, INST}; echoes every
 *                                    message back until it gets "quit"
 *   services client TYPE INST N      looks the name up (waiting up to 20 s,
 *                                    or SERVICES_WAIT_MS, for it), sends N
 *                                    byte-exact messages
 *                                    of growing size and checks the echoes;
 *                                    prints the server's node-local flag
 *   services spread TYPE INST N      N anycast lookups: prints how many
 *                                    distinct publishers they reached
 *   services watch TYPE LO HI N MS   subscribes; prints each event as
 *                                    "EVENT lower upper lost T" (T: the
 *                                    monotonic clock in ms) until N events
 *                                    or MS passed
 *   services stall TYPE MS           subscribes and reads nothing for MS,
 *                                    then reads every event; prints "events
 *                                    E resync R after F" (F: events after
 *                                    the last RESYNC)
 *   services churn TYPE N            publishes and withdraws {TYPE, 5} N
 *                                    times, then publishes it and waits
 *                                    for "quit"
 *   services now                     prints the monotonic clock in ms
 *   services member TYPE INST        publishes and counts multicast messages
 *                                    until "quit"; prints "got K dup D"
 *   services mcast TYPE LO HI N      sends N numbered multicasts
 *   services quit TYPE LO HI         multicasts "quit"
 *   services invalid                 bad calls get the documented errors
 */
#include "testing/fmtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CH 9
#define MAX_MSG 65536

static fm_ctx *ctx;
static fm_ep *ep;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static uint32_t arg_u32(const char *s) { return (uint32_t)strtoul(s, NULL, 0); }

static int scope_of(const char *s) { return !strcmp(s, "node") ? FM_SCOPE_NODE : FM_SCOPE_CLUSTER; }

static fm_addr lookup_wait(uint32_t type, uint32_t inst)
{
    fm_addr a;
    int rc;
    const char *wait = getenv("SERVICES_WAIT_MS");
    double end = now_ms() + (wait ? atof(wait) : 20000);
    while ((rc = fm_name_lookup(ctx, type, inst, 0, &a)) == FM_ENONAME && now_ms() < end)
        usleep(2000);
    CHECK_RC(rc, 0);
    return a;
}

static void serve(uint32_t type, uint32_t inst, int scope)
{
    CHECK_RC(fm_name_publish(ep, type, inst, inst, scope), 0);
    CHECK_RC(fm_name_publish(ep, type, inst, inst, scope), FM_EBUSY);
    printf("ready\n");
    fflush(stdout);
    static unsigned char buf[MAX_MSG];
    for (;;) {
        fm_addr src;
        long n = fmt_recv_copy(ep, buf, sizeof(buf), &src);
        if (n == FM_EPEERLOST)
            continue; /* a client that left */
        CHECK(n >= 0);
        if (n == 4 && !memcmp(buf, "quit", 4))
            break;
        CHECK(fmt_send_all(ep, src, buf, (size_t)n) == 1);
    }
    CHECK_RC(fm_name_withdraw(ep, type, inst, inst, scope), 0);
    CHECK_RC(fm_name_withdraw(ep, type, inst, inst, scope), FM_ENONAME);
}

static void client(uint32_t type, uint32_t inst, int n)
{
    fm_addr server = lookup_wait(type, inst);
    struct fm_name_entry e;
    CHECK(fm_name_lookup_all(ctx, type, inst, inst, &e, 1) >= 1);
    static unsigned char out[MAX_MSG], in[MAX_MSG];
    for (int i = 0; i < n; i++) {
        size_t len = (size_t)(i * 7919) % (MAX_MSG - 1) + 1;
        for (size_t k = 0; k < len; k++)
            out[k] = fmt_pattern((uint64_t)i, k);
        CHECK(fmt_send_all(ep, server, out, len) == 1);
        fm_addr src;
        long got = fmt_recv_copy(ep, in, sizeof(in), &src);
        CHECK_EQ(got, (long)len);
        CHECK(src == server);
        CHECK(!memcmp(in, out, len));
    }
    printf("ok local=%d\n", e.local);
}

static void spread(uint32_t type, uint32_t inst, int n)
{
    fm_addr seen[64];
    int nseen = 0;
    for (int i = 0; i < n; i++) {
        fm_addr a;
        CHECK_RC(fm_name_lookup(ctx, type, inst, 0, &a), 0);
        int k = 0;
        while (k < nseen && seen[k] != a)
            k++;
        if (k == nseen && nseen < 64)
            seen[nseen++] = a;
    }
    printf("distinct %d\n", nseen);
}

static const char *event_name(int e)
{
    return e == FM_NAME_PUBLISHED ? "PUBLISHED" : e == FM_NAME_WITHDRAWN ? "WITHDRAWN" : "RESYNC";
}

/* The next event on ep, waiting up to 10 ms: 1, or 0 if none came. */
static int next_event(struct fm_name_event *ev)
{
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    fm_addr src;
    ssize_t len = fm_recv(ep, seg, &nseg, &src);
    if (len == FM_EAGAIN) {
        fm_wait(ep, 10);
        return 0;
    }
    if (len < 0)
        return 0; /* FM_EPEERLOST: a peer this test does not wait for */
    CHECK(src == FM_ADDR_NAMES);
    CHECK_RC(fm_name_event(ctx, seg, nseg, (size_t)len, ev), 0);
    CHECK_RC(fm_recv_done(ep), 0);
    return 1;
}

static void watch(uint32_t type, uint32_t lo, uint32_t hi, int n, int ms)
{
    double t0 = now_ms();
    CHECK_RC(fm_name_subscribe(ep, type, lo, hi, 0, 42), 0);
    CHECK_RC(fm_name_subscribe(ep, type, lo, hi, 0, 42), FM_EBUSY);
    printf("subscribed\n");
    fflush(stdout);
    for (int got = 0; got < n && now_ms() - t0 < ms;) {
        struct fm_name_event ev;
        if (!next_event(&ev))
            continue;
        CHECK(ev.handle == 42 && ev.type == type);
        printf("%s %u %u %d %.1f\n", event_name(ev.event), ev.lower, ev.upper,
               !!(ev.flags & FM_NAME_LOST), now_ms());
        fflush(stdout);
        got++;
    }
    CHECK_RC(fm_name_unsubscribe(ep, 42), 0);
    CHECK_RC(fm_name_unsubscribe(ep, 42), FM_ENONAME);
}

static void stall(uint32_t type, int ms)
{
    CHECK_RC(fm_name_subscribe(ep, type, 0, 100, FM_SUB_NO_STATUS, 7), 0);
    printf("subscribed\n");
    fflush(stdout);
    usleep((useconds_t)ms * 1000);
    long events = 0, resync = 0, after = 0;
    for (double quiet_since = now_ms(); now_ms() - quiet_since < 500;) {
        struct fm_name_event ev;
        if (!next_event(&ev))
            continue;
        CHECK(ev.handle == 7);
        events++;
        if (ev.event == FM_NAME_RESYNC)
            resync++, after = 0;
        else
            after++;
        quiet_since = now_ms();
    }
    printf("events %ld resync %ld after %ld\n", events, resync, after);
}

static void churn(uint32_t type, long n)
{
    for (long i = 0; i < n; i++) {
        CHECK_RC(fm_name_publish(ep, type, 5, 5, FM_SCOPE_NODE), 0);
        CHECK_RC(fm_name_withdraw(ep, type, 5, 5, FM_SCOPE_NODE), 0);
    }
    CHECK_RC(fm_name_publish(ep, type, 5, 5, FM_SCOPE_NODE), 0);
    printf("ready\n");
    fflush(stdout);
    unsigned char buf[64];
    fm_addr src;
    while (fmt_recv_copy(ep, buf, sizeof(buf), &src) != 4 || memcmp(buf, "quit", 4))
        ;
}

static void member(uint32_t type, uint32_t inst)
{
    CHECK_RC(fm_name_publish(ep, type, inst, inst, FM_SCOPE_CLUSTER), 0);
    /* An overlapping second range: multicast must still come once. */
    CHECK_RC(fm_name_publish(ep, type, inst, inst + 1, FM_SCOPE_CLUSTER), 0);
    printf("ready\n");
    fflush(stdout);
    long got = 0, dup = 0, next = 0;
    unsigned char buf[64];
    for (;;) {
        fm_addr src;
        long n = fmt_recv_copy(ep, buf, sizeof(buf), &src);
        if (n == FM_EPEERLOST)
            continue;
        CHECK(n >= 0);
        if (n == 4 && !memcmp(buf, "quit", 4))
            break;
        long v;
        CHECK_EQ(n, (long)sizeof(v));
        memcpy(&v, buf, sizeof(v));
        if (v != next)
            dup++; /* a duplicate or a gap: either breaks "once, in order" */
        next = v + 1;
        got++;
    }
    printf("got %ld dup %ld\n", got, dup);
}

static void mcast(uint32_t type, uint32_t lo, uint32_t hi, long n)
{
    ssize_t members = -1;
    for (long i = 0; i < n; i++) {
        struct iovec iov = {&i, sizeof(i)};
        ssize_t rc = fm_name_mcast(ep, type, lo, hi, &iov, 1);
        CHECK(rc > 0);
        CHECK(members < 0 || rc == members);
        members = rc;
    }
    printf("members %zd\n", members);
}

static void quit(uint32_t type, uint32_t lo, uint32_t hi)
{
    struct iovec iov = {"quit", 4};
    CHECK(fm_name_mcast(ep, type, lo, hi, &iov, 1) > 0);
}

static void invalid(void)
{
    fm_addr a;
    CHECK_RC(fm_name_publish(NULL, 100, 1, 1, FM_SCOPE_NODE), FM_EINVAL);
    CHECK_RC(fm_name_publish(ep, 1, 1, 1, FM_SCOPE_NODE), FM_EINVAL); /* reserved type */
    CHECK_RC(fm_name_publish(ep, 100, 2, 1, FM_SCOPE_NODE), FM_EINVAL);
    CHECK_RC(fm_name_publish(ep, 100, 1, 1, 7), FM_EINVAL);
    CHECK_RC(fm_name_withdraw(ep, 100, 1, 1, FM_SCOPE_NODE), FM_ENONAME);
    CHECK_RC(fm_name_lookup(ctx, 0x7fff1234, 5, 0, &a), FM_ENONAME);
    CHECK_RC(fm_name_lookup(ctx, 100, 5, 0x80, &a), FM_EINVAL);
    CHECK_RC(fm_name_lookup(NULL, 100, 5, 0, &a), FM_EINVAL);
    CHECK_EQ(fm_name_lookup_all(ctx, 0x7fff1234, 0, 10, NULL, 0), 0);
    CHECK_RC(fm_name_lookup_all(ctx, 100, 5, 4, NULL, 0), FM_EINVAL);
    CHECK_RC(fm_name_unsubscribe(ep, 7), FM_ENONAME);
    struct iovec iov = {"x", 1};
    CHECK_RC(fm_name_mcast(ep, 0x7fff1234, 0, 9, &iov, 1), FM_ENONAME);
    struct fm_name_event ev;
    unsigned char junk[40] = {1, 2, 3};
    struct iovec seg = {junk, sizeof(junk)};
    CHECK_RC(fm_name_event(ctx, &seg, 1, sizeof(junk), &ev), FM_EINVAL);
    /* A name published and withdrawn is gone for lookups at once. */
    CHECK_RC(fm_name_publish(ep, 100, 10, 20, FM_SCOPE_NODE), 0);
    CHECK_RC(fm_name_lookup(ctx, 100, 15, FM_LOOKUP_LOCAL, &a), 0);
    CHECK(a == fm_ep_addr(ep) || fm_addr_rank(ctx, a) < 0);
    CHECK_RC(fm_name_lookup(ctx, 100, 21, 0, &a), FM_ENONAME);
    CHECK_RC(fm_name_withdraw(ep, 100, 10, 20, FM_SCOPE_NODE), 0);
    CHECK_RC(fm_name_lookup(ctx, 100, 15, 0, &a), FM_ENONAME);
    printf("ok\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: see the comment at the top of tests/services.c\n");
        return 2;
    }
    if (!strcmp(argv[1], "now")) {
        printf("%.1f\n", now_ms());
        return 0;
    }
    ctx = fmt_init();
    CHECK_RC(fm_ep_open(ctx, CH, &ep), 0);
    const char *m = argv[1];
    if (!strcmp(m, "serve") && argc == 5)
        serve(arg_u32(argv[2]), arg_u32(argv[3]), scope_of(argv[4]));
    else if (!strcmp(m, "client") && argc == 5)
        client(arg_u32(argv[2]), arg_u32(argv[3]), atoi(argv[4]));
    else if (!strcmp(m, "spread") && argc == 5)
        spread(arg_u32(argv[2]), arg_u32(argv[3]), atoi(argv[4]));
    else if (!strcmp(m, "watch") && argc == 7)
        watch(arg_u32(argv[2]), arg_u32(argv[3]), arg_u32(argv[4]), atoi(argv[5]),
              atoi(argv[6]));
    else if (!strcmp(m, "member") && argc == 4)
        member(arg_u32(argv[2]), arg_u32(argv[3]));
    else if (!strcmp(m, "mcast") && argc == 6)
        mcast(arg_u32(argv[2]), arg_u32(argv[3]), arg_u32(argv[4]), atol(argv[5]));
    else if (!strcmp(m, "quit") && argc == 5)
        quit(arg_u32(argv[2]), arg_u32(argv[3]), arg_u32(argv[4]));
    else if (!strcmp(m, "stall") && argc == 4)
        stall(arg_u32(argv[2]), atoi(argv[3]));
    else if (!strcmp(m, "churn") && argc == 4)
        churn(arg_u32(argv[2]), atol(argv[3]));
    else if (!strcmp(m, "invalid") && argc == 2)
        invalid();
    else {
        fprintf(stderr, "services: bad arguments\n");
        return 2;
    }
    fflush(stdout);
    CHECK_RC(fm_finalize(ctx), 0);
    return 0;
}
