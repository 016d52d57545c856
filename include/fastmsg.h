/*
 * fastmsg: user-level message passing for Linux clusters.
 *
 * The only public header of the core library. Every function returns 0 or a
 * non-negative count on success and a negative FM_E* code on failure; output
 * arguments are written only on success. See docs/API.md for a guide.
 */
#ifndef FASTMSG_H
#define FASTMSG_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FM_VERSION_MAJOR 0
#define FM_VERSION_MINOR 1
#define FM_VERSION_PATCH 0
#define FM_VERSION_STRING "0.1.0"

#if defined(__GNUC__)
#define FM_API __attribute__((visibility("default")))
#define FM_NORETURN __attribute__((noreturn))
#else
#define FM_API
#define FM_NORETURN
#endif

/* Most segments fm_recv fills for one message. */
#define FM_SEGS_MAX 3

/* Error codes: negative, and equal to -errno where an errno means the same. */
#define FM_EAGAIN    (-EAGAIN)       /* nothing can go or come now; try again */
#define FM_EINVAL    (-EINVAL)       /* an argument is invalid */
#define FM_EMSGSIZE  (-EMSGSIZE)     /* a length is larger than the API allows */
#define FM_ENOMEM    (-ENOMEM)       /* out of (shared) memory */
#define FM_EPEERLOST (-ECONNRESET)   /* the peer process died or stopped answering */
#define FM_ETIMEDOUT (-ETIMEDOUT)    /* fm_wait: the timeout passed */
#define FM_EBUSY     (-EBUSY)        /* the channel is already open in this process */
#define FM_ELIMIT    (-EMFILE)       /* too many endpoints open (FM_EP_MAX) */
#define FM_EUNREACH  (-EHOSTUNREACH) /* no transport reaches that rank */
#define FM_EBOOT     (-EPROTO)       /* the bootstrap (launcher protocol) failed */
#define FM_ESYS      (-EIO)          /* a system call failed unexpectedly */

typedef struct fm_ctx fm_ctx; /* one per process: bootstrap, links, progress */
typedef struct fm_ep fm_ep;   /* an endpoint = a channel = a port with its own buffers */
typedef uint64_t fm_addr;     /* opaque address of an endpoint */

#define FM_ADDR_NONE ((fm_addr)0) /* never the address of an endpoint */

/* Bootstraps from the environment (fmrun, mpiexec.hydra); a process started
 * without a launcher is a singleton of size 1. Call once per process. */
FM_API int fm_init(fm_ctx **ctx);

/* Closes every endpoint and leaves the job. Messages already delivered to a
 * peer stay readable there; sends towards this process then fail with
 * FM_EPEERLOST. Not collective. */
FM_API int fm_finalize(fm_ctx *ctx);

/* Ends the whole job, like MPI_Abort: asks the launcher to end every rank,
 * with `status` as the job's exit status where the launcher takes one
 * (fmrun, mpiexec.hydra, PMIx), then exits this process with `status`
 * without running atexit handlers. Does not return. Without a launcher
 * (a singleton) only this process ends. */
FM_API FM_NORETURN void fm_abort(fm_ctx *ctx, int status);

FM_API int fm_rank(const fm_ctx *ctx);
FM_API int fm_size(const fm_ctx *ctx);

/* Opens the endpoint of this process on `channel`. Messages sent to
 * (this rank, channel) are received only here. FM_EBUSY if already open,
 * FM_ELIMIT when FM_EP_MAX endpoints are open. */
FM_API int fm_ep_open(fm_ctx *ctx, uint32_t channel, fm_ep **ep);

/* Releases the endpoint's held messages and its receive memory. Peers must
 * have stopped sending to it: what arrives later is discarded. */
FM_API int fm_ep_close(fm_ep *ep);

FM_API fm_addr fm_ep_addr(const fm_ep *ep);
FM_API fm_addr fm_addr_of(const fm_ctx *ctx, int rank, uint32_t channel);
/* The rank of an address, or -1 if it is not an endpoint of this job. */
FM_API int fm_addr_rank(const fm_ctx *ctx, fm_addr addr);

/*
 * Peers by name: reaching an endpoint of a process that no common launcher
 * started (docs/API.md, "Peers by name"). A name is at most FM_NAME_MAX
 * bytes, portable between processes and hosts; it says how to reach the
 * endpoint (its node, shared segment, network rails), and the process's
 * incarnation, so that a restarted process is a new peer. Sessions with a
 * process outside this job are authenticated by the domain key: FM_KEY,
 * else $HOME/.fastmsg/key, made with mode 0600 on first use.
 */
#define FM_NAME_MAX 64

/* Writes the name of ep into name; *len: on entry the buffer's size, on
 * return the name's length (<= FM_NAME_MAX). FM_EMSGSIZE if the buffer is
 * too small; FM_EINVAL or FM_ESYS if no domain key can be had. */
FM_API int fm_ep_name(const fm_ep *ep, void *name, size_t *len);

/* The address of the endpoint a name names: the same name always gives the
 * same address, and every endpoint of one process the same peer. A name of
 * a rank of this job gives fm_addr_of(rank, channel). The first send
 * connects. FM_EINVAL for bytes that are not a name (truncated, corrupt,
 * another version). */
FM_API int fm_addr_insert(fm_ctx *ctx, const void *name, size_t len, fm_addr *addr);

/* Forgets an inserted address: sends to it fail with FM_EINVAL until its
 * name is inserted again. Messages from it still arrive. FM_EINVAL for a
 * rank's address. */
FM_API int fm_addr_remove(fm_ctx *ctx, fm_addr addr);

/* The name of an address: this process's endpoints, the ranks of this job
 * (each publishes its name at fm_init), and peers met by name (inserted, or
 * senders that were never inserted). *len as fm_ep_name. */
FM_API int fm_addr_name(const fm_ctx *ctx, fm_addr addr, void *name, size_t *len);

/*
 * Names (docs/names.md): service addresses {type, instance}, as TIPC has
 * them, between any processes that share the domain key. An endpoint
 * publishes a range [lower, upper] of a type; others look the name up, send
 * to it, subscribe to its coming and going, or multicast to every publisher
 * of a range. A per-node agent (fmnamed, started on first use, gone when
 * its last user is) keeps the node's replica of the table, which lookups
 * read from shared memory; agents on other hosts find each other and
 * replicate the cluster-scope part.
 */
#define FM_ENONAME (-ENOENT) /* no publication matches */

enum { FM_SCOPE_NODE = 1, FM_SCOPE_CLUSTER = 2 };
#define FM_NAME_TYPE_USER 64 /* types below this are reserved */

/* Publishes [lower, upper] of `type` on ep, seen on this node (NODE) or by
 * every host of the domain (CLUSTER). It lasts until withdrawn, the
 * endpoint is closed or the process ends, however it ends. FM_EBUSY if ep
 * already publishes exactly this; FM_EINVAL for a reserved type, lower >
 * upper or a bad scope; FM_ENOMEM when the node's table is full
 * (FM_NAMES_MAX); FM_ESYS if no agent can be started. */
FM_API int fm_name_publish(fm_ep *ep, uint32_t type, uint32_t lower, uint32_t upper, int scope);
/* Withdraws exactly what fm_name_publish published; FM_ENONAME if it did not. */
FM_API int fm_name_withdraw(fm_ep *ep, uint32_t type, uint32_t lower, uint32_t upper, int scope);

#define FM_LOOKUP_LOCAL 1u   /* publishers on this node only */
#define FM_LOOKUP_CLOSEST 2u /* this node's publishers if there are any */
/* Anycast: the address of one publisher of `instance`, round robin (per
 * process) over all whose range holds it. Reads the node's replica: no
 * message, no system call once the process knows the publisher.
 * FM_ENONAME if none. */
FM_API int fm_name_lookup(fm_ctx *ctx, uint32_t type, uint32_t instance, unsigned flags,
                          fm_addr *addr);

struct fm_name_entry {
    fm_addr addr;         /* the publishing endpoint */
    uint32_t lower, upper; /* its range */
    uint8_t scope;        /* FM_SCOPE_* */
    uint8_t local;        /* published on this node */
    uint16_t reserved;
};
/* Every publication of `type` overlapping [lower, upper]: writes up to max
 * of them and returns how many there are (FM_ENONAME never: 0 is an answer). */
FM_API ssize_t fm_name_lookup_all(fm_ctx *ctx, uint32_t type, uint32_t lower, uint32_t upper,
                                  struct fm_name_entry *out, size_t max);

/* Subscribes ep to the publications of `type` overlapping [lower, upper]:
 * an FM_NAME_PUBLISHED event for each that exists now (unless
 * FM_SUB_NO_STATUS), then one per publication and withdrawal. Events are
 * messages on ep from FM_ADDR_NAMES, read with fm_name_event. FM_EBUSY if
 * ep already has a subscription with this handle. */
#define FM_SUB_NO_STATUS 4u
FM_API int fm_name_subscribe(fm_ep *ep, uint32_t type, uint32_t lower, uint32_t upper,
                             unsigned flags, uint64_t handle);
/* Ends the subscription; events already sent may still arrive. FM_ENONAME
 * if there is none with that handle. */
FM_API int fm_name_unsubscribe(fm_ep *ep, uint64_t handle);

#define FM_ADDR_NAMES ((fm_addr)UINT64_MAX) /* the source of event messages */
enum {
    FM_NAME_PUBLISHED = 1,
    FM_NAME_WITHDRAWN = 2,
    FM_NAME_RESYNC = 3 /* events were lost (the endpoint did not read): forget this
                          subscription's state, the current state follows */
};
#define FM_NAME_LOST 1u /* flags: withdrawn because the publisher or its host died */
struct fm_name_event {
    uint32_t type, lower, upper; /* the publication's range */
    uint16_t event;              /* FM_NAME_* */
    uint8_t flags, scope;
    fm_addr publisher; /* send here */
    uint64_t handle;   /* the subscription's */
};
/* Reads the event in a message received from FM_ADDR_NAMES (the segments
 * fm_recv filled, and its length). FM_EINVAL if it is not an event. */
FM_API int fm_name_event(fm_ctx *ctx, const struct iovec *seg, int nseg, size_t len,
                         struct fm_name_event *ev);

/* Multicast: sends one message to every endpoint with a publication of
 * `type` overlapping [lower, upper], each receiving it once, in order with
 * this endpoint's other multicasts. Waits for room at each destination
 * (up to FM_NAMES_MCAST_MS) and returns the number of destinations that
 * took it; a destination lost meanwhile is skipped. FM_ENONAME if there is
 * none, FM_EMSGSIZE above the smallest ring's room, FM_ETIMEDOUT if some
 * did not take it in time (the others did). */
FM_API ssize_t fm_name_mcast(fm_ep *ep, uint32_t type, uint32_t lower, uint32_t upper,
                             const struct iovec *iov, int iovcnt);

/* Sends ONE message made of the gathered iovec, like writev. Never blocks and
 * never buffers beyond the rings it owns: returns the number of bytes taken
 * (the message may be a prefix of the data) or FM_EAGAIN. A request with data
 * takes at least one byte or returns FM_EAGAIN; an empty message goes only when
 * the total length is 0. */
FM_API ssize_t fm_send(fm_ep *ep, fm_addr dst, const struct iovec *iov, int iovcnt);

/* Grants up to `len` bytes of send memory in *buf (at least one byte unless
 * len is 0) and returns the granted length, or FM_EAGAIN. Build the message
 * there, then fm_send_commit() it: no copy is made. A new prepare or send
 * on the endpoint abandons an uncommitted grant. */
FM_API ssize_t fm_send_prepare(fm_ep *ep, fm_addr dst, size_t len, void **buf);
/* Sends the first `len` bytes (len <= granted) of the last grant as one
 * message: 0, or FM_EPEERLOST if the peer was lost since the grant (the
 * message is dropped). */
FM_API int fm_send_commit(fm_ep *ep, size_t len);

/* Receives one message without copying it: fills up to FM_SEGS_MAX segments
 * that point into the endpoint's own receive memory and returns the length
 * (0 is a valid empty message). FM_EAGAIN when nothing is there. FM_EPEERLOST
 * once per lost peer, with *src set to it, after its last message. The
 * segments stay valid until fm_recv_done releases the message. */
FM_API ssize_t fm_recv(fm_ep *ep, struct iovec seg[FM_SEGS_MAX], int *nseg, fm_addr *src);

/* Releases the oldest message still held by fm_recv. FM_EINVAL if none. */
FM_API int fm_recv_done(fm_ep *ep);

/* Sleeps until a message may be received, send space may have freed, or a
 * peer was lost: returns 0 then, FM_ETIMEDOUT after timeout_ms (-1: never).
 * Spins briefly first, then blocks. */
FM_API int fm_wait(fm_ep *ep, int timeout_ms);

/* Advances transports that need the CPU (network links) and checks peers'
 * liveness. Returns the number of events handled. */
FM_API int fm_progress(fm_ctx *ctx);

/* A short English name for any value returned by a fastmsg call. */
FM_API const char *fm_strerror(int code);

#ifdef __cplusplus
}
#endif
#endif /* FASTMSG_H */
