/* A service name in one process: publish {1000, 1}, look it up, send to it
 * by name, receive. The first names call starts the node agent (fmnamed). */
#include <fastmsg.h>
#include <stdio.h>

int main(void)
{
    fm_ctx *ctx;
    fm_ep *ep;
    fm_addr addr;
    if (fm_init(&ctx) || fm_ep_open(ctx, 7, &ep))
        return 1;
    int rc = fm_name_publish(ep, 1000, 1, 1, FM_SCOPE_NODE);
    if (!rc)
        rc = fm_name_lookup(ctx, 1000, 1, 0, &addr);
    if (rc) {
        fprintf(stderr, "names: %s\n", fm_strerror(rc));
        return 1;
    }
    struct iovec v = {"hello", 6};
    while (fm_send(ep, addr, &v, 1) == FM_EAGAIN)
        fm_wait(ep, -1);
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    fm_addr src;
    ssize_t n;
    while ((n = fm_recv(ep, seg, &nseg, &src)) == FM_EAGAIN)
        fm_wait(ep, -1);
    if (n < 0)
        return 1;
    printf("%s from {1000, 1}\n", (const char *)seg[0].iov_base);
    fm_recv_done(ep);
    return fm_finalize(ctx);
}
