/*
 * libFuzzer target: arbitrary bytes as the libfabric provider's wire
 * messages (src/fi/fmfi.h) into fmfi_rx_message, on an endpoint built in
 * memory without a fastmsg endpoint: ep->fm is NULL, so every control
 * message the provider answers with (CTS, FIN, ACK, READ_RESP) fails in
 * fm_send and is freed, and fmfi_ep_progress does nothing.
 *
 * Per input, the endpoint starts with receives posted (tagged with ignore
 * bits, directed at source B, untagged, three iovecs, a multi-receive),
 * transmit ops waiting for an answer (rendezvous sends waiting for CTS or
 * FIN, an RMA read for READ_RESP, an RMA write and a delivery-complete
 * send for ACK), two memory regions (key 1 read-write, key 2 read-only),
 * a small CQ and a counter. The input is a sequence of records:
 *
 *   message  [c < 0x80][len lo][len hi][cut1][cut2][len bytes]
 *            from source A, B or C (c & 3; C is another endpoint of A's
 *            process), in 1 to 3 segments (c >> 2 & 3), each its own
 *            allocation; c & 0x40 first makes the header plausible.
 *   action   [c >= 0x80][arg][tag lo][tag hi]: an API call on the
 *            endpoint (receives, FI_PEEK/FI_CLAIM/FI_DISCARD, fi_cancel,
 *            reading the CQ, sends and RMA that fail for want of fastmsg).
 *
 * Besides the sanitizers: send buffers are read-only memory, so a write
 * into one crashes; every completion names a context of ours (or NULL).
 * An unexpected EAGER message is buffered whole (malloc of its header's
 * len), so the harness keeps that len below 1 MiB, as a sender's eager
 * limit would.
 */
#include "fi/fmfi.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HDR sizeof(struct fmfi_hdr)
#define SRC_A ((fm_addr)1 << 32 | 0x66690000u)
#define SRC_B ((fm_addr)2 << 32 | 0x66690000u)
#define SRC_C ((fm_addr)1 << 32 | 0x66690001u)
#define NCTX 96
#define NBUF 64
#define EAGER_LEN_MAX (1u << 20)

/* What sends point at: the provider must never write there. */
static const uint8_t ro_send[65536] = {1, 2, 3, 4, 5, 6, 7, 8};
static const uint8_t ro_inject[256] = {9, 10, 11};

static struct {
    struct fmfi_domain *dom;
    struct fid_ep *fep;
    struct fmfi_ep *ep;
    struct fid_cq *cq;
    struct fid_cntr *cntr;
    struct fid_av *av;
    struct fid_mr *mr[2];
    uint8_t *region[2];
    struct fi_context ctx[NCTX]; /* receives' and sends' contexts */
    int nctx;
    void *buf[NBUF]; /* receive buffers, freed after the endpoint */
    int nbuf;
} s;

static struct fi_info *info;

static void *ctx_next(void)
{
    return &s.ctx[s.nctx < NCTX ? s.nctx++ : NCTX - 1];
}

static void *buf_new(size_t len)
{
    if (s.nbuf == NBUF)
        return NULL;
    void *p = malloc(len ? len : 1);
    if (p)
        s.buf[s.nbuf++] = p;
    return p;
}

/* av.c's reverse map, filled the way rev_put does (only FI_SOURCE uses it). */
static void av_fill(struct fmfi_av *av)
{
    static const fm_addr peers[2] = {SRC_A, SRC_B};
    av->addr = malloc(2 * sizeof(*av->addr));
    av->local = calloc(2, 1); /* both peers on another node */
    av->rev = calloc(64, sizeof(*av->rev)); /* FM_ADDR_NONE is 0: all free */
    if (!av->addr || !av->local || !av->rev)
        abort();
    av->count = av->cap = 2;
    av->rcap = 64;
    for (size_t i = 0; i < 2; i++) {
        av->addr[i] = peers[i];
        size_t k = (size_t)((peers[i] * 0x9E3779B97F4A7C15ull) >> 20) & 63;
        while (av->rev[k].key != FM_ADDR_NONE)
            k = (k + 1) & 63;
        av->rev[k].key = peers[i];
        av->rev[k].val = i;
    }
}

/* A transmit op that went out and waits for the peer's answer. */
static void tx_waiting(uint8_t kind, uint64_t id, fm_addr peer, const void *buf, size_t len,
                       uint8_t hop, uint8_t hflags, bool inject)
{
    struct fmfi_op *op = fmfi_op_new(s.ep);
    if (!op)
        abort();
    op->kind = kind;
    op->state = ST_WAIT;
    op->tagged = 1;
    op->context = ctx_next();
    op->peer = peer;
    op->iov[0] = (struct iovec){(void *)buf, len};
    op->iovcnt = 1;
    op->len = len;
    op->id = id;
    op->hdr = (struct fmfi_hdr){.op = hop, .flags = hflags, .len = len, .id = id};
    if (inject) { /* like op_iov: the op's own copy, the caller's iov kept */
        if (!(op->inject = malloc(len)))
            abort();
        memcpy(op->inject, buf, len);
    }
    fmfi_list_push(&s.ep->tx_wait, &op->link);
    s.ep->tx_ops++; /* as fmfi_tx_start counts it */
}

static void post(bool tagged, size_t len, fi_addr_t src, uint64_t tag, uint64_t ignore,
                 uint64_t flags)
{
    void *b = buf_new(len);
    if (!b)
        return;
    struct iovec iov = {b, len};
    if (tagged) {
        struct fi_msg_tagged m = {&iov, NULL, 1, src, tag, ignore, ctx_next(), 0};
        fi_trecvmsg(s.fep, &m, flags);
    } else {
        struct fi_msg m = {&iov, NULL, 1, src, ctx_next(), 0};
        fi_recvmsg(s.fep, &m, flags);
    }
}

static void post_iov(bool tagged, uint64_t tag)
{
    static const size_t cut[3] = {5, 50, 300};
    struct iovec iov[3];
    for (int i = 0; i < 3; i++) {
        void *b = buf_new(cut[i]);
        if (!b)
            return;
        iov[i] = (struct iovec){b, cut[i]};
    }
    if (tagged)
        fi_trecvv(s.fep, iov, NULL, 3, FI_ADDR_UNSPEC, tag, 0, ctx_next());
    else
        fi_recvv(s.fep, iov, NULL, 3, FI_ADDR_UNSPEC, ctx_next());
}

static bool ours(void *ctx)
{
    return !ctx || ((char *)ctx >= (char *)s.ctx && (char *)ctx < (char *)(s.ctx + NCTX));
}

static void read_cq(void)
{
    struct fi_cq_tagged_entry e[4];
    for (;;) {
        ssize_t n = fi_cq_read(s.cq, e, 4);
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry ee;
            memset(&ee, 0, sizeof(ee));
            if (fi_cq_readerr(s.cq, &ee, 0) != 1)
                abort();
            if (!ours(ee.op_context) || ee.err <= 0)
                abort();
            continue;
        }
        if (n <= 0)
            return;
        for (ssize_t i = 0; i < n; i++)
            if (!ours(e[i].op_context))
                abort();
    }
}

static void setup(void)
{
    memset(&s, 0, sizeof(s));
    struct fmfi_domain *d = calloc(1, sizeof(*d));
    if (!d)
        abort();
    pthread_mutex_init(&d->lock, NULL);
    fmfi_list_init(&d->eps);
    d->threading = FI_THREAD_DOMAIN; /* d->locked stays false */
    d->api_version = FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION);
    d->next_key = 1;
    d->dom.fid.fclass = FI_CLASS_DOMAIN;
    s.dom = d;
    static const uint64_t access[2] = {FI_REMOTE_READ | FI_REMOTE_WRITE, FI_REMOTE_READ};
    static const size_t rlen[2] = {4096, 200};
    for (int i = 0; i < 2; i++) {
        s.region[i] = calloc(1, rlen[i]);
        if (!s.region[i] || fmfi_mr_reg(&d->dom.fid, s.region[i], rlen[i], access[i], 0,
                                        (uint64_t)i + 1, 0, &s.mr[i], NULL))
            abort();
    }
    struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .size = 8};
    struct fi_cntr_attr na = {.events = FI_CNTR_EVENTS_COMP};
    struct fi_av_attr aa = {.type = FI_AV_TABLE};
    if (fmfi_cq_open(&d->dom, &ca, &s.cq, NULL) || fmfi_cntr_open(&d->dom, &na, &s.cntr, NULL) ||
        fmfi_av_open(&d->dom, &aa, &s.av, NULL) || fmfi_ep_open(&d->dom, info, &s.fep, NULL))
        abort();
    av_fill(fmfi_container(s.av, struct fmfi_av, av));
    if (fi_ep_bind(s.fep, &s.av->fid, 0) || fi_ep_bind(s.fep, &s.cq->fid, FI_TRANSMIT | FI_RECV) ||
        fi_ep_bind(s.fep, &s.cntr->fid,
                   FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE))
        abort();
    s.ep = fmfi_container(s.fep, struct fmfi_ep, ep);
    s.ep->enabled = true; /* without fi_enable, which would open a fastmsg endpoint */
    size_t min = 128;
    fi_setopt(&s.fep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min));

    /* Ops waiting for answers: ids 1-5 (receives' ids continue from 5). */
    tx_waiting(OP_SEND, 1, SRC_A, ro_send, sizeof(ro_send), FMFI_RTS, FMFI_F_TAGGED, false);
    tx_waiting(OP_READ, 2, SRC_B, buf_new(256), 256, FMFI_READ_REQ, 0, false);
    tx_waiting(OP_WRITE, 3, SRC_A, ro_send, 64, FMFI_WRITE, 0, false);
    tx_waiting(OP_SEND, 4, SRC_B, ro_send, 100, FMFI_EAGER, FMFI_F_ACKREQ, false);
    tx_waiting(OP_SEND, 5, SRC_C, ro_inject, sizeof(ro_inject), FMFI_RTS, 0, true);
    s.ep->next_id = 5;

    /* Receives: tagged with ignore bits, directed at B, untagged, iovecs, multi. */
    post(true, 64, FI_ADDR_UNSPEC, 0x10, 0xF, 0);
    post(true, 100000, 1, 0x20, 0, 0);
    post(true, 4096, FI_ADDR_UNSPEC, 0x30, 0, FI_COMPLETION);
    post_iov(true, 0x40);
    post(false, 256, FI_ADDR_UNSPEC, 0, 0, 0);
    post_iov(false, 0);
    post(false, 1024, FI_ADDR_UNSPEC, 0, 0, FI_MULTI_RECV);
}

static void teardown(void)
{
    read_cq();
    if (fi_close(&s.fep->fid) || fi_close(&s.cq->fid) || fi_close(&s.cntr->fid) ||
        fi_close(&s.av->fid) || fi_close(&s.mr[0]->fid) || fi_close(&s.mr[1]->fid))
        abort();
    for (int i = 0; i < s.nbuf; i++)
        free(s.buf[i]);
    free(s.region[0]);
    free(s.region[1]);
    pthread_mutex_destroy(&s.dom->lock);
    free(s.dom);
}

/* Makes a header more likely to mean something: a known opcode, small
 * lengths and ids, an RTS whose iovec count fits its payload. */
static size_t repair(uint8_t *msg, size_t len)
{
    struct fmfi_hdr h;
    memcpy(&h, msg, HDR);
    size_t plen = len - HDR;
    h.op = (uint8_t)(h.op % 10 + 1);
    h.flags &= 0xf;
    h.id %= 8;
    h.off %= 8192;
    switch (h.op) {
    case FMFI_EAGER:
    case FMFI_WRITE:
        h.len = plen + h.len % 512;
        h.tag %= 4;
        h.data %= 8192; /* RMA: the address */
        break;
    case FMFI_RTS:
        h.iovcnt %= 5;
        plen = plen < h.iovcnt * 16u ? plen : h.iovcnt * 16u;
        h.len %= 200000;
        break;
    case FMFI_READ_REQ:
        h.len %= 8192;
        h.tag %= 4;
        break;
    default: h.len %= 8192;
    }
    memcpy(msg, &h, HDR);
    return HDR + plen;
}

static void message(uint8_t c, const uint8_t *p, size_t len, uint8_t cut1, uint8_t cut2)
{
    static const fm_addr srcs[4] = {SRC_A, SRC_B, SRC_C, SRC_A};
    uint8_t *msg = malloc(len ? len : 1);
    if (!msg)
        return;
    memcpy(msg, p, len);
    if ((c & 0x40) && len >= HDR)
        len = repair(msg, len);
    if (len >= HDR) { /* the sender's eager limit */
        struct fmfi_hdr h;
        memcpy(&h, msg, HDR);
        if (h.op == FMFI_EAGER && h.len > EAGER_LEN_MAX) {
            h.len %= EAGER_LEN_MAX;
            memcpy(msg, &h, HDR);
        }
    }
    /* 1-3 segments, each its own allocation, as a ring wrap would cut it. */
    int nseg = 1 + (c >> 2 & 3) % 3;
    size_t at[4] = {0, len * cut1 / 255, 0, len};
    at[2] = at[1] + (len - at[1]) * cut2 / 255;
    if (nseg == 1)
        at[1] = len;
    else if (nseg == 2)
        at[2] = len;
    struct iovec seg[3];
    for (int i = 0; i < nseg; i++) {
        size_t l = at[i + 1] - at[i];
        seg[i].iov_base = malloc(l ? l : 1);
        seg[i].iov_len = l;
        if (seg[i].iov_base)
            memcpy(seg[i].iov_base, msg + at[i], l);
    }
    bool ok = true;
    for (int i = 0; i < nseg; i++)
        ok &= seg[i].iov_base != NULL;
    if (ok)
        fmfi_rx_message(s.ep, srcs[c & 3], seg, nseg, len);
    for (int i = 0; i < nseg; i++)
        free(seg[i].iov_base);
    free(msg);
}

static void action(uint8_t c, uint8_t arg, uint64_t tag)
{
    static const size_t sizes[8] = {0, 1, 48, 100, 300, 4096, 65536, 300000};
    size_t len = sizes[arg & 7];
    fi_addr_t src = arg & 0x40 ? (fi_addr_t)(arg >> 3 & 1) : FI_ADDR_UNSPEC;
    struct fi_context *claim = &s.ctx[NCTX - 1 - (arg & 3)]; /* FI_CLAIM pairs */
    switch ((c & 0x7f) % 14) {
    case 0: post(true, len, src, tag, arg & 0x80 ? 0xFF : 0, 0); break;
    case 1: post(false, len, src, 0, 0, 0); break;
    case 2: post_iov(arg & 1, tag); break;
    case 3: post(arg & 1, arg & 0x80 ? 4096 : 1024, FI_ADDR_UNSPEC, tag, 0, FI_MULTI_RECV); break;
    case 4: /* FI_PEEK, maybe with FI_CLAIM or FI_DISCARD */
    case 5: {
        struct fi_msg_tagged m = {
            NULL, NULL, 0, src, tag, arg & 0x80 ? 0xFF : 0, (c & 1) ? claim : ctx_next(), 0};
        uint64_t f = FI_PEEK | ((c & 1) ? FI_CLAIM : 0) | ((arg & 0x20) ? FI_DISCARD : 0);
        fi_trecvmsg(s.fep, &m, f);
        break;
    }
    case 6: { /* FI_CLAIM: receive, or FI_DISCARD, what a peek claimed */
        void *b = buf_new(len);
        struct iovec iov = {b, b ? len : 0};
        struct fi_msg_tagged m = {&iov, NULL, 1, FI_ADDR_UNSPEC, tag, 0, claim, 0};
        fi_trecvmsg(s.fep, &m, FI_CLAIM | ((arg & 0x20) ? FI_DISCARD : 0));
        break;
    }
    case 7: fi_cancel(&s.fep->fid, &s.ctx[arg % NCTX]); break;
    case 8: read_cq(); break;
    case 9: {
        size_t min = (size_t)arg * 16;
        fi_setopt(&s.fep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min));
        fi_cntr_read(s.cntr);
        break;
    }
    case 10: /* sends fail at fm_send: eager at once, rendezvous as an error completion */
        fi_tsend(s.fep, ro_send, len < sizeof(ro_send) ? len : sizeof(ro_send), NULL, arg & 1, tag,
                 ctx_next());
        fi_send(s.fep, ro_send, sizeof(ro_send), NULL, arg & 1, ctx_next());
        break;
    case 11: fi_write(s.fep, ro_send, 64, NULL, arg & 1, 0, 1, ctx_next()); break;
    case 12: {
        void *b = buf_new(64);
        if (b)
            fi_read(s.fep, b, 64, NULL, arg & 1, 0, 1, ctx_next());
        break;
    }
    default: post(true, len, FI_ADDR_UNSPEC, tag, ~(uint64_t)0, 0); /* matches any tag */
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!info) {
        fmfi_params.eager_max = 32768;
        info = fi_allocinfo();
        if (!info)
            abort();
        info->ep_attr->type = FI_EP_RDM;
        info->caps = FI_MSG | FI_TAGGED | FI_RMA | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV |
                     FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE;
    }
    setup();
    size_t off = 0;
    while (off < size) {
        uint8_t c = data[off];
        if (c & 0x80) {
            if (off + 4 > size)
                break;
            action(c, data[off + 1], (uint64_t)data[off + 2] | (uint64_t)data[off + 3] << 8);
            off += 4;
            continue;
        }
        if (off + 5 > size)
            break;
        size_t len = (size_t)data[off + 1] | (size_t)data[off + 2] << 8;
        uint8_t cut1 = data[off + 3], cut2 = data[off + 4];
        off += 5;
        len = len < size - off ? len : size - off;
        message(c, data + off, len, cut1, cut2);
        off += len;
    }
    teardown();
    return 0;
}
