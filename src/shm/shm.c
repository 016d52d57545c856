#include "shm.h"

#include "board.h"
#include "core/log.h"
#include "memlimit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGE 4096u

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
static void layout(const fm_ctx *ctx, struct fm_seg_hdr *h)
{
    uint64_t rings = (uint64_t)ctx->nprocs * (uint64_t)ctx->cfg.ep_max;
    h->nprocs = (uint32_t)ctx->nprocs;
    h->ep_max = (uint32_t)ctx->cfg.ep_max;
    h->ring_size = (uint64_t)ctx->cfg.shm_ring_size;
    h->hdr_size = page_up(sizeof(struct fm_seg_hdr) + h->ep_max * sizeof(struct fm_seg_ep));
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

int fm_shm_setup(fm_ctx *ctx, char *err, size_t errlen)
{
    struct fm_seg_hdr want;
    layout(ctx, &want);
    int fd = memfd_create("fastmsg", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "shm: memfd_create failed: %s", strerror(errno));
        return FM_ESYS;
    }
    /* Only this user may open it (peers open it through /proc). */
    if (fchmod(fd, 0600) < 0 || ftruncate(fd, (off_t)want.seg_size) < 0) {
        snprintf(err, errlen, "shm: cannot size the shared segment to %llu bytes: %s",
                 (unsigned long long)want.seg_size, strerror(errno));
        goto err_close;
    }
    if (commit(fd, 0, want.hdr_size, "the segment header", "FM_EP_MAX")) {
        snprintf(err, errlen, "shm: no memory for the segment header");
        close(fd);
        return FM_ENOMEM;
    }
    struct fm_seg_hdr *h =
        mmap(NULL, want.seg_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, fd, 0);
    if (h == MAP_FAILED) {
        snprintf(err, errlen, "shm: cannot map %llu bytes of shared segment: %s",
                 (unsigned long long)want.seg_size, strerror(errno));
        goto err_close;
    }
    *h = want;
    h->version = FM_SEG_VERSION;
    h->pid = (uint32_t)getpid();
    h->state = FM_SEG_LIVE;
    __atomic_store_n(&h->magic, FM_SEG_MAGIC, __ATOMIC_RELEASE);
    ctx->seg = h;
    struct fm_proc *me = &ctx->procs[ctx->my_proc];
    me->memfd = fd;
    me->seg = h;
    me->pid = getpid();

    if (ctx->nprocs > 1 && ctx->my_proc == 0)
        return fm_board_create(ctx, fd, err, errlen);
    return 0;

err_close:
    close(fd);
    return errno == ENOMEM || errno == ENOSPC || errno == EFBIG ? FM_ENOMEM : FM_ESYS;
}

int fm_shm_join(fm_ctx *ctx, char *err, size_t errlen)
{
    if (ctx->nprocs == 1 || ctx->my_proc == 0)
        return 0;
    return fm_board_join(ctx, ctx->procs[ctx->my_proc].memfd, err, errlen);
}

/* Maps the segment of local process p as it wrote on the node board. */
static int map_peer(fm_ctx *ctx, struct fm_proc *p, char *err, size_t errlen)
{
    char path[64];
    pid_t pid;
    int fd;
    if (fm_board_read(ctx, (int)(p - ctx->procs), &pid, &fd) < 0) {
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
    layout(ctx, &want);
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
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (uint32_t)(p - ctx->procs)};
    if (epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, p->pidfd, &ev) < 0) {
        snprintf(err, errlen, "shm: epoll_ctl: %s", strerror(errno));
        return FM_ESYS;
    }
    return 0;
}

int fm_shm_connect(fm_ctx *ctx, char *err, size_t errlen)
{
    for (int i = 0; i < ctx->nprocs; i++) {
        struct fm_proc *p = &ctx->procs[i];
        p->bells = malloc(sizeof(*p->bells) * (size_t)ctx->cfg.ep_max);
        if (!p->bells) {
            snprintf(err, errlen, "shm: out of memory");
            return FM_ENOMEM;
        }
        for (int s = 0; s < ctx->cfg.ep_max; s++)
            p->bells[s] = (struct fm_bell){.fd = -1, .gen = 0};
        if (i == ctx->my_proc)
            continue;
        int rc = map_peer(ctx, p, err, errlen);
        if (rc)
            return rc;
    }
    /* Everyone opened the board before the fence: it has served. */
    fm_board_close(ctx);
    return 0;
}

void fm_shm_teardown(fm_ctx *ctx)
{
    fm_board_close(ctx);
    for (int i = 0; i < ctx->nprocs; i++) {
        struct fm_proc *p = &ctx->procs[i];
        if (p->bells) {
            for (int s = 0; s < ctx->cfg.ep_max; s++)
                if (p->bells[s].fd >= 0)
                    close(p->bells[s].fd);
            free(p->bells);
            p->bells = NULL;
        }
        if (p->seg)
            munmap(p->seg, p->seg->seg_size);
        if (p->memfd >= 0)
            close(p->memfd);
        if (p->pidfd >= 0)
            close(p->pidfd);
        p->seg = NULL;
        p->memfd = p->pidfd = -1;
    }
    ctx->seg = NULL;
}

/* Byte offset of a pointer into a segment. */
static off_t seg_off(const struct fm_seg_hdr *h, const void *p)
{
    return (off_t)((const char *)p - (const char *)h);
}

int fm_shm_ep_open(fm_ep *ep)
{
    fm_ctx *ctx = ep->ctx;
    struct fm_seg_hdr *h = ctx->seg;
    struct fm_ring_ctl *ctl = fm_seg_ctl(h, ep->slot, 0);
    /* An area whose last endpoint got no shm traffic is still committed
     * and still zero: skip the system call. */
    if (!ctx->area_ready[ep->slot]) {
        int rc = commit(ctx->procs[ctx->my_proc].memfd, seg_off(h, ctl), h->ctl_size,
                        "an endpoint", "FM_EP_MAX");
        if (rc)
            return rc;
        ctx->area_ready[ep->slot] = 1;
    }
    struct fm_seg_ep *d = &h->ep[ep->slot];
    d->channel = ep->channel;
    __atomic_store_n(&d->bell_fd, -1, __ATOMIC_RELAXED); /* made at the first sleep */
    d->sleeping = 0;
    d->nclaimed = 0;
    __atomic_store_n(&d->gen, d->gen + 1, __ATOMIC_RELEASE); /* odd: open */
    ep->dir = d;
    return 0;
}

int fm_shm_ep_bell(fm_ep *ep)
{
    int fds[2];
    struct stat st;
    if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0) {
        fm_error("shm", "cannot create a doorbell pipe: %s", strerror(errno));
        return errno == EMFILE || errno == ENFILE ? FM_ELIMIT : FM_ESYS;
    }
    fstat(fds[1], &st);
    ep->bell_rd = fds[0];
    __atomic_store_n(&ep->bell_wr, fds[1], __ATOMIC_RELEASE); /* read by fm_core_wake */
    struct fm_seg_ep *d = ep->dir;
    d->bell_ino = (uint64_t)st.st_ino;
    /* Published before `sleeping` is ever set, which senders read first. */
    __atomic_store_n(&d->bell_fd, fds[1], __ATOMIC_RELEASE);
    return 0;
}

void fm_shm_ep_close(fm_ep *ep)
{
    fm_ctx *ctx = ep->ctx;
    struct fm_seg_hdr *h = ctx->seg;
    struct fm_seg_ep *d = &h->ep[ep->slot];
    __atomic_store_n(&d->gen, d->gen + 1, __ATOMIC_RELEASE); /* even: closed */
    /* Zero the area and give its pages back, so the next endpoint starts
     * fresh; an area no sender claimed a ring in is still zero. */
    if (__atomic_load_n(&d->nclaimed, __ATOMIC_ACQUIRE)) {
        fallocate(ctx->procs[ctx->my_proc].memfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                  seg_off(h, fm_seg_ctl(h, ep->slot, 0)), (off_t)h->area_size);
        ctx->area_ready[ep->slot] = 0;
    }
    /* The doorbell stays until the endpoint is freed: a link's thread may
     * still ring it until the link has let go of the endpoint. */
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

int fm_shm_resolve(fm_ep *ep, int rank, uint32_t channel, struct fm_route *rt)
{
    fm_ctx *ctx = ep->ctx;
    int p = ctx->peers[rank].proc;
    struct fm_proc *proc = &ctx->procs[p];
    struct fm_seg_hdr *h = proc->seg;
    uint32_t gen;
    if (__atomic_load_n(&ctx->peers[rank].state, __ATOMIC_ACQUIRE) != FM_PEER_UP)
        return FM_EPEERLOST;
    int slot = find_slot(h, channel, &gen);
    if (slot < 0) {
        if (__atomic_load_n(&h->state, __ATOMIC_ACQUIRE) == FM_SEG_FINALIZED) {
            pthread_mutex_lock(&ctx->lock);
            fm_ctx_peer_gone(ctx, rank, FM_PEER_FINALIZED);
            pthread_mutex_unlock(&ctx->lock);
            return FM_EPEERLOST;
        }
        return FM_EAGAIN;
    }
    int ring = ctx->my_proc * (int)h->ep_max + ep->slot;
    struct fm_ring_ctl *ctl = fm_seg_ctl(h, slot, ring);
    unsigned char *data = fm_seg_data(h, slot, ring);
    if (!__atomic_load_n(&ctl->claimed, __ATOMIC_ACQUIRE)) {
        int rc = commit(proc->memfd, seg_off(h, data), h->ring_size, "a ring",
                        "FM_SHM_RING_SIZE");
        if (rc)
            return rc;
        ctl->producer_proc = (uint32_t)ctx->my_proc;
        ctl->producer_ep = (uint32_t)ep->slot;
        __atomic_store_n(&ctl->claimed, 1, __ATOMIC_RELEASE);
        __atomic_fetch_add(&h->ep[slot].nclaimed, 1, __ATOMIC_RELEASE);
    }
    rt->dst = fm_addr_make(rank, channel);
    rt->link = &fm_shm_link;
    rt->gen_word = &h->ep[slot].gen;
    rt->gen = gen;
    rt->dir = &h->ep[slot];
    rt->ring = (struct fm_ring){.ctl = ctl, .data = data, .size = h->ring_size};
    rt->proc = p;
    rt->slot = slot;
    rt->need_src = !(ctl->src_told && ctl->src_channel == ep->channel);
    return 0;
}

void fm_shm_ring_bell(fm_ctx *ctx, int proc, int slot)
{
    struct fm_proc *p = &ctx->procs[proc];
    pthread_mutex_lock(&ctx->lock);
    if (!p->seg || !p->bells)
        goto out;
    struct fm_seg_ep *d = &p->seg->ep[slot];
    uint32_t gen = __atomic_load_n(&d->gen, __ATOMIC_ACQUIRE);
    struct fm_bell *b = &p->bells[slot];
    if (!(gen & 1))
        goto out;
    if (b->fd < 0 || b->gen != gen) {
        char path[64];
        struct stat st;
        if (b->fd >= 0)
            close(b->fd);
        int fd = __atomic_load_n(&d->bell_fd, __ATOMIC_ACQUIRE);
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
    pthread_mutex_unlock(&ctx->lock);
}

void fm_shm_refresh_rx(fm_ep *ep)
{
    fm_ctx *ctx = ep->ctx;
    struct fm_seg_hdr *h = ctx->seg;
    ep->nclaimed_seen = __atomic_load_n(&ep->dir->nclaimed, __ATOMIC_ACQUIRE);
    int rings = ctx->nprocs * ctx->cfg.ep_max;
    for (int i = 0; i < rings; i++) {
        struct fm_rx *rx = &ep->rx[i];
        if (rx->ring.ctl)
            continue;
        struct fm_ring_ctl *ctl = fm_seg_ctl(h, ep->slot, i);
        if (!__atomic_load_n(&ctl->claimed, __ATOMIC_ACQUIRE))
            continue;
        rx->ring = (struct fm_ring){
            .ctl = ctl, .data = fm_seg_data(h, ep->slot, i), .size = h->ring_size};
        rx->rd = rx->published = __atomic_load_n(&ctl->head, __ATOMIC_ACQUIRE);
        rx->src = FM_ADDR_NONE;
        ep->active[ep->nactive++] = rx;
    }
}

/* ---- the link ops ----------------------------------------------------------- */

static ssize_t shm_send(fm_ep *ep, struct fm_route *rt, const struct iovec *iov, int iovcnt,
                        size_t total)
{
    return fm_shm_send(ep, rt, iov, iovcnt, total);
}

static ssize_t shm_grant(fm_ep *ep, struct fm_route *rt, size_t len, void **buf)
{
    if (rt->need_src && fm_shm_tell_src(ep, rt) < 0)
        return FM_EAGAIN;
    int64_t n = fm_ring_take_grant(&rt->ring, len, (size_t)ep->ctx->cfg.shm_max_msg, buf);
    return n < 0 ? FM_EAGAIN : (ssize_t)n;
}

static void shm_commit(fm_ep *ep, struct fm_route *rt, size_t len)
{
    fm_ring_publish(&rt->ring, FM_REC_DATA, (uint32_t)len);
    fm_shm_notify(ep->ctx, rt);
}

static size_t shm_max_msg(const fm_ep *ep) { return (size_t)ep->ctx->cfg.shm_max_msg; }

const struct fm_link fm_shm_link = {
    .name = "shm",
    .send = shm_send,
    .grant = shm_grant,
    .commit = shm_commit,
    .max_msg = shm_max_msg,
};
