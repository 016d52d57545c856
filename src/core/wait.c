/*
 * fm_wait: spin briefly, then block in the kernel.
 *
 * Spinning answers fastest while the peer has a core of its own. When the
 * node runs more ranks than CPUs, the message a rank waits for usually comes
 * from a rank that needs this very core, so the rank does not spin at all:
 * it yields at once, a few times, before it blocks. (Measured with fmperf
 * ring, 4 ranks on 2 cores: 2.2 us per round yielding at once, 4-5 us after
 * a 2 us spin, 27 us blocking at once.)
 *
 * Blocking arms the endpoint's `sleeping` flag (senders then write its
 * doorbell pipe) and, for full rings, the rings' `space_wanted` flags
 * (receivers then write this endpoint's doorbell when they free space);
 * exiting peers wake it through their pidfds.
 */
#include "ctx.h"

#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <unistd.h>

/* How much longer than FM_WAIT_SPIN_US a rank with its own core may spin
 * when its waits are regularly a little longer than that. */
#define SPIN_STRETCH 20

/* How often a stretched poll looks at the machine's run queue again; and
 * after a crowded look, how long it does not stretch before the next: the
 * count is of one instant, so a crowded one weighs more than a quiet one. */
#define CROWD_CHECK_NS 50000000u
#define CROWD_HOLD_NS 1000000000u

/* Rounds of a polled spin (each reads the sockets) between readings of
 * the clock: a few microseconds at most, against a spin of 50 or more. */
#define POLLED_ROUNDS 4

/* Yields before blocking when ranks outnumber CPUs. */
#define OVERSUBSCRIBED_YIELDS 32
/* A timer due sooner than this is waited for by polling, not sleeping. */
#define SHORT_SLEEP_NS 50000u

/* Sets or clears the flags that make peers ring our doorbell. Setting
 * needs the store-load fence before the caller rechecks (fm_fence_slow);
 * clearing is only an optimization for the peers. */
static void arm(fm_ep *ep, uint32_t on)
{
    __atomic_store_n(ep->sleeping, on, __ATOMIC_RELAXED);
    int others_read = 0; /* a ring another process reads (shared memory) */
    for (int i = 0; i < ep->nwant; i++) {
        __atomic_store_n(&ep->want_space[i].rt->ring.ctl->space_wanted, on, __ATOMIC_RELAXED);
        others_read |= ep->want_space[i].rt->direct;
    }
    if (on)
        fm_fence_slow(ep->ctx, others_read);
}

static void drain_bell(fm_ep *ep)
{
    char buf[64];
    while (read(ep->bell_rd, buf, sizeof(buf)) == (ssize_t)sizeof(buf))
        ;
}

/* The doorbell: a pipe that wakers write a byte to. Links that let other
 * processes ring it publish it (their ep_bell). */
static int make_doorbell(fm_ep *ep)
{
    fm_ctx *ctx = ep->ctx;
    int fds[2];
    struct stat st;
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) {
        fm_error("core", "cannot create a doorbell pipe: %s", strerror(errno));
        return errno == EMFILE || errno == ENFILE ? FM_ELIMIT : FM_ESYS;
    }
    fstat(fds[1], &st);
    ep->bell_rd = fds[0];
    __atomic_store_n(&ep->bell_wr, fds[1], __ATOMIC_RELEASE); /* read by fm_core_wake */
    for (int i = 0; i < fm_nlinks; i++)
        if (ep->link_state[i] && fm_links[i]->ep_bell)
            fm_links[i]->ep_bell(ctx, ctx->link_state[i], ep, ep->link_state[i], fds[1],
                                 (uint64_t)st.st_ino);
    return 0;
}

/* What an endpoint sleeps on, made at its first sleep: endpoints that
 * never sleep (most short-lived ones) cost no descriptors. */
static int make_bell(fm_ep *ep)
{
    int rc = make_doorbell(ep);
    if (rc)
        return rc;
    ep->epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event bell = {.events = EPOLLIN, .data.u32 = 0};
    struct epoll_event peers = {.events = EPOLLIN, .data.u32 = 1};
    if (ep->epfd < 0 || epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->bell_rd, &bell) < 0 ||
        epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->ctx->epfd, &peers) < 0) {
        fm_error("core", "cannot set up an endpoint's wait: %s", strerror(errno));
        if (ep->epfd >= 0)
            close(ep->epfd);
        ep->epfd = -1;
        return FM_ESYS;
    }
    return 0;
}

/*
 * Whether the machine has more tasks ready to run than CPUs (the count in
 * /proc/loadavg, looked at every CROWD_CHECK_NS at most; unknown counts as
 * crowded). node_procs does not see other jobs, nor ranks of this one in
 * network namespaces that stand for hosts on one machine: 10 of them on 2
 * CPUs (bench/incast.sh) dropped 0.5-2.7 % at the port, against none, when
 * they stretched their polls into each other's time.
 */
static int machine_crowded(fm_ctx *ctx, uint64_t now)
{
    uint64_t checked = __atomic_load_n(&ctx->crowd_checked_ns, __ATOMIC_RELAXED);
    int was = __atomic_load_n(&ctx->crowded, __ATOMIC_RELAXED);
    if (checked && now - checked < (was ? CROWD_HOLD_NS : CROWD_CHECK_NS))
        return was;
    __atomic_store_n(&ctx->crowd_checked_ns, now, __ATOMIC_RELAXED);
    char buf[128];
    ssize_t n = -1;
    int fd = open("/proc/loadavg", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
    }
    int ready = 0; /* the fourth field: tasks ready to run / tasks */
    if (n > 0) {
        buf[n] = '\0';
        if (sscanf(buf, "%*s %*s %*s %d/", &ready) != 1)
            ready = 0;
    }
    int crowded = ready <= 0 || ctx->cpus <= 0 || ready > ctx->cpus;
    __atomic_store_n(&ctx->crowded, crowded, __ATOMIC_RELAXED);
    return crowded;
}

int fm_core_crowded(fm_ctx *ctx)
{
    return ctx->oversubscribed || machine_crowded(ctx, fm_now_ns());
}

/*
 * How long to poll before blocking. A rank with a core of its own polls for
 * FM_WAIT_SPIN_US, or for twice its typical wait when that is up to
 * SPIN_STRETCH times longer: a ping-pong of 256 KiB waits about 200 us
 * each time, and a sleep with its wake-up cost it 20-25 us per message on
 * the two-namespace benchmark. Waits longer than that (the peer computes)
 * keep the short spin: polling would only burn the core. So does a crowded
 * machine, where the core is not the rank's own after all, and a wait for
 * send space: a stream that fills its rings goes at the network's pace
 * whether its sender polls or sleeps, and over two rails shaped to 1 Gbit/s
 * and 300 Mbit/s a polling sender reached 0.88-0.94x of the rails' sum
 * against 0.94-0.96x (the polls take CPU time the shaping's timers need).
 * Nor does a wait that follows no send of this endpoint: it awaits no
 * answer, as a stream's receiver does not (tests/rails_test.sh's unequal
 * rails failed once in CI with such a receiver polling).
 */
static uint64_t spin_ns(const fm_ep *ep, uint64_t now)
{
    fm_ctx *ctx = ep->ctx;
    if (ctx->oversubscribed)
        return 0;
    uint64_t base = (uint64_t)ctx->cfg.wait_spin_us * 1000u;
    uint64_t stretched = 2 * ep->wait_typical_ns;
    if (ep->nwant || !ep->sent_since_wait || stretched <= base || stretched > SPIN_STRETCH * base ||
        machine_crowded(ctx, now))
        return base;
    return stretched;
}

static int wait(fm_ep *ep, int timeout_ms, uint64_t start, uint64_t *last);

/* wait() returns rc, and the clock as it last read it. */
static inline int ended(uint64_t *last, uint64_t now, int rc)
{
    *last = now;
    return rc;
}

int fm_wait(fm_ep *ep, int timeout_ms)
{
    if (!ep || timeout_ms < -1)
        return FM_EINVAL;
    if (fm_ep_ready(ep))
        return 0;
    uint64_t start = fm_now_ns(), last = start;
    int rc = wait(ep, timeout_ms, start, &last);
    ep->sent_since_wait = 0;
    /* last: the clock as wait() last read it. It is not read again for
     * this: a wait on shared memory takes about as long as two readings. */
    ep->wait_typical_ns = (7 * ep->wait_typical_ns + (last - start)) / 8;
    return rc;
}

static int wait(fm_ep *ep, int timeout_ms, uint64_t start, uint64_t *last)
{
    fm_ctx *ctx = ep->ctx;
    int rc;
    uint64_t now = start;
    uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : now + (uint64_t)timeout_ms * 1000000u;
    uint64_t spin_end = FM_MIN(deadline, now + spin_ns(ep, now));
    /* With a network path, polling means reading the sockets too, before
     * each look at the rings (a datagram waits no longer than that). The
     * read is a system call, which spaces the looks already, so a round
     * has one look, and the clock is read every POLLED_ROUNDS rounds: each
     * pause or reading would cost a sixth of a round's own work. */
    int looks = ctx->polled ? 1 : 32, rounds = ctx->polled ? POLLED_ROUNDS : 1;
    while (now < spin_end) {
        for (int k = 0; k < rounds; k++) {
            if (ctx->polled)
                fm_links_progress(ctx, 1);
            /* The look comes first: what the sockets brought is seen
             * without a pause (25 ns in this VM) in its way. */
            for (int i = 0; i < looks; i++) {
                if (fm_ep_ready(ep))
                    return ended(last, now, 0);
                fm_cpu_relax();
            }
        }
        now = fm_now_ns();
    }
    if (ctx->oversubscribed && ctx->cfg.wait_spin_us > 0) {
        for (int i = 0; i < OVERSUBSCRIBED_YIELDS && now < deadline; i++) {
            sched_yield();
            if (ctx->polled)
                fm_links_progress(ctx, 1);
            if (fm_ep_ready(ep))
                return ended(last, now, 0);
            now = fm_now_ns();
        }
    }
    if (ep->epfd < 0 && (rc = make_bell(ep)) != 0)
        return ended(last, now, rc);
    for (;;) {
        if (ctx->polled)
            fm_links_progress(ctx, 1);
        /* Sleep until the caller's deadline or the network's next timer
         * (loss detection waits a round trip: microseconds, not ms). */
        uint64_t wake = deadline;
        if (ctx->polled)
            wake = FM_MIN(wake, fm_links_deadline(ctx));
        /* An endpoint that is not open yet rings no doorbell: poll for it. */
        if (ep->want_open)
            wake = FM_MIN(wake, now + 1000000u);
        now = fm_now_ns();
        if (wake != UINT64_MAX && wake <= now + SHORT_SLEEP_NS) {
            /* Too soon to be worth a sleep: poll until then. */
            while ((now = fm_now_ns()) < wake) {
                if (ctx->polled)
                    fm_links_progress(ctx, 1);
                if (fm_ep_ready(ep))
                    return ended(last, now, 0);
                fm_cpu_relax();
            }
            if (now >= deadline)
                return ended(last, now, FM_ETIMEDOUT);
            continue;
        }
        arm(ep, 1);
        if (fm_ep_ready(ep)) {
            arm(ep, 0);
            return ended(last, now, 0);
        }
        struct epoll_event ev[2];
        struct timespec ts = {.tv_sec = (time_t)((wake - now) / 1000000000u),
                              .tv_nsec = (long)((wake - now) % 1000000000u)};
        int n = epoll_pwait2(ep->epfd, ev, 2, wake == UINT64_MAX ? NULL : &ts, NULL);
        int err = n < 0 ? errno : 0; /* before the calls below change errno */
        now = fm_now_ns();
        arm(ep, 0);
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u32 == 0)
                drain_bell(ep);
            else
                fm_ctx_check_peers(ctx, 1); /* a peer exited, or datagrams came */
        }
        if (ctx->polled)
            fm_links_progress(ctx, 1);
        if (n < 0 && err != EINTR)
            return ended(last, now, FM_ESYS);
        if (ep->want_open) {
            ep->want_open = 0;
            return ended(last, now, 0); /* the caller retries its send */
        }
        if (fm_ep_ready(ep))
            return ended(last, now, 0);
        now = fm_now_ns();
        if (now >= deadline)
            return ended(last, now, FM_ETIMEDOUT);
    }
}
