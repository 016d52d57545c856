/* Endpoint names: encoding and the parser every received name goes through
 * (fuzzed by tests/fuzz/fuzz_name.c). */
#include "name.h"

#include "crc32c.h"

#include <string.h>

#define NAME_FIXED 32 /* bytes before the rails */

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t fm_name_size(const struct fm_name *n) { return NAME_FIXED + 6 * (size_t)n->nrails + 4; }

size_t fm_name_encode(const struct fm_name *n, void *buf)
{
    unsigned char *p = buf;
    p[0] = FM_NAME_MAGIC;
    p[1] = FM_NAME_VERSION;
    p[2] = (unsigned char)(n->nrails | (n->seg_fd >= 0 ? FM_NAME_SHM : 0));
    p[3] = 0;
    put32(p + 4, n->channel);
    put32(p + 8, n->job);
    put32(p + 12, n->rank);
    put32(p + 16, n->epoch);
    put32(p + 20, n->node);
    put32(p + 24, n->pid);
    put32(p + 28, (uint32_t)(n->seg_fd >= 0 ? n->seg_fd : -1));
    unsigned char *r = p + NAME_FIXED;
    for (int i = 0; i < n->nrails; i++, r += 6) {
        memcpy(r, &n->rail[i].ip, 4);
        memcpy(r + 4, &n->rail[i].port, 2);
    }
    put32(r, fm_crc32c(0, p, (size_t)(r - p)));
    return (size_t)(r - p) + 4;
}

int fm_name_decode(const void *buf, size_t len, struct fm_name *n)
{
    const unsigned char *p = buf;
    if (!buf || len < NAME_FIXED + 4 || len > FM_NAME_MAX || p[0] != FM_NAME_MAGIC ||
        p[1] != FM_NAME_VERSION || p[3] != 0)
        return FM_EINVAL;
    int nrails = p[2] & 0x0f;
    if ((p[2] & ~(0x0f | FM_NAME_SHM)) || nrails > FM_NAME_RAILS ||
        len != NAME_FIXED + 6 * (size_t)nrails + 4)
        return FM_EINVAL;
    if (fm_crc32c(0, p, len - 4) != get32(p + len - 4))
        return FM_EINVAL;
    struct fm_name d;
    memset(&d, 0, sizeof(d));
    d.channel = get32(p + 4);
    d.job = get32(p + 8);
    d.rank = get32(p + 12);
    d.epoch = get32(p + 16);
    d.node = get32(p + 20);
    d.pid = get32(p + 24);
    d.seg_fd = (int32_t)get32(p + 28);
    /* One encoding per name: without a segment the field is -1. */
    if (d.epoch == 0 || ((p[2] & FM_NAME_SHM) != 0) != (d.seg_fd >= 0) || d.seg_fd < -1 ||
        (int32_t)d.rank < 0)
        return FM_EINVAL;
    d.nrails = nrails;
    for (int i = 0; i < nrails; i++) {
        memcpy(&d.rail[i].ip, p + NAME_FIXED + 6 * i, 4);
        memcpy(&d.rail[i].port, p + NAME_FIXED + 6 * i + 4, 2);
        if (!d.rail[i].port)
            return FM_EINVAL;
    }
    *n = d;
    return 0;
}

int fm_name_same_process(const struct fm_name *a, const struct fm_name *b)
{
    return a->epoch == b->epoch && a->node == b->node && a->pid == b->pid && a->job == b->job &&
           a->rank == b->rank;
}

/* FNV-1a: cheap enough for every fm_init (CRC32C's first use builds its
 * tables, which costs 64 ranks of one node 25 ms of start-up). */
uint32_t fm_name_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}
