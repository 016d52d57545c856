/* The start-up benchmark's fastmsg program: joins the job and leaves it. */
#include <fastmsg.h>

#include <stdio.h>

int main(void)
{
    fm_ctx *ctx;
    int rc = fm_init(&ctx);
    if (rc) {
        fprintf(stderr, "fm_init: %s\n", fm_strerror(rc));
        return 1;
    }
    rc = fm_finalize(ctx);
    if (rc) {
        fprintf(stderr, "fm_finalize: %s\n", fm_strerror(rc));
        return 1;
    }
    return 0;
}
