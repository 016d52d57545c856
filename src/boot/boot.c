#include "boot.h"

#include "core/config.h"
#include "fastmsg.h"

#include <stdio.h>
#include <stdlib.h>

int fm_boot_open(struct fm_boot *b, int which, char *err, size_t errlen)
{
    b->fd = -1;
    b->node_of = NULL;
    switch (which) {
    case FM_BOOT_PMI1:
        return fm_boot_pmi1_open(b, err, errlen);
    case FM_BOOT_SINGLETON:
        return fm_boot_singleton_open(b, err, errlen);
    default:
        if (getenv("PMI_FD"))
            return fm_boot_pmi1_open(b, err, errlen);
        return fm_boot_singleton_open(b, err, errlen);
    }
}

void fm_boot_close(struct fm_boot *b)
{
    if (b->ops)
        b->ops->finalize(b);
    free(b->node_of);
    b->node_of = NULL;
    b->ops = NULL;
}
