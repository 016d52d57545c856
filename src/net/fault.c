#include "fault.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t next_random(struct fm_fault *f)
{
    uint64_t x = f->state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return f->state = x;
}

int fm_fault_parse(struct fm_fault *f, const char *spec, char *err, size_t errlen)
{
    memset(f, 0, sizeof(*f));
    f->state = 0x9E3779B97F4A7C15ull;
    f->on_send = f->on_recv = 1;
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", spec);
    for (char *save, *item = strtok_r(buf, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq) {
            snprintf(err, errlen, "FM_FAULT: '%s' is not name=value", item);
            return -1;
        }
        *eq = '\0';
        char *end;
        if (strcmp(item, "seed") == 0) {
            unsigned long long seed = strtoull(eq + 1, &end, 10);
            if (*end || end == eq + 1) {
                snprintf(err, errlen, "FM_FAULT: seed=%s is not a number", eq + 1);
                return -1;
            }
            f->state = seed * 0x9E3779B97F4A7C15ull + 1;
            if (!f->state) /* xorshift stays at 0: every packet would be hit */
                f->state = 1;
            continue;
        }
        if (strcmp(item, "on") == 0) {
            const char *v = eq + 1;
            f->on_send = strcmp(v, "send") == 0 || strcmp(v, "both") == 0;
            f->on_recv = strcmp(v, "recv") == 0 || strcmp(v, "both") == 0;
            if (!f->on_send && !f->on_recv) {
                snprintf(err, errlen, "FM_FAULT: on=%s is not send, recv or both", v);
                return -1;
            }
            continue;
        }
        double p = strtod(eq + 1, &end);
        if (*end || end == eq + 1 || !(p >= 0 && p <= 1)) { /* NaN too */
            snprintf(err, errlen, "FM_FAULT: %s=%s is not a probability from 0 to 1", item,
                     eq + 1);
            return -1;
        }
        uint32_t q = p >= 1 ? UINT32_MAX : (uint32_t)(p * 4294967296.0);
        if (strcmp(item, "drop") == 0)
            f->drop = q;
        else if (strcmp(item, "dup") == 0)
            f->dup = q;
        else if (strcmp(item, "reorder") == 0)
            f->reorder = q;
        else if (strcmp(item, "corrupt") == 0)
            f->corrupt = q;
        else {
            snprintf(err, errlen, "FM_FAULT: unknown fault '%s' (drop, dup, reorder, corrupt, "
                     "seed, on)", item);
            return -1;
        }
    }
    return 0;
}

enum fm_fault_action fm_fault_roll(struct fm_fault *f, int *corrupt)
{
    uint64_t r = next_random(f);
    *corrupt = f->corrupt && (uint32_t)r < f->corrupt;
    uint32_t roll = (uint32_t)(r >> 32);
    if (roll < f->drop)
        return FM_FAULT_DROP;
    roll -= f->drop;
    if (roll < f->dup)
        return FM_FAULT_DUP;
    roll -= f->dup;
    if (roll < f->reorder)
        return FM_FAULT_REORDER;
    return FM_FAULT_PASS;
}

void fm_fault_corrupt(struct fm_fault *f, void *pkt, size_t len)
{
    if (!len)
        return;
    uint64_t r = next_random(f);
    ((unsigned char *)pkt)[r % len] ^= (unsigned char)(1u << ((r >> 32) & 7));
}

enum fm_fault_action fm_fault_next(struct fm_fault *f, void *pkt, size_t len)
{
    int corrupt;
    enum fm_fault_action a = fm_fault_roll(f, &corrupt);
    if (corrupt)
        fm_fault_corrupt(f, pkt, len);
    return a;
}
