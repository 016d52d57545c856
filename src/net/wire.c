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
    [FM_DROP_NOMEM] = "nomem",
};

uint32_t fm_wire_crc_prefix(const void *pkt, size_t hdr_len, size_t len)
{
    unsigned char h[sizeof(struct fm_wire_hdr)];
    fm_wire_crc_view(h, pkt, hdr_len);
    return fm_crc32c(fm_crc32c(0, h, hdr_len), (const char *)pkt + hdr_len, len - hdr_len);
}

/* What either header must satisfy: its version, its length, its CRC. */
static enum fm_drop check_sealed(const void *pkt, size_t len, size_t hdr_len, uint8_t version,
                                 uint16_t payload_len, uint32_t crc)
{
    if (version != FM_WIRE_VERSION)
        return FM_DROP_VERSION;
    if (hdr_len + payload_len != len)
        return FM_DROP_SHORT;
    if (fm_wire_crc_prefix(pkt, hdr_len, len) != crc)
        return FM_DROP_CRC;
    return FM_DROP_NONE;
}

enum fm_drop fm_wire_check(const void *pkt, size_t len, uint64_t job, uint64_t domain,
                           uint32_t rank, uint32_t size)
{
    struct fm_wire_hdr h;
    if (len < sizeof(h))
        return FM_DROP_SHORT;
    memcpy(&h, pkt, sizeof(h));
    enum fm_drop why = check_sealed(pkt, len, sizeof(h), h.version, h.len, h.crc);
    if (why)
        return why;
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

enum fm_drop fm_wire_check_short(const void *pkt, size_t len)
{
    struct fm_wire_short h;
    if (len < sizeof(h) + sizeof(struct fm_wire_data))
        return FM_DROP_SHORT;
    memcpy(&h, pkt, sizeof(h));
    enum fm_drop why = check_sealed(pkt, len, sizeof(h), h.version, h.len, h.crc);
    if (why)
        return why;
    if (h.flags & ~FM_SHORT_FLAGS)
        return FM_DROP_OPCODE;
    return FM_DROP_NONE;
}

/* The CRC of head_len bytes of headers at head (CRC field 0) and then the
 * payload's pieces; with copy, the pieces are copied there on the way,
 * read once for both. */
static uint32_t packet_crc(const void *head, size_t head_len, const struct iovec *payload, int n,
                           unsigned char *copy)
{
    /* A DATA packet's headers (64 bytes, 40 under the short header) fold
     * into the payload's CRC as one block instead of a chain of their own. */
    int folded = head_len <= 64 && n > 0;
    size_t pad = 64 - head_len;
    unsigned char block[64];
    if (folded && pad) {
        memset(block, 0, pad);
        memcpy(block + pad, head, head_len);
        head = block;
    }
    uint32_t crc;
    if (!folded)
        crc = fm_crc32c(0, head, head_len);
    else if (copy)
        crc = fm_crc32c_copy_after(fm_crc32c_pad_start(pad), head, copy, payload[0].iov_base,
                                   payload[0].iov_len);
    else
        crc = fm_crc32c_after(fm_crc32c_pad_start(pad), head, payload[0].iov_base,
                              payload[0].iov_len);
    if (copy && folded)
        copy += payload[0].iov_len;
    for (int i = folded; i < n; i++) {
        if (copy) {
            crc = fm_crc32c_copy(crc, copy, payload[i].iov_base, payload[i].iov_len);
            copy += payload[i].iov_len;
        } else {
            crc = fm_crc32c(crc, payload[i].iov_base, payload[i].iov_len);
        }
    }
    return crc;
}

static uint16_t payload_len(size_t sub_len, const struct iovec *payload, int n)
{
    size_t len = sub_len;
    for (int i = 0; i < n; i++)
        len += payload[i].iov_len;
    return (uint16_t)len;
}

void fm_wire_seal(struct fm_wire_hdr *h, size_t sub_len, const struct iovec *payload, int n,
                  void *copy)
{
    h->len = payload_len(sub_len, payload, n);
    h->crc = 0;
    h->crc = packet_crc(h, sizeof(*h) + sub_len, payload, n, copy);
}

void fm_wire_seal_short(struct fm_wire_hdr *h, uint32_t token, size_t sub_len,
                        const struct iovec *payload, int n, void *copy)
{
    /* seq, ack and rail are in place already (the header's layout says
     * so); len is set there too. The rest comes from the first half. */
    h->len = payload_len(sub_len, payload, n);
    struct fm_wire_short *s = fm_wire_short_of(h);
    s->version = h->version;
    s->op = FM_OP_DATA_SHORT;
    s->flags = h->flags;
    s->crc = 0;
    s->reserved0 = 0;
    s->token = token;
    s->crc = packet_crc(s, sizeof(*s) + sub_len, payload, n, copy);
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
