#include "wire.h"

#include "core/crc32c.h"
#include "core/siphash.h"

#include <string.h>

const char *const fm_drop_names[FM_DROP_COUNT] = {
    [FM_DROP_NONE] = "none",
    [FM_DROP_SHORT] = "short",
    [FM_DROP_VERSION] = "version",
    [FM_DROP_CRC] = "checksum",
    [FM_DROP_FOREIGN] = "foreign",
    [FM_DROP_MISDIRECTED] = "misdirected",
    [FM_DROP_OPCODE] = "opcode",
    [FM_DROP_AUTH] = "auth",
    [FM_DROP_STALE] = "stale",
    [FM_DROP_NOSESSION] = "nosession",
    [FM_DROP_DUPLICATE] = "duplicate",
    [FM_DROP_WINDOW] = "window",
    [FM_DROP_FLOW] = "flow",
    [FM_DROP_FAULT] = "fault",
};

uint32_t fm_wire_crc_prefix(const void *pkt, size_t len)
{
    unsigned char h[sizeof(struct fm_wire_hdr)];
    fm_wire_crc_view(h, pkt, sizeof(h));
    return fm_crc32c(fm_crc32c(0, h, sizeof(h)), (const char *)pkt + sizeof(h), len - sizeof(h));
}

enum fm_drop fm_wire_check(const void *pkt, size_t len, uint64_t job, uint64_t domain,
                           uint32_t rank, uint32_t size)
{
    struct fm_wire_hdr h;
    if (len < sizeof(h))
        return FM_DROP_SHORT;
    memcpy(&h, pkt, sizeof(h));
    if (h.version != FM_WIRE_VERSION)
        return FM_DROP_VERSION;
    if (sizeof(h) + h.len != len)
        return FM_DROP_SHORT;
    if (fm_wire_crc_prefix(pkt, len) != h.crc)
        return FM_DROP_CRC;
    if (h.job == job) {
        if (h.dst_rank != rank || h.src_rank >= size)
            return FM_DROP_MISDIRECTED;
    } else if (domain && h.job == domain) {
        if (h.dst_rank != FM_WIRE_NAMED || h.src_rank != FM_WIRE_NAMED)
            return FM_DROP_MISDIRECTED;
    } else {
        return FM_DROP_FOREIGN;
    }
    if (h.op == 0 || h.op >= FM_OP_FIRST_RESERVED || h.src_epoch == 0)
        return FM_DROP_OPCODE;
    return FM_DROP_NONE;
}

void fm_wire_seal(struct fm_wire_hdr *h, size_t sub_len, const struct iovec *payload, int n)
{
    size_t len = sub_len;
    for (int i = 0; i < n; i++)
        len += payload[i].iov_len;
    h->len = (uint16_t)len;
    h->crc = 0;
    /* A DATA packet's headers are 64 bytes: they fold into the payload's
     * CRC instead of a chain of their own. */
    size_t head = sizeof(*h) + sub_len;
    int folded = head == 64 && n > 0;
    uint32_t crc = folded ? fm_crc32c_after(0, h, payload[0].iov_base, payload[0].iov_len)
                          : fm_crc32c(0, h, head);
    for (int i = folded; i < n; i++)
        crc = fm_crc32c(crc, payload[i].iov_base, payload[i].iov_len);
    h->crc = crc;
}

uint64_t fm_wire_hello_mac(const uint8_t key[16], const struct fm_wire_hdr *h,
                           const struct fm_wire_hello *hello, const void *extra,
                           size_t extra_len)
{
    unsigned char buf[sizeof(*h) + sizeof(*hello) + 64];
    if (extra_len > 64)
        return 0; /* no valid HELLO carries more: its MAC never matches */
    memcpy(buf, h, sizeof(*h));
    memcpy(buf + sizeof(*h), hello, sizeof(*hello));
    if (extra_len)
        memcpy(buf + sizeof(*h) + sizeof(*hello), extra, extra_len);
    struct fm_wire_hdr *hc = (struct fm_wire_hdr *)buf;
    struct fm_wire_hello *lc = (struct fm_wire_hello *)(buf + sizeof(*h));
    hc->crc = 0;
    lc->mac = 0;
    return fm_siphash(key, buf, sizeof(*h) + sizeof(*hello) + extra_len);
}

uint64_t fm_wire_job_tag(const uint8_t key[16])
{
    static const char msg[] = "fastmsg job tag";
    return fm_siphash(key, msg, sizeof(msg) - 1);
}
