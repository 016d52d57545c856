#include "fmtest.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void fmt_fail(const char *file, int line, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    const char *rank = getenv("PMI_RANK");
    fprintf(stderr, "FAIL [rank %s] %s:%d: %s\n", rank ? rank : "-", file, line, msg);
    fflush(stderr);
    exit(1);
}

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: the test timed out (watchdog)\n";
    ssize_t n = write(STDERR_FILENO, msg, sizeof(msg) - 1);
    (void)n;
    _exit(124);
}

void fmt_watchdog(unsigned seconds)
{
    signal(SIGALRM, on_alarm);
    alarm(seconds);
}

fm_ctx *fmt_init(void)
{
    fm_ctx *ctx = NULL;
    const char *t = getenv("FMT_TIMEOUT");
    fmt_watchdog(t ? (unsigned)atoi(t) : 120);
    CHECK_RC(fm_init(&ctx), 0);
    return ctx;
}

long fmt_send_all(fm_ep *ep, fm_addr dst, const void *buf, size_t len)
{
    long msgs = 0;
    size_t off = 0;
    for (;;) {
        struct iovec v = {(char *)buf + off, len - off};
        ssize_t n = fm_send(ep, dst, &v, 1);
        if (n == FM_EAGAIN) {
            int rc = fm_wait(ep, 1000);
            if (rc < 0 && rc != FM_ETIMEDOUT)
                return rc;
            continue;
        }
        if (n < 0)
            return n;
        off += (size_t)n;
        msgs++;
        if (off == len)
            return msgs;
    }
}

long fmt_recv_copy(fm_ep *ep, void *buf, size_t cap, fm_addr *src)
{
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    for (;;) {
        ssize_t n = fm_recv(ep, seg, &nseg, src);
        if (n == FM_EAGAIN) {
            int rc = fm_wait(ep, 1000);
            if (rc < 0 && rc != FM_ETIMEDOUT)
                return rc;
            continue;
        }
        if (n < 0)
            return n;
        size_t off = 0;
        for (int i = 0; i < nseg; i++) {
            if (off + seg[i].iov_len > cap)
                fmt_fail(__FILE__, __LINE__, "message of %zd bytes exceeds buffer of %zu", n,
                         cap);
            memcpy((char *)buf + off, seg[i].iov_base, seg[i].iov_len);
            off += seg[i].iov_len;
        }
        CHECK_EQ(off, n);
        CHECK_RC(fm_recv_done(ep), 0);
        return n;
    }
}
