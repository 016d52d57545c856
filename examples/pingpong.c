/* Ping-pong between ranks 0 and 1: fmrun -n 2 ./pingpong */
#include <fastmsg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check(const char *what, long rc)
{
    if (rc < 0)
        fprintf(stderr, "%s: %s\n", what, fm_strerror((int)rc)), exit(1);
}

/* Sends all of buf, as several messages if the link takes only a prefix. */
static void send_all(fm_ep *ep, fm_addr to, const char *buf, size_t len)
{
    size_t off = 0;
    do {
        struct iovec v = {(char *)buf + off, len - off};
        ssize_t n = fm_send(ep, to, &v, 1);
        if (n == FM_EAGAIN)
            n = fm_wait(ep, -1); /* spins briefly, then sleeps; 0 when woken */
        else if (n >= 0)
            off += (size_t)n;
        check("send", n);
    } while (off < len);
}

/* Receives one message and copies it out of the endpoint's own memory. */
static void recv_one(fm_ep *ep, char *buf, size_t cap)
{
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    ssize_t n;
    while ((n = fm_recv(ep, seg, &nseg, NULL)) == FM_EAGAIN)
        check("wait", fm_wait(ep, -1));
    check("recv", n);
    for (size_t i = 0, got = 0; i < (size_t)nseg && got + seg[i].iov_len <= cap; i++)
        memcpy(buf + got, seg[i].iov_base, seg[i].iov_len), got += seg[i].iov_len;
    check("recv_done", fm_recv_done(ep)); /* the segments are invalid from here on */
}

int main(void)
{
    fm_ctx *ctx;
    fm_ep *ep;
    char buf[8];
    check("init", fm_init(&ctx));
    check("ep_open", fm_ep_open(ctx, 1, &ep));
    if (fm_size(ctx) != 2)
        return fprintf(stderr, "run me with: fmrun -n 2\n"), 1;
    fm_addr peer = fm_addr_of(ctx, 1 - fm_rank(ctx), 1);
    for (int i = 0; i < 3; i++) {
        if (fm_rank(ctx) == 0)
            send_all(ep, peer, "ping", 5), recv_one(ep, buf, sizeof(buf)), puts(buf);
        else
            recv_one(ep, buf, sizeof(buf)), send_all(ep, peer, "pong", 5);
    }
    return fm_finalize(ctx);
}
