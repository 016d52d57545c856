/*
 * A live endpoint under a flood of bad datagrams. Rank 0 streams bytes to
 * rank 1 over the network path; rank 2 aims at rank 1's socket: random
 * garbage, truncated and bit-flipped copies of real packets, real packets
 * of the stream captured off the wire and replayed, packets of another job,
 * and session requests with a bad MAC. The stream must arrive exactly once
 * and in order, nothing may crash, and rank 1 must count every kind of
 * drop. Run with FM_TRANSPORTS=udp under fmrun -n 3, as root (the capture
 * uses a packet socket; without it, replays are crafted instead).
 */
#include "core/ctx.h"
#include "core/hex.h"
#include "net/udp_link.h"
#include "net/wire.h"
#include "testing/fmtest.h"

#include <arpa/inet.h>
#include <linux/if_ether.h>
#include <netinet/ip.h>
#include <netinet/udp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define STREAM (8u << 20)
#define CH 1
#define CH_DONE 2

static fm_ctx *ctx;

static void target_address(struct sockaddr_in *to)
{
    char card[FM_BOOT_VAL_MAX], ip[64];
    unsigned port;
    CHECK_RC(ctx->boot.ops->get(&ctx->boot, 1, "net", card, sizeof(card)), 0);
    CHECK(sscanf(card, "%63[0-9.]/%*u:%u", ip, &port) == 2); /* its first rail */
    memset(to, 0, sizeof(*to));
    to->sin_family = AF_INET;
    to->sin_port = htons((uint16_t)port);
    CHECK(inet_pton(AF_INET, ip, &to->sin_addr) == 1);
}

static void job_key(uint8_t key[16])
{
    char hex[64];
    CHECK_RC(ctx->boot.ops->get(&ctx->boot, 0, "key", hex, sizeof(hex)), 0);
    CHECK_EQ(fm_hex_decode(hex, key, 16), 0);
}

/* A packet that passes every check but the ones under test. */
static size_t craft(unsigned char *buf, uint64_t tag, uint8_t op, uint32_t seq,
                    const void *payload, uint16_t plen)
{
    struct fm_wire_hdr h = {.version = FM_WIRE_VERSION, .op = op, .job = tag, .src_rank = 2,
                            .dst_rank = 1, .src_epoch = 77, .dst_epoch = 88, .seq = seq};
    struct iovec v = {(void *)payload, plen};
    fm_wire_seal(&h, 0, &v, plen ? 1 : 0, NULL);
    memcpy(buf, &h, sizeof(h));
    if (plen)
        memcpy(buf + sizeof(h), payload, plen);
    return sizeof(h) + plen;
}

/* The largest UDP payload kept: a whole datagram of the stream, which
 * gathers its packets into GSO sends of up to 64 KiB (loopback's packets
 * are 16 KiB). Only its first packet is replayed. */
#define CAP_MAX 65536
#define CAPS 64

/* Bytes of bad datagrams a burst sends at most. Every kind of bad datagram
 * still comes many times a second; a flood of whole 64 KiB datagrams filled
 * rank 1's socket faster than a sanitizer build on a loaded host drains it,
 * and its peer's packets were lost with the flood for seconds. */
#define BURST_BYTES (32u << 10)

/* Captured UDP payloads sent to the target port (by rank 0's stream). */
static int capture(unsigned char (*pkts)[CAP_MAX], size_t *lens, int max, uint16_t port)
{
    int fd = socket(AF_PACKET, SOCK_DGRAM, htons(ETH_P_IP));
    if (fd < 0)
        return -1;
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int n = 0;
    for (int tries = 0; n < max && tries < 100000; tries++) {
        unsigned char frame[65536];
        ssize_t r = recv(fd, frame, sizeof(frame), 0);
        if (r < 0)
            break;
        struct iphdr *ip = (struct iphdr *)frame;
        if ((size_t)r < sizeof(*ip) || ip->protocol != IPPROTO_UDP)
            continue;
        struct udphdr *udp = (struct udphdr *)(frame + ip->ihl * 4);
        size_t off = (size_t)ip->ihl * 4 + sizeof(*udp);
        if (ntohs(udp->dest) != port || (size_t)r <= off || (size_t)r - off > CAP_MAX)
            continue;
        lens[n] = (size_t)r - off;
        memcpy(pkts[n], frame + off, lens[n]);
        n++;
    }
    close(fd);
    return n;
}

static void flooder(fm_ep *ep)
{
    struct sockaddr_in to;
    uint8_t key[16], other[16];
    target_address(&to);
    job_key(key);
    memcpy(other, key, 16);
    other[0] ^= 0x5a;
    uint64_t tag = fm_wire_job_tag(key), foreign = fm_wire_job_tag(other);
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    CHECK(fd >= 0);
    static unsigned char cap[CAPS][CAP_MAX];
    static size_t caplen[CAPS];
    int ncap = getenv("FLOOD_NOCAPTURE") ? 0 : capture(cap, caplen, CAPS, ntohs(to.sin_port));
    if (ncap <= 0)
        fprintf(stderr, "flood: no packet capture (not root?): replays are crafted\n");
    static unsigned char buf[CAP_MAX];
    for (int i = 0; i < ncap; i++) /* a real packet: the datagram's first */
        caplen[i] = fm_wire_packet_len(cap[i], caplen[i]);
    srand(1234);
    uint64_t sent = 0;
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    for (;;) {
        /* Until rank 1 says the stream is through. */
        ssize_t r = fm_recv(ep, seg, &nseg, NULL);
        if (r >= 0) {
            fm_recv_done(ep);
            break;
        }
        size_t burst = 0;
        for (int k = 0; k < 64 && burst < BURST_BYTES; k++, sent++) {
            size_t len;
            switch (sent % 7) {
            case 0: /* garbage */
                len = (size_t)(rand() % 1500);
                for (size_t i = 0; i < len; i++)
                    buf[i] = (unsigned char)rand();
                break;
            case 1: /* truncated */
                if (ncap > 0) {
                    int i = rand() % ncap;
                    len = (size_t)rand() % caplen[i];
                    memcpy(buf, cap[i], len);
                } else {
                    len = craft(buf, tag, FM_OP_PING, 0, NULL, 0) - 1 - (size_t)(rand() % 20);
                }
                break;
            case 2: /* one bit flipped: the checksum fails */
                if (ncap > 0) {
                    int i = rand() % ncap;
                    len = caplen[i];
                    memcpy(buf, cap[i], len);
                } else {
                    len = craft(buf, tag, FM_OP_PING, 0, NULL, 0);
                }
                buf[(size_t)rand() % len] ^= (unsigned char)(1u << (rand() % 8));
                break;
            case 3: /* replayed: a real packet of the stream, again */
                if (ncap > 0) {
                    int i = rand() % ncap;
                    len = caplen[i];
                    memcpy(buf, cap[i], len);
                } else {
                    char d[24] = {0};
                    len = craft(buf, tag, FM_OP_DATA, (uint32_t)rand(), d, sizeof(d));
                }
                break;
            case 4: { /* another job's packet */
                char d[24] = {0};
                len = craft(buf, foreign, FM_OP_DATA, 5, d, sizeof(d));
                break;
            }
            case 5: { /* a session request whose MAC is wrong */
                struct fm_wire_hello hello = {.nonce = 1, .first_seq = 1, .mac = 12345};
                len = craft(buf, tag, FM_OP_HELLO, 0, &hello, sizeof(hello));
                struct fm_wire_hdr h;
                memcpy(&h, buf, sizeof(h));
                h.dst_epoch = 0;
                struct iovec v = {&hello, sizeof(hello)};
                fm_wire_seal(&h, 0, &v, 1, NULL);
                memcpy(buf, &h, sizeof(h));
                break;
            }
            default: { /* a reserved opcode */
                len = craft(buf, tag, 200, 0, NULL, 0);
                break;
            }
            }
            sendto(fd, buf, len, 0, (struct sockaddr *)&to, sizeof(to));
            burst += len;
        }
        usleep(200);
    }
    close(fd);
    fprintf(stderr, "flood: %llu bad datagrams sent (%d captured packets replayed)\n",
            (unsigned long long)sent, ncap);
}

int main(void)
{
    ctx = fmt_init();
    fm_ep *ep, *done;
    CHECK_EQ(fm_size(ctx), 3);
    uint64_t nc[FM_NC_COUNT], dr[FM_DROP_COUNT];
    CHECK_RC(fm_udp_link_counters(ctx, nc, dr), 0); /* run with FM_TRANSPORTS=udp */
    CHECK_RC(fm_ep_open(ctx, CH, &ep), 0);
    CHECK_RC(fm_ep_open(ctx, CH_DONE, &done), 0);
    int rank = fm_rank(ctx);
    if (rank == 0) {
        unsigned char *buf = malloc(STREAM);
        for (size_t i = 0; i < STREAM; i++)
            buf[i] = fmt_pattern(9, i);
        srand(99);
        for (size_t off = 0; off < STREAM;) {
            size_t len = FM_MIN((size_t)(1 + rand() % 5000), STREAM - off);
            CHECK(fmt_send_all(ep, fm_addr_of(ctx, 1, CH), buf + off, len) > 0);
            off += len;
        }
        free(buf);
    } else if (rank == 1) {
        size_t got = 0;
        /* A slow reader, so the flood meets a stream in progress. */
        for (long msgs = 0; got < STREAM; msgs++) {
            unsigned char msg[8192];
            long n = fmt_recv_copy(ep, msg, sizeof(msg), NULL);
            CHECK(n > 0);
            for (long i = 0; i < n; i++)
                if (msg[i] != fmt_pattern(9, got + (size_t)i))
                    fmt_fail(__FILE__, __LINE__, "stream byte %zu differs", got + (size_t)i);
            got += (size_t)n;
            if (msgs % 16 == 0)
                usleep(2000);
        }
        /* Let every kind of bad datagram arrive at least once. */
        for (int tries = 0; tries < 500; tries++) {
            fm_progress(ctx);
            fm_udp_link_counters(ctx, nc, dr);
            if (dr[FM_DROP_SHORT] && dr[FM_DROP_CRC] && dr[FM_DROP_FOREIGN] && dr[FM_DROP_AUTH] &&
                dr[FM_DROP_OPCODE] && dr[FM_DROP_DUPLICATE] + dr[FM_DROP_STALE] + dr[FM_DROP_WINDOW])
                break;
            usleep(10000);
        }
        char b = 1;
        CHECK_EQ(fmt_send_all(done, fm_addr_of(ctx, 2, CH_DONE), &b, 1), 1);
        fprintf(stderr, "flood: rank 1 dropped");
        for (int i = 1; i < FM_DROP_COUNT; i++)
            fprintf(stderr, " %s=%llu", fm_drop_names[i], (unsigned long long)dr[i]);
        fprintf(stderr, "\n");
        CHECK(dr[FM_DROP_SHORT] > 0);
        CHECK(dr[FM_DROP_CRC] > 0);
        CHECK(dr[FM_DROP_FOREIGN] > 0);
        CHECK(dr[FM_DROP_AUTH] > 0);
        CHECK(dr[FM_DROP_OPCODE] > 0);
        CHECK(dr[FM_DROP_DUPLICATE] + dr[FM_DROP_STALE] + dr[FM_DROP_WINDOW] > 0);
    } else {
        flooder(done);
    }
    CHECK_RC(fm_finalize(ctx), 0);
    return 0;
}
