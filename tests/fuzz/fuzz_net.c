/*
 * libFuzzer target: arbitrary datagrams into the network receive path.
 *
 * Each input is a sequence of chunks [u16 length][bytes]. Before the chunks,
 * two engines set up a session and exchange a little data, so the packets
 * meet an established session with a flow. A chunk whose first byte is odd
 * is "repaired" first (version, job tag, ranks, epochs, length, CRC made
 * valid; under the short header of DATA, the token the setup's DATA
 * carried), so mutations reach the session logic instead of stopping at
 * the checksum. FUZZ_DUMP_SEEDS=dir writes the setup's packets as seeds.
 */
#include "core/crc32c.h"
#include "net/engine.h"
#include "net/wire.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fm_rxflow *seen[16];
static int nseen;

static void up_flow_new(void *core, struct fm_rxflow *f, int src)
{
    (void)core;
    (void)src;
    if (nseen < 16)
        seen[nseen++] = f;
}
static void up_delivered(void *core, struct fm_rxflow *f)
{
    (void)core;
    /* Consume and release, so credits flow too. */
    uint64_t rd = f->ctl.head;
    uint64_t h;
    while ((h = fm_ring_peek(&f->ring, rd)) != 0 && fm_ring_hdr_valid(&f->ring, h))
        rd += FM_REC_SIZE(FM_REC_LEN(h));
    fm_ring_release(&f->ring, rd);
}
static void up_flow_end(void *core, struct fm_rxflow *f)
{
    (void)core;
    for (int i = 0; i < nseen; i++)
        if (seen[i] == f)
            seen[i] = seen[--nseen];
    fm_net_rxflow_free(f);
}
static void up_gone(void *core, int rank, int state)
{
    (void)core;
    (void)rank;
    (void)state;
}
static int up_addr(void *core, int rank, struct sockaddr_in out[FM_RAILS_MAX])
{
    (void)core;
    for (int r = 0; r < 2; r++) {
        memset(&out[r], 0, sizeof(out[r]));
        out[r].sin_family = AF_INET;
        out[r].sin_port = (uint16_t)(7000 + 10 * r + rank);
    }
    return 0;
}

static struct fm_net *make(int rank)
{
    struct fm_net_params p = {
        .rank = rank, .size = 3, .epoch = 100u + (uint32_t)rank, .ring_size = 4096,
        .payload = 1024, .timeout_ns = 1000000000ull, .rto_min_ns = 1000000,
        .rto_max_ns = 100000000, .ack_delay_ns = 100000, .nrails = 2,
        .up = {.core = NULL, .flow_new = up_flow_new, .delivered = up_delivered,
               .flow_end = up_flow_end, .peer_gone = up_gone, .address_of = up_addr},
    };
    for (int i = 0; i < 16; i++)
        p.key[i] = (uint8_t)(i * 7 + 1);
    return fm_net_new(&p);
}

static int seeds_written;
static uint32_t token; /* the receiver's, from the setup's short DATA */

/* Moves all output of `from` into `to`; returns packets moved. */
static int pump(struct fm_net *from, struct fm_net *to, uint64_t now)
{
    struct fm_pkt_out pk[64];
    int n = fm_net_output(from, pk, 64, 1, now);
    const char *dump = getenv("FUZZ_DUMP_SEEDS");
    for (int i = 0; i < n; i++) {
        unsigned char buf[FM_WIRE_MAX];
        size_t len = fm_pkt_seal_into(&pk[i], buf);
        if (dump && seeds_written < 32) {
            char path[512];
            snprintf(path, sizeof(path), "%s/setup-%02d", dump, seeds_written++);
            FILE *f = fopen(path, "wb");
            if (f) {
                unsigned char pre[2] = {(unsigned char)(len & 0xff), (unsigned char)(len >> 8)};
                fwrite(pre, 1, 2, f);
                fwrite(buf, 1, len, f);
                fclose(f);
            }
        }
        if (len >= sizeof(struct fm_wire_short) && buf[1] == FM_OP_DATA_SHORT)
            memcpy(&token, buf + offsetof(struct fm_wire_short, token), sizeof(token));
        struct sockaddr_in src = {.sin_family = AF_INET, .sin_port = 7000};
        fm_net_input(to, buf, len, 0, &src, now);
    }
    return n;
}

/* Makes a chunk under the short header pass the checks of the receiver. */
static void repair_short(unsigned char *p, size_t len)
{
    struct fm_wire_short h;
    memcpy(&h, p, sizeof(h));
    h.version = FM_WIRE_VERSION;
    h.token = token;
    h.flags &= FM_SHORT_FLAGS;
    h.len = (uint16_t)(len - sizeof(h));
    h.crc = 0;
    memcpy(p, &h, sizeof(h));
    h.crc = fm_crc32c(0, p, len);
    memcpy(p, &h, sizeof(h));
}

/* Makes a chunk pass the header checks of `to`. */
static void repair(unsigned char *p, size_t len, uint64_t tag, int odd)
{
    struct fm_wire_hdr h;
    memcpy(&h, p, sizeof(h));
    h.version = FM_WIRE_VERSION;
    h.job = tag;
    h.dst_rank = 1;
    h.src_rank = odd & 2 ? 2 : 0;
    h.src_epoch = 100;
    h.dst_epoch = odd & 4 ? 0 : 101;
    h.len = (uint16_t)(len - sizeof(h));
    h.crc = 0;
    memcpy(p, &h, sizeof(h));
    h.crc = fm_crc32c(0, p, len);
    memcpy(p, &h, sizeof(h));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fm_net *a = make(0), *b = make(1);
    uint64_t now = 1000000000ull;
    nseen = 0;
    /* A session and a flow with a few messages in it. */
    struct fm_txflow *f;
    if (fm_net_flow(a, 1, 3, 4, &f) == 0) {
        char msg[300] = "seed";
        struct iovec v = {msg, sizeof(msg)};
        for (int i = 0; i < 3; i++) {
            fm_ring_write(&f->ring, FM_REC_DATA, &v, 1, sizeof(msg));
            fm_net_kick(a, f);
            for (int r = 0; r < 3; r++) {
                pump(a, b, now);
                pump(b, a, now);
                now += 100000;
            }
        }
    }
    uint64_t tag = fm_wire_job_tag((const uint8_t[16]){1, 8, 15, 22, 29, 36, 43, 50, 57, 64, 71,
                                                       78, 85, 92, 99, 106});
    unsigned char buf[FM_WIRE_MAX];
    size_t off = 0;
    while (off + 2 <= size) {
        size_t len = (size_t)data[off] | (size_t)data[off + 1] << 8;
        off += 2;
        len = len < size - off ? len : size - off;
        len = len < sizeof(buf) ? len : sizeof(buf);
        memcpy(buf, data + off, len);
        off += len;
        if (len >= sizeof(struct fm_wire_short) && (buf[0] & 1) && buf[1] == FM_OP_DATA_SHORT)
            repair_short(buf, len);
        else if (len >= sizeof(struct fm_wire_hdr) && (buf[0] & 1))
            repair(buf, len, tag, buf[1]);
        /* Any rail, also one that does not exist (taken as rail 0); the
         * chunk is a datagram, split into packets as the UDP link does. */
        struct sockaddr_in src = {.sin_family = AF_INET, .sin_port = 7000};
        for (size_t k = 0, n; k < len; k += n) {
            n = fm_wire_packet_len(buf + k, len - k);
            fm_net_input(b, buf + k, n, len % 3, &src, now);
        }
        now += 50000;
        pump(b, a, now);
    }
    fm_net_free(a);
    fm_net_free(b);
    return 0;
}
