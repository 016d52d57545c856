/*
 * Start-up, finalization, PE queries and the way errors end the job.
 *
 * shmem_init: the static data moves to shared memory first (before fm_init,
 * which may start a progress thread), then fastmsg joins the job, the PEs of
 * this node exchange cards and map each other's segments, and, if some PE
 * is on another node, the server endpoint and its thread start.
 */
#include "shmem_internal.h"

#include "core/core_api.h"
#include "core/ctx.h"
#include "core/log.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct state fmshmem;

shmem_team_t SHMEM_TEAM_WORLD = &fmshmem.world;
shmem_team_t SHMEM_TEAM_SHARED = &fmshmem.shared;

void fmshmem_fatal(const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fflush(stdout);
    fprintf(stderr, "shmem: PE %d: %s\n", S.me, msg);
    /* The launcher ends the job when a PE fails; the memfds go with us. */
    _exit(1);
}

void fmshmem_check_pe(int pe, const char *what)
{
    if (fm_unlikely(pe < 0 || pe >= S.npes))
        fmshmem_fatal("%s: PE %d is out of range (0..%d)", what, pe, S.npes - 1);
}

void fmshmem_check_peers(void)
{
    fm_progress(S.ctx);
    for (int pe = 0; pe < S.npes; pe++) {
        uint8_t st = __atomic_load_n(&fm_peer_at(S.ctx, pe)->state, __ATOMIC_ACQUIRE);
        if ((st & ~FM_PEER_REMOVED) == FM_PEER_FAILED)
            fmshmem_pe_died(pe);
    }
}

void fmshmem_pe_died(int pe)
{
    fmshmem_fatal("PE %d died or stopped answering; ending the job", pe);
}

static bool env_false(const char *name)
{
    const char *v = getenv(name);
    return v && (!strcmp(v, "0") || !strcasecmp(v, "no") || !strcasecmp(v, "off"));
}

/* Which PEs share this node: the launcher's mapping. FM_SHMEM_LOCAL=0 treats
 * every other PE as remote (the network path on one host, for tests). */
static void find_local_pes(void)
{
    const int *node_of = fm_core_node_of(S.ctx);
    bool all_remote = env_false("FM_SHMEM_LOCAL");
    S.local = calloc((size_t)S.npes, sizeof(bool));
    S.local_pes = calloc((size_t)S.npes, sizeof(int));
    if (!S.local || !S.local_pes)
        fmshmem_fatal("out of memory");
    for (int pe = 0; pe < S.npes; pe++) {
        S.local[pe] = pe == S.me || (!all_remote && node_of[pe] == node_of[S.me]);
        if (S.local[pe])
            S.local_pes[S.nlocal++] = pe;
        else
            S.any_remote = true;
    }
}

/* Every PE sends its card to the other PEs of its node and maps theirs. */
static void exchange_cards(void)
{
    char card[256];
    size_t len = fmshmem_segments_card(card, sizeof(card));
    for (int i = 0; i < S.nlocal; i++) {
        int pe = S.local_pes[i];
        if (pe == S.me)
            continue;
        struct iovec iov = {card, len};
        ssize_t n;
        while ((n = fm_send(S.client, fm_addr_of(S.ctx, pe, CH_CLIENT), &iov, 1)) == FM_EAGAIN)
            fm_wait(S.client, 10);
        if (n != (ssize_t)len)
            fmshmem_fatal("cannot send the segment card to PE %d: %s", pe,
                          n < 0 ? fm_strerror((int)n) : "partial send");
    }
    int missing = S.nlocal - 1;
    uint64_t last_check = fm_now_ns();
    while (missing > 0) {
        struct iovec seg[FM_SEGS_MAX];
        int nseg;
        fm_addr src;
        ssize_t n = fm_recv(S.client, seg, &nseg, &src);
        if (n == FM_EAGAIN) {
            fm_wait(S.client, 10);
            if (fm_now_ns() - last_check > 100000000u) {
                fmshmem_check_peers();
                last_check = fm_now_ns();
            }
            continue;
        }
        if (n < 0)
            fmshmem_fatal("waiting for the segment cards: %s", fm_strerror((int)n));
        char buf[256];
        fmshmem_copy_out(buf, seg, nseg, 0, FM_MIN((size_t)n, sizeof(buf)));
        int pe = fm_addr_rank(S.ctx, src);
        fm_recv_done(S.client);
        if (pe < 0 || !S.local[pe] || S.peer_base[SEG_HEAP][pe])
            continue; /* not a card we wait for */
        if (fmshmem_segments_map_peer(pe, buf, (size_t)n) < 0)
            fmshmem_fatal("cannot map the symmetric segments of PE %d on this node: %s", pe,
                          strerror(errno));
        missing--;
    }
}

static void init_teams(void)
{
    S.world = (struct fmshmem_team){0, 1, S.npes, S.me, 0, S.nlocal == S.npes, {0}};
    /* The PEs of this node, as a strided set when they form one (block or
     * round-robin placement); otherwise this PE alone. */
    int stride = S.nlocal > 1 ? S.local_pes[1] - S.local_pes[0] : 1;
    bool strided = true;
    for (int i = 1; i < S.nlocal; i++)
        strided &= S.local_pes[i] - S.local_pes[i - 1] == stride;
    if (strided) {
        int idx = 0;
        while (S.local_pes[idx] != S.me)
            idx++;
        S.shared = (struct fmshmem_team){S.local_pes[0], stride, S.nlocal, idx, 1, true, {0}};
    } else {
        S.shared = (struct fmshmem_team){S.me, 1, 1, 0, 1, true, {0}};
    }
    S.team_slots_free = ~(uint64_t)3; /* slots 0 and 1: world and shared */
}

int shmem_init_thread(int requested, int *provided)
{
    if (S.initialized) {
        if (provided)
            *provided = S.thread_level;
        return 0;
    }
    S.me = 0; /* until the rank is known, for messages */
    fmshmem_segments_create();
    int rc = fm_init(&S.ctx);
    if (rc)
        fmshmem_fatal("fastmsg did not start: %s", fm_strerror(rc));
    S.me = fm_rank(S.ctx);
    S.npes = fm_size(S.ctx);
    for (int s = 0; s < SEG_COUNT; s++) {
        S.peer_base[s] = calloc((size_t)S.npes, sizeof(char *));
        if (!S.peer_base[s])
            fmshmem_fatal("out of memory");
        S.peer_base[s][S.me] = S.seg[s].base;
    }
    find_local_pes();
    rc = fm_ep_open(S.ctx, CH_CLIENT, &S.client);
    if (rc)
        fmshmem_fatal("cannot open the endpoint: %s", fm_strerror(rc));
    exchange_cards();
    if (S.any_remote && fmshmem_am_init() < 0)
        fmshmem_fatal("cannot start the server for PEs on other nodes");
    fmshmem_heap_init();
    init_teams();
    /* Waits yield at once when the node runs more processes than CPUs (the
     * core's rule, which counts every process of the job on this node). */
    S.spin_before_yield = S.ctx->oversubscribed ? 0 : 4096;
    S.thread_level = requested > SHMEM_THREAD_MULTIPLE ? SHMEM_THREAD_MULTIPLE : requested;
    if (provided)
        *provided = S.thread_level;
    S.initialized = true;
    shmem_barrier_all();
    return 0;
}

void shmem_init(void)
{
    int provided;
    shmem_init_thread(SHMEM_THREAD_SINGLE, &provided);
}

/* start_pes needs no shmem_finalize: the library finalizes, collectively,
 * when the program exits (the spec's rule). Without it a PE that returned
 * from main left, and a peer still reading its memory saw it die. */
static void finalize_at_exit(void) { shmem_finalize(); }

void start_pes(int npes)
{
    (void)npes;
    bool first = !S.initialized;
    shmem_init();
    if (first)
        atexit(finalize_at_exit);
}

void shmem_query_thread(int *provided)
{
    if (provided)
        *provided = S.thread_level;
}

void shmem_finalize(void)
{
    if (!S.initialized || S.finalized)
        return;
    shmem_barrier_all();
    S.finalized = true;
    if (S.any_remote)
        fmshmem_am_fini();
    fm_ep_close(S.client);
    fm_finalize(S.ctx);
    S.ctx = NULL;
    fmshmem_heap_fini();
    fmshmem_segments_destroy();
    free(S.local);
    free(S.local_pes);
}

void shmem_global_exit(int status)
{
    /* Every PE ends, and the job's status is this one, 0 included. */
    if (S.ctx)
        fm_abort(S.ctx, status);
    fflush(NULL);
    _exit(status);
}

int shmem_my_pe(void) { return S.me; }
int shmem_n_pes(void) { return S.npes; }
int _my_pe(void) { return S.me; }
int _num_pes(void) { return S.npes; }

int shmem_pe_accessible(int pe) { return pe >= 0 && pe < S.npes && fm_core_peer_up(S.ctx, pe); }

int shmem_addr_accessible(const void *addr, int pe)
{
    if (!shmem_pe_accessible(pe))
        return 0;
    for (int s = 0; s < SEG_COUNT; s++) {
        uintptr_t a = (uintptr_t)addr, b = (uintptr_t)S.seg[s].base;
        if (a >= b && a < b + S.seg[s].size)
            return 1;
    }
    return 0;
}

void *shmem_ptr(const void *dest, int pe)
{
    if (pe < 0 || pe >= S.npes || !shmem_addr_accessible(dest, S.me))
        return NULL;
    return fmshmem_local_ptr(dest, 0, pe, "shmem_ptr");
}

void shmem_info_get_version(int *major, int *minor)
{
    *major = SHMEM_MAJOR_VERSION;
    *minor = SHMEM_MINOR_VERSION;
}

void shmem_info_get_name(char *name)
{
    strncpy(name, SHMEM_VENDOR_STRING, SHMEM_MAX_NAME_LEN - 1);
    name[SHMEM_MAX_NAME_LEN - 1] = '\0';
}

void fmshmem_bad_type(void) { fmshmem_fatal("a generic routine was called with an unsupported type"); }
