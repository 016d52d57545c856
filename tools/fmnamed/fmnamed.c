/*
 * fmnamed: the node agent of fastmsg's names (docs/names.md). One per user,
 * domain key and host (network namespace); the first process that needs
 * names starts it, and it leaves FM_NAMES_LINGER_MS after its last client.
 *
 * It keeps the node's replica of the name table in a memfd that clients map
 * read-only (src/names/table.h), answers the requests of its clients on an
 * abstract unix socket (publish, withdraw, subscribe), withdraws everything
 * of a client whose socket closes (it exited or was killed), sends
 * subscribers their events over fastmsg, finds the agents of other hosts
 * (a broadcast probe on every subnet, or FM_NAMES_SEEDS), and replicates
 * the cluster-scope publications with them (src/names/distr.h) over
 * fastmsg's reliable session under the domain key.
 *
 * Two threads: the main one waits in epoll for clients, discovery probes
 * and the timer; the network one waits in fm_wait for other agents. One
 * mutex covers all state: neither blocks while holding it.
 */
#include "core/core_api.h"
#include "core/key.h"
#include "core/log.h"
#include "core/name.h"
#include "core/siphash.h"
#include "core/util.h"
#include "fastmsg.h"
#include "names/distr.h"
#include "names/proto.h"
#include "names/table.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/timerfd.h>
#include <sys/un.h>
#include <unistd.h>

#define TICK_MS 20
#define SUB_QUEUE_MAX 1024     /* events held for a subscriber that does not read */
#define PEER_QUEUE_MAX (8u << 20) /* bytes held for an agent whose ring is full */
#define PROBE_MAGIC 0x504e4d46u /* "FMNP" */
#define REFIND_US (300 * 1000000ull) /* how long lost members are looked for */

struct lpub { /* a client's publication */
    uint64_t id;
    uint32_t type, lower, upper, scope;
    uint8_t namelen, name[FM_NAME_MAX];
};

struct client {
    int fd;
    int waits_hello; /* asked before the replica was loaded */
    struct lpub *pubs;
    size_t npubs, cap;
};

struct sub {
    struct client *owner;
    uint8_t namelen, name[FM_NAME_MAX];
    fm_addr addr;
    uint32_t type, lower, upper, flags;
    uint64_t handle;
    unsigned char (*q)[NA_EVENT_MAX]; /* queued events, each with its length in q_len */
    uint8_t *q_len;
    size_t qhead, qn;
    int resync;
};

struct outmsg {
    struct outmsg *next;
    size_t len;
    unsigned char data[];
};

struct peer { /* another agent */
    uint32_t node;
    fm_addr addr;
    struct outmsg *head, *tail;
    size_t queued;
};

static struct {
    pthread_mutex_t lock;
    fm_ctx *ctx;
    fm_ep *ep_in, *ep_out;
    uint8_t key[16];
    uint32_t node;
    struct nt_shm *shm;
    int memfd;
    uint32_t cap;
    struct nt_writer *table;
    struct nd *distr;
    uint8_t card[FM_NAME_MAX];
    size_t cardlen;
    struct client **clients;
    size_t nclients, capclients;
    struct sub **subs;
    size_t nsubs, capsubs;
    struct peer *peers;
    size_t npeers, cappeers;
    uint64_t next_id;
    int disc_fd;
    uint16_t disc_port;
    uint64_t next_probe, probes_sent, started;
    uint64_t foreign_probes, dropped_out;
    /* Clients are answered once the replica holds the domain's table: a
     * snapshot came from another agent, or none answered the first probes
     * within FM_NAMES_SETTLE_MS. */
    int ready;
    size_t members; /* agents in the domain at the last look, this one included */
    size_t members_peak;            /* the most since members were last given up */
    uint64_t lost_since, next_refind; /* probing again after losing members */
    int stop;
} A;

static uint64_t now_us(void) { return fm_now_ns() / 1000; }

/* ---- other agents: addresses and queued output ---- */

static struct peer *peer_of(uint32_t node, const void *card, size_t cardlen)
{
    for (size_t i = 0; i < A.npeers; i++)
        if (A.peers[i].node == node && node)
            return &A.peers[i];
    fm_addr addr;
    if (fm_addr_insert(A.ctx, card, cardlen, &addr))
        return NULL;
    if (!node) { /* a contact: known by its card only */
        for (size_t i = 0; i < A.npeers; i++)
            if (A.peers[i].addr == addr)
                return &A.peers[i];
    }
    if (A.npeers == A.cappeers) {
        size_t c = A.cappeers ? A.cappeers * 2 : 16;
        struct peer *p = realloc(A.peers, c * sizeof(*p));
        if (!p)
            return NULL;
        A.peers = p, A.cappeers = c;
    }
    struct peer *p = &A.peers[A.npeers++];
    memset(p, 0, sizeof(*p));
    p->node = node, p->addr = addr;
    return p;
}

/* All of a message or nothing: a prefix would not parse at the other end. */
static int send_whole(fm_addr to, const void *msg, size_t len)
{
    void *buf;
    ssize_t n = fm_send_prepare(A.ep_out, to, len, &buf);
    if (n < 0)
        return (int)n;
    if ((size_t)n < len)
        return FM_EAGAIN;
    memcpy(buf, msg, len);
    return fm_send_commit(A.ep_out, len);
}

static void peer_drain(struct peer *p)
{
    while (p->head) {
        struct outmsg *m = p->head;
        int rc = send_whole(p->addr, m->data, m->len);
        if (rc == FM_EAGAIN)
            return;
        p->head = m->next;
        if (!p->head)
            p->tail = NULL;
        p->queued -= m->len;
        free(m);
    }
}

static void distr_send(void *arg, uint32_t to, const void *card, size_t cardlen, const void *msg,
                       size_t len)
{
    (void)arg;
    struct peer *p = peer_of(to, card, cardlen);
    if (!p)
        return;
    if (!p->node)
        p->node = to;
    peer_drain(p);
    if (!p->head) {
        int rc = send_whole(p->addr, msg, len);
        if (rc == 0)
            return;
        if (rc != FM_EAGAIN) {
            if (rc == FM_EPEERLOST && to)
                nd_peer_lost(A.distr, to, now_us());
            return;
        }
    }
    if (p->queued + len > PEER_QUEUE_MAX) {
        A.dropped_out++; /* the protocol repairs it once the agent reads again */
        return;
    }
    struct outmsg *m = malloc(sizeof(*m) + len);
    if (!m)
        return;
    m->next = NULL, m->len = len;
    memcpy(m->data, msg, len);
    if (p->tail)
        p->tail->next = m;
    else
        p->head = m;
    p->tail = m;
    p->queued += len;
}

/* ---- events ---- */

static int sub_matches(const struct sub *s, const struct nt_entry *e)
{
    return s->type == e->type && e->lower <= s->upper && e->upper >= s->lower;
}

static int sub_try(struct sub *s, const void *ev, size_t len)
{
    int rc = send_whole(s->addr, ev, len);
    return rc;
}

static void sub_queue(struct sub *s, const void *ev, size_t len, int bounded)
{
    if (!s->resync && !s->qn && sub_try(s, ev, len) != FM_EAGAIN)
        return;
    if (s->resync && bounded)
        return; /* the current state will be sent in full */
    if (s->qn == SUB_QUEUE_MAX && bounded) {
        s->resync = 1; /* it stopped reading: drop its backlog, resend the state later */
        s->qn = 0;
        return;
    }
    if (s->qn == SUB_QUEUE_MAX || !s->q) {
        size_t cap = s->q ? s->qn * 2 : SUB_QUEUE_MAX;
        unsigned char(*q)[NA_EVENT_MAX] = malloc(cap * sizeof(*q));
        uint8_t *ql = malloc(cap);
        if (!q || !ql) {
            free(q), free(ql);
            return;
        }
        for (size_t i = 0; i < s->qn; i++) {
            size_t k = (s->qhead + i) % (s->q ? SUB_QUEUE_MAX : 1);
            memcpy(q[i], s->q[k], NA_EVENT_MAX);
            ql[i] = s->q_len[k];
        }
        free(s->q), free(s->q_len);
        s->q = q, s->q_len = ql, s->qhead = 0;
    }
    size_t at = (s->qhead + s->qn) % SUB_QUEUE_MAX;
    memcpy(s->q[at], ev, len);
    s->q_len[at] = (uint8_t)len;
    s->qn++;
}

static void event(struct sub *s, const struct nt_entry *e, int what, int flags, int bounded)
{
    unsigned char ev[NA_EVENT_MAX];
    size_t len = na_event_encode(ev, e->type, e->lower, e->upper, what, flags, e->scope,
                                 s->handle, e->name, e->namelen);
    sub_queue(s, ev, len, bounded);
}

struct status_arg {
    struct sub *s;
};
static void status_one(void *arg, const struct nt_entry *e)
{
    struct sub *s = ((struct status_arg *)arg)->s;
    if (sub_matches(s, e))
        event(s, e, FM_NAME_PUBLISHED, 0, 0);
}

static void sub_drop(size_t i)
{
    struct sub *s = A.subs[i];
    A.subs[i] = A.subs[--A.nsubs];
    free(s->q), free(s->q_len), free(s);
}

/* Sends what subscribers have queued; a subscriber that is gone is dropped. */
static void subs_drain(void)
{
    for (size_t i = 0; i < A.nsubs; i++) {
        struct sub *s = A.subs[i];
        int rc = 0;
        if (s->resync) {
            unsigned char ev[NA_EVENT_MAX];
            size_t len = na_event_encode(ev, s->type, s->lower, s->upper, FM_NAME_RESYNC, 0, 0,
                                         s->handle, NULL, 0);
            rc = sub_try(s, ev, len);
            if (rc == 0) {
                s->resync = 0;
                struct status_arg a = {s};
                nt_each(A.table, status_one, &a);
            }
        }
        while (!s->resync && s->qn && rc == 0) {
            rc = sub_try(s, s->q[s->qhead], s->q_len[s->qhead]);
            if (rc == 0)
                s->qhead = (s->qhead + 1) % SUB_QUEUE_MAX, s->qn--;
        }
        if (rc == FM_EPEERLOST) {
            sub_drop(i);
            i--;
        }
    }
}

static void table_changed(const struct nt_entry *e, int what, int lost)
{
    for (size_t i = 0; i < A.nsubs; i++)
        if (sub_matches(A.subs[i], e))
            event(A.subs[i], e, what, lost ? FM_NAME_LOST : 0, 1);
}

static void table_add(const struct nt_entry *e)
{
    if (nt_add(A.table, e) == 0)
        table_changed(e, FM_NAME_PUBLISHED, 0);
}

static void table_remove(uint32_t node, uint64_t id, int lost)
{
    struct nt_entry e;
    if (nt_remove(A.table, node, id, &e) == 0)
        table_changed(&e, FM_NAME_WITHDRAWN, lost);
}

/* ---- replication upcalls ---- */

static void entry_of_pub(struct nt_entry *e, uint32_t origin, const struct nd_pub *p)
{
    memset(e, 0, sizeof(*e));
    e->type = p->type, e->lower = p->lower, e->upper = p->upper;
    e->node = origin, e->scope = FM_SCOPE_CLUSTER, e->id = p->id;
    e->namelen = p->namelen;
    memcpy(e->name, p->name, p->namelen);
}

static void distr_added(void *arg, uint32_t origin, const struct nd_pub *p)
{
    (void)arg;
    struct nt_entry e;
    entry_of_pub(&e, origin, p);
    table_add(&e);
}

static void distr_removed(void *arg, uint32_t origin, const struct nd_pub *p, int lost)
{
    (void)arg;
    table_remove(origin, p->id, lost);
}

/* ---- clients ---- */

static int client_publish(struct client *c, const struct na_req *r)
{
    for (size_t i = 0; i < c->npubs; i++) {
        struct lpub *p = &c->pubs[i];
        if (p->namelen == r->namelen && !memcmp(p->name, r->name, r->namelen) &&
            p->type == r->type && p->lower == r->lower && p->upper == r->upper &&
            p->scope == r->scope)
            return FM_EBUSY;
    }
    if (nt_count(A.table) >= A.cap)
        return FM_ENOMEM;
    if (c->npubs == c->cap) {
        size_t cap = c->cap ? c->cap * 2 : 8;
        struct lpub *v = realloc(c->pubs, cap * sizeof(*v));
        if (!v)
            return FM_ENOMEM;
        c->pubs = v, c->cap = cap;
    }
    struct lpub *p = &c->pubs[c->npubs++];
    p->id = A.next_id++;
    p->type = r->type, p->lower = r->lower, p->upper = r->upper, p->scope = r->scope;
    p->namelen = (uint8_t)r->namelen;
    memcpy(p->name, r->name, r->namelen);
    struct nt_entry e = {.type = p->type, .lower = p->lower, .upper = p->upper,
                         .node = A.node, .scope = (uint8_t)p->scope, .id = p->id,
                         .namelen = p->namelen};
    memcpy(e.name, p->name, p->namelen);
    table_add(&e);
    if (p->scope == FM_SCOPE_CLUSTER) {
        struct nd_pub np = {.id = p->id, .type = p->type, .lower = p->lower, .upper = p->upper,
                            .namelen = p->namelen};
        memcpy(np.name, p->name, p->namelen);
        nd_publish(A.distr, &np);
    }
    return 0;
}

static void unpublish(struct client *c, size_t i, int lost)
{
    struct lpub p = c->pubs[i];
    c->pubs[i] = c->pubs[--c->npubs];
    table_remove(A.node, p.id, lost);
    if (p.scope == FM_SCOPE_CLUSTER)
        nd_withdraw(A.distr, p.id, lost);
}

static int client_withdraw(struct client *c, const struct na_req *r)
{
    for (size_t i = 0; i < c->npubs; i++) {
        struct lpub *p = &c->pubs[i];
        if (p->namelen == r->namelen && !memcmp(p->name, r->name, r->namelen) &&
            p->type == r->type && p->lower == r->lower && p->upper == r->upper &&
            p->scope == r->scope) {
            unpublish(c, i, 0);
            return 0;
        }
    }
    return FM_ENONAME;
}

static int client_subscribe(struct client *c, const struct na_req *r)
{
    for (size_t i = 0; i < A.nsubs; i++) {
        struct sub *s = A.subs[i];
        if (s->owner == c && s->handle == r->handle && s->namelen == r->namelen &&
            !memcmp(s->name, r->name, r->namelen))
            return FM_EBUSY;
    }
    struct sub *s = calloc(1, sizeof(*s));
    if (!s)
        return FM_ENOMEM;
    int rc = fm_addr_insert(A.ctx, r->name, r->namelen, &s->addr);
    if (rc) {
        free(s);
        return rc;
    }
    if (A.nsubs == A.capsubs) {
        size_t cap = A.capsubs ? A.capsubs * 2 : 16;
        struct sub **v = realloc(A.subs, cap * sizeof(*v));
        if (!v) {
            free(s);
            return FM_ENOMEM;
        }
        A.subs = v, A.capsubs = cap;
    }
    s->owner = c;
    s->namelen = (uint8_t)r->namelen;
    memcpy(s->name, r->name, r->namelen);
    s->type = r->type, s->lower = r->lower, s->upper = r->upper;
    s->flags = r->flags, s->handle = r->handle;
    A.subs[A.nsubs++] = s;
    if (!(r->flags & FM_SUB_NO_STATUS)) {
        struct status_arg a = {s};
        nt_each(A.table, status_one, &a);
    }
    return 0;
}

static int client_unsubscribe(struct client *c, const struct na_req *r)
{
    for (size_t i = 0; i < A.nsubs; i++) {
        struct sub *s = A.subs[i];
        if (s->owner == c && s->handle == r->handle && s->namelen == r->namelen &&
            !memcmp(s->name, r->name, r->namelen)) {
            sub_drop(i);
            return 0;
        }
    }
    return FM_ENONAME;
}

/* Everything of one endpoint (NA_EP_CLOSED), or of the whole client
 * (name NULL: it is gone; lost says whether it said goodbye). */
static void client_forget(struct client *c, const uint8_t *name, size_t namelen, int lost)
{
    for (size_t i = c->npubs; i-- > 0;)
        if (!name || (c->pubs[i].namelen == namelen && !memcmp(c->pubs[i].name, name, namelen)))
            unpublish(c, i, lost);
    for (size_t i = A.nsubs; i-- > 0;)
        if (A.subs[i]->owner == c &&
            (!name || (A.subs[i]->namelen == namelen && !memcmp(A.subs[i]->name, name, namelen))))
            sub_drop(i);
}

/* The replica and the agent's name, to a new client. */
static int hello(struct client *c)
{
    struct na_rep rep = {.magic = NA_MAGIC, .node = A.node, .cap = A.cap};
    rep.namelen = (uint32_t)A.cardlen;
    memcpy(rep.name, A.card, A.cardlen);
    c->waits_hello = 0;
    return na_send_with_fd(c->fd, &rep, sizeof(rep), A.memfd);
}

/* Handles one request: 1, 0 if there was none, -1 when the client is gone. */
static int client_request(struct client *c)
{
    struct na_req r;
    ssize_t n = recv(c->fd, &r, sizeof(r), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return 0;
    if (n <= 0)
        return -1;
    int sent;
    struct na_rep rep = {.magic = NA_MAGIC};
    rep.rc = na_req_check(&r, (size_t)n);
    if (rep.rc == 0) {
        switch (r.op) {
        case NA_HELLO:
            if (!A.ready) {
                c->waits_hello = 1; /* answered once the replica is loaded */
                return 1;
            }
            return hello(c) ? -1 : 1;
        case NA_PUBLISH:
            rep.rc = r.type < FM_NAME_TYPE_USER ? FM_EINVAL : client_publish(c, &r);
            break;
        case NA_WITHDRAW:
            rep.rc = client_withdraw(c, &r);
            break;
        case NA_SUBSCRIBE:
            rep.rc = client_subscribe(c, &r);
            break;
        case NA_UNSUBSCRIBE:
            rep.rc = client_unsubscribe(c, &r);
            break;
        case NA_EP_CLOSED:
            client_forget(c, r.name, r.namelen, 0);
            break;
        }
    }
    /* Visible to lookups before the client hears it is done. */
    nt_commit(A.table);
    sent = send(c->fd, &rep, sizeof(rep), MSG_NOSIGNAL) == (ssize_t)sizeof(rep);
    return sent ? 1 : -1;
}

static void client_gone(int epfd, struct client *c)
{
    epoll_ctl(epfd, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    client_forget(c, NULL, 0, 1);
    for (size_t i = 0; i < A.nclients; i++)
        if (A.clients[i] == c)
            A.clients[i] = A.clients[--A.nclients];
    free(c->pubs);
    free(c);
}

static void client_accept(int epfd, int lfd)
{
    int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
        return;
    /* An abstract socket has no permissions: check who is calling. */
    struct ucred cred;
    socklen_t len = sizeof(cred);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) || cred.uid != geteuid()) {
        fm_warn("names", "refused a client of uid %u", (unsigned)cred.uid);
        close(fd);
        return;
    }
    struct client *c = calloc(1, sizeof(*c));
    if (!c || (A.nclients == A.capclients &&
               !(A.clients = realloc(A.clients, (A.capclients = A.capclients * 2 + 8) *
                                                    sizeof(*A.clients))))) {
        free(c);
        close(fd);
        return;
    }
    c->fd = fd;
    A.clients[A.nclients++] = c;
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* ---- discovery ---- */

static size_t probe_encode(unsigned char *buf)
{
    uint32_t v[3] = {PROBE_MAGIC, A.node, nd_incarnation(A.distr)};
    memcpy(buf, v, sizeof(v));
    buf[12] = (unsigned char)A.cardlen;
    memcpy(buf + 13, A.card, A.cardlen);
    size_t len = 13 + A.cardlen;
    uint64_t mac = fm_siphash(A.key, buf, len);
    memcpy(buf + len, &mac, 8);
    return len + 8;
}

static void probe_send_to(const unsigned char *buf, size_t len, struct in_addr ip, uint16_t port)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port), .sin_addr = ip};
    if (sendto(A.disc_fd, buf, len, 0, (struct sockaddr *)&sa, sizeof(sa)) == (ssize_t)len)
        A.probes_sent++;
}

/* To every subnet's broadcast address, and to the seeds. */
static void probe_send(void)
{
    unsigned char buf[64 + FM_NAME_MAX];
    size_t len = probe_encode(buf);
    struct ifaddrs *ifs;
    const char *how = getenv("FM_NAMES_DISCOVERY");
    if ((!how || strcmp(how, "seeds")) && getifaddrs(&ifs) == 0) {
        for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
            if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET || !i->ifa_netmask ||
                !(i->ifa_flags & IFF_BROADCAST) || !(i->ifa_flags & IFF_UP))
                continue;
            /* Computed, not ifa_broadaddr: `ip addr add` sets none without "brd +". */
            struct in_addr ip = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
            struct in_addr mask = ((struct sockaddr_in *)i->ifa_netmask)->sin_addr;
            ip.s_addr |= ~mask.s_addr;
            probe_send_to(buf, len, ip, A.disc_port);
        }
        freeifaddrs(ifs);
    }
    const char *seeds = getenv("FM_NAMES_SEEDS");
    if (!seeds)
        return;
    char list[1024];
    snprintf(list, sizeof(list), "%s", seeds);
    for (char *save, *s = strtok_r(list, ", ", &save); s; s = strtok_r(NULL, ", ", &save)) {
        char *colon = strchr(s, ':');
        uint16_t port = A.disc_port;
        if (colon)
            *colon = '\0', port = (uint16_t)atoi(colon + 1);
        struct in_addr ip;
        if (inet_pton(AF_INET, s, &ip) == 1)
            probe_send_to(buf, len, ip, port);
    }
}

static void probe_recv(void)
{
    unsigned char buf[256];
    ssize_t n;
    while ((n = recv(A.disc_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        uint32_t v[3];
        if (n < 13 + 8) {
            A.foreign_probes++;
            continue;
        }
        memcpy(v, buf, sizeof(v));
        size_t cardlen = buf[12];
        uint64_t mac;
        if (v[0] != PROBE_MAGIC || cardlen > FM_NAME_MAX || (size_t)n != 13 + cardlen + 8) {
            A.foreign_probes++;
            continue;
        }
        memcpy(&mac, buf + 13 + cardlen, 8);
        if (mac != fm_siphash(A.key, buf, 13 + cardlen)) {
            fm_info("names", "dropped a probe of another domain key");
            A.foreign_probes++; /* another domain, or damaged */
            continue;
        }
        if (v[1] == A.node || nd_has_member(A.distr, v[1]))
            continue;
        fm_addr ignored;
        if (fm_addr_insert(A.ctx, buf + 13, cardlen, &ignored)) {
            A.foreign_probes++;
            continue;
        }
        fm_info("names", "probe from the agent of node %08x: joining it", v[1]);
        nd_contact(A.distr, buf + 13, cardlen, now_us());
    }
}

/* After a turn of either thread (A.lock held): the batched protocol
 * messages go out, the replica shows the changes, queued messages and
 * events go where there is room now. */
static void send_what_changed(void)
{
    nd_flush(A.distr);
    nt_commit(A.table);
    for (size_t i = 0; i < A.npeers; i++)
        peer_drain(&A.peers[i]);
    subs_drain();
}

/* ---- the network thread ---- */

static uint32_t node_of_addr(fm_addr a)
{
    int peer = (int)(a >> 32);
    for (size_t i = 0; i < A.npeers; i++)
        if ((int)(A.peers[i].addr >> 32) == peer)
            return A.peers[i].node;
    return 0;
}

static void *net_thread(void *arg)
{
    (void)arg;
    unsigned char *msg = malloc(ND_MSG_MAX);
    while (!__atomic_load_n(&A.stop, __ATOMIC_ACQUIRE)) {
        fm_wait(A.ep_in, TICK_MS);
        pthread_mutex_lock(&A.lock);
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        fm_addr src;
        ssize_t n;
        int handled = 0;
        while (handled < 64 && (n = fm_recv(A.ep_in, seg, &nseg, &src)) != FM_EAGAIN) {
            handled++;
            if (n == FM_EPEERLOST) {
                uint32_t node = node_of_addr(src);
                if (node)
                    nd_peer_lost(A.distr, node, now_us());
                continue;
            }
            if (n < 0)
                break;
            if ((size_t)n <= ND_MSG_MAX) {
                size_t off = 0;
                for (int i = 0; i < nseg; i++) {
                    memcpy(msg + off, seg[i].iov_base, seg[i].iov_len);
                    off += seg[i].iov_len;
                }
                fm_recv_done(A.ep_in);
                nd_input(A.distr, msg, (size_t)n, now_us());
            } else
                fm_recv_done(A.ep_in);
        }
        send_what_changed();
        pthread_mutex_unlock(&A.lock);
    }
    free(msg);
    return NULL;
}

/* ---- start-up ---- */

static uint32_t node_id(void)
{
    char id[160], ns[64] = "";
    fm_kernel_id(id, sizeof(id));
    ssize_t n = readlink("/proc/self/ns/net", ns, sizeof(ns) - 1);
    if (n > 0)
        ns[n] = '\0';
    strncat(id, ns, sizeof(id) - strlen(id) - 1);
    uint32_t h = fm_name_hash(id);
    return h ? h : 1;
}

static uint64_t env_u64(const char *name, uint64_t dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtoull(v, NULL, 10) : dflt;
}

/* Detaches from the client that started it: the client reaps the first
 * child, the agent runs on in a session of its own with nothing inherited
 * but the environment. */
static void detach(void)
{
    pid_t pid = fork();
    if (pid < 0)
        exit(1);
    if (pid > 0)
        _exit(0);
    setsid();
    int null = open("/dev/null", O_RDWR);
    const char *log = getenv("FM_NAMES_LOG");
    int err = log && *log ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0600) : null;
    dup2(null, 0), dup2(null, 1), dup2(err >= 0 ? err : null, 2);
    closefrom(3);
    signal(SIGPIPE, SIG_IGN);
    /* fm_init must start a singleton, not join the job of the client. */
    static const char *const launcher_vars[] = {"PMI_FD", "PMI_PORT", "PMI_RANK", "PMI_SIZE",
                                                "PMIX_NAMESPACE", "PMIX_RANK", "SLURM_NTASKS",
                                                "OMPI_COMM_WORLD_SIZE", "FMRUN_JOB"};
    for (size_t i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++)
        unsetenv(launcher_vars[i]);
    setenv("FM_BOOTSTRAP", "singleton", 1);
}

static int listen_socket(uint64_t tag)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t n = na_socket_name(sa.sun_path, sizeof(sa.sun_path), (unsigned)geteuid(), tag);
    int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n)) ||
        listen(fd, 128)) {
        close(fd); /* EADDRINUSE: another agent serves this domain here */
        return -1;
    }
    return fd;
}

static int discovery_socket(uint64_t tag)
{
    A.disc_port = (uint16_t)env_u64("FM_NAMES_PORT", 40000 + tag % 20000);
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(A.disc_port)};
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, sizeof(one)) ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
        bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
        fm_warn("names", "discovery port %u: %s; only seeds will find this node",
                (unsigned)A.disc_port, strerror(errno));
    }
    return fd;
}

static void on_term(int sig)
{
    (void)sig;
    __atomic_store_n(&A.stop, 1, __ATOMIC_RELEASE);
}

int main(int argc, char **argv)
{
    int foreground = argc > 1 && !strcmp(argv[1], "--foreground");
    if (argc > 1 && !foreground) {
        fprintf(stderr, "usage: fmnamed [--foreground]\n"
                        "  the node agent of fastmsg's names: processes start it when they\n"
                        "  first use names (docs/names.md)\n");
        return 2;
    }
    if (!foreground)
        detach();
    char err[256], source[256];
    if (fm_key_load(A.key, source, sizeof(source), err, sizeof(err))) {
        fprintf(stderr, "fmnamed: %s\n", err);
        return 1;
    }
    uint64_t tag = na_domain_tag(A.key);
    int lfd = listen_socket(tag);
    if (lfd < 0)
        return 0;
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    pthread_mutex_init(&A.lock, NULL);
    A.node = node_id();
    A.cap = (uint32_t)env_u64("FM_NAMES_MAX", 131072);
    if (A.cap < 16 || A.cap > (1u << 24))
        A.cap = 131072;
    if (getrandom(&A.next_id, sizeof(A.next_id), 0) != sizeof(A.next_id))
        A.next_id = (uint64_t)getpid() << 32;
    A.next_id >>= 1; /* ids count up from a random start, never wrapping */
    int rc = fm_init(&A.ctx);
    if (!rc)
        rc = fm_ep_open(A.ctx, NA_CH_AGENT, &A.ep_in);
    if (!rc)
        rc = fm_ep_open(A.ctx, NA_CH_OUT, &A.ep_out);
    A.cardlen = sizeof(A.card);
    if (!rc)
        rc = fm_ep_name(A.ep_in, A.card, &A.cardlen);
    if (rc) {
        fm_error("names", "the agent cannot start fastmsg: %s", fm_strerror(rc));
        return 1;
    }
    size_t size = nt_shm_size(A.cap);
    A.memfd = memfd_create("fastmsg-names", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (A.memfd < 0 || ftruncate(A.memfd, (off_t)size) ||
        fcntl(A.memfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) ||
        (A.shm = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, A.memfd, 0)) == MAP_FAILED) {
        fm_error("names", "cannot make the replica: %s", strerror(errno));
        return 1;
    }
    A.table = nt_writer_new(A.shm, A.cap, A.node);
    uint32_t inc;
    if (getrandom(&inc, sizeof(inc), 0) != sizeof(inc) || !inc)
        inc = (uint32_t)getpid();
    struct nd_ops ops = {.send = distr_send, .added = distr_added, .removed = distr_removed};
    struct nd_params prm;
    nd_params_default(&prm);
    prm.probe_us = (uint32_t)env_u64("FM_NAMES_PROBE_MS", prm.probe_us / 1000) * 1000;
    prm.down_us = (uint32_t)env_u64("FM_NAMES_DOWN_MS", prm.down_us / 1000) * 1000;
    A.distr = nd_new(A.node, inc >> 1, A.card, A.cardlen, &ops, &prm, now_us());
    A.disc_fd = discovery_socket(tag);
    if (!A.table || !A.distr) {
        fm_error("names", "out of memory");
        return 1;
    }
    uint64_t linger_us = env_u64("FM_NAMES_LINGER_MS", 10000) * 1000;
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    int tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    struct itimerspec its = {{0, TICK_MS * 1000000L}, {0, TICK_MS * 1000000L}};
    timerfd_settime(tfd, 0, &its, NULL);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = &lfd};
    epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev);
    ev.data.ptr = &tfd;
    epoll_ctl(epfd, EPOLL_CTL_ADD, tfd, &ev);
    if (A.disc_fd >= 0) {
        ev.data.ptr = &A.disc_fd;
        epoll_ctl(epfd, EPOLL_CTL_ADD, A.disc_fd, &ev);
    }
    pthread_t net;
    pthread_create(&net, NULL, net_thread, NULL);
    A.started = now_us();
    uint64_t idle_since = A.started, probe_every = 50000;
    uint64_t settle_us = env_u64("FM_NAMES_SETTLE_MS", 300) * 1000;
    uint64_t refind_every = 0;
    fm_info("names", "agent of node %08x up, discovery port %u", A.node, (unsigned)A.disc_port);
    while (!__atomic_load_n(&A.stop, __ATOMIC_ACQUIRE)) {
        struct epoll_event evs[32];
        int n = epoll_wait(epfd, evs, 32, TICK_MS);
        pthread_mutex_lock(&A.lock);
        for (int i = 0; i < n; i++) {
            void *p = evs[i].data.ptr;
            if (p == &lfd)
                client_accept(epfd, lfd);
            else if (p == &tfd) {
                uint64_t ticks;
                if (read(tfd, &ticks, sizeof(ticks)) < 0)
                    continue;
            } else if (p == &A.disc_fd)
                probe_recv();
            else {
                struct client *c = p;
                int r = 1;
                for (int k = 0; k < 64 && r > 0; k++)
                    r = client_request(c);
                /* Requests sent just before a close were read above. */
                if (r < 0 || (r == 0 && (evs[i].events & (EPOLLHUP | EPOLLERR))))
                    client_gone(epfd, c);
            }
        }
        uint64_t now = now_us();
        nd_tick(A.distr, now);
        /* Look for other agents while alone: quickly at first, then every
         * 2 s. After losing members, for REFIND_US more at growing
         * intervals: a partition that outlasts the protocol's memory of the
         * lost members heals when the probes cross again. */
        size_t now_members = nd_members(A.distr);
        if (now_members >= A.members_peak) {
            A.members_peak = now_members;
            A.lost_since = 0;
        } else if (!A.lost_since) {
            A.lost_since = now;
            refind_every = 1000000;
            A.next_refind = now + refind_every;
        }
        if (A.disc_fd >= 0 && now_members <= 1 && now >= A.next_probe) {
            probe_send();
            A.next_probe = now + probe_every;
            if (probe_every < 2000000)
                probe_every *= 2;
        } else if (A.disc_fd >= 0 && A.lost_since && now >= A.next_refind) {
            probe_send();
            refind_every = FM_MIN(2 * refind_every, 30000000u);
            A.next_refind = now + refind_every;
            if (now - A.lost_since > REFIND_US)
                A.members_peak = now_members; /* they are gone for good */
        }
        send_what_changed();
        if (!A.ready && (nd_synced(A.distr) || now - A.started >= settle_us)) {
            A.ready = 1;
            for (size_t i = 0; i < A.nclients; i++)
                if (A.clients[i]->waits_hello)
                    hello(A.clients[i]);
        }
        size_t members = nd_members(A.distr);
        if (members != A.members) {
            const struct nd_stats *st = nd_stats(A.distr);
            fm_info("names", "%zu agents in the domain (%llu declared down, %llu times back "
                             "after being declared down)", members,
                    (unsigned long long)st->downs_declared,
                    (unsigned long long)st->reincarnations);
            A.members = members;
        }
        if (A.nclients)
            idle_since = now;
        int leave = !A.nclients && now - idle_since >= linger_us;
        pthread_mutex_unlock(&A.lock);
        if (leave)
            break;
    }
    /* Leave: no new clients, then tell the other agents. */
    close(lfd);
    __atomic_store_n(&A.stop, 1, __ATOMIC_RELEASE);
    pthread_join(net, NULL);
    nd_leave(A.distr);
    for (int i = 0; i < 50; i++) { /* give the goodbyes a moment to leave */
        int pending = 0;
        for (size_t k = 0; k < A.npeers; k++) {
            peer_drain(&A.peers[k]);
            pending |= A.peers[k].head != NULL;
        }
        fm_progress(A.ctx);
        if (!pending)
            break;
        usleep(1000);
    }
    const struct nd_stats *st = nd_stats(A.distr);
    fm_info("names", "agent of node %08x leaves: %llu probes sent, %llu foreign or damaged "
                     "probes and %llu malformed messages dropped, %llu messages to slow agents "
                     "dropped", A.node, (unsigned long long)A.probes_sent,
            (unsigned long long)A.foreign_probes, (unsigned long long)st->malformed,
            (unsigned long long)A.dropped_out);
    fm_finalize(A.ctx);
    return 0;
}
