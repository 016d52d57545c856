/* What processes and their agent say to each other (proto.h): request
 * checks, the event format (fuzzed by tests/fuzz/fuzz_names_proto.c), the
 * socket's name and its descriptor passing. */
#include "names/proto.h"

#include "core/siphash.h"

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

int na_req_check(const struct na_req *r, size_t len)
{
    if (len != sizeof(*r) || r->magic != NA_MAGIC || r->version != NA_VERSION ||
        r->op < NA_HELLO || r->op > NA_EP_CLOSED || r->namelen > FM_NAME_MAX)
        return FM_EINVAL;
    if ((r->op == NA_PUBLISH || r->op == NA_WITHDRAW || r->op == NA_SUBSCRIBE) &&
        r->lower > r->upper)
        return FM_EINVAL;
    if ((r->op == NA_PUBLISH || r->op == NA_WITHDRAW) &&
        r->scope != FM_SCOPE_NODE && r->scope != FM_SCOPE_CLUSTER)
        return FM_EINVAL;
    if (r->op != NA_HELLO && r->namelen == 0)
        return FM_EINVAL;
    return 0;
}

static void put32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t na_event_encode(void *buf, uint32_t type, uint32_t lower, uint32_t upper, int event,
                       int flags, int scope, uint64_t handle, const void *name, size_t namelen)
{
    unsigned char *p = buf;
    put32(p, NA_EVENT_MAGIC);
    put32(p + 4, type);
    put32(p + 8, lower);
    put32(p + 12, upper);
    p[16] = (unsigned char)event;
    p[17] = (unsigned char)flags;
    p[18] = (unsigned char)scope;
    p[19] = (unsigned char)namelen;
    put32(p + 20, (uint32_t)handle);
    put32(p + 24, (uint32_t)(handle >> 32));
    memset(p + 28, 0, 8);
    if (namelen) /* a RESYNC names nobody */
        memcpy(p + NA_EVENT_FIXED, name, namelen);
    return NA_EVENT_FIXED + namelen;
}

int na_event_decode(const void *buf, size_t len, struct fm_name_event *ev, const uint8_t **name,
                    size_t *namelen)
{
    const unsigned char *p = buf;
    static const unsigned char zero[8];
    if (len < NA_EVENT_FIXED || get32(p) != NA_EVENT_MAGIC || memcmp(p + 28, zero, 8))
        return FM_EINVAL;
    size_t n = p[19];
    int event = p[16];
    if (len != NA_EVENT_FIXED + n || n > FM_NAME_MAX || event < FM_NAME_PUBLISHED ||
        event > FM_NAME_RESYNC || (p[17] & ~FM_NAME_LOST) || get32(p + 8) > get32(p + 12))
        return FM_EINVAL;
    if (event != FM_NAME_RESYNC && (n == 0 || (p[18] != FM_SCOPE_NODE && p[18] != FM_SCOPE_CLUSTER)))
        return FM_EINVAL;
    memset(ev, 0, sizeof(*ev));
    ev->type = get32(p + 4);
    ev->lower = get32(p + 8);
    ev->upper = get32(p + 12);
    ev->event = (uint16_t)event;
    ev->flags = p[17];
    ev->scope = p[18];
    ev->handle = get32(p + 20) | (uint64_t)get32(p + 24) << 32;
    *name = p + NA_EVENT_FIXED;
    *namelen = n;
    return 0;
}

/* Room for one descriptor, aligned as a control message header. */
union fd_cmsg {
    char buf[CMSG_SPACE(sizeof(int))];
    struct cmsghdr align;
};

int na_send_with_fd(int sock, const void *msg, size_t len, int fd)
{
    struct iovec iov = {(void *)msg, len};
    union fd_cmsg u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                        .msg_controllen = sizeof(u.buf)};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET, cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    return sendmsg(sock, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

int na_recv_with_fd(int sock, void *msg, size_t len, int *fd)
{
    struct iovec iov = {msg, len};
    union fd_cmsg u;
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
                        .msg_controllen = sizeof(u.buf)};
    *fd = -1;
    if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != (ssize_t)len)
        return -1;
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
        memcpy(fd, CMSG_DATA(cm), sizeof(int));
    return *fd >= 0 ? 0 : -1;
}

uint64_t na_domain_tag(const uint8_t key[16])
{
    static const char what[] = "fastmsg names agent";
    return fm_siphash(key, what, sizeof(what) - 1);
}

size_t na_socket_name(char *buf, size_t len, unsigned uid, uint64_t tag)
{
    /* Abstract: the first byte is NUL, and the name is not NUL-terminated. */
    int n = snprintf(buf + 1, len - 1, "fastmsg-names/%u/%016llx", uid, (unsigned long long)tag);
    buf[0] = '\0';
    return 1 + (size_t)n;
}
