/*
 * Fuzz target for endpoint names (src/core/name.c): whatever bytes come in
 * are either refused or decode to a name that encodes back to the same
 * bytes. Odd-numbered inputs get a valid checksum first, so mutations reach
 * the field checks behind it.
 */
#include "core/crc32c.h"
#include "core/name.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t buf[FM_NAME_MAX + 8];
    if (size > sizeof(buf))
        size = sizeof(buf);
    memcpy(buf, data, size);
    if (size >= 8 && (size & 1)) {
        size_t len = size - 1; /* the last byte only chose this branch */
        uint32_t crc = fm_crc32c(0, buf, len - 4);
        memcpy(buf + len - 4, &crc, 4);
        size = len;
    }
    struct fm_name n;
    if (fm_name_decode(buf, size, &n) != 0)
        return 0;
    uint8_t again[FM_NAME_MAX];
    if (fm_name_size(&n) != size || fm_name_encode(&n, again) != size ||
        memcmp(again, buf, size) != 0)
        abort(); /* a name that does not survive a round trip */
    return 0;
}
