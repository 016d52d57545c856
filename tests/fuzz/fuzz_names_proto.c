/*
 * Fuzz target for what a process and its name agent read from each other
 * (src/names/proto.c): event messages are refused or decode to fields
 * that encode back to the same bytes; requests are refused or pass every
 * check the agent relies on.
 */
#include "names/proto.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct na_req r;
    if (size == sizeof(r)) {
        memcpy(&r, data, sizeof(r));
        if (na_req_check(&r, sizeof(r)) == 0 &&
            (r.namelen > FM_NAME_MAX || r.op < NA_HELLO || r.op > NA_EP_CLOSED))
            abort(); /* accepted a request the agent would misread */
        return 0;
    }
    struct fm_name_event ev;
    const uint8_t *name;
    size_t namelen;
    if (na_event_decode(data, size, &ev, &name, &namelen) != 0)
        return 0;
    if (namelen > FM_NAME_MAX || name < data || name + namelen > data + size ||
        ev.lower > ev.upper)
        abort();
    unsigned char again[NA_EVENT_MAX];
    size_t len = na_event_encode(again, ev.type, ev.lower, ev.upper, ev.event, ev.flags,
                                 ev.scope, ev.handle, name, namelen);
    if (len != size || memcmp(again, data, size))
        abort(); /* an event that does not survive a round trip */
    return 0;
}
