/*
 * The fastmsg wire format: every datagram between two fastmsg processes.
 * docs/wire.md describes it for a second implementation; this header is the
 * definition. All fields are little-endian; structures have no padding.
 *
 *   datagram = one or more packets back to back
 *   packet   = fm_wire_hdr, then the `len` bytes of its opcode's payload
 *            | fm_wire_short, then the `len` bytes of a DATA payload
 *
 * A packet is accepted only if it is at least a header long, its version is
 * FM_WIRE_VERSION, its CRC32C matches, its job tag is this job's, and it is
 * addressed to this rank. Everything else is dropped and counted by reason.
 */
#ifndef FM_NET_WIRE_H
#define FM_NET_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "fastmsg's wire code assumes a little-endian host (x86-64, arm64)"
#endif

#define FM_WIRE_VERSION 7

enum fm_wire_op {
    FM_OP_HELLO = 1,     /* asks for a session; proves the job key (fm_wire_hello) */
    FM_OP_HELLO_ACK = 2, /* grants it (fm_wire_hello) */
    FM_OP_DATA = 3,      /* bytes of a flow's record stream, in sequence (fm_wire_data) */
    FM_OP_ACK = 4,       /* acknowledgement, selective acks, credits (fm_wire_ack) */
    FM_OP_FLOW = 5,      /* opens a flow, in sequence (fm_wire_flow) */
    FM_OP_PING = 6,      /* asks for an ACK now: heartbeat of an idle session; no payload */
    FM_OP_BYE = 7,       /* the sender leaves the job (fm_finalize), in sequence; no payload */
    FM_OP_FLOW_END = 8,  /* the sender's flow carries no more data, in sequence (fm_wire_flow_end) */
    FM_OP_FLOW_STOP = 9, /* the receiver closed the flow's endpoint: end it, in sequence
                            (fm_wire_flow_end, naming the sender's flow id) */
    FM_OP_DATA_SHORT = 10, /* DATA under the short header (fm_wire_short, fm_wire_data) */
    FM_OP_FIRST_RESERVED = 11, /* 11..255: reserved, dropped and counted */
};

/* src_rank and dst_rank of a session between processes of no common job
 * (peers by name): such a session is found by the sender's epoch, its job
 * tag is the domain key's, and its HELLO carries the sender's name. */
#define FM_WIRE_NAMED 0xFFFFFFFFu

/* Header flags. */
#define FM_HDR_ACK_VALID 0x0001u /* `ack` carries a cumulative acknowledgement */
#define FM_HDR_STATUS 0x0002u    /* PING: asks for the receiver's rail status (seed 000's
                                    SReq); ACK: answers one (SAck) */
#define FM_HDR_CREDIT 0x0004u    /* DATA: carries one credit, for flow `credit_flow`, of
                                    which the data header's `credit_lo` holds the low 32
                                    bits of the head (the full value follows from the
                                    sender's own, since a flow is never 4 GiB ahead) */
#define FM_HDR_SIDE_PORT 0x0008u /* sent from a socket of its own, connected to the receiver:
                                    its source port is not the sender's address */
#define FM_HDR_ALONE 0x0010u     /* DATA: the sender had nothing else in flight and nothing
                                    more to send (a request or a reply; copies keep it): its
                                    receiver may hold the acknowledgement until the message
                                    is whole and the program had a turn, and does not count
                                    it as a sender (budget.c) */
#define FM_HDR_ECHO 0x0020u      /* ACK: `seq` names the packet whose arrival it answers
                                    (the last sequenced one since the previous ACK): the
                                    sender times its round trip from it */
/* The flags a short DATA header may have. */
#define FM_SHORT_FLAGS (FM_HDR_ACK_VALID | FM_HDR_SIDE_PORT | FM_HDR_ALONE)

/* Every packet starts with this (48 bytes). */
struct fm_wire_hdr {
    uint8_t version;    /* FM_WIRE_VERSION */
    uint8_t op;         /* enum fm_wire_op */
    uint16_t flags;     /* FM_HDR_* */
    uint32_t crc;       /* CRC32C of the whole datagram, computed with this field 0 */
    uint64_t job;       /* job tag (from the job key): another job's packets are foreign */
    uint32_t src_rank;  /* sender's rank */
    uint32_t dst_rank;  /* receiver's rank; a packet for another rank is dropped */
    uint32_t src_epoch; /* sender process's random incarnation number (never 0) */
    uint32_t dst_epoch; /* receiver's, as the sender knows it: 0 in HELLO and in what
                           follows it before the HELLO_ACK came */
    uint32_t seq;       /* sequence number of DATA, FLOW, FLOW_END, FLOW_STOP and BYE; of
                           an ACK with FM_HDR_ECHO, the packet it answers; else 0 */
    uint32_t ack;       /* with FM_HDR_ACK_VALID: next sequence number expected from the receiver */
    uint16_t len;       /* bytes of payload after this header */
    uint8_t rail;       /* index of the sender's rail this packet left on */
    uint8_t reserved0;  /* 0 */
    uint32_t credit_flow; /* with FM_HDR_CREDIT: the flow of the credit; else 0 */
};

/*
 * The short header of DATA (24 bytes), once the sender knows the token the
 * receiver gave the session in its HELLO or HELLO_ACK: the token stands for
 * the job tag, both ranks and both epochs, which the receiver keeps with
 * the session. It saves 24 of the 64 bytes of headers a full packet of data
 * carries: 1432 bytes of data fit a 1500-byte MTU where 1408 did. Version,
 * opcode, flags and CRC are at the full header's offsets; seq, ack, len and
 * rail sit 24 bytes before the full header's, so that a sender can write
 * the short header over the second half of a full one. A short DATA
 * carries no credit (FM_HDR_CREDIT): the sender uses the full header then.
 */
struct fm_wire_short {
    uint8_t version;   /* FM_WIRE_VERSION */
    uint8_t op;        /* FM_OP_DATA_SHORT */
    uint16_t flags;    /* FM_SHORT_FLAGS only */
    uint32_t crc;      /* CRC32C of the whole packet, computed with this field 0 */
    uint32_t seq;      /* sequence number */
    uint32_t ack;      /* with FM_HDR_ACK_VALID: next sequence number expected */
    uint16_t len;      /* bytes after this header: fm_wire_data, then the data */
    uint8_t rail;      /* index of the sender's rail this packet left on */
    uint8_t reserved0; /* 0 */
    uint32_t token;    /* the receiver's token for the session */
};

/* HELLO and HELLO_ACK (32 bytes). The MAC keys the request to the job: a
 * process without the key cannot open a session. A HELLO between named
 * processes (FM_WIRE_NAMED) is followed by the sender's endpoint name with
 * channel 0 (at most 64 bytes), which the MAC covers too. */
struct fm_wire_hello {
    uint64_t nonce;     /* HELLO: random; HELLO_ACK: the HELLO's nonce, echoed */
    uint32_t first_seq; /* the sequence number the sender's first DATA/FLOW/BYE will carry */
    uint32_t token;     /* the sender's token for the session: short DATA to it carries it */
    uint32_t ring_max;  /* the largest ring the sender lets flows to it have (as in ACKs) */
    uint32_t reserved;  /* 0 */
    uint64_t mac;       /* SipHash-2-4(job key, header with crc 0 + this payload with mac 0) */
};

/* Whether ring_max (HELLO, ACK) is a ring size a receiver may allow. */
static inline int fm_wire_ring_max_valid(uint32_t v)
{
    return v >= 4096 && v <= (1u << 30) && !(v & (v - 1));
}

/* DATA (16 bytes, then the bytes). A flow's bytes form a stream of ring
 * records (8-byte header, payload, padded to 8) that the receiver lays into
 * a ring of the flow's size at the same positions. */
struct fm_wire_data {
    uint32_t flow;      /* sender's flow id, announced by FLOW earlier in the sequence */
    uint32_t credit_lo; /* with FM_HDR_CREDIT: low 32 bits of the credit's head; else 0 */
    uint64_t pos;      /* stream position of the first byte (a multiple of 8) */
};

/* FLOW (16 bytes): from now on, flow `flow` carries messages from the
 * sender's endpoint on src_channel to the receiver's endpoint on dst_channel.
 * The receiver holds ring_size bytes for it; the sender may have that many
 * unreleased bytes outstanding before any credit. */
struct fm_wire_flow {
    uint32_t flow;        /* sender's flow id */
    uint32_t src_channel; /* channel of the sending endpoint */
    uint32_t dst_channel; /* channel of the receiving endpoint */
    uint32_t ring_size;   /* bytes of the flow's ring, a power of two */
};

/* FLOW_END and FLOW_STOP (8 bytes). */
struct fm_wire_flow_end {
    uint32_t flow;     /* FLOW_END: the sender's own flow id; FLOW_STOP: the id the
                          receiver got in that flow's FLOW */
    uint32_t flow_seq; /* FLOW_STOP: that FLOW's sequence number; FLOW_END: 0 */
};

/* A credit: the receiver has released the first `head` bytes of a flow. */
struct fm_wire_credit {
    uint32_t flow;     /* sender's flow id */
    uint32_t reserved; /* 0 */
    uint64_t head;     /* bytes of the stream released by the receiving endpoint */
};

/* A selective acknowledgement: packets first .. first + count - 1 arrived. */
struct fm_wire_sack {
    uint32_t first;
    uint32_t count;
};

/* Ranges one ACK carries: the lowest ones after the cumulative
 * acknowledgement (the sender keeps what earlier ACKs said). */
#define FM_WIRE_SACK_MAX 32

/* ACK (16 bytes, then `ncredit` credits, then `nsack` ranges). The
 * cumulative acknowledgement is the header's `ack`. */
struct fm_wire_ack {
    uint32_t rails_busy; /* bit r: the receiver's rail r is busy (rail dispatch) */
    uint16_t ncredit;    /* credits that follow */
    uint16_t nsack;      /* selective acknowledgements after them, at most FM_WIRE_SACK_MAX */
    uint32_t grant;      /* bytes the sender may have in flight to us; 0: no limit;
                            1 and 2: wait for a turn (FM_GRANT_TRICKLE, _PAUSE) */
    uint32_t ring_max;   /* the largest ring the sender's next flows to us may have */
    /* struct fm_wire_credit credit[ncredit]; */
    /* struct fm_wire_sack sack[nsack]; */
};

_Static_assert(sizeof(struct fm_wire_hdr) == 48, "header is 48 bytes");
_Static_assert(sizeof(struct fm_wire_short) == 24, "short header is 24 bytes");
_Static_assert(offsetof(struct fm_wire_short, seq) + 24 == offsetof(struct fm_wire_hdr, seq) &&
                   offsetof(struct fm_wire_short, rail) + 24 == offsetof(struct fm_wire_hdr, rail),
               "a short header's seq, ack, len and rail lie under the full header's");
_Static_assert(sizeof(struct fm_wire_hello) == 32, "hello is 32 bytes");
_Static_assert(sizeof(struct fm_wire_data) == 16, "data header is 16 bytes");
_Static_assert(sizeof(struct fm_wire_flow) == 16, "flow is 16 bytes");
_Static_assert(sizeof(struct fm_wire_credit) == 16, "credit is 16 bytes");
_Static_assert(sizeof(struct fm_wire_flow_end) == 8, "flow end is 8 bytes");
_Static_assert(sizeof(struct fm_wire_ack) == 16, "ack is 16 bytes");
_Static_assert(sizeof(struct fm_wire_sack) == 8, "sack is 8 bytes");

/* Bytes the short header saves. */
#define FM_WIRE_SHORT_SAVING (sizeof(struct fm_wire_hdr) - sizeof(struct fm_wire_short))

/* Largest datagram: a UDP payload over IPv4. */
#define FM_WIRE_MAX 65507u

/* Why a received datagram was dropped (counted per reason). */
enum fm_drop {
    FM_DROP_NONE = 0,
    FM_DROP_SHORT,       /* shorter than its header or than `len` says */
    FM_DROP_VERSION,     /* another wire version */
    FM_DROP_CRC,         /* checksum mismatch: corrupted */
    FM_DROP_FOREIGN,     /* another job's tag, or a stray sender */
    FM_DROP_MISDIRECTED, /* for another rank, or from a rank not in the job */
    FM_DROP_OPCODE,      /* reserved opcode or bad payload size for its opcode */
    FM_DROP_AUTH,        /* HELLO whose MAC does not match the job key */
    FM_DROP_STALE,       /* from or for another incarnation of a process */
    FM_DROP_NOSESSION,   /* sequenced packet before the session was set up */
    FM_DROP_DUPLICATE,   /* already received */
    FM_DROP_WINDOW,      /* sequence number outside the receive window */
    FM_DROP_FLOW,        /* unknown flow, or bytes outside its ring or credit */
    FM_DROP_FAULT,       /* dropped by the fault injector (FM_FAULT) */
    FM_DROP_NOMEM,       /* no memory to take it now: not acknowledged, sent again */
    FM_DROP_COUNT
};

/* Names of the drop reasons, for counters and logs. */
extern const char *const fm_drop_names[FM_DROP_COUNT];

/* The CRC of a packet's first len bytes (at least its header, of hdr_len
 * bytes), its CRC field counted as zero: the whole packet's is what the
 * header carries. */
uint32_t fm_wire_crc_prefix(const void *pkt, size_t hdr_len, size_t len);

/* Copies a packet's first n bytes (its header, and maybe more) to out as
 * its CRC covers them: with the CRC field zero (at the same place in both
 * headers). */
static inline void fm_wire_crc_view(unsigned char *out, const void *pkt, size_t n)
{
    _Static_assert(offsetof(struct fm_wire_hdr, crc) == offsetof(struct fm_wire_short, crc),
                   "both headers have their CRC at the same place");
    memcpy(out, pkt, n);
    memset(out + offsetof(struct fm_wire_hdr, crc), 0, sizeof(((struct fm_wire_hdr *)0)->crc));
}

/* Checks what every packet must satisfy before its opcode is looked at:
 * size, version, checksum, job tag, destination. A packet under the domain
 * tag (0: none) must be FM_WIRE_NAMED both ways. Returns FM_DROP_NONE or
 * the reason to drop it. */
enum fm_drop fm_wire_check(const void *pkt, size_t len, uint64_t job, uint64_t domain,
                           uint32_t rank, uint32_t size);

/* What a short DATA must satisfy before its token is looked up: size,
 * version, checksum, flags. Returns FM_DROP_NONE or the reason to drop it. */
enum fm_drop fm_wire_check_short(const void *pkt, size_t len);

/* Fills in the length and checksum of a packet: header h, followed in
 * memory by its sub_len bytes of sub-header, then the payload's pieces.
 * With copy (else NULL), the pieces are copied there, one after the
 * other, in the same pass as the checksum reads them. */
void fm_wire_seal(struct fm_wire_hdr *h, size_t sub_len, const struct iovec *payload, int n,
                  void *copy);

/* Turns full DATA header h, sealed or not, into the short one with token
 * (written over its second half, where fm_wire_short_of finds it) and
 * seals that: length and checksum, and copy as for fm_wire_seal. Sealing
 * it again gives the same bytes. */
void fm_wire_seal_short(struct fm_wire_hdr *h, uint32_t token, size_t sub_len,
                        const struct iovec *payload, int n, void *copy);

/* Where the short header written over full header h starts. */
static inline void *fm_wire_short_of(struct fm_wire_hdr *h)
{
    return (unsigned char *)h + FM_WIRE_SHORT_SAVING;
}

/* The job tag of a job key: SipHash-2-4(key, "fastmsg job tag"). */
uint64_t fm_wire_job_tag(const uint8_t key[16]);

/* The MAC of a HELLO or HELLO_ACK (over header and payload with crc and mac
 * 0, and the `extra` bytes after the payload: a named HELLO's name). */
uint64_t fm_wire_hello_mac(const uint8_t key[16], const struct fm_wire_hdr *h,
                           const struct fm_wire_hello *hello, const void *extra,
                           size_t extra_len);

/* Sequence-number order with wrap-around. */
static inline int fm_seq_lt(uint32_t a, uint32_t b) { return (int32_t)(a - b) < 0; }

/* The length of the packet at the start of the n bytes left of a datagram:
 * its header and `len` bytes, or all n if the header is cut short or says
 * more than is left (then the packet's check drops it). */
static inline size_t fm_wire_packet_len(const unsigned char *p, size_t n)
{
    uint16_t len;
    int brief = n >= 2 && p[1] == FM_OP_DATA_SHORT;
    size_t hdr = brief ? sizeof(struct fm_wire_short) : sizeof(struct fm_wire_hdr);
    if (n < hdr)
        return n;
    size_t at = brief ? offsetof(struct fm_wire_short, len) : offsetof(struct fm_wire_hdr, len);
    memcpy(&len, p + at, sizeof(len));
    size_t m = hdr + len;
    return m <= n ? m : n;
}

#endif
