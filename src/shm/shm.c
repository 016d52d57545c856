#include "shm.h"

#include "board.h"
#include "core/core_api.h"
#include "core/log.h"
#include "core/name.h"
#include "core/siphash.h"
#include "memlimit.h"
#include "segment.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096u

/* An opened doorbell of an endpoint slot of a local process. */
struct shm_bell {
    int fd;                /* our descriptor for its pipe, -1 if not opened */
    uint32_t gen;          /* endpoint generation it belongs to */
    struct shm_proc *proc; /* whose */
    int slot;
};

/* A process of the job on this node (including this one). */
struct shm_proc {
    struct fm_shm *shm;
    int rank;
    pid_t pid;
    int pidfd;              /* readable once it exits; -1 after that was handled */
    int memfd;              /* its segment */
    struct fm_seg_hdr *seg; /* our mapping of its segment */
    struct shm_bell *bells; /* [ep_max], under shm->lock */
};

/* A process met by name that runs on this node, by its peer index. */
struct shm_named {
    int tried;             /* reaching it was tried: proc says how it went */
    struct shm_proc *proc; /* its segment mapped, or NULL: not reachable here */
    int my_sender;         /* our slot in its sender table, -1 until claimed */
    int its_sender;        /* its slot in our sender table, -1 if it never sent here */
};

struct fm_shm {
    struct shm_proc *procs; /* [nprocs], in rank order */
    int nprocs;
    int my_proc;
    int size;               /* ranks of the job: peers from here on are met by name */
    int nsenders;           /* sender slots in our segment (segment.h) */
    uint32_t node;          /* this node, as names say it */
    struct shm_named **named; /* [named_cap], by peer - size, under lock */
    int named_cap;
    struct shm_proc **sender_proc; /* [nsenders]: who sends in each slot, once known */
    int *slot_rings;        /* [nsenders]: rings of that sender attached to endpoints */
    uint8_t *slot_dead;     /* [nsenders]: its sender exited: free once its rings are */
    struct shm_ep *eps;     /* open endpoints, under lock */
    uint8_t key[16];        /* the domain key, once the process has one */
    int have_key;
    int ep_max;
    uint64_t ring_size;
    size_t max_msg;
    int32_t *proc_of;       /* [job size]: the local process index of a rank, or -1 */
    struct fm_seg_hdr *seg; /* own segment */
    struct fm_board board;  /* during fm_init: where local segments are */
    uint8_t area_ready[64]; /* slot's ring controls committed (they stay so) */
    pthread_mutex_t lock;   /* the doorbells, the processes met by name */
};

/* What an endpoint has here: its directory entry and the rings it receives
 * on, one per (local process, endpoint slot), attached as senders claim them. */
struct shm_ep {
    struct fm_seg_ep *dir;
    int slot;
    uint32_t gen; /* its directory generation: the rings claimed for it carry it */
    /* [nsenders * ep_max], made at the first claim: an endpoint that only
     * the network reaches (a connection per message between nodes) never
     * needs its 12 KB, nor a look at every ring of its area */
    struct fm_rx *rx;
    uint32_t claims_seen; /* the directory's nclaimed when refresh last looked */
    struct shm_ep *next, **pprev; /* the open endpoints, under shm->lock */
};

static uint64_t page_up(uint64_t x) { return FM_ALIGN_UP(x, (uint64_t)PAGE); }

static int pidfd_open_compat(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    errno = ENOSYS;
    return -1;
#endif
}

/* Sizes of the segment: every process computes them the same way, so a
 * mismatch of FM_EP_MAX or FM_SHM_RING_SIZE between ranks is detected. */
static void layout(const struct fm_shm *shm, struct fm_seg_hdr *h)
{
    uint64_t rings = (uint64_t)shm->nsenders * (uint64_t)shm->ep_max;
    h->nprocs = (uint32_t)shm->nprocs;
    h->nsenders = (uint32_t)shm->nsenders;
    h->ep_max = (uint32_t)shm->ep_max;
    h->ring_size = shm->ring_size;
    h->senders_off = sizeof(struct fm_seg_hdr) + h->ep_max * sizeof(struct fm_seg_ep);
    h->hdr_size = page_up(h->senders_off + (uint64_t)(shm->nsenders - shm->nprocs) *
                                               sizeof(struct fm_seg_sender));
    h->ctl_size = page_up(rings * sizeof(struct fm_ring_ctl));
    h->area_size = h->ctl_size + rings * h->ring_size;
    h->seg_size = h->hdr_size + h->ep_max * h->area_size;
}

/* Slack kept below the memory limit: the rest of the process needs some. */
#define COMMIT_SLACK (8u << 20)

/*
 * Commits len bytes of a segment, unless that would take the process past
 * its memory limit (the kernel would kill it rather than fail). Logs what
 * to change and returns FM_ENOMEM when it cannot.
 */
static int commit(int fd, off_t off, uint64_t len, const char *what, const char *knob)
{
    int64_t room = fm_mem_headroom(len);
    if (room < INT64_MAX && (int64_t)(len + COMMIT_SLACK) > room) {
        fm_error("shm",
                 "cannot commit %llu bytes of shared memory for %s: the memory limit leaves "
                 "%lld bytes (lower %s or raise the limit)",
                 (unsigned long long)len, what, (long long)room, knob);
        return FM_ENOMEM;
    }
    if (fallocate(fd, 0, off, (off_t)len) < 0) {
        fm_error("shm", "cannot commit %llu bytes of shared memory for %s: %s (lower %s or "
                 "raise the memory limit)", (unsigned long long)len, what, strerror(errno),
                 knob);
        return FM_ENOMEM;
    }
    return 0;
}

/* Finds the processes of this job on this node. */
static int find_procs(fm_ctx *ctx, struct fm_shm *shm)
{
    const int *node_of = fm_core_node_of(ctx);
    int size = fm_core_size(ctx), me = fm_core_rank(ctx);
    shm->proc_of = malloc(sizeof(*shm->proc_of) * (size_t)size);
    if (!shm->proc_of)
        return FM_ENOMEM;
    int n = 0;
    for (int r = 0; r < size; r++)
        shm->proc_of[r] = node_of[r] == node_of[me] ? n++ : -1;
    shm->procs = calloc((size_t)n, sizeof(*shm->procs));
    if (!shm->procs)
        return FM_ENOMEM;
    shm->nprocs = n;
    for (int r = 0; r < size; r++) {
        int p = shm->proc_of[r];
        if (p < 0)
            continue;
        shm->procs[p] = (struct shm_proc){.shm = shm, .rank = r, .pidfd = -1, .memfd = -1};
        if (r == me)
            shm->my_proc = p;
    }
    fm_core_set_node_procs(ctx, shm->nprocs);
    return 0;
}

/* Creates this process's segment; the node's first process also creates
 * and publishes the node board (board.h). */
static int shm_setup(fm_ctx *ctx, void **state, char *err, size_t errlen)
{
    const struct fm_config *cfg = fm_core_cfg(ctx);
    struct fm_shm *shm = calloc(1, sizeof(*shm));
    if (!shm)
        return FM_ENOMEM;
    *state = shm;
    pthread_mutex_init(&shm->lock, NULL);
    shm->board.fd = -1;
    shm->ep_max = (int)cfg->ep_max;
    shm->ring_size = (uint64_t)cfg->shm_ring_size;
    shm->max_msg = (size_t)cfg->shm_max_msg;
    shm->size = fm_core_size(ctx);
    shm->node = fm_core_node(ctx);
    if (find_procs(ctx, shm)) {
        snprintf(err, errlen, "shm: out of memory");
        return FM_ENOMEM;
    }
    shm->nsenders = shm->nprocs + (int)cfg->shm_peers;
    shm->sender_proc = calloc((size_t)shm->nsenders, sizeof(*shm->sender_proc));
    shm->slot_rings = calloc((size_t)shm->nsenders, sizeof(*shm->slot_rings));
    shm->slot_dead = calloc((size_t)shm->nsenders, 1);
    if (!shm->sender_proc || !shm->slot_rings || !shm->slot_dead) {
        snprintf(err, errlen, "shm: out of memory");
        return FM_ENOMEM;
    }
    struct fm_seg_hdr want;
    layout(shm, &want);
    int fd = memfd_create("fastmsg", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "shm: memfd_create failed: %s", strerror(errno));
        return FM_ESYS;
    }
    struct shm_proc *me = &shm->procs[shm->my_proc];
    me->memfd = fd;
    /* Only this user may open it (peers open it through /proc). */
    if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)want.seg_size) < 0) {
        snprintf(err, errlen, "shm: cannot size the shared segment to %llu bytes: %s",
                 (unsigned long long)want.seg_size, strerror(errno));
        goto err_sys;
    }
    if (commit(fd, 0, want.hdr_size, "the segment header", "FM_EP_MAX")) {
        snprintf(err, errlen, "shm: no memory for the segment header");
        return FM_ENOMEM;
    }
    struct fm_seg_hdr *h =
        mmap(NULL, want.seg_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (h == MAP_FAILED) {
        snprintf(err, errlen, "shm: cannot map %llu bytes of shared segment: %s",
                 (unsigned long long)want.seg_size, strerror(errno));
        goto err_sys;
    }
    *h = want;
    h->version = FM_SEG_VERSION;
    h->pid = (uint32_t)getpid();
    h->epoch = fm_core_epoch(ctx);
    h->state = FM_SEG_LIVE;
    __atomic_store_n(&h->magic, FM_SEG_MAGIC, __ATOMIC_RELEASE);
    shm->seg = h;
    me->seg = h;
    me->pid = getpid();
    fm_core_set_named_writers(ctx, &h->named_writers);

    if (shm->nprocs > 1 && shm->my_proc == 0)
        return fm_board_create(&shm->board, fm_core_boot(ctx), shm->nprocs, fd, err, errlen);
    return 0;

err_sys:
    return errno == ENOMEM || errno == ENOSPC || errno == EFBIG ? FM_ENOMEM : FM_ESYS;
}

/* After a bootstrap fence: writes this process's segment on the board. */
static int shm_join(fm_ctx *ctx, void *state, char *err, size_t errlen)
{
    struct fm_shm *shm = state;
    if (shm->nprocs == 1 || shm->my_proc == 0)
        return 0;
    return fm_board_join(&shm->board, fm_core_boot(ctx), shm->procs[0].rank, shm->nprocs,
                         shm->my_proc, shm->procs[shm->my_proc].memfd, err, errlen);
}

/* Maps the segment of local process p as it wrote on the node board. */
static int map_peer(fm_ctx *ctx, struct fm_shm *shm, struct shm_proc *p, char *err,
                    size_t errlen)
{
    char path[64];
    pid_t pid;
    int fd;
    if (fm_board_read(&shm->board, (int)(p - shm->procs), &pid, &fd) < 0) {
        snprintf(err, errlen, "shm: rank %d did not write its segment on the node board",
                 p->rank);
        return FM_EBOOT;
    }
    p->pid = pid;
    p->pidfd = pidfd_open_compat(pid);
    if (p->pidfd < 0) {
        snprintf(err, errlen,
                 "shm: rank %d (pid %d) is not visible from here: %s. Ranks of one node must "
                 "share a PID namespace",
                 p->rank, pid, strerror(errno));
        return FM_EBOOT;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    p->memfd = open(path, O_RDWR | O_CLOEXEC);
    if (p->memfd < 0) {
        int e = errno;
        snprintf(err, errlen,
                 "shm: cannot open the shared memory of rank %d through %s: %s. Ranks of one "
                 "node must run as the same user, in one PID namespace, with /proc mounted",
                 p->rank, path, strerror(e));
        return e == ENOENT ? FM_EPEERLOST : FM_EBOOT;
    }
    struct fm_seg_hdr want;
    layout(shm, &want);
    struct stat st;
    if (fstat(p->memfd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (uint64_t)st.st_size != want.seg_size) {
        snprintf(err, errlen,
                 "shm: the segment of rank %d has another size than ours: every rank must "
                 "use the same FM_EP_MAX and FM_SHM_RING_SIZE",
                 p->rank);
        return FM_EINVAL;
    }
    p->seg = mmap(NULL, want.seg_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
                  p->memfd, 0);
    if (p->seg == MAP_FAILED) {
        p->seg = NULL;
        snprintf(err, errlen, "shm: cannot map the segment of rank %d: %s", p->rank,
                 strerror(errno));
        return FM_ENOMEM;
    }
    if (__atomic_load_n(&p->seg->magic, __ATOMIC_ACQUIRE) != FM_SEG_MAGIC ||
        p->seg->version != FM_SEG_VERSION || p->seg->pid != (uint32_t)pid) {
        snprintf(err, errlen, "shm: the segment of rank %d is not a fastmsg segment of this "
                 "version", p->rank);
        return FM_EINVAL;
    }
    if (fm_core_watch(ctx, &fm_shm_link, p->pidfd, (uint32_t)(p - shm->procs)) != 0) {
        snprintf(err, errlen, "shm: epoll_ctl: %s", strerror(errno));
        return FM_ESYS;
    }
    return 0;
}

/* After the next fence: maps the segments of the other local processes. */
static int shm_start(fm_ctx *ctx, void *state, char *err, size_t errlen)
{
    struct fm_shm *shm = state;
    for (int i = 0; i < shm->nprocs; i++) {
        struct shm_proc *p = &shm->procs[i];
        p->bells = malloc(sizeof(*p->bells) * (size_t)shm->ep_max);
        if (!p->bells) {
            snprintf(err, errlen, "shm: out of memory");
            return FM_ENOMEM;
        }
        for (int s = 0; s < shm->ep_max; s++)
            p->bells[s] = (struct shm_bell){.fd = -1, .proc = p, .slot = s};
        if (i == shm->my_proc)
            continue;
        int rc = map_peer(ctx, shm, p, err, errlen);
        if (rc)
            return rc;
    }
    /* Everyone opened the board before the fence: it has served. */
    fm_board_close(&shm->board);
    return 0;
}

/* Pidfd cookies of processes met by name: their peer index with this bit. */
#define NAMED_COOKIE 0x80000000u

static struct shm_named *named_of(struct fm_shm *shm, int peer);
static void named_gone(struct fm_shm *shm, struct shm_proc *p, int peer);

/* A local peer's pidfd became readable: it exited. */
static void shm_event(fm_ctx *ctx, void *state, uint32_t cookie)
{
    struct fm_shm *shm = state;
    struct shm_proc *p;
    if (cookie & NAMED_COOKIE) {
        pthread_mutex_lock(&shm->lock);
        struct shm_named *nm = named_of(shm, (int)(cookie & ~NAMED_COOKIE));
        p = nm ? nm->proc : NULL;
        pthread_mutex_unlock(&shm->lock);
        if (!p)
            return;
    } else {
        p = &shm->procs[cookie];
    }
    if (p->pidfd < 0)
        return;
    fm_core_unwatch(ctx, p->pidfd);
    close(p->pidfd);
    p->pidfd = -1;
    int finalized = __atomic_load_n(&p->seg->state, __ATOMIC_ACQUIRE) == FM_SEG_FINALIZED;
    /* Its rings end first: the wake-up that comes with the news retires them. */
    if (cookie & NAMED_COOKIE)
        named_gone(shm, p, (int)(cookie & ~NAMED_COOKIE));
    fm_core_peer_gone(ctx, p->rank, finalized ? FM_PEER_FINALIZED : FM_PEER_FAILED);
}

static void shm_leaving(fm_ctx *ctx, void *state)
{
    (void)ctx;
    struct fm_shm *shm = state;
    __atomic_store_n(&shm->seg->state, FM_SEG_FINALIZED, __ATOMIC_RELEASE);
}

/* Unmaps every segment and closes what setup and start opened. */
static void shm_teardown(fm_ctx *ctx, void *state)
{
    struct fm_shm *shm = state;
    fm_core_set_named_writers(ctx, NULL);
    fm_board_close(&shm->board);
    for (int i = 0; i < shm->nprocs; i++) {
        struct shm_proc *p = &shm->procs[i];
        if (p->bells) {
            for (int s = 0; s < shm->ep_max; s++)
                if (p->bells[s].fd >= 0)
                    close(p->bells[s].fd);
            free(p->bells);
        }
        if (p->seg)
            munmap(p->seg, p->seg->seg_size);
        if (p->memfd >= 0)
            close(p->memfd);
        if (p->pidfd >= 0)
            close(p->pidfd); /* which also takes it out of the core's epoll set */
    }
    for (int i = 0; i < shm->named_cap; i++) {
        struct shm_named *nm = shm->named[i];
        struct shm_proc *p = nm ? nm->proc : NULL;
        if (p) {
            for (int b = 0; p->bells && b < (int)p->seg->ep_max; b++)
                if (p->bells[b].fd >= 0)
                    close(p->bells[b].fd);
            free(p->bells);
            munmap(p->seg, p->seg->seg_size);
            close(p->memfd);
            if (p->pidfd >= 0)
                close(p->pidfd);
            free(p);
        }
        free(nm);
    }
    free(shm->named);
    free(shm->sender_proc);
    free(shm->slot_rings);
    free(shm->slot_dead);
    free(shm->procs);
    free(shm->proc_of);
    pthread_mutex_destroy(&shm->lock);
    free(shm);
}

/* Byte offset of a pointer into a segment. */
static off_t seg_off(const struct fm_seg_hdr *h, const void *p)
{
    return (off_t)((const char *)p - (const char *)h);
}

/* ---- processes met by name on this node ---------------------------------------- *
 *
 * A name says where a process's segment is (pid and descriptor) and which
 * incarnation it is. The first send maps that segment, checks it is the one
 * the name says, watches the process's pidfd, and claims a slot of its
 * sender table with our own name in it: the receiver learns who we are from
 * there when our rings appear. All under shm->lock.
 */

/* What a segment shows to prove its owner's domain key (segment.h). */
static uint64_t domain_check(const uint8_t key[16], uint32_t epoch)
{
    const char what[] = "fastmsg segment";
    uint8_t buf[sizeof(what) + 4];
    memcpy(buf, what, sizeof(what));
    memcpy(buf + sizeof(what), &epoch, 4);
    return fm_siphash(key, buf, sizeof(buf)) | 1; /* never 0: 0 says "no key yet" */
}

/* The process now has a domain key: its segment proves it from now on. */
static void shm_named(fm_ctx *ctx, void *state, const uint8_t key[16], const void *card,
                      size_t len)
{
    (void)card, (void)len;
    struct fm_shm *shm = state;
    pthread_mutex_lock(&shm->lock);
    memcpy(shm->key, key, 16);
    shm->have_key = 1;
    __atomic_store_n(&shm->seg->domain_check, domain_check(key, fm_core_epoch(ctx)),
                     __ATOMIC_RELEASE);
    pthread_mutex_unlock(&shm->lock);
}

/* The state kept for named peer `peer`, made on first use; NULL on OOM. */
static struct shm_named *named_of(struct fm_shm *shm, int peer)
{
    int i = peer - shm->size;
    if (i < 0)
        return NULL;
    if (i >= shm->named_cap) {
        int cap = FM_MAX(i + 1, shm->named_cap * 2);
        struct shm_named **a = realloc(shm->named, sizeof(*a) * (size_t)cap);
        if (!a)
            return NULL;
        memset(a + shm->named_cap, 0, sizeof(*a) * (size_t)(cap - shm->named_cap));
        shm->named = a;
        shm->named_cap = cap;
    }
    if (!shm->named[i] && (shm->named[i] = calloc(1, sizeof(**shm->named))))
        shm->named[i]->my_sender = shm->named[i]->its_sender = -1;
    return shm->named[i];
}

/* Maps the segment a name points to; NULL (and a line at FM_LOG=info) when
 * it is not there, not this incarnation's, or of another geometry. */
static struct shm_proc *map_named(fm_ctx *ctx, struct fm_shm *shm, int peer,
                                  const struct fm_name *n)
{
    char path[64];
    struct stat st;
    snprintf(path, sizeof(path), "/proc/%u/fd/%d", n->pid, n->seg_fd);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (uint64_t)st.st_size < sizeof(struct fm_seg_hdr)) {
        fm_info("shm", "peer %d (pid %u): no segment at %s: the network link carries it", peer,
                n->pid, path);
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    struct fm_seg_hdr *h = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE,
                                MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (h == MAP_FAILED) {
        close(fd);
        return NULL;
    }
    if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != FM_SEG_MAGIC ||
        h->version != FM_SEG_VERSION || h->pid != n->pid || h->epoch != n->epoch ||
        h->seg_size != (uint64_t)st.st_size || h->ep_max != (uint32_t)shm->ep_max) {
        fm_info("shm", "peer %d (pid %u): its segment is not this incarnation's, or has "
                       "another FM_EP_MAX: the network link carries it", peer, n->pid);
        munmap(h, (size_t)st.st_size);
        close(fd);
        return NULL;
    }
    if (!shm->have_key ||
        __atomic_load_n(&h->domain_check, __ATOMIC_ACQUIRE) != domain_check(shm->key, n->epoch)) {
        fm_log_limited(FM_LOG_ERROR, "shm", 1,
                       "pid %u on this node is under another domain key: refused (give both "
                       "processes the same FM_KEY, or the same key file)", n->pid);
        munmap(h, (size_t)st.st_size);
        close(fd);
        return NULL;
    }
    struct shm_proc *p = calloc(1, sizeof(*p));
    if (p)
        p->bells = malloc(sizeof(*p->bells) * h->ep_max);
    if (!p || !p->bells) {
        if (p)
            free(p);
        munmap(h, (size_t)st.st_size);
        close(fd);
        return NULL;
    }
    *p = (struct shm_proc){.shm = shm, .rank = peer, .pid = (pid_t)n->pid, .memfd = fd,
                           .seg = h, .bells = p->bells};
    for (uint32_t b = 0; b < h->ep_max; b++)
        p->bells[b] = (struct shm_bell){.fd = -1, .proc = p, .slot = (int)b};
    p->pidfd = pidfd_open_compat((pid_t)n->pid);
    if (p->pidfd >= 0 &&
        fm_core_watch(ctx, &fm_shm_link, p->pidfd, NAMED_COOKIE | (uint32_t)peer) != 0) {
        close(p->pidfd);
        p->pidfd = -1;
    }
    return p;
}

/* Whether named peer `peer` runs on this node and its segment can be mapped
 * (shm->lock held): tried once. */
static struct shm_proc *named_proc(fm_ctx *ctx, struct fm_shm *shm, int peer)
{
    struct shm_named *nm = named_of(shm, peer);
    if (!nm)
        return NULL;
    if (!nm->tried) {
        struct fm_name n;
        nm->tried = 1;
        if (fm_core_peer_name(ctx, peer, &n) == 0 && n.node == shm->node && n.seg_fd >= 0)
            nm->proc = map_named(ctx, shm, peer, &n);
    }
    return nm->proc;
}

/* A free slot of the sender table of p's segment, now holding our name
 * (claimed once per peer: named_of keeps it). -1 when the table is full:
 * FM_SHM_PEERS counts the processes that send to p and are alive, or whose
 * last messages p has not read yet. */
static int claim_sender(fm_ctx *ctx, struct fm_shm *shm, struct shm_proc *p)
{
    struct fm_seg_hdr *h = p->seg;
    struct fm_seg_sender *tab = (struct fm_seg_sender *)((char *)h + h->senders_off);
    int n = (int)(h->nsenders - h->nprocs);
    struct fm_name me;
    fm_core_self_name(ctx, &me);
    for (int i = 0; i < n; i++) {
        uint32_t free_state = FM_SENDER_FREE;
        if (!__atomic_compare_exchange_n(&tab[i].state, &free_state, FM_SENDER_WRITING, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        /* Before any record of ours: the owner now fences its sleeps for
         * other processes too (fm_fence_slow). */
        __atomic_fetch_add(&h->named_writers, 1, __ATOMIC_SEQ_CST);
        tab[i].len = (uint32_t)fm_name_encode(&me, tab[i].card);
        tab[i].mac = fm_siphash(shm->key, tab[i].card, tab[i].len);
        __atomic_store_n(&tab[i].state, FM_SENDER_READY, __ATOMIC_RELEASE);
        return (int)h->nprocs + i;
    }
    fm_log_limited(FM_LOG_WARN, "shm", 4,
                   "pid %d's shared segment has no free sender slot (its FM_SHM_PEERS): "
                   "the network link carries this process's messages to it",
                   (int)p->pid);
    return -1;
}

/* Whether process pid has exited, or is exiting: its segment's descriptor
 * is closed (a live process keeps it open until fm_finalize ends). */
static int process_gone(pid_t pid, int seg_fd)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)pid, seg_fd);
    struct stat st;
    return stat(path, &st) < 0 && errno == ENOENT;
}

/* The process sending in slot s of our sender table, mapped so that we can
 * wake it (shm->lock held); its peer index in *peer. NULL if unknown, or,
 * with *gone set, if it already exited: a process that sends and exits
 * before the receiver looks leaves its messages in the receiver's segment,
 * readable without its own. */
static struct shm_proc *sender_of(fm_ctx *ctx, struct fm_shm *shm, int s, int *peer, int *gone)
{
    if (s < shm->nprocs) {
        *peer = shm->procs[s].rank;
        return &shm->procs[s];
    }
    struct fm_seg_hdr *h = shm->seg;
    struct fm_seg_sender *e =
        (struct fm_seg_sender *)((char *)h + h->senders_off) + (s - shm->nprocs);
    if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != FM_SENDER_READY)
        return NULL;
    struct fm_name n;
    uint8_t card[sizeof(e->card)];
    uint32_t len = FM_MIN(e->len, (uint32_t)sizeof(card));
    memcpy(card, e->card, len);
    if (fm_name_decode(card, len, &n) != 0)
        return NULL;
    if (!shm->have_key || fm_siphash(shm->key, card, len) != e->mac) {
        fm_log_limited(FM_LOG_ERROR, "shm", 1,
                       "pid %u on this node sends under another domain key: its messages are "
                       "dropped (give both processes the same FM_KEY, or the same key file)",
                       n.pid);
        return NULL;
    }
    int p = fm_core_peer_by_name(ctx, card, len, n.epoch);
    if (p < shm->size) /* not a name, or one of our own ranks: not a sender by name */
        return NULL;
    *peer = p;
    struct shm_named *nm = named_of(shm, p);
    if (nm)
        nm->its_sender = s;
    shm->sender_proc[s] = named_proc(ctx, shm, p);
    *gone = !shm->sender_proc[s] && n.node == shm->node && process_gone((pid_t)n.pid, n.seg_fd);
    return shm->sender_proc[s];
}

/*
 * A process met by name exited. What it sent stays readable: its rings
 * here end, and are retired once read (shm_retire); then its slot of our
 * sender table is free for another process. Its own segment stays mapped,
 * since routes still look at its directory, but the memory of its rings
 * goes back to the system (every process that maps the segment sees that:
 * the header, which says whether it finalized, is kept). Sends to it fail
 * on the peer's state before they touch a ring. (shm->lock not held.)
 */
static void free_slot(struct fm_shm *shm, int s);

static void named_gone(struct fm_shm *shm, struct shm_proc *p, int peer)
{
    pthread_mutex_lock(&shm->lock);
    struct shm_named *nm = named_of(shm, peer);
    int s = nm ? nm->its_sender : -1;
    if (s >= 0) {
        shm->slot_dead[s] = 1;
        for (struct shm_ep *se = shm->eps; se; se = se->next)
            for (int e = 0; se->rx && e < shm->ep_max; e++)
                if (se->rx[s * shm->ep_max + e].ring.ctl)
                    fm_core_rx_end(&se->rx[s * shm->ep_max + e]);
        if (!shm->slot_rings[s])
            free_slot(shm, s);
    }
    /* Not the header: other processes still read its state (did it finalize?). */
    fallocate(p->memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)p->seg->hdr_size,
              (off_t)(p->seg->seg_size - p->seg->hdr_size));
    pthread_mutex_unlock(&shm->lock);
}

/* Gives slot s of our sender table back (shm->lock held): its sender
 * exited and none of its rings is attached any more. */
static void free_slot(struct fm_shm *shm, int s)
{
    struct fm_seg_hdr *h = shm->seg;
    struct fm_seg_sender *e =
        (struct fm_seg_sender *)((char *)h + h->senders_off) + (s - shm->nprocs);
    for (int i = 0; i < shm->named_cap; i++)
        if (shm->named[i] && shm->named[i]->its_sender == s)
            shm->named[i]->its_sender = -1;
    /* Rings it claimed in endpoints that never looked at them are made new
     * too (refresh attaches only rings whose slot still holds a sender). */
    struct fm_seg_hdr *own = shm->seg;
    for (struct shm_ep *se = shm->eps; se; se = se->next)
        for (int k = 0; k < shm->ep_max; k++) {
            int i = s * shm->ep_max + k;
            struct fm_ring_ctl *ctl = fm_seg_ctl(own, se->slot, i);
            if ((se->rx && se->rx[i].ring.ctl) || !__atomic_load_n(&ctl->claimed, __ATOMIC_ACQUIRE))
                continue;
            fallocate(shm->procs[shm->my_proc].memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                      seg_off(own, fm_seg_data(own, se->slot, i)), (off_t)own->ring_size);
            memset(ctl, 0, sizeof(*ctl));
        }
    shm->sender_proc[s] = NULL;
    shm->slot_dead[s] = 0;
    e->len = 0;
    e->mac = 0;
    __atomic_store_n(&e->state, FM_SENDER_FREE, __ATOMIC_RELEASE);
}

/* ---- endpoints -------------------------------------------------------------- */

/* Commits the endpoint's area and publishes it in the directory. */
static int shm_ep_open(fm_ctx *ctx, void *state, fm_ep *ep, void **ep_state)
{
    (void)ctx;
    struct fm_shm *shm = state;
    struct fm_seg_hdr *h = shm->seg;
    int slot = fm_core_ep_slot(ep);
    struct shm_ep *se = calloc(1, sizeof(*se));
    if (!se)
        return FM_ENOMEM;
    /* The ring controls are committed once per slot and kept. */
    if (!shm->area_ready[slot]) {
        int rc = commit(shm->procs[shm->my_proc].memfd, seg_off(h, fm_seg_ctl(h, slot, 0)),
                        h->ctl_size, "an endpoint", "FM_EP_MAX");
        if (rc) {
            free(se);
            return rc;
        }
        shm->area_ready[slot] = 1;
    }
    struct fm_seg_ep *d = &h->ep[slot];
    d->channel = fm_core_ep_channel(ep);
    __atomic_store_n(&d->bell_fd, -1, __ATOMIC_RELAXED); /* made at the first sleep */
    d->sleeping = 0;
    d->nclaimed = 0;
    __atomic_store_n(&d->gen, d->gen + 1, __ATOMIC_RELEASE); /* odd: open */
    se->dir = d;
    se->slot = slot;
    se->gen = d->gen;
    pthread_mutex_lock(&shm->lock);
    se->next = shm->eps;
    se->pprev = &shm->eps;
    if (shm->eps)
        shm->eps->pprev = &se->next;
    shm->eps = se;
    pthread_mutex_unlock(&shm->lock);
    fm_core_ep_sleep_word(ep, &d->sleeping);
    fm_core_ep_news(ep, &fm_shm_link, &d->nclaimed);
    *ep_state = se;
    return 0;
}

/* Senders find the doorbell in the directory: published before `sleeping`
 * is ever set, which they read first. */
static void shm_ep_bell(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state, int fd,
                        uint64_t ino)
{
    (void)ctx, (void)state, (void)ep;
    struct shm_ep *se = ep_state;
    se->dir->bell_ino = ino;
    __atomic_store_n(&se->dir->bell_fd, fd, __ATOMIC_RELEASE);
}

/* Unpublishes the endpoint; its area stays committed for the next one. */
static void shm_ep_close(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state)
{
    (void)ctx, (void)ep;
    struct fm_shm *shm = state;
    struct shm_ep *se = ep_state;
    struct fm_seg_ep *d = se->dir;
    pthread_mutex_lock(&shm->lock);
    *se->pprev = se->next;
    if (se->next)
        se->next->pprev = se->pprev;
    /* Its rings go with its area: senders that exited may leave their slot. */
    for (int i = 0; se->rx && i < shm->nsenders * shm->ep_max; i++) {
        int q = i / shm->ep_max;
        if (se->rx[i].ring.ctl && --shm->slot_rings[q] == 0 && shm->slot_dead[q])
            free_slot(shm, q);
    }
    pthread_mutex_unlock(&shm->lock);
    __atomic_store_n(&d->gen, d->gen + 1, __ATOMIC_RELEASE); /* even: closed */
    /* The area keeps its pages for the next endpoint in this slot: giving
     * them back (a hole punched in shared memory, which unmaps them in
     * every process) cost 25-45 us per close, and the next endpoint's
     * senders would commit them again. Nothing needs zeroing: a ring
     * belongs to the generation in its `claimed`, and a sender sets up any
     * other afresh. A slot's rings go back when their sender exits
     * (free_slot) or with the segment. */
    free(se->rx);
    free(se);
}

/* Attaches the endpoint's rings that senders claimed since the last look;
 * FM_ENOMEM if it could not attach them all (looked at again later). */
static int shm_refresh(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state)
{
    struct fm_shm *shm = state;
    struct shm_ep *se = ep_state;
    struct fm_seg_hdr *h = shm->seg;
    int slot = fm_core_ep_slot(ep), rings = shm->nsenders * shm->ep_max;
    /* A sender counts its claim after making it: an unchanged count means
     * nothing new, and a claim not seen now brings another look. */
    uint32_t claims = __atomic_load_n(&se->dir->nclaimed, __ATOMIC_ACQUIRE);
    if (claims == se->claims_seen)
        return 0;
    if (!se->rx) {
        struct fm_rx *rx = calloc((size_t)rings, sizeof(*rx));
        if (!rx)
            return FM_ENOMEM;
        /* Under the lock: a peer's exit (named_gone, free_slot) walks
         * every endpoint's table from another thread. */
        pthread_mutex_lock(&shm->lock);
        se->rx = rx;
        pthread_mutex_unlock(&shm->lock);
    }
    uint32_t seen = se->claims_seen;
    se->claims_seen = claims;
    for (int i = 0; i < rings; i++) {
        struct fm_rx *rx = &se->rx[i];
        if (rx->ring.ctl)
            continue;
        struct fm_ring_ctl *ctl = fm_seg_ctl(h, slot, i);
        if (__atomic_load_n(&ctl->claimed, __ATOMIC_ACQUIRE) != se->gen)
            continue; /* unclaimed, or set up for an earlier endpoint in this slot */
        int peer, q = i / shm->ep_max, gone = 0;
        pthread_mutex_lock(&shm->lock);
        /* Looked at again under the lock: free_slot may have made it new. */
        struct shm_proc *sender = __atomic_load_n(&ctl->claimed, __ATOMIC_ACQUIRE) == se->gen
                                      ? sender_of(ctx, shm, q, &peer, &gone)
                                      : NULL;
        if (gone)
            shm->slot_dead[q] = 1;
        if (sender || gone) {
            shm->slot_rings[q]++;
            rx->ring = (struct fm_ring){
                .ctl = ctl, .data = fm_seg_data(h, slot, i), .size = h->ring_size};
            if (shm->slot_dead[q])
                fm_core_rx_end(rx); /* read what it left, then retire */
        }
        pthread_mutex_unlock(&shm->lock);
        if (!sender && !gone)
            continue; /* a slot whose name does not read: its ring is never read */
        rx->rd = rx->published = __atomic_load_n(&ctl->head, __ATOMIC_ACQUIRE);
        rx->link = &fm_shm_link;
        rx->src_rank = peer;
        rx->src = FM_ADDR_NONE;
        if (fm_core_ep_attach_rx(ep, rx) != 0) {
            pthread_mutex_lock(&shm->lock);
            shm->slot_rings[q]--;
            memset(rx, 0, sizeof(*rx));
            pthread_mutex_unlock(&shm->lock);
            se->claims_seen = seen; /* looked at again */
            return FM_ENOMEM;
        }
    }
    return 0;
}

/* ---- sending ---------------------------------------------------------------- */

/* The ranks of this job on this node, and processes met by name whose
 * segment this process can map (same node, same user, same PID namespace). */
static int shm_reaches(fm_ctx *ctx, void *state, int peer)
{
    struct fm_shm *shm = state;
    if (peer < shm->size)
        return shm->proc_of[peer] >= 0;
    pthread_mutex_lock(&shm->lock);
    struct shm_proc *p = named_proc(ctx, shm, peer);
    pthread_mutex_unlock(&shm->lock);
    return p != NULL;
}

/* Slot of the open endpoint on `channel` in a directory, its generation in
 * *gen; -1 if none. Reads each entry like a seqlock: gen, channel, gen. */
static int find_slot(struct fm_seg_hdr *h, uint32_t channel, uint32_t *gen)
{
    for (uint32_t s = 0; s < h->ep_max; s++) {
        struct fm_seg_ep *d = &h->ep[s];
        uint32_t g = __atomic_load_n(&d->gen, __ATOMIC_ACQUIRE);
        uint32_t c = __atomic_load_n(&d->channel, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if ((g & 1) && c == channel && __atomic_load_n(&d->gen, __ATOMIC_RELAXED) == g) {
            *gen = g;
            return (int)s;
        }
    }
    return -1;
}

/*
 * Fills rt with the ring from ep to endpoint (rank, channel) on this node,
 * claiming it on first use. FM_EAGAIN if that endpoint is not open (yet),
 * FM_EPEERLOST if the process is gone, FM_ENOMEM if its memory cannot be
 * committed.
 */
static int shm_resolve(fm_ctx *ctx, void *state, fm_ep *ep, void *ep_state, int rank,
                       uint32_t channel, struct fm_route *rt)
{
    (void)ep_state;
    struct fm_shm *shm = state;
    struct shm_proc *proc;
    int sender = shm->my_proc; /* our slot in its sender table */
    if (rank < shm->size) {
        proc = &shm->procs[shm->proc_of[rank]];
    } else {
        pthread_mutex_lock(&shm->lock);
        struct shm_named *nm = named_of(shm, rank);
        proc = nm ? nm->proc : NULL;
        if (proc && nm->my_sender < 0)
            nm->my_sender = claim_sender(ctx, shm, proc);
        sender = proc ? nm->my_sender : -1;
        pthread_mutex_unlock(&shm->lock);
        if (sender < 0)
            return FM_EUNREACH;
    }
    struct fm_seg_hdr *h = proc->seg;
    uint32_t gen;
    if (!fm_core_peer_up(ctx, rank))
        return FM_EPEERLOST;
    int slot = find_slot(h, channel, &gen);
    if (slot < 0) {
        if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == FM_SEG_FINALIZED) {
            fm_core_peer_gone(ctx, rank, FM_PEER_FINALIZED);
            return FM_EPEERLOST;
        }
        return FM_EAGAIN;
    }
    int my_slot = fm_core_ep_slot(ep);
    int ring = sender * (int)h->ep_max + my_slot;
    struct fm_ring_ctl *ctl = fm_seg_ctl(h, slot, ring);
    unsigned char *data = fm_seg_data(h, slot, ring);
    /* A ring belongs to one incarnation of the receiving endpoint: `claimed`
     * holds its generation. A ring claimed for an earlier one (that endpoint
     * closed, its area was given back, maybe while a send of ours was still
     * writing) is set up afresh; the receiver attaches only rings of its own
     * generation, so nothing written for the old endpoint reaches the new. */
    if (__atomic_load_n(&ctl->claimed, __ATOMIC_ACQUIRE) != gen) {
        /* An endpoint that closed keeps its rings' pages for the next one
         * in its slot: committing them again would cost a system call
         * (~30 us) per endpoint, which a connection per message pays. */
        if (!__atomic_load_n(&ctl->committed, __ATOMIC_ACQUIRE)) {
            int rc = commit(proc->memfd, seg_off(h, data), h->ring_size, "a ring",
                            "FM_SHM_RING_SIZE");
            if (rc)
                return rc;
            __atomic_store_n(&ctl->committed, 1, __ATOMIC_RELEASE);
        }
        ctl->head = ctl->tail = ctl->head_cache = 0;
        ctl->src_channel = ctl->src_told = ctl->space_wanted = 0;
        memset(data, 0, FM_REC_HDR); /* the first header: later ones the producer zeroes */
        ctl->producer_proc = (uint32_t)sender;
        ctl->producer_ep = (uint32_t)my_slot;
        __atomic_store_n(&ctl->claimed, gen, __ATOMIC_RELEASE);
        __atomic_fetch_add(&h->ep[slot].nclaimed, 1, __ATOMIC_RELEASE);
    }
    uint32_t my_channel = fm_core_ep_channel(ep);
    rt->gen_word = &h->ep[slot].gen;
    rt->gen = gen;
    rt->ring = (struct fm_ring){.ctl = ctl, .data = data, .size = h->ring_size};
    rt->direct = 1;
    rt->sleeping = &h->ep[slot].sleeping;
    rt->link_rt = &proc->bells[slot];
    rt->need_src = !(ctl->src_told && ctl->src_channel == my_channel);
    return 0;
}

/* Wakes the endpoint behind a doorbell (it sleeps in fm_wait). */
static void ring_bell(struct shm_bell *b)
{
    struct shm_proc *p = b->proc;
    struct fm_shm *shm = p->shm;
    pthread_mutex_lock(&shm->lock);
    if (!p->seg)
        goto out;
    struct fm_seg_ep *d = &p->seg->ep[b->slot];
    uint32_t gen = __atomic_load_n(&d->gen, __ATOMIC_ACQUIRE);
    if (!(gen & 1))
        goto out;
    if (b->fd < 0 || b->gen != gen) {
        char path[64];
        struct stat st;
        if (b->fd >= 0)
            close(b->fd);
        int fd = __atomic_load_n(&d->bell_fd, __ATOMIC_ACQUIRE);
        b->fd = -1;
        if (fd < 0)
            goto out; /* not sleeping after all: it makes its bell first */
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)p->pid, fd);
        b->fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        /* The fd number may have been reused after the endpoint closed:
         * accept only the pipe the directory names. */
        if (b->fd >= 0 && (fstat(b->fd, &st) < 0 || !S_ISFIFO(st.st_mode) ||
                           (uint64_t)st.st_ino != d->bell_ino ||
                           __atomic_load_n(&d->gen, __ATOMIC_ACQUIRE) != gen)) {
            close(b->fd);
            b->fd = -1;
        }
        if (b->fd < 0) {
            fm_log_limited(FM_LOG_WARN, "shm", 5, "cannot open the doorbell of rank %d: %s",
                           p->rank, strerror(errno));
            goto out;
        }
        b->gen = gen;
    }
    /* A full pipe already holds a wake-up: EAGAIN is fine. */
    ssize_t n = write(b->fd, "", 1);
    (void)n;
out:
    pthread_mutex_unlock(&shm->lock);
}

static void shm_notify(fm_ep *ep, struct fm_route *rt)
{
    (void)ep;
    ring_bell(rt->link_rt);
}

static size_t shm_max_msg(const fm_ctx *ctx) { return (size_t)fm_core_cfg(ctx)->shm_max_msg; }

/* ---- receiving --------------------------------------------------------------- */

/* The endpoint freed space in a ring: wake its sender if it waits for it.
 * The fence pairs with the one a sender makes between asking for space and
 * rechecking head before it sleeps. */
static void shm_released(fm_ctx *ctx, void *state, struct fm_rx *rx)
{
    struct fm_shm *shm = state;
    fm_core_fence(ctx);
    struct fm_ring_ctl *ctl = rx->ring.ctl;
    if (fm_unlikely(__atomic_load_n(&ctl->space_wanted, __ATOMIC_RELAXED))) {
        __atomic_store_n(&ctl->space_wanted, 0, __ATOMIC_RELAXED);
        uint32_t s = ctl->producer_proc, e = ctl->producer_ep;
        struct shm_proc *p = NULL;
        if (s < (uint32_t)shm->nprocs)
            p = &shm->procs[s];
        else if (s < (uint32_t)shm->nsenders)
            p = shm->sender_proc[s]; /* known since its ring was attached */
        if (p && e < p->seg->ep_max)
            ring_bell(&p->bells[e]);
    }
}

/* Our segment goes into the process's name: peers on this node map it. */
static void shm_describe(fm_ctx *ctx, void *state, struct fm_name *n)
{
    (void)ctx;
    struct fm_shm *shm = state;
    n->seg_fd = shm->procs[shm->my_proc].memfd;
}

/* A ring of a sender that exited, read to its end and detached: it is made
 * new (zero, its pages given back) for whoever claims the slot next. */
static void shm_retire(fm_ctx *ctx, void *state, struct fm_rx *rx)
{
    (void)ctx;
    struct fm_shm *shm = state;
    struct fm_ring_ctl *ctl = rx->ring.ctl;
    int q = (int)ctl->producer_proc;
    fallocate(shm->procs[shm->my_proc].memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
              seg_off(shm->seg, rx->ring.data), (off_t)rx->ring.size);
    memset(ctl, 0, sizeof(*ctl));
    memset(rx, 0, sizeof(*rx));
    pthread_mutex_lock(&shm->lock);
    if (q >= 0 && q < shm->nsenders && --shm->slot_rings[q] == 0 && shm->slot_dead[q])
        free_slot(shm, q);
    pthread_mutex_unlock(&shm->lock);
}

/* ---- what fm_info shows -------------------------------------------------------- */

/* Whether the link can work here: a memfd that reopens through /proc. */
static void shm_info(const struct fm_config *cfg, FILE *out)
{
    char why[160];
    int fd = memfd_create("fm_info", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(why, sizeof(why), "unavailable: memfd_create: %s", strerror(errno));
    } else {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
        int fd2 = open(path, O_RDWR | O_CLOEXEC);
        if (fd2 < 0)
            snprintf(why, sizeof(why), "unavailable: cannot reopen a memfd through /proc: %s",
                     strerror(errno));
        else
            snprintf(why, sizeof(why), "available");
        if (fd2 >= 0)
            close(fd2);
        close(fd);
    }
    fprintf(out, "  shm   shared-memory rings between processes of one node: %s%s\n", why,
            (cfg->transports & FM_TRANSPORT_SHM) ? "" : " (disabled by FM_TRANSPORTS)");
}

static void shm_info_limits(const struct fm_config *cfg, FILE *out)
{
    fprintf(out,
            "  largest message per send (shm)  %lld bytes (FM_SHM_MAX_MSG; longer sends take "
            "a prefix)\n",
            (long long)cfg->shm_max_msg);
    fprintf(out, "  receive ring per sender (shm)   %lld bytes (FM_SHM_RING_SIZE)\n",
            (long long)cfg->shm_ring_size);
    long long ep = (long long)cfg->ep_max, ring = (long long)cfg->shm_ring_size;
    size_t ctl = sizeof(struct fm_ring_ctl);
    fprintf(out,
            "  senders met by name (shm)       %lld per process (FM_SHM_PEERS; more go over "
            "udp)\n",
            (long long)cfg->shm_peers);
    fprintf(out,
            "  shared memory per process, L ranks of its job on the node, P = FM_SHM_PEERS, E\n"
            "  endpoints open, S sending endpoints (of either kind) that have talked to them:\n"
            "      header    = ceil4K(128 B + %lld * %zu B + P * %zu B)\n"
            "      committed = header + E * ceil4K((L + P) * %lld * %zu B) + S * %lld B\n"
            "      at most   = header + E * (L + P) * %lld * (%zu B + %lld B)   (virtual)\n",
            ep, sizeof(struct fm_seg_ep), sizeof(struct fm_seg_sender), ep, ctl, ring, ep, ctl,
            ring);
}

const struct fm_link fm_shm_link = {
    .name = "shm",
    .transport = FM_TRANSPORT_SHM,
    .setup = shm_setup,
    .join = shm_join,
    .start = shm_start,
    .leaving = shm_leaving,
    .teardown = shm_teardown,
    .describe = shm_describe,
    .named = shm_named,
    .ep_open = shm_ep_open,
    .ep_bell = shm_ep_bell,
    .ep_close = shm_ep_close,
    .reaches = shm_reaches,
    .resolve = shm_resolve,
    .notify = shm_notify,
    .max_msg = shm_max_msg,
    .refresh = shm_refresh,
    .released = shm_released,
    .retire = shm_retire,
    .event = shm_event,
    .info = shm_info,
    .info_limits = shm_info_limits,
};
