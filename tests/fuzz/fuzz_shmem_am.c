/*
 * libfmshmem's active-message checks with any bytes: a request or reply
 * they accept must lie inside the segment (or the get) it names, whatever
 * the header says. The first bytes are the header, the rest stands for the
 * payload (only its length matters to the checks).
 */
#include "shmem/shmem_internal.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct am_hdr h;
    if (size < sizeof(h))
        return 0;
    memcpy(&h, data, sizeof(h));
    size_t payload = size - sizeof(h);
    const size_t seg[SEG_COUNT] = {64 << 10, 3 << 12};
    if (fmshmem_am_request_ok(&h, payload, seg) && h.op != AM_FLUSH) { /* FLUSH names no memory */
        if (h.seg >= SEG_COUNT || h.off > seg[h.seg])
            abort();
        size_t room = seg[h.seg] - h.off;
        if (h.op == AM_PUT && payload > room)
            abort();
        if (h.op == AM_GET && h.len > room)
            abort();
        if ((h.op == AM_AMO || h.op == AM_FAMO) &&
            ((h.size != 4 && h.size != 8) || h.size > room || h.off % h.size))
            abort();
    }
    /* A reply to a get of 4 KiB of which 1 KiB already came. */
    if (fmshmem_am_reply_ok(&h, payload, 4096, 3072) &&
        (h.off > 4096 || payload > 4096 - h.off || payload > 3072))
        abort();
    return 0;
}
