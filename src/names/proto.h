/*
 * What a process and its node agent (fmnamed) say to each other over the
 * agent's unix socket, and the event messages the agent sends subscribers
 * over fastmsg. Requests and replies are fixed-size records on a
 * SOCK_SEQPACKET socket between processes of one user on one host; events
 * cross no host either, but every field is still checked on receipt.
 */
#ifndef FM_NAMES_PROTO_H
#define FM_NAMES_PROTO_H


#include "fastmsg.h"

#include <stddef.h>
#include <stdint.h>

#define NA_MAGIC 0x414e4d46u /* "FMNA" */
#define NA_EVENT_MAGIC 0x454e4d46u /* "FMNE" */
#define NA_VERSION 1
/* The channels of the agent's endpoints: it receives agent traffic on the
 * first and sends everything from the second. */
#define NA_CH_AGENT 0xF4A3E001u
#define NA_CH_OUT 0xF4A3E002u

enum na_op {
    NA_HELLO = 1,   /* reply: the replica's memfd (SCM_RIGHTS) and the agent's name */
    NA_PUBLISH,     /* name, type, lower, upper, scope */
    NA_WITHDRAW,    /* name, type, lower, upper, scope */
    NA_SUBSCRIBE,   /* name, type, lower, upper, flags, handle */
    NA_UNSUBSCRIBE, /* name, handle */
    NA_EP_CLOSED,   /* name: withdraws and unsubscribes everything of that endpoint */
};

struct na_req {
    uint32_t magic;
    uint16_t version, op;
    uint32_t type, lower, upper;
    uint32_t scope, flags;
    uint32_t namelen;
    uint64_t handle;
    uint8_t name[FM_NAME_MAX]; /* the requesting endpoint's fastmsg name */
};

struct na_rep {
    uint32_t magic;
    int32_t rc;     /* 0 or an FM_E* code */
    uint32_t node;  /* HELLO: the agent's node id */
    uint32_t cap;   /* HELLO: entries per area of the replica */
    uint32_t namelen;
    uint8_t name[FM_NAME_MAX]; /* HELLO: the agent's endpoint name */
};

/* 0 if r (len bytes) is a well-formed request, else FM_EINVAL. */
int na_req_check(const struct na_req *r, size_t len);

/* An event on the wire: fixed part, then the publisher's name. */
#define NA_EVENT_FIXED 36
#define NA_EVENT_MAX (NA_EVENT_FIXED + FM_NAME_MAX)

/* Writes an event into buf (NA_EVENT_MAX bytes); returns its length. */
size_t na_event_encode(void *buf, uint32_t type, uint32_t lower, uint32_t upper, int event,
                       int flags, int scope, uint64_t handle, const void *name,
                       size_t namelen);

/* Parses an event: 0 and the fields (name points into buf), or FM_EINVAL. */
int na_event_decode(const void *buf, size_t len, struct fm_name_event *ev, const uint8_t **name,
                    size_t *namelen);

#endif

/* One record with a descriptor (SCM_RIGHTS) on the agent's socket: 0 or
 * -1. The receiver's *fd is -1 unless a descriptor came (close-on-exec). */
int na_send_with_fd(int sock, const void *msg, size_t len, int fd);
int na_recv_with_fd(int sock, void *msg, size_t len, int *fd);

/* The domain's tag (a keyed hash, so that the key stays secret) names the
 * agent's abstract unix socket "\0fastmsg-names/<uid>/<tag>" (per network
 * namespace, like a host) and sets its default discovery port. */
uint64_t na_domain_tag(const uint8_t key[16]);
size_t na_socket_name(char *buf, size_t len, unsigned uid, uint64_t tag);
