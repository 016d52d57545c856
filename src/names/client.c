/*
 * Names in the process (include/fastmsg.h, docs/names.md): the connection
 * to the node agent, which is started here when there is none; lookups in
 * the replica the agent shares; the requests that change the table; events
 * and multicast.
 *
 * The connection is made on first use and kept for the life of the
 * context. The process remembers what it published and subscribed, so
 * that if the agent dies, the next request starts a new one and restores
 * all of it.
 */
#include "core/ctx.h"

#include "core/log.h"
#include "core/util.h"
#include "names/proto.h"
#include "names/table.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_WAIT_MS 5000 /* for a new agent to answer */
#define ANYCAST_MAX 32     /* publishers one round robin spreads over */
#define ADDR_CACHE 256     /* names already turned into addresses */
#define MCAST_MAX (64u << 10)

extern char **environ;

struct cached { /* one publisher's address */
    uint8_t namelen, name[FM_NAME_MAX];
    fm_addr addr;
};

struct cached_pub { /* a publication's address: (node, id) names it for good */
    uint32_t node;
    uint64_t id;
    fm_addr addr;
};

struct fm_names {
    pthread_mutex_t lock; /* the connection and the lists below */
    int fd;
    fm_ctx *ctx;
    /* A thread that sleeps on the connection and, if the agent dies,
     * starts another and restores this process's names at once (a server
     * idle in fm_wait makes no call that would notice). */
    pthread_t watcher;
    int watching;
    int stop[2]; /* a pipe: written to end the watcher */
    const struct nt_shm *shm; /* (atomic) the replica, read-only */
    uint32_t node;
    struct na_req *held; /* publications and subscriptions to restore */
    size_t nheld, capheld;
    uint32_t rr[256]; /* round-robin cursors, by (type, instance) hash */
    pthread_mutex_t cache_lock;
    struct cached cache[ADDR_CACHE];
    struct cached_pub pub_cache[ADDR_CACHE];
    /* The destinations of the last multicast, valid while the replica has
     * not changed: a stream of multicasts to one range looks them up once. */
    pthread_mutex_t mcast_lock;
    struct {
        uint32_t type, lower, upper;
        uint64_t commits;
        const struct nt_shm *shm;
        fm_addr *dst;
        size_t n;
    } group;
};

/* ---- the agent ---- */

/* fmnamed: FM_NAMED, else beside this library or program (the build tree's
 * tools/, an install's libexec/fastmsg/), else where it was installed. */
static int agent_path(char *path, size_t len)
{
    const char *env = getenv("FM_NAMED");
    if (env && *env) {
        snprintf(path, len, "%s", env);
        return access(path, X_OK);
    }
    Dl_info info;
    if (dladdr((void *)agent_path, &info) && info.dli_fname) {
        char self[PATH_MAX];
        snprintf(self, sizeof(self), "%s", info.dli_fname);
        if (!strchr(self, '/') && readlink("/proc/self/exe", self, sizeof(self) - 1) < 0)
            self[0] = '\0';
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = '\0';
            static const char *const rel[] = {"/../tools/fmnamed", "/../libexec/fastmsg/fmnamed",
                                              "/fmnamed"};
            for (size_t i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
                snprintf(path, len, "%s%s", self, rel[i]);
                if (access(path, X_OK) == 0)
                    return 0;
            }
        }
    }
    snprintf(path, len, "%s", FM_NAMED_INSTALLED);
    return access(path, X_OK);
}

static int agent_spawn(void)
{
    char path[PATH_MAX];
    if (agent_path(path, sizeof(path))) {
        fm_error("names", "cannot find the name agent fmnamed (set FM_NAMED to its path)");
        return FM_ESYS;
    }
    char *argv[] = {path, NULL};
    pid_t pid;
    int rc = posix_spawn(&pid, path, NULL, NULL, argv, environ);
    if (rc) {
        fm_error("names", "cannot start %s: %s", path, strerror(rc));
        return FM_ESYS;
    }
    /* It forks its daemon and exits at once. */
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    return 0;
}

static int agent_dial(fm_ctx *ctx)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = na_socket_name(sa.sun_path, sizeof(sa.sun_path), (unsigned)geteuid(),
                              na_domain_tag(ctx->domain_key));
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n))) {
        close(fd);
        return -1;
    }
    struct timeval tv = {START_WAIT_MS / 1000, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return fd;
}

static int request(struct fm_names *nm, const struct na_req *r)
{
    struct na_rep rep;
    if (send(nm->fd, r, sizeof(*r), MSG_NOSIGNAL) != (ssize_t)sizeof(*r) ||
        recv(nm->fd, &rep, sizeof(rep), 0) != (ssize_t)sizeof(rep) || rep.magic != NA_MAGIC)
        return FM_EPEERLOST;
    return rep.rc;
}

static void req_init(struct na_req *r, int op)
{
    memset(r, 0, sizeof(*r));
    r->magic = NA_MAGIC, r->version = NA_VERSION, r->op = (uint16_t)op;
}

static int connect_once(fm_ctx *ctx, struct fm_names *nm);

/* Connects (starting the agent if there is none), maps the replica, and
 * restores what this process had published and subscribed. names->lock held. */
static int connect_agent(fm_ctx *ctx, struct fm_names *nm)
{
    int rc;
    /* An agent that is just leaving may take the connection and close it:
     * the next try starts a new one. */
    for (int tries = 0; tries < 3; tries++)
        if ((rc = connect_once(ctx, nm)) != FM_EPEERLOST)
            break;
    if (rc == FM_EPEERLOST)
        fm_error("names", "the name agent did not answer");
    return rc == FM_EPEERLOST ? FM_ESYS : rc;
}

static int connect_once(fm_ctx *ctx, struct fm_names *nm)
{
    int rc = fm_domain_ready(ctx);
    if (rc)
        return rc;
    if (nm->fd >= 0)
        close(nm->fd);
    nm->fd = -1;
    int fd = agent_dial(ctx);
    if (fd < 0) {
        if ((rc = agent_spawn()) != 0)
            return rc;
        for (int waited = 0; (fd = agent_dial(ctx)) < 0 && waited < START_WAIT_MS; waited += 2)
            nanosleep(&(struct timespec){0, 2000000}, NULL);
        if (fd < 0) {
            fm_error("names", "the name agent did not start (FM_NAMES_LOG=file shows why)");
            return FM_ESYS;
        }
    }
    nm->fd = fd;
    struct na_req hello;
    req_init(&hello, NA_HELLO);
    struct na_rep rep;
    int memfd;
    if (send(fd, &hello, sizeof(hello), MSG_NOSIGNAL) != (ssize_t)sizeof(hello) ||
        na_recv_with_fd(fd, &rep, sizeof(rep), &memfd) || rep.magic != NA_MAGIC || rep.rc ||
        rep.namelen > FM_NAME_MAX)
        return FM_EPEERLOST;
    size_t size = nt_shm_size(rep.cap);
    /* A replica mapped before stays mapped: a lookup may still be reading it. */
    void *shm = mmap(NULL, size, PROT_READ, MAP_SHARED, memfd, 0);
    close(memfd);
    fm_addr agent;
    if (shm == MAP_FAILED || (rc = fm_addr_insert(ctx, rep.name, rep.namelen, &agent)) != 0) {
        fm_error("names", "cannot map the name table");
        return shm == MAP_FAILED ? FM_ESYS : rc;
    }
    nm->node = rep.node;
    __atomic_store_n(&ctx->names_peer, fm_addr_rank_of(agent), __ATOMIC_RELAXED);
    __atomic_store_n(&nm->shm, (const struct nt_shm *)shm, __ATOMIC_RELEASE);
    for (size_t i = 0; i < nm->nheld; i++)
        request(nm, &nm->held[i]);
    return 0;
}

static struct fm_names *names_of(fm_ctx *ctx)
{
    struct fm_names *nm = __atomic_load_n(&ctx->names, __ATOMIC_ACQUIRE);
    if (nm)
        return nm;
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->names && (nm = calloc(1, sizeof(*nm))) != NULL) {
        pthread_mutex_init(&nm->lock, NULL);
        pthread_mutex_init(&nm->cache_lock, NULL);
        pthread_mutex_init(&nm->mcast_lock, NULL);
        nm->fd = -1;
        nm->ctx = ctx;
        nm->stop[0] = nm->stop[1] = -1;
        __atomic_store_n(&ctx->names, nm, __ATOMIC_RELEASE);
    }
    nm = ctx->names;
    pthread_mutex_unlock(&ctx->lock);
    return nm;
}

static void *watch_agent(void *arg)
{
    struct fm_names *nm = arg;
    for (;;) {
        pthread_mutex_lock(&nm->lock);
        int fd = nm->fd;
        pthread_mutex_unlock(&nm->lock);
        /* Only a hang-up: replies are read by the calls that wait for them. */
        struct pollfd p[2] = {{.fd = fd, .events = POLLRDHUP}, {.fd = nm->stop[0], .events = POLLIN}};
        if (poll(p, 2, fd < 0 ? 1000 : -1) < 0 && errno != EINTR)
            return NULL;
        if (p[1].revents)
            return NULL;
        if (fd >= 0 && !(p[0].revents & (POLLRDHUP | POLLHUP | POLLERR)))
            continue;
        pthread_mutex_lock(&nm->lock);
        if (nm->fd == fd) {
            fm_warn("names", "the name agent went away: starting another");
            if (connect_agent(nm->ctx, nm) != 0)
                nm->fd = -1; /* tried again in a second, or by the next call */
        }
        pthread_mutex_unlock(&nm->lock);
    }
}

/* The replica, connecting first if need be; NULL with *rc set if not. */
static const struct nt_shm *replica(fm_ctx *ctx, struct fm_names **nmp, int *rc)
{
    struct fm_names *nm = names_of(ctx);
    *nmp = nm;
    if (!nm) {
        *rc = FM_ENOMEM;
        return NULL;
    }
    const struct nt_shm *shm = __atomic_load_n(&nm->shm, __ATOMIC_ACQUIRE);
    if (shm)
        return shm;
    pthread_mutex_lock(&nm->lock);
    *rc = nm->shm ? 0 : connect_agent(ctx, nm);
    if (!*rc && !nm->watching && pipe2(nm->stop, O_CLOEXEC) == 0)
        nm->watching = pthread_create(&nm->watcher, NULL, watch_agent, nm) == 0;
    pthread_mutex_unlock(&nm->lock);
    return *rc ? NULL : nm->shm;
}

/* Sends a request, reconnecting once if the agent went away. */
static int call(fm_ctx *ctx, struct na_req *r)
{
    struct fm_names *nm;
    int rc;
    if (!replica(ctx, &nm, &rc))
        return rc;
    pthread_mutex_lock(&nm->lock);
    rc = request(nm, r);
    if (rc == FM_EPEERLOST) {
        fm_warn("names", "the name agent went away: starting another");
        rc = connect_agent(ctx, nm);
        if (!rc)
            rc = request(nm, r);
    }
    pthread_mutex_unlock(&nm->lock);
    return rc;
}

/* Remembers (or forgets) what the agent must be told again after a restart. */
static void hold(struct fm_names *nm, const struct na_req *r, int keep)
{
    pthread_mutex_lock(&nm->lock);
    for (size_t i = 0; i < nm->nheld; i++) {
        struct na_req *h = &nm->held[i];
        int same = h->namelen == r->namelen && !memcmp(h->name, r->name, r->namelen);
        if (r->op == NA_EP_CLOSED ? same
            : r->op == NA_UNSUBSCRIBE
                ? same && h->op == NA_SUBSCRIBE && h->handle == r->handle
                : same && h->op == NA_PUBLISH && h->type == r->type && h->lower == r->lower &&
                      h->upper == r->upper && h->scope == r->scope) {
            nm->held[i--] = nm->held[--nm->nheld];
        }
    }
    if (keep) {
        if (nm->nheld == nm->capheld) {
            size_t cap = nm->capheld ? nm->capheld * 2 : 8;
            struct na_req *v = realloc(nm->held, cap * sizeof(*v));
            if (!v) {
                pthread_mutex_unlock(&nm->lock);
                return;
            }
            nm->held = v, nm->capheld = cap;
        }
        nm->held[nm->nheld++] = *r;
    }
    pthread_mutex_unlock(&nm->lock);
}

static int ep_request(fm_ep *ep, int op, uint32_t type, uint32_t lower, uint32_t upper,
                      uint32_t scope, uint32_t flags, uint64_t handle)
{
    if (!ep)
        return FM_EINVAL;
    struct na_req r;
    req_init(&r, op);
    r.type = type, r.lower = lower, r.upper = upper, r.scope = scope, r.flags = flags;
    r.handle = handle;
    size_t len = sizeof(r.name);
    int rc = fm_ep_name(ep, r.name, &len);
    if (rc)
        return rc;
    r.namelen = (uint32_t)len;
    if (na_req_check(&r, sizeof(r)))
        return FM_EINVAL;
    rc = call(ep->ctx, &r);
    if (!rc && op != NA_WITHDRAW)
        hold(ep->ctx->names, &r, op == NA_PUBLISH || op == NA_SUBSCRIBE);
    if (!rc && op == NA_WITHDRAW) {
        r.op = NA_PUBLISH; /* forget the publication it undoes */
        hold(ep->ctx->names, &r, 0);
    }
    return rc;
}

/* ---- the API ---- */

int fm_name_publish(fm_ep *ep, uint32_t type, uint32_t lower, uint32_t upper, int scope)
{
    if (type < FM_NAME_TYPE_USER || lower > upper ||
        (scope != FM_SCOPE_NODE && scope != FM_SCOPE_CLUSTER))
        return FM_EINVAL;
    return ep_request(ep, NA_PUBLISH, type, lower, upper, (uint32_t)scope, 0, 0);
}

int fm_name_withdraw(fm_ep *ep, uint32_t type, uint32_t lower, uint32_t upper, int scope)
{
    if (lower > upper || (scope != FM_SCOPE_NODE && scope != FM_SCOPE_CLUSTER))
        return FM_EINVAL;
    return ep_request(ep, NA_WITHDRAW, type, lower, upper, (uint32_t)scope, 0, 0);
}

int fm_name_subscribe(fm_ep *ep, uint32_t type, uint32_t lower, uint32_t upper,
                      unsigned flags, uint64_t handle)
{
    if (lower > upper || (flags & ~FM_SUB_NO_STATUS))
        return FM_EINVAL;
    return ep_request(ep, NA_SUBSCRIBE, type, lower, upper, 0, flags, handle);
}

int fm_name_unsubscribe(fm_ep *ep, uint64_t handle)
{
    return ep_request(ep, NA_UNSUBSCRIBE, 0, 0, 0, 0, 0, handle);
}

/* The address of a publisher's endpoint, from the cache when it is there. */
static int addr_of(fm_ctx *ctx, struct fm_names *nm, const uint8_t *name, size_t len,
                   fm_addr *addr)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ name[i]) * 16777619u;
    struct cached *c = &nm->cache[h % ADDR_CACHE];
    pthread_mutex_lock(&nm->cache_lock);
    if (c->namelen == len && !memcmp(c->name, name, len)) {
        *addr = c->addr;
        pthread_mutex_unlock(&nm->cache_lock);
        return 0;
    }
    pthread_mutex_unlock(&nm->cache_lock);
    int rc = fm_addr_insert(ctx, name, len, addr);
    if (rc)
        return rc;
    pthread_mutex_lock(&nm->cache_lock);
    c->namelen = (uint8_t)len;
    memcpy(c->name, name, len);
    c->addr = *addr;
    pthread_mutex_unlock(&nm->cache_lock);
    return 0;
}

/* The address of a publication found in the replica: by its (node, id),
 * which is cheaper to compare than its name. */
static int addr_of_entry(fm_ctx *ctx, struct fm_names *nm, const struct nt_entry *e,
                         fm_addr *addr)
{
    uint64_t h = (e->id ^ (uint64_t)e->node << 32) * 0x9E3779B97F4A7C15ull;
    struct cached_pub *c = &nm->pub_cache[(h >> 40) % ADDR_CACHE];
    pthread_mutex_lock(&nm->cache_lock);
    if (c->addr != FM_ADDR_NONE && c->node == e->node && c->id == e->id) {
        *addr = c->addr;
        pthread_mutex_unlock(&nm->cache_lock);
        return 0;
    }
    pthread_mutex_unlock(&nm->cache_lock);
    int rc = addr_of(ctx, nm, e->name, e->namelen, addr);
    if (rc)
        return rc;
    pthread_mutex_lock(&nm->cache_lock);
    *c = (struct cached_pub){.node = e->node, .id = e->id, .addr = *addr};
    pthread_mutex_unlock(&nm->cache_lock);
    return 0;
}

int fm_name_lookup(fm_ctx *ctx, uint32_t type, uint32_t instance, unsigned flags, fm_addr *addr)
{
    if (!ctx || !addr || (flags & ~(FM_LOOKUP_LOCAL | FM_LOOKUP_CLOSEST)))
        return FM_EINVAL;
    struct fm_names *nm;
    int rc;
    const struct nt_shm *shm = replica(ctx, &nm, &rc);
    if (!shm)
        return rc;
    struct nt_entry found[ANYCAST_MAX];
    size_t n = nt_lookup(shm, type, instance, flags != 0, nm->node, found, ANYCAST_MAX);
    if (!n && (flags & FM_LOOKUP_CLOSEST))
        n = nt_lookup(shm, type, instance, 0, nm->node, found, ANYCAST_MAX);
    if (!n)
        return FM_ENONAME;
    uint32_t slot = (type * 2654435761u ^ instance) & 255;
    uint32_t turn = __atomic_fetch_add(&nm->rr[slot], 1, __ATOMIC_RELAXED);
    return addr_of_entry(ctx, nm, &found[turn % n], addr);
}

ssize_t fm_name_lookup_all(fm_ctx *ctx, uint32_t type, uint32_t lower, uint32_t upper,
                           struct fm_name_entry *out, size_t max)
{
    if (!ctx || lower > upper || (max && !out))
        return FM_EINVAL;
    struct fm_names *nm;
    int rc;
    const struct nt_shm *shm = replica(ctx, &nm, &rc);
    if (!shm)
        return rc;
    struct nt_entry *found = max ? malloc(max * sizeof(*found)) : NULL;
    if (max && !found)
        return FM_ENOMEM;
    size_t total = nt_lookup_range(shm, type, lower, upper, found, max);
    size_t n = total < max ? total : max;
    for (size_t i = 0; i < n; i++) {
        if ((rc = addr_of_entry(ctx, nm, &found[i], &out[i].addr)) != 0) {
            free(found);
            return rc;
        }
        out[i].lower = found[i].lower, out[i].upper = found[i].upper;
        out[i].scope = found[i].scope;
        out[i].local = found[i].node == nm->node;
        out[i].reserved = 0;
    }
    free(found);
    return (ssize_t)total;
}

int fm_name_event(fm_ctx *ctx, const struct iovec *seg, int nseg, size_t len,
                  struct fm_name_event *ev)
{
    if (!ctx || !ev || (nseg && !seg) || nseg < 0 || len > NA_EVENT_MAX)
        return FM_EINVAL;
    unsigned char buf[NA_EVENT_MAX];
    size_t off = 0;
    for (int i = 0; i < nseg && off < len; i++) {
        size_t take = seg[i].iov_len < len - off ? seg[i].iov_len : len - off;
        memcpy(buf + off, seg[i].iov_base, take);
        off += take;
    }
    const uint8_t *name;
    size_t namelen;
    if (off != len || na_event_decode(buf, len, ev, &name, &namelen))
        return FM_EINVAL;
    if (ev->event == FM_NAME_RESYNC) {
        ev->publisher = FM_ADDR_NONE;
        return 0;
    }
    struct fm_names *nm = names_of(ctx);
    if (!nm)
        return FM_ENOMEM;
    return addr_of(ctx, nm, name, namelen, &ev->publisher) ? FM_EINVAL : 0;
}

static int addr_cmp(const void *a, const void *b)
{
    fm_addr x = *(const fm_addr *)a, y = *(const fm_addr *)b;
    return x < y ? -1 : x > y;
}

/* The distinct publishers of [lower, upper] into nm->group (mcast_lock
 * held), unless the replica has not changed since the last time. */
static ssize_t group_of(fm_ctx *ctx, struct fm_names *nm, const struct nt_shm *shm,
                        uint32_t type, uint32_t lower, uint32_t upper)
{
    uint64_t commits = __atomic_load_n(&shm->commits, __ATOMIC_ACQUIRE);
    if (nm->group.dst && nm->group.shm == shm && nm->group.commits == commits &&
        nm->group.type == type && nm->group.lower == lower && nm->group.upper == upper)
        return (ssize_t)nm->group.n;
    struct fm_name_entry small[64], *all = small;
    ssize_t total = fm_name_lookup_all(ctx, type, lower, upper, small, 64);
    if (total > 64) {
        all = malloc((size_t)total * sizeof(*all));
        if (!all)
            return FM_ENOMEM;
        total = fm_name_lookup_all(ctx, type, lower, upper, all, (size_t)total);
    }
    fm_addr *dst = total > 0 ? malloc((size_t)total * sizeof(*dst)) : NULL;
    if (total > 0 && !dst)
        total = FM_ENOMEM;
    for (ssize_t i = 0; i < total; i++)
        dst[i] = all[i].addr;
    if (all != small)
        free(all);
    if (total <= 0) {
        free(dst);
        return total;
    }
    /* An endpoint publishing several overlapping ranges receives once. */
    qsort(dst, (size_t)total, sizeof(*dst), addr_cmp);
    size_t n = 0;
    for (ssize_t i = 0; i < total; i++)
        if (!n || dst[n - 1] != dst[i])
            dst[n++] = dst[i];
    free(nm->group.dst);
    nm->group.dst = dst, nm->group.n = n, nm->group.shm = shm, nm->group.commits = commits;
    nm->group.type = type, nm->group.lower = lower, nm->group.upper = upper;
    return (ssize_t)n;
}

/* The whole message to dst, waiting for room until *deadline (set at the
 * first wait): 1 if it went, 0 if the destination is gone, FM_ETIMEDOUT. */
static int send_whole(fm_ep *ep, fm_addr dst, const struct iovec *iov, int iovcnt, size_t len,
                      uint64_t *deadline)
{
    for (int tries = 0;; tries++) {
        void *buf;
        ssize_t n = fm_send_prepare(ep, dst, len, &buf);
        if (n >= 0 && (size_t)n >= len) {
            size_t off = 0;
            for (int i = 0; i < iovcnt; i++) {
                memcpy((char *)buf + off, iov[i].iov_base, iov[i].iov_len);
                off += iov[i].iov_len;
            }
            fm_send_commit(ep, len);
            return 1;
        }
        if (n < 0 && n != FM_EAGAIN)
            return 0; /* lost meanwhile: skipped */
        uint64_t now = fm_now_ns();
        if (!*deadline)
            *deadline = now + (uint64_t)ep->ctx->cfg.names_mcast_ms * 1000000u;
        else if (now > *deadline)
            return FM_ETIMEDOUT;
        if (tries < 16)
            fm_links_progress(ep->ctx, 1);
        else
            fm_wait(ep, 1);
    }
}

ssize_t fm_name_mcast(fm_ep *ep, uint32_t type, uint32_t lower, uint32_t upper,
                      const struct iovec *iov, int iovcnt)
{
    if (!ep || lower > upper || iovcnt < 0 || (iovcnt && !iov))
        return FM_EINVAL;
    size_t len = 0;
    for (int i = 0; i < iovcnt; i++)
        len += iov[i].iov_len;
    if (len > MCAST_MAX)
        return FM_EMSGSIZE;
    fm_ctx *ctx = ep->ctx;
    struct fm_names *nm;
    int rc;
    const struct nt_shm *shm = replica(ctx, &nm, &rc);
    if (!shm)
        return rc;
    pthread_mutex_lock(&nm->mcast_lock);
    ssize_t n = group_of(ctx, nm, shm, type, lower, upper);
    if (n <= 0) {
        pthread_mutex_unlock(&nm->mcast_lock);
        return n < 0 ? n : FM_ENONAME;
    }
    uint64_t deadline = 0;
    ssize_t delivered = 0;
    int late = 0;
    for (ssize_t k = 0; k < n && !late; k++) {
        int r = send_whole(ep, nm->group.dst[k], iov, iovcnt, len, &deadline);
        late = r == FM_ETIMEDOUT;
        delivered += r == 1;
    }
    pthread_mutex_unlock(&nm->mcast_lock);
    return late ? FM_ETIMEDOUT : delivered;
}

/* ---- the core's hooks ---- */

void fm_names_ep_closed(fm_ep *ep)
{
    struct fm_names *nm = __atomic_load_n(&ep->ctx->names, __ATOMIC_ACQUIRE);
    if (!nm || !__atomic_load_n(&nm->shm, __ATOMIC_ACQUIRE))
        return;
    struct na_req r;
    req_init(&r, NA_EP_CLOSED);
    size_t len = sizeof(r.name);
    if (fm_ep_name(ep, r.name, &len))
        return;
    r.namelen = (uint32_t)len;
    pthread_mutex_lock(&nm->lock);
    int any = 0;
    for (size_t i = 0; i < nm->nheld && !any; i++)
        any = nm->held[i].namelen == len && !memcmp(nm->held[i].name, r.name, len);
    pthread_mutex_unlock(&nm->lock);
    if (!any)
        return;
    hold(nm, &r, 0);
    pthread_mutex_lock(&nm->lock);
    request(nm, &r);
    pthread_mutex_unlock(&nm->lock);
}

void fm_names_free(fm_ctx *ctx)
{
    struct fm_names *nm = ctx->names;
    if (!nm)
        return;
    if (nm->watching) {
        if (write(nm->stop[1], "", 1) != 1)
            pthread_cancel(nm->watcher);
        pthread_join(nm->watcher, NULL);
    }
    if (nm->stop[0] >= 0)
        close(nm->stop[0]), close(nm->stop[1]);
    if (nm->fd >= 0)
        close(nm->fd);
    if (nm->shm)
        munmap((void *)nm->shm, nt_shm_size(nm->shm->cap));
    pthread_mutex_destroy(&nm->lock);
    pthread_mutex_destroy(&nm->cache_lock);
    pthread_mutex_destroy(&nm->mcast_lock);
    free(nm->group.dst);
    free(nm->held);
    free(nm);
    ctx->names = NULL;
}
