/* A process started without a launcher: a job of one rank. */
#include "boot.h"

#include "fastmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct kv {
    char key[64];
    char val[FM_BOOT_VAL_MAX];
};
/* The few cards a singleton publishes to itself. */
static struct kv cards[8];
static int ncards;

static int single_put(struct fm_boot *b, const char *key, const char *val)
{
    (void)b;
    for (int i = 0; i < ncards; i++)
        if (strcmp(cards[i].key, key) == 0) {
            snprintf(cards[i].val, sizeof(cards[i].val), "%s", val);
            return 0;
        }
    if (ncards == (int)(sizeof(cards) / sizeof(cards[0])))
        return FM_ENOMEM;
    snprintf(cards[ncards].key, sizeof(cards[ncards].key), "%s", key);
    snprintf(cards[ncards].val, sizeof(cards[ncards].val), "%s", val);
    ncards++;
    return 0;
}

static int single_fence(struct fm_boot *b)
{
    (void)b;
    return 0;
}

static int single_get(struct fm_boot *b, int rank, const char *key, char *val, size_t len)
{
    (void)b;
    if (rank != 0)
        return FM_EBOOT;
    for (int i = 0; i < ncards; i++)
        if (strcmp(cards[i].key, key) == 0) {
            snprintf(val, len, "%s", cards[i].val);
            return 0;
        }
    return FM_EBOOT;
}

static int single_finalize(struct fm_boot *b)
{
    (void)b;
    ncards = 0;
    return 0;
}

static const struct fm_boot_ops singleton_ops = {
    .name = "singleton",
    .put = single_put,
    .fence = single_fence,
    .get = single_get,
    .finalize = single_finalize,
};

int fm_boot_singleton_open(struct fm_boot *b, char *err, size_t errlen)
{
    b->rank = 0;
    b->size = 1;
    b->node_of = calloc(1, sizeof(int));
    if (!b->node_of) {
        snprintf(err, errlen, "singleton bootstrap: out of memory");
        return FM_ENOMEM;
    }
    snprintf(b->job, sizeof(b->job), "singleton-%d", (int)getpid());
    ncards = 0;
    b->ops = &singleton_ops;
    return 0;
}
