/*
 * Whether an active message may be applied: the only parsing of bytes that
 * come from other PEs. Pure functions, so tests/fuzz/fuzz_shmem_am.c can
 * drive them with any bytes.
 */
#include "shmem_internal.h"

bool fmshmem_am_request_ok(const struct am_hdr *h, size_t payload, const size_t *seg_size)
{
    if (h->op == AM_FLUSH)
        return payload == 0;
    bool amo = h->op == AM_AMO || h->op == AM_FAMO;
    if (h->op != AM_PUT && h->op != AM_GET && !amo)
        return false;
    if (h->seg >= SEG_COUNT || h->off > seg_size[h->seg])
        return false;
    size_t room = seg_size[h->seg] - h->off;
    if (h->op == AM_PUT)
        return payload <= room;
    if (h->op == AM_GET)
        return payload == 0 && h->len <= room;
    return (h->size == 4 || h->size == 8) && h->off % h->size == 0 && h->size <= room &&
           h->amo <= AMO_XOR && payload == 2 * sizeof(uint64_t);
}

bool fmshmem_am_reply_ok(const struct am_hdr *h, size_t payload, size_t total, size_t left)
{
    if (h->op != AM_GET_REP && h->op != AM_FAMO_REP)
        return false;
    return h->off <= total && payload <= total - h->off && payload <= left;
}
