/* The context: joining the job, finding the processes of this node, and
 * keeping track of which peers are gone. */
#include "ctx.h"

#include "log.h"

#include <errno.h>
#include <linux/membarrier.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* A node is a kernel and a network namespace: processes in different
 * namespaces are told apart as hosts are (they reach each other over the
 * network, never through each other's memory), which is what containers
 * with their own network and the two-namespace tests expect. */
void fm_kernel_id(char *buf, size_t len)
{
    char boot[64] = "unknown", net[64] = "";
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f) {
        if (fgets(boot, (int)sizeof(boot), f))
            boot[strcspn(boot, "\n")] = '\0';
        fclose(f);
    }
    ssize_t n = readlink("/proc/self/ns/net", net, sizeof(net) - 1);
    net[n > 0 ? n : 0] = '\0';
    snprintf(buf, len, "%s%s%s", boot, net[0] ? "/" : "", net);
}

/* Without PMI_process_mapping, ranks compare a card naming their kernel. */
static int nodes_from_cards(fm_ctx *ctx, char *err, size_t errlen)
{
    char mine[FM_BOOT_VAL_MAX], theirs[FM_BOOT_VAL_MAX];
    fm_kernel_id(mine, sizeof(mine));
    int rc = ctx->boot.ops->put(&ctx->boot, "node", mine);
    if (!rc)
        rc = ctx->boot.ops->fence(&ctx->boot);
    if (rc) {
        snprintf(err, errlen, "%s bootstrap: cannot exchange node names", ctx->boot.ops->name);
        return rc;
    }
    ctx->boot.node_of = calloc((size_t)ctx->size, sizeof(int));
    if (!ctx->boot.node_of)
        return FM_ENOMEM;
    for (int r = 0; r < ctx->size; r++) {
        rc = ctx->boot.ops->get(&ctx->boot, r, "node", theirs, sizeof(theirs));
        if (rc) {
            snprintf(err, errlen, "%s bootstrap: rank %d published no node name",
                     ctx->boot.ops->name, r);
            return rc;
        }
        ctx->boot.node_of[r] = strcmp(mine, theirs) == 0 ? 0 : 1 + r;
    }
    ctx->boot.node_of[ctx->rank] = 0;
    return 0;
}

static long membarrier(int cmd) { return syscall(SYS_membarrier, cmd, 0, 0); }

/*
 * Light fences when every process of the node can rely on the sleeper's
 * membarrier: the kernel offers it and ranks have a CPU each. With more
 * ranks than CPUs, ranks sleep so often that the system call would cost
 * more than the fences it saves. Every process of the node reaches the
 * same `sleeper_membarrier`, which is what makes the scheme safe.
 */
static void setup_fences(fm_ctx *ctx)
{
    long q = membarrier(MEMBARRIER_CMD_QUERY);
    long needed = MEMBARRIER_CMD_GLOBAL_EXPEDITED | MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED |
                  MEMBARRIER_CMD_PRIVATE_EXPEDITED | MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED;
    ctx->sleeper_membarrier = q > 0 && (q & needed) == needed && !ctx->oversubscribed;
    ctx->light_fence = ctx->sleeper_membarrier &&
                       membarrier(MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED) == 0 &&
                       membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0;
}

void fm_core_set_named_writers(fm_ctx *ctx, const uint32_t *count)
{
    __atomic_store_n(&ctx->named_writers, count, __ATOMIC_RELEASE);
}

/* Whether another process may write to our rings: the job's other ranks on
 * this node, or a process met by name that claimed a sender slot. */
static int others_write(const fm_ctx *ctx)
{
    const uint32_t *named = __atomic_load_n(&ctx->named_writers, __ATOMIC_ACQUIRE);
    return ctx->node_procs > 1 || (named && __atomic_load_n(named, __ATOMIC_RELAXED));
}

/* The fence comes first: the sleep flag is then visible before the count of
 * writers met by name is read, and one that raises it after that read (with
 * a full barrier) sees the flag. Only this process's threads can have
 * missed it then, and PRIVATE_EXPEDITED fences them. */
void fm_fence_slow(const fm_ctx *ctx, int others_read)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (ctx->sleeper_membarrier)
        membarrier(others_read || others_write(ctx) ? MEMBARRIER_CMD_GLOBAL_EXPEDITED
                                                    : MEMBARRIER_CMD_PRIVATE_EXPEDITED);
}

/* The node of every rank: from the launcher, or by comparing kernel ids. */
static int find_nodes(fm_ctx *ctx, char *err, size_t errlen)
{
    if (ctx->boot.node_of)
        return 0;
    return nodes_from_cards(ctx, err, errlen);
}

/*
 * Every rank of a job must use the same transports, and each reads its own
 * environment: rank 0 publishes its FM_TRANSPORTS, the others compare after
 * the first fence. (A difference made the links' setups disagree, and
 * fm_init failed at a fence on every rank, without a reason.)
 */
static void transports_text(const fm_ctx *ctx, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = 0; i < fm_cfg_count; i++)
        if (strcmp(fm_cfg_table[i].name, "FM_TRANSPORTS") == 0)
            fm_config_format(&fm_cfg_table[i], &ctx->cfg, buf, len);
}

static int transports_publish(fm_ctx *ctx)
{
    char mine[64];
    transports_text(ctx, mine, sizeof(mine));
    return ctx->rank == 0 ? ctx->boot.ops->put(&ctx->boot, "transports", mine) : 0;
}

static int transports_check(fm_ctx *ctx, char *err, size_t errlen)
{
    char mine[64], theirs[64];
    if (ctx->rank == 0 || ctx->boot.ops->get(&ctx->boot, 0, "transports", theirs,
                                             sizeof(theirs)) != 0)
        return 0;
    transports_text(ctx, mine, sizeof(mine));
    if (strcmp(mine, theirs) == 0)
        return 0;
    snprintf(err, errlen,
             "FM_TRANSPORTS is %s here and %s on rank 0: every rank of a job must use the same",
             mine, theirs);
    return FM_EINVAL;
}

static int fence(fm_ctx *ctx, const char *which, char *err, size_t errlen)
{
    int rc = ctx->boot.ops->fence(&ctx->boot);
    if (rc)
        snprintf(err, errlen, "%s bootstrap: %s failed", ctx->boot.ops->name, which);
    return rc;
}

static void ctx_free(fm_ctx *ctx)
{
    for (int i = fm_nlinks - 1; i >= 0; i--)
        if (ctx->link_state[i])
            fm_links[i]->teardown(ctx, ctx->link_state[i]);
    if (ctx->epfd >= 0)
        close(ctx->epfd);
    fm_names_free(ctx);
    fm_boot_close(&ctx->boot);
    pthread_mutex_destroy(&ctx->lock);
    pthread_mutex_destroy(&ctx->events_lock);
    pthread_mutex_destroy(&ctx->domain_lock);
    pthread_mutex_destroy(&ctx->boot_lock);
    fm_peers_free(ctx);
    free(ctx);
}

/* Runs one stage of every link in use; the first failure ends fm_init. */
enum stage { STAGE_SETUP, STAGE_JOIN, STAGE_START };

static int links_stage(fm_ctx *ctx, enum stage st, char *err, size_t errlen)
{
    for (int i = 0; i < fm_nlinks; i++) {
        const struct fm_link *l = fm_links[i];
        int rc = 0;
        if (st == STAGE_SETUP) {
            if (!(ctx->cfg.transports & l->transport))
                continue;
            rc = l->setup(ctx, &ctx->link_state[i], err, errlen);
            if (!rc && ctx->link_state[i] && l->progress)
                ctx->polled = 1;
        } else if (ctx->link_state[i]) {
            if (st == STAGE_JOIN && l->join)
                rc = l->join(ctx, ctx->link_state[i], err, errlen);
            else if (st == STAGE_START)
                rc = l->start(ctx, ctx->link_state[i], err, errlen);
        }
        if (rc)
            return rc;
    }
    return 0;
}

static int init_ctx(fm_ctx **out, bool singleton, const char *const *defaults)
{
    char err[512] = "";
    if (!out)
        return FM_EINVAL;
    fm_log_init();
    fm_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return FM_ENOMEM;
    ctx->epfd = -1;
    ctx->node_procs = 1;
    ctx->cpus = sysconf(_SC_NPROCESSORS_ONLN);
    pthread_mutex_init(&ctx->lock, NULL);
    pthread_mutex_init(&ctx->events_lock, NULL);
    pthread_mutex_init(&ctx->domain_lock, NULL);
    pthread_mutex_init(&ctx->boot_lock, NULL);
    int rc = fm_config_load_with(&ctx->cfg, defaults, err, sizeof(err));
    if (rc) {
        fm_error("config", "%s", err);
        ctx_free(ctx);
        return rc;
    }
    fm_log_level_cur = (int)ctx->cfg.log;
    if (singleton)
        ctx->cfg.bootstrap = FM_BOOT_SINGLETON;
    rc = fm_boot_open(&ctx->boot, (int)ctx->cfg.bootstrap, err, sizeof(err));
    if (rc)
        goto err_free;
    ctx->rank = ctx->boot.rank;
    ctx->size = ctx->boot.size;
    if (!singleton) /* a forced singleton is no rank of a job: its lines name its pid */
        fm_log_set_rank(ctx->rank);
    ctx->names_peer = -1;
    ctx->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (fm_peers_init(ctx) || ctx->epfd < 0) {
        rc = FM_ENOMEM;
        snprintf(err, sizeof(err), "out of memory for a job of %d ranks", ctx->size);
        goto err_free;
    }
    rc = find_nodes(ctx, err, sizeof(err));
    if (!rc)
        rc = links_stage(ctx, STAGE_SETUP, err, sizeof(err));
    if (!rc)
        setup_fences(ctx);
    if (!rc && ctx->size > 1)
        rc = fm_peers_publish(ctx);
    if (!rc && ctx->size > 1)
        rc = transports_publish(ctx);
    /* Two fences before the links start: what a link publishes at setup
     * (address cards, the node board) is visible after the first, what it
     * writes at join after the second (shm/board.h). */
    if (!rc)
        rc = fence(ctx, "the fence", err, sizeof(err));
    if (!rc && ctx->size > 1)
        rc = transports_check(ctx, err, sizeof(err));
    if (!rc)
        rc = links_stage(ctx, STAGE_JOIN, err, sizeof(err));
    if (!rc)
        rc = fence(ctx, "the second fence", err, sizeof(err));
    if (!rc)
        rc = links_stage(ctx, STAGE_START, err, sizeof(err));
    /* No rank may leave fm_init (and perhaps the job) before every local
     * peer has mapped its segment. */
    if (!rc)
        rc = fence(ctx, "the closing fence", err, sizeof(err));
    if (rc)
        goto err_free;
    fm_info("core", "rank %d of %d, %d on this node, bootstrap %s", ctx->rank, ctx->size,
            ctx->node_procs, ctx->boot.ops->name);
    *out = ctx;
    return 0;

err_free:
    fm_error("init", "%s", err[0] ? err : fm_strerror(rc));
    ctx_free(ctx);
    return rc;
}

int fm_init(fm_ctx **out) { return init_ctx(out, false, NULL); }
int fm_init_singleton(fm_ctx **out, const char *const *defaults)
{
    return init_ctx(out, true, defaults);
}

int fm_finalize(fm_ctx *ctx)
{
    if (!ctx)
        return FM_EINVAL;
    /* Say "finalized" first: senders that find our endpoints closed then
     * fail with FM_EPEERLOST instead of retrying. */
    for (int i = 0; i < fm_nlinks; i++)
        if (ctx->link_state[i] && fm_links[i]->leaving)
            fm_links[i]->leaving(ctx, ctx->link_state[i]);
    for (int s = 0; s < FM_EP_MAX_LIMIT; s++)
        if (ctx->eps[s])
            fm_ep_close(ctx->eps[s]);
    if (ctx->cfg.stats)
        for (int i = 0; i < fm_nlinks; i++)
            if (ctx->link_state[i] && fm_links[i]->stats)
                fm_links[i]->stats(ctx, ctx->link_state[i], stderr);
    ctx_free(ctx);
    return 0;
}

void fm_abort(fm_ctx *ctx, int status)
{
    fflush(NULL);
    /* A thread in the middle of a bootstrap call holds the lock; its
     * exchange cannot be interleaved with ours, so after a second the
     * process only exits, and the launcher sees that. */
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    if (ctx && ctx->boot.ops && ctx->boot.ops->abort &&
        pthread_mutex_timedlock(&ctx->boot_lock, &until) == 0)
        ctx->boot.ops->abort(&ctx->boot, status);
    _exit(status);
}

int fm_rank(const fm_ctx *ctx) { return ctx ? ctx->rank : FM_EINVAL; }
int fm_size(const fm_ctx *ctx) { return ctx ? ctx->size : FM_EINVAL; }

fm_addr fm_addr_of(const fm_ctx *ctx, int rank, uint32_t channel)
{
    if (!ctx || rank < 0 || rank >= ctx->size)
        return FM_ADDR_NONE;
    return fm_addr_make(rank, channel);
}

int fm_addr_rank(const fm_ctx *ctx, fm_addr addr)
{
    int r = fm_addr_rank_of(addr);
    if (!ctx || addr == FM_ADDR_NONE || r < 0 || r >= ctx->size)
        return -1;
    return r;
}

void fm_ctx_peer_gone(fm_ctx *ctx, int rank, int state)
{
    struct fm_peer *p = fm_peer_at(ctx, rank);
    if (__atomic_load_n(&p->state, __ATOMIC_RELAXED) != FM_PEER_UP)
        return;
    __atomic_store_n(&p->state, (uint8_t)state, __ATOMIC_RELEASE);
    if (state == FM_PEER_FAILED) {
        ctx->lost_chunk[ctx->nlost / FM_PEER_CHUNK][ctx->nlost % FM_PEER_CHUNK] = rank;
        __atomic_store_n(&ctx->nlost, ctx->nlost + 1, __ATOMIC_RELEASE);
        fm_info("core", "rank %d is lost", rank);
    }
}

void fm_core_peer_gone(fm_ctx *ctx, int rank, int state)
{
    pthread_mutex_lock(&ctx->lock);
    fm_ctx_peer_gone(ctx, rank, state);
    /* Any endpoint may be waiting for this rank's messages; under the lock,
     * none of them can be freed meanwhile. */
    for (int s = 0; s < ctx->cfg.ep_max; s++)
        if (ctx->eps[s])
            fm_core_wake(ctx->eps[s]);
    pthread_mutex_unlock(&ctx->lock);
}

/*
 * Reads the events of the descriptors links watch (fm_core_watch) if the
 * last look is older than FM_PEER_CHECK_MS (or now if force), and hands each
 * to its link: a local peer's pidfd that became readable means it exited.
 * One thread at a time; the others go on.
 */
void fm_ctx_check_peers(fm_ctx *ctx, int force)
{
    /* Polling loops ask on every empty look: the clock is read on one ask
     * in 16 (in a VM even the coarse clock costs as much as the look). */
    uint32_t calls = __atomic_load_n(&ctx->check_calls, __ATOMIC_RELAXED);
    __atomic_store_n(&ctx->check_calls, calls + 1, __ATOMIC_RELAXED);
    if (!force && (calls & 15))
        return;
    uint64_t now = fm_now_coarse_ns();
    if (!force && now < __atomic_load_n(&ctx->next_check_ns, __ATOMIC_RELAXED))
        return;
    __atomic_store_n(&ctx->next_check_ns, now + (uint64_t)ctx->cfg.peer_check_ms * 1000000u,
                     __ATOMIC_RELAXED);
    if (pthread_mutex_trylock(&ctx->events_lock) != 0)
        return;
    struct epoll_event ev[16];
    int n = epoll_wait(ctx->epfd, ev, 16, 0);
    for (int i = 0; i < n; i++) {
        int link = (int)(ev[i].data.u64 >> 32);
        if (link < fm_nlinks && ctx->link_state[link] && fm_links[link]->event)
            fm_links[link]->event(ctx, ctx->link_state[link], (uint32_t)ev[i].data.u64);
    }
    pthread_mutex_unlock(&ctx->events_lock);
}

int fm_core_watch(fm_ctx *ctx, const struct fm_link *link, int fd, uint32_t cookie)
{
    uint64_t index = (uint64_t)fm_link_index(link);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (index << 32) | cookie};
    return epoll_ctl(ctx->epfd, EPOLL_CTL_ADD, fd, &ev) < 0 ? FM_ESYS : 0;
}

void fm_core_unwatch(fm_ctx *ctx, int fd) { epoll_ctl(ctx->epfd, EPOLL_CTL_DEL, fd, NULL); }

/* Progress of every link that needs the CPU; the events they handled. */
int fm_links_progress(fm_ctx *ctx, int flush)
{
    int events = 0;
    for (int i = 0; i < fm_nlinks; i++)
        if (ctx->link_state[i] && fm_links[i]->progress)
            events += fm_links[i]->progress(ctx, ctx->link_state[i], flush);
    return events;
}

/* The earliest time a link needs progress, or UINT64_MAX. */
uint64_t fm_links_deadline(fm_ctx *ctx)
{
    uint64_t d = UINT64_MAX;
    for (int i = 0; i < fm_nlinks; i++)
        if (ctx->link_state[i] && fm_links[i]->deadline)
            d = FM_MIN(d, fm_links[i]->deadline(ctx, ctx->link_state[i]));
    return d;
}

/* ---- what links read and tell (core_api.h) ---- */

const struct fm_config *fm_core_cfg(const fm_ctx *ctx) { return &ctx->cfg; }

void *fm_core_link_state(const fm_ctx *ctx, const struct fm_link *link)
{
    int i = fm_link_index(link);
    return i < 0 ? NULL : ctx->link_state[i];
}
struct fm_boot *fm_core_boot(fm_ctx *ctx) { return &ctx->boot; }

int fm_core_boot_get(fm_ctx *ctx, int rank, const char *key, char *val, size_t len)
{
    pthread_mutex_lock(&ctx->boot_lock);
    int rc = ctx->boot.ops->get(&ctx->boot, rank, key, val, len);
    pthread_mutex_unlock(&ctx->boot_lock);
    return rc;
}
int fm_core_rank(const fm_ctx *ctx) { return ctx->rank; }
int fm_core_size(const fm_ctx *ctx) { return ctx->size; }
const int *fm_core_node_of(const fm_ctx *ctx) { return ctx->boot.node_of; }
uint32_t fm_core_node(const fm_ctx *ctx) { return ctx->node_hash; }
void fm_core_fence(const fm_ctx *ctx) { fm_fence_fast(ctx); }

int fm_core_peer_up(const fm_ctx *ctx, int peer)
{
    return __atomic_load_n(&fm_peer_at(ctx, peer)->state, __ATOMIC_ACQUIRE) == FM_PEER_UP;
}

void fm_core_set_node_procs(fm_ctx *ctx, int nprocs)
{
    ctx->node_procs = nprocs;
    ctx->oversubscribed = ctx->cpus > 0 && nprocs > ctx->cpus;
}

int fm_progress(fm_ctx *ctx)
{
    if (!ctx)
        return FM_EINVAL;
    uint32_t before = __atomic_load_n(&ctx->nlost, __ATOMIC_ACQUIRE);
    fm_ctx_check_peers(ctx, 1);
    int events = fm_links_progress(ctx, 1);
    return events + (int)(__atomic_load_n(&ctx->nlost, __ATOMIC_ACQUIRE) - before);
}
