/*
 * libfastmsg-fi.so: fastmsg as a libfabric provider (docs/mpi.md).
 *
 * The provider is built against libfabric's public headers only, so it
 * writes its own small helpers (lists, hint checks, stubs). It carries its
 * own copy of the fastmsg core and exports nothing but fi_prov_ini.
 *
 * Objects and who owns what:
 *   fabric -> domain (one fastmsg context per process, shared by domains)
 *          -> av, cq, cntr, mr, ep
 *   An endpoint is one fastmsg endpoint (a channel of this process). Every
 *   operation and every CQ or counter read runs the domain's progress, under
 *   the domain's lock when the threading level asks for one (fmfi_lock).
 *
 * Wire protocol (one fastmsg message = struct fmfi_hdr + payload; fastmsg
 * delivers in order from one endpoint to another, reliably):
 *   EAGER  a whole small message, or its first part: a fastmsg send may take
 *          a prefix, and CONT messages from the same sender carry the rest.
 *   RTS    a large message: the receiver matches it like EAGER, then either
 *          reads the sender's buffer once with process_vm_readv (same node)
 *          and answers FIN, or answers CTS and the sender streams DATA.
 *   RMA    WRITE (+CONT), READ_REQ -> READ_RESP (+DATA), each write and read
 *          answered or acked so the initiator completes only when done.
 */
#ifndef FMFI_H
#define FMFI_H

#include "fastmsg.h"

#include <pthread.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FMFI_NAME "fastmsg"
#define FMFI_PROV_VERSION FI_VERSION(FM_VERSION_MAJOR, FM_VERSION_MINOR)
#define FMFI_ADDRLEN FM_NAME_MAX /* names are padded to this: AV inserts stride by it */
#define FMFI_IOV_MAX 4
#define FMFI_TAG_FORMAT 0xAAAAAAAAAAAAAAAAull /* FI_TAG_GENERIC (internal to libfabric) */
#define FMFI_QUEUE_SIZE 1024                  /* advertised tx/rx sizes: a hint, not a limit */
#define FMFI_INJECT_SIZE 4096
#define FMFI_CQ_DATA_SIZE 8
#define FMFI_DGRAM_MAX (65536 - 64) /* a datagram endpoint's largest message */
/* FI_FASTMSG_EAGER_MAX's ceiling: a receiver allocates an unexpected eager
 * message's length when its first part comes, so it refuses larger ones. */
#define FMFI_EAGER_CEILING (64u << 20)

extern struct fi_provider fmfi_prov;

/* Tunables, read once at fi_prov_ini through fi_param_get (FI_FASTMSG_*). */
struct fmfi_params {
    size_t eager_max;  /* larger messages go by rendezvous */
    size_t eager_local_max; /* the same, to a process on this node */
    int cma;           /* read same-node rendezvous senders with process_vm_readv */
    int idle_sleep;    /* empty CQ reads in a row wait for traffic: 1, 0, -1 when crowded */
};
extern struct fmfi_params fmfi_params;

/* ---- intrusive doubly linked list ------------------------------------------ */
struct fmfi_list {
    struct fmfi_list *prev, *next;
};
static inline void fmfi_list_init(struct fmfi_list *l) { l->prev = l->next = l; }
static inline bool fmfi_list_empty(const struct fmfi_list *l) { return l->next == l; }
static inline void fmfi_list_push(struct fmfi_list *l, struct fmfi_list *e)
{
    e->prev = l->prev;
    e->next = l;
    l->prev->next = e;
    l->prev = e;
}
static inline void fmfi_list_del(struct fmfi_list *e)
{
    e->prev->next = e->next;
    e->next->prev = e->prev;
    e->prev = e->next = e;
}
#define fmfi_container(ptr, type, member) ((type *)((char *)(ptr) - offsetof(type, member)))
#define fmfi_list_each(pos, head) for (pos = (head)->next; pos != (head); pos = pos->next)
#define fmfi_list_each_safe(pos, tmp, head)                                                  \
    for (pos = (head)->next, tmp = pos->next; pos != (head); pos = tmp, tmp = pos->next)

/* ---- fabric, domain, memory regions ------------------------------------------ */
struct fmfi_fabric {
    struct fid_fabric fab;
    uint32_t api_version;
    int refs; /* domains and EQs open on it */
};

struct fmfi_mr {
    struct fid_mr mr;
    struct fmfi_domain *dom;
    struct fmfi_mr *next; /* the domain's key table chain */
    uint8_t *base;
    size_t len;
    uint64_t offset; /* what a remote address 0 means without FI_MR_VIRT_ADDR */
    uint64_t access;
};

struct fmfi_domain {
    struct fid_domain dom;
    struct fmfi_fabric *fab;
    pthread_mutex_t lock;
    bool locked;          /* the threading level asks the provider to serialize */
    fm_ctx *ctx;          /* the process's fastmsg context (refcounted, init.c) */
    uint32_t api_version; /* the version the consumer asked for */
    uint64_t mr_mode;
    enum fi_threading threading;
    struct fmfi_list eps; /* every endpoint: progress runs them all */
    size_t nmr;
    struct fmfi_mr *mr_table[256]; /* by key hash */
    uint64_t next_key;
    int refs;
};

/* Every call into a domain's objects runs under its lock, unless the
 * consumer promised to serialize them itself (FI_THREAD_DOMAIN and
 * below): then an uncontended lock would only cost time. */
static inline void fmfi_lock(struct fmfi_domain *d)
{
    if (d->locked)
        pthread_mutex_lock(&d->lock);
}
static inline void fmfi_unlock(struct fmfi_domain *d)
{
    if (d->locked)
        pthread_mutex_unlock(&d->lock);
}

/* The memory region a remote RMA names, checked for bounds and access:
 * where the bytes are, or NULL. */
uint8_t *fmfi_mr_target(struct fmfi_domain *dom, uint64_t key, uint64_t addr, size_t len,
                        uint64_t access, struct fmfi_mr **mr);

/* ---- address vectors ---------------------------------------------------------- */
struct fmfi_av {
    struct fid_av av;
    struct fmfi_domain *dom;
    enum fi_av_type type;
    size_t count, cap;
    fm_addr *addr;      /* by fi_addr: FM_ADDR_NONE where removed */
    uint8_t *local;     /* by fi_addr: the peer runs on this node */
    /* fastmsg address -> fi_addr, for FI_SOURCE (open addressing) */
    size_t rcap;
    struct { fm_addr key; fi_addr_t val; } *rev;
    int refs; /* endpoints bound */
};

/* Whether fi_addr's process runs on this node. */
static inline bool fmfi_av_local(const struct fmfi_av *av, fi_addr_t a)
{
    return a < av->count && av->local[a];
}
/* The fastmsg address of fi_addr, or FM_ADDR_NONE. */
fm_addr fmfi_av_fm(const struct fmfi_av *av, fi_addr_t a);
/* The fi_addr a sender has in this AV, or FI_ADDR_NOTAVAIL. */
fi_addr_t fmfi_av_fi(const struct fmfi_av *av, fm_addr a);

/* ---- completion queues and counters ------------------------------------------ */
/* What a completion says: the widest format; cq.c writes what the CQ's
 * format holds. */
struct fmfi_comp {
    void *op_context;
    uint64_t flags;
    size_t len;
    void *buf;
    uint64_t data;
    uint64_t tag;
    fi_addr_t src;
};

struct fmfi_cq_err {
    struct fmfi_list link;
    struct fi_cq_err_entry e;
};

struct fmfi_cq {
    struct fid_cq cq;
    struct fmfi_domain *dom;
    enum fi_cq_format format;
    size_t entry_size;
    struct fmfi_comp *ring; /* a power of two */
    size_t cap, head, tail; /* tail - head entries */
    struct fmfi_list errs;
    size_t nerrs;
    int signaled;
    int refs; /* endpoints bound */
    uint64_t idle_since; /* since when fi_cq_read finds nothing (0: it found some) */
    unsigned empty_reads; /* fi_cq_read calls in a row that found nothing */
};

/* Adds a completion; the ring grows instead of losing one (the consumer
 * sizes the CQ, and ops in flight are bounded by what it posted). */
int fmfi_cq_push(struct fmfi_cq *cq, const struct fmfi_comp *c);
/* Adds an error completion: err is a positive FI_E* value. */
int fmfi_cq_push_err(struct fmfi_cq *cq, const struct fmfi_comp *c, int err, size_t olen);

struct fmfi_cntr {
    struct fid_cntr cntr;
    struct fmfi_domain *dom;
    uint64_t value, errors;
    int refs;
};
static inline void fmfi_cntr_inc(struct fmfi_cntr *c)
{
    if (c)
        __atomic_add_fetch(&c->value, 1, __ATOMIC_RELEASE);
}
static inline void fmfi_cntr_err(struct fmfi_cntr *c)
{
    if (c)
        __atomic_add_fetch(&c->errors, 1, __ATOMIC_RELEASE);
}

/* ---- the wire ---------------------------------------------------------------- */
enum fmfi_opcode {
    FMFI_EAGER = 1,
    FMFI_CONT,      /* more of the sender's current message: off, payload */
    FMFI_RTS,       /* a large message: id = the sender's op */
    FMFI_CTS,       /* id = sender's op, off = the receiver's op */
    FMFI_DATA,      /* id = the receiver's op, off: where */
    FMFI_FIN,       /* id = sender's op: read by CMA, or refused (flags ERR) */
    FMFI_WRITE,     /* RMA: key, addr, len; payload follows (+CONT) */
    FMFI_READ_REQ,  /* RMA: key, addr, len, id = the initiator's op */
    FMFI_READ_RESP, /* id = initiator's op; payload (+DATA) */
    FMFI_ACK,       /* id = initiator's op (write done, or FLAG_ERR) */
};
enum {
    FMFI_F_TAGGED = 1, /* tag is meaningful */
    FMFI_F_DATA = 2,   /* data is remote CQ data */
    FMFI_F_ERR = 4,    /* FIN/ACK/READ_RESP: the target refused (bad key or bounds) */
    FMFI_F_ACKREQ = 8, /* EAGER/RTS: answer ACK on delivery (FI_DELIVERY_COMPLETE) */
};

struct fmfi_hdr {
    uint8_t op;
    uint8_t flags;
    uint16_t iovcnt; /* RTS: how many remote iovecs follow (CMA) */
    uint32_t rsv;
    uint64_t len;  /* EAGER/RTS/WRITE/READ: total length */
    uint64_t tag;  /* EAGER/RTS; RMA: key */
    uint64_t data; /* EAGER/RTS/WRITE: CQ data; RMA: addr */
    uint64_t id;   /* see the opcodes */
    uint64_t off;  /* CONT/DATA/CTS */
};

/* ---- operations -------------------------------------------------------------- */
enum fmfi_op_kind {
    OP_SEND,  /* a message (EAGER+CONT, or RTS then DATA) */
    OP_RECV,  /* a posted receive, or one message's share of a multi-receive */
    OP_WRITE, /* RMA write: WRITE+CONT, then the target's ACK */
    OP_READ,  /* RMA read: READ_REQ, then READ_RESP */
    OP_CTL,   /* the provider's own message (CTS, FIN, ACK, READ_RESP data) */
};

/* Where a send or an RMA op is. */
enum fmfi_op_state {
    ST_QUEUED,  /* in tx_queue: its header is not sent yet */
    ST_PARTIAL, /* in tx_queue: a prefix went, CONT messages carry the rest */
    ST_WAIT,    /* in tx_wait: sent; waits for CTS, FIN, ACK or READ_RESP */
    ST_STREAM,  /* in tx_queue: streaming DATA after a CTS */
};

/* A posted receive, a send in progress, an RMA op or a control message. */
struct fmfi_op {
    struct fmfi_list link;      /* the queue it is on */
    uint8_t kind, state;
    uint8_t tagged, multi;
    uint8_t silent;             /* an fi_inject's: no completion event (FI_INJECT alone, a
                                   flag of fi_sendmsg, asks only for the buffer back) */
    uint64_t flags;             /* FI_* op flags */
    void *context;
    fm_addr peer;               /* receives: FM_ADDR_NONE = any source */
    uint64_t tag, ignore, data;
    struct iovec iov[FMFI_IOV_MAX];
    size_t iovcnt;
    size_t len;                 /* bytes of the buffers (sends: of the message) */
    size_t done;                /* bytes sent, or received */
    size_t want;                /* sends after CTS: bytes the receiver takes */
    size_t msg_len;             /* receives: the matched message's length */
    uint64_t id;                /* the op's wire id */
    uint64_t remote_id;         /* the peer's op id (CTS -> DATA) */
    fm_addr src;                /* receives: the matched sender */
    struct fmfi_hdr hdr;        /* sends: what goes first; receives: what matched */
    uint8_t *inject;            /* a copy of the data the op owns, freed with it */
    size_t multi_used;          /* FI_MULTI_RECV: bytes handed out */
    uint32_t shares;            /* FI_MULTI_RECV: messages in it not complete yet */
    uint8_t spent;              /* FI_MULTI_RECV: no longer posted (used up or cancelled);
                                   released with its last share (on ep->spent_multi) */
    struct fmfi_op *parent;     /* a share: its multi-receive buffer */
    uint64_t release_flag;      /* FI_MULTI_RECV on the last completion of the buffer */
};

/* An unexpected message: its data (eager) or the sender's RTS. */
struct fmfi_unexp {
    struct fmfi_list link;
    fm_addr src;
    struct fmfi_hdr hdr;             /* EAGER or RTS as it came */
    size_t have;                     /* eager bytes arrived so far */
    void *claim_context;             /* FI_CLAIM: the context that holds it */
    bool orphaned;                   /* claimed, and its sender lost before it was whole */
    struct iovec riov[FMFI_IOV_MAX]; /* RTS: the sender's buffers (CMA) */
    uint8_t *buf;                    /* eager: the data, hdr.len bytes */
    uint8_t small[256];              /* buf for a small message */
};

/* Per sender: the message its next CONT continues. */
struct fmfi_inbound {
    fm_addr src;               /* FM_ADDR_NONE: a free slot */
    struct fmfi_op *op;        /* a matched receive... */
    struct fmfi_unexp *unexp;  /* ...or an unexpected message being filled... */
    uint8_t *rma_dst;          /* ...or where an RMA write goes (NULL: refused, dropped) */
    struct fmfi_hdr hdr;       /* the first part's header */
    size_t off;                /* next offset */
};

struct fmfi_ep {
    struct fid_ep ep;
    struct fmfi_domain *dom;
    struct fmfi_list dom_link;
    enum fi_ep_type type;
    fm_ep *fm;
    struct fmfi_av *av;
    struct fmfi_cq *tx_cq, *rx_cq;
    bool tx_sel, rx_sel;       /* FI_SELECTIVE_COMPLETION on the binding */
    struct fmfi_cntr *send_cntr, *recv_cntr, *read_cntr, *write_cntr;
    struct fmfi_cntr *rread_cntr, *rwrite_cntr;
    uint64_t tx_op_flags, rx_op_flags;
    uint64_t caps;
    size_t inject_size;            /* the tx_attr's: largest inject */
    bool enabled;
    size_t min_multi_recv;
    struct fmfi_list tx_queue;     /* sends and RMA not yet wholly handed to fastmsg */
    struct fmfi_list tx_wait;      /* handed over, waiting for CTS/FIN/ACK/READ_RESP */
    struct fmfi_list rx_wait;      /* matched receives waiting for DATA */
    struct fmfi_list ctl_queue;    /* control messages not yet sent */
    struct fmfi_list posted_msg, posted_tag;
    struct fmfi_list spent_multi; /* multi-receive buffers waiting for their last share */
    struct fmfi_list unexp_msg, unexp_tag;
    struct fmfi_list claimed;      /* FI_CLAIM'ed unexpected messages */
    struct fmfi_list free_ops, free_unexp;
    size_t ninb, inb_cap;          /* senders with a message in progress */
    struct fmfi_inbound *inb;
    uint64_t next_id;
    size_t tx_ops;                 /* sends and RMA ops not completed: at most FMFI_QUEUE_SIZE */
    size_t nunexp;                 /* unexpected messages held */
    uint64_t dropped;              /* malformed or foreign messages, dropped */
    fm_addr *lost;                 /* peers whose loss was handled, their last messages read */
    size_t nlost, lost_cap;
};

/* xfer.c: the data transfer tables (msg, tagged, rma) of an endpoint. */
void fmfi_ep_set_xfer_ops(struct fmfi_ep *ep);

/* proto.c: the protocol. All with dom->lock held. */
struct fmfi_op *fmfi_op_new(struct fmfi_ep *ep);
void fmfi_op_free(struct fmfi_ep *ep, struct fmfi_op *op);
/* Starts a send or RMA op: sends what fits now, queues the rest. */
void fmfi_tx_start(struct fmfi_ep *ep, struct fmfi_op *op);
/* Matches a new receive against unexpected messages, else posts it. */
void fmfi_rx_post(struct fmfi_ep *ep, struct fmfi_op *op);
/* FI_PEEK / FI_CLAIM / FI_DISCARD receives (their completion or error). */
void fmfi_rx_peek(struct fmfi_ep *ep, struct fmfi_op *op);
void fmfi_rx_claim(struct fmfi_ep *ep, struct fmfi_op *op);
int fmfi_ep_progress(struct fmfi_ep *ep);
/* Handles one message from src (its segments, as fm_recv gave them): a
 * malformed, truncated or unexpected one is dropped and counted in
 * ep->dropped. Exposed for the fuzzer. */
void fmfi_rx_message(struct fmfi_ep *ep, fm_addr src, const struct iovec *seg, int nseg,
                     size_t len);
/* A control message to dst: a header, and data (READ_RESP) it streams. */
void fmfi_send_ctl(struct fmfi_ep *ep, fm_addr dst, const struct fmfi_hdr *h, uint8_t *data,
                   size_t len);
void fmfi_ack(struct fmfi_ep *ep, fm_addr dst, uint64_t id, bool refused);
/* Where src's CONT messages go next: a new slot (NULL: out of memory). */
struct fmfi_inbound *fmfi_inbound_add(struct fmfi_ep *ep, fm_addr src);
/* rma.c: the target's side of RMA, called by the dispatcher. */
void fmfi_rma_write_in(struct fmfi_ep *ep, fm_addr src, const struct fmfi_hdr *h,
                       const struct iovec *seg, int nseg, size_t plen);
void fmfi_rma_written(struct fmfi_ep *ep, fm_addr src, const struct fmfi_hdr *h, bool ok);
void fmfi_rma_read_in(struct fmfi_ep *ep, fm_addr src, const struct fmfi_hdr *h);
/* Cancels a posted receive with this context: 0, or -FI_ENOENT. */
int fmfi_rx_cancel(struct fmfi_ep *ep, void *context);
/* Fails every op and drops every message in flight (closing). */
void fmfi_ep_drain(struct fmfi_ep *ep);

/* ---- entry points between files --------------------------------------------- */
int fmfi_getinfo(uint32_t version, const char *node, const char *service, uint64_t flags,
                 const struct fi_info *hints, struct fi_info **info);
int fmfi_fabric_open(struct fi_fabric_attr *attr, struct fid_fabric **fabric, void *context);
int fmfi_domain_open(struct fid_fabric *fabric, struct fi_info *info, struct fid_domain **dom,
                     void *context);
int fmfi_eq_open(struct fid_fabric *fabric, struct fi_eq_attr *attr, struct fid_eq **eq,
                 void *context);
int fmfi_av_open(struct fid_domain *dom, struct fi_av_attr *attr, struct fid_av **av,
                 void *context);
int fmfi_cq_open(struct fid_domain *dom, struct fi_cq_attr *attr, struct fid_cq **cq,
                 void *context);
int fmfi_cntr_open(struct fid_domain *dom, struct fi_cntr_attr *attr, struct fid_cntr **cntr,
                   void *context);
int fmfi_ep_open(struct fid_domain *dom, struct fi_info *info, struct fid_ep **ep,
                 void *context);
int fmfi_mr_reg(struct fid *fid, const void *buf, size_t len, uint64_t access, uint64_t offset,
                uint64_t requested_key, uint64_t flags, struct fid_mr **mr, void *context);
int fmfi_mr_regv(struct fid *fid, const struct iovec *iov, size_t count, uint64_t access,
                 uint64_t offset, uint64_t requested_key, uint64_t flags, struct fid_mr **mr,
                 void *context);
int fmfi_mr_regattr(struct fid *fid, const struct fi_mr_attr *attr, uint64_t flags,
                    struct fid_mr **mr);

/* Runs every endpoint of the domain once: receives what arrived, sends
 * what waits. Called with dom->lock held. Returns events handled. */
int fmfi_progress(struct fmfi_domain *dom);
/* Blocks up to timeout_ms (-1: no limit) for something to happen on the
 * domain's endpoints: dom->lock is dropped while it sleeps. */
void fmfi_wait(struct fmfi_domain *dom, int timeout_ms);

/* The process's fastmsg context: made on first use, always a singleton (an
 * MPI process must not join fastmsg's own launcher protocol: its PMI
 * connection belongs to the MPI library), and released with the last domain. */
int fmfi_ctx_get(fm_ctx **ctx);
void fmfi_ctx_put(void);

/* ---- small shared helpers (util.c) ------------------------------------------- */
size_t fmfi_iov_len(const struct iovec *iov, size_t cnt);
/* Copies len bytes from src segments (skip bytes in) to dst iovecs at dst_off;
 * returns the bytes copied (less when dst is shorter). */
size_t fmfi_iov_copy(const struct iovec *dst, size_t dstcnt, size_t dst_off,
                     const struct iovec *src, size_t srccnt, size_t src_skip, size_t len);
int fmfi_fm_err(int fm_code); /* an FM_E* code as a negative FI_E* code */
/* CQs, counters and EQs wait inside the provider whatever they are asked
 * (NONE, UNSPEC, YIELD): an object the consumer would wait on itself
 * cannot be had. 0, -FI_ENOSYS or -FI_EINVAL, logged under subsys. */
int fmfi_wait_obj_ok(enum fi_wait_obj w, int subsys);
/* fi_cq_strerror and fi_eq_strerror: our prov_errno is an FI_E* value. */
const char *fmfi_strerror(int prov_errno, char *buf, size_t len);

/* Ops tables whose entries all fail with -FI_ENOSYS (stubs.c), for what an
 * object does not do. */
extern struct fi_ops_cm fmfi_no_cm_ops;
extern struct fi_ops_atomic fmfi_no_atomic_ops;
extern struct fi_ops_collective fmfi_no_collective_ops;
int fmfi_no_control(struct fid *fid, int command, void *arg);
int fmfi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops,
                     void *context);
int fmfi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags);

#define FMFI_WARN(subsys, ...) FI_WARN(&fmfi_prov, subsys, __VA_ARGS__)
#define FMFI_DBG(subsys, ...) FI_DBG(&fmfi_prov, subsys, __VA_ARGS__)

#endif
