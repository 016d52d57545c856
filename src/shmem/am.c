/*
 * Active messages: operations on PEs of other nodes.
 *
 * Each PE has two endpoints. The application thread sends requests from the
 * client endpoint to the target's server endpoint; the target's server
 * thread applies them (puts and atomics straight from its receive ring into
 * the segment: one copy) and sends replies back to the client endpoint. So
 * each endpoint has one thread, as fastmsg asks, and a get is answered while
 * the target computes: the server thread sleeps in fm_wait and costs nothing
 * when idle.
 *
 * Messages from one endpoint to another arrive in order, so a fence costs
 * nothing here, and a quiet is one FLUSH round trip to each PE written to
 * since the last quiet. The server never waits for its own requests, and
 * every waiting loop of the application thread takes replies, so no cycle of
 * full rings can form.
 */
#include "shmem_internal.h"

#include "core/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Gets larger than this are split into several requests in flight. */
#define GET_CHUNK ((size_t)1 << 20)
#define PENDING_MAX 1024

/* An operation waiting for its reply. */
struct pending {
    char *dst;        /* where the reply's bytes go */
    size_t total;     /* bytes asked for */
    size_t left;      /* bytes still to come */
    uint32_t gen;     /* tells a reply for an earlier use of the slot */
    bool used;
};

static struct pending pend[PENDING_MAX];
static int pend_free[PENDING_MAX], npend_free;
/* Read by waiting loops outside the client lock, hence atomic. */
static _Atomic size_t outstanding; /* requests whose replies are due */
static _Atomic size_t flushes_due;

/* Under SHMEM_THREAD_MULTIPLE, application threads share the client
 * endpoint (one thread at a time, as fastmsg asks) and the tables above:
 * each takes this lock for its sends and for reading replies, and never
 * holds it while waiting for another thread. Recursive: a send that meets
 * a full ring reads replies meanwhile. Below MULTIPLE it is not taken. */
static pthread_mutex_t client_lock;

static void client_enter(void)
{
    if (S.thread_level == SHMEM_THREAD_MULTIPLE)
        pthread_mutex_lock(&client_lock);
}

static void client_leave(void)
{
    if (S.thread_level == SHMEM_THREAD_MULTIPLE)
        pthread_mutex_unlock(&client_lock);
}


/* Who serves the server endpoint: whoever holds serve_lock. While the
 * application thread waits in the library it serves from its waiting loop
 * (last_poll: when it last did), so a target inside the library answers
 * without a thread wake-up, and the server thread parks. The server thread
 * takes over, sleeping in fm_wait, when the application thread starts to
 * nap in a long wait (it says so), or PARK_NS after it last polled (it went
 * back to computing): a computing target answers after one wake-up. */
#define PARK_NS 200000
static pthread_mutex_t serve_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t park_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cond = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t last_poll;
static _Thread_local bool on_server_thread;

/* The server touches symmetric memory while the application thread may use
 * it: their ordering is the program's, made through other PEs (a barrier, a
 * flag set by a put), which ThreadSanitizer cannot follow. Under TSan those
 * accesses are ignored rather than reported and suppressed: a suppressed
 * report costs a stack symbolization per racy range, minutes per test. */
#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreReadsBegin(const char *file, int line);
void AnnotateIgnoreReadsEnd(const char *file, int line);
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define USER_DATA_BEGIN()                                                                      \
    (AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__))
#define USER_DATA_END()                                                                        \
    (AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__))
#else
#define USER_DATA_BEGIN() ((void)0)
#define USER_DATA_END() ((void)0)
#endif

/* ---- sending ---- */

/* A reply that finds its initiator's ring full, with more requests queued
 * at the server: fm_wait returns at once for those. Blocked up to
 * SEND_SPIN_NS is flow control (the initiator drains the ring as it waits),
 * after that the initiator is computing, and the server naps, longer each
 * time: a full ring then costs it no CPU. */
#define SEND_SPIN_NS 200000
#define SEND_NAP_MIN_NS 20000
#define SEND_NAP_MAX_NS 1000000

/* Sends one message: header and payload, the payload as a series of
 * messages if the ring takes a prefix at a time (each with its own header,
 * the offset advanced). `ep` is the client (application thread) or the
 * server (its thread), and waits as that thread may. */
static void send_msg(fm_ep *ep, fm_addr dst, struct am_hdr h, const void *payload, size_t len,
                     int pe)
{
    const char *p = payload;
    uint64_t last_check = 0, blocked_since = 0;
    long nap = SEND_NAP_MIN_NS;
    /* Until the header went with the last of the payload: a message of a
     * header alone that found no room is tried again too (a FLUSH or its
     * reply dropped so left its initiator in shmem_quiet for ever). */
    for (;;) {
        /* The payload's length is the message's less the header: the ring
         * may take a prefix, and the rest follows at its offset. */
        struct iovec iov[2] = {{&h, sizeof(h)}, {(void *)p, len}};
        ssize_t g = fm_send(ep, dst, iov, len ? 2 : 1);
        if (g >= (ssize_t)sizeof(h)) {
            size_t take = (size_t)g - sizeof(h);
            p += take;
            len -= take;
            h.off += take;
            if (!len)
                return;
            blocked_since = 0;
            nap = SEND_NAP_MIN_NS;
            continue;
        }
        if (g >= 0)
            fmshmem_fatal("fastmsg took %zd bytes of a %zu-byte header", g, sizeof(h));
        if ((g == FM_EPEERLOST || g == FM_EINVAL) && ep == S.server) {
            /* The initiator is gone: its job ends without the reply. (Any
             * other failure is fatal below: a reply dropped while its
             * initiator lives leaves it waiting for ever.) */
            fm_log_limited(FM_LOG_WARN, SUBSYS, 5, "reply to PE %d not sent: %s", pe,
                           fm_strerror((int)g));
            return;
        }
        if (g == FM_EPEERLOST)
            fmshmem_pe_died(pe);
        if (g != FM_EAGAIN)
            fmshmem_fatal("sending to PE %d: %s", pe, fm_strerror((int)g));
        /* The application thread takes replies while it waits, even when
         * it sends as the server: two PEs serving each other's gets must
         * not wait on each other's full reply rings. */
        if (!on_server_thread)
            fmshmem_am_poll();
        uint64_t now = fm_now_ns();
        if (!blocked_since)
            blocked_since = now;
        if (ep == S.server && now - blocked_since > SEND_SPIN_NS) {
            struct timespec ts = {0, nap};
            nanosleep(&ts, NULL);
            nap = FM_MIN(nap * 2, SEND_NAP_MAX_NS);
            fm_progress(S.ctx); /* reads the acks and credits that make room */
        } else {
            fm_wait(ep, 5);
        }
        if (!on_server_thread && now - last_check > 100000000u) {
            fmshmem_check_peers();
            last_check = now;
        }
    }
}

static void mark_dirty(int pe)
{
    if (!S.dirty[pe]) {
        S.dirty[pe] = 1;
        S.dirty_list[S.ndirty++] = pe;
    }
}

static int pend_get(char *dst, size_t len, uint64_t *token)
{
    FMSHMEM_WAIT_WHILE(npend_free == 0);
    int i = pend_free[--npend_free];
    pend[i].dst = dst;
    pend[i].total = pend[i].left = len;
    pend[i].used = true;
    pend[i].gen++;
    outstanding++;
    *token = (uint64_t)pend[i].gen << 32 | (uint32_t)i;
    return i;
}

static bool still_pending(int i, uint32_t gen)
{
    client_enter();
    bool r = pend[i].used && pend[i].gen == gen;
    client_leave();
    return r;
}

static void wait_pending(int i, uint32_t gen)
{
    FMSHMEM_WAIT_WHILE(still_pending(i, gen));
}

void fmshmem_am_put(int pe, enum seg s, uint64_t off, const void *src, size_t len)
{
    struct am_hdr h = {.op = AM_PUT, .seg = (uint8_t)s, .off = off};
    client_enter();
    send_msg(S.client, S.server_addr[pe], h, src, len, pe);
    mark_dirty(pe);
    client_leave();
}

void fmshmem_am_get(int pe, enum seg s, uint64_t off, void *dst, size_t len, bool blocking)
{
    for (size_t done = 0; done < len; done += GET_CHUNK) {
        size_t n = FM_MIN(GET_CHUNK, len - done);
        uint64_t token;
        client_enter();
        pend_get((char *)dst + done, n, &token);
        struct am_hdr h = {.op = AM_GET, .seg = (uint8_t)s, .len = (uint32_t)n,
                           .off = off + done, .token = token};
        send_msg(S.client, S.server_addr[pe], h, NULL, 0, pe);
        client_leave();
    }
    /* Waits for every get in flight, this one's chunks among them. */
    if (blocking)
        fmshmem_am_quiet_gets();
}

void fmshmem_am_amo(int pe, enum seg s, uint64_t off, enum amo_op op, int size, uint64_t value,
                    uint64_t cond, void *fetch, bool blocking)
{
    uint64_t ops[2] = {value, cond};
    struct am_hdr h = {.op = fetch ? AM_FAMO : AM_AMO, .seg = (uint8_t)s,
                       .size = (uint8_t)size, .amo = (uint8_t)op, .off = off};
    int i = -1;
    client_enter();
    if (fetch)
        i = pend_get(fetch, (size_t)size, &h.token);
    send_msg(S.client, S.server_addr[pe], h, ops, sizeof(ops), pe);
    if (!fetch)
        mark_dirty(pe);
    client_leave();
    if (fetch && blocking)
        wait_pending(i, (uint32_t)(h.token >> 32));
}

void fmshmem_am_quiet_gets(void)
{
    FMSHMEM_WAIT_WHILE(outstanding);
}

void fmshmem_am_quiet(void)
{
    client_enter();
    for (int k = 0; k < S.ndirty; k++) {
        int pe = S.dirty_list[k];
        struct am_hdr h = {.op = AM_FLUSH};
        send_msg(S.client, S.server_addr[pe], h, NULL, 0, pe);
        flushes_due++;
        S.dirty[pe] = 0;
    }
    S.ndirty = 0;
    client_leave();
    FMSHMEM_WAIT_WHILE(outstanding || flushes_due);
}

/* ---- receiving ---- */

/* Messages come from this job's PEs over an authenticated, ordered session:
 * one that does not parse is a bug or a mix of library versions, and
 * skipping it would leave its initiator waiting for ever. */
static _Noreturn void malformed(const char *what, int pe)
{
    if (pe >= 0)
        fmshmem_fatal("%s from PE %d does not parse (another libfmshmem version?)", what, pe);
    fmshmem_fatal("%s does not parse (another libfmshmem version?)", what);
}

static struct pending *reply_slot(uint64_t token)
{
    uint32_t i = (uint32_t)token;
    if (i >= PENDING_MAX || !pend[i].used || pend[i].gen != (uint32_t)(token >> 32))
        return NULL;
    return &pend[i];
}

static void reply_done(struct pending *p)
{
    p->used = false;
    pend_free[npend_free++] = (int)(p - pend);
    outstanding--;
}

static void handle_reply(const struct iovec *seg, int nseg, size_t n)
{
    struct am_hdr h;
    if (n < sizeof(h))
        malformed("a reply", -1);
    fmshmem_copy_out(&h, seg, nseg, 0, sizeof(h));
    if (h.op == AM_FLUSH_REP) {
        if (flushes_due)
            flushes_due--;
        return;
    }
    struct pending *p = reply_slot(h.token);
    size_t len = n - sizeof(h);
    if (!p || !fmshmem_am_reply_ok(&h, len, p->total, p->left))
        malformed("a reply", -1);
    /* Replies of one get arrive in order: off counts from the chunk's start. */
    fmshmem_copy_out(p->dst + h.off, seg, nseg, sizeof(h), len);
    p->left -= len;
    if (!p->left)
        reply_done(p);
}

void fmshmem_am_poll(void)
{
    if (!S.client || !S.any_remote)
        return;
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    fm_addr src;
    ssize_t n;
    client_enter();
    while ((n = fm_recv(S.client, seg, &nseg, &src)) != FM_EAGAIN) {
        if (n == FM_EPEERLOST) {
            if (!S.finalized)
                fmshmem_check_peers();
            continue;
        }
        if (n < 0)
            fmshmem_fatal("receiving: %s", fm_strerror((int)n));
        handle_reply(seg, nseg, (size_t)n);
        fm_recv_done(S.client);
    }
    client_leave();
}

/* ---- the server thread ---- */

static void serve(const struct iovec *seg, int nseg, size_t n, int pe)
{
    struct am_hdr h;
    if (n < sizeof(h) || pe < 0 || pe >= S.npes)
        malformed("a request", pe);
    fmshmem_copy_out(&h, seg, nseg, 0, sizeof(h));
    size_t len = n - sizeof(h);
    size_t sizes[SEG_COUNT] = {S.seg[SEG_HEAP].size, S.seg[SEG_STATIC].size};
    if (!fmshmem_am_request_ok(&h, len, sizes))
        malformed("a request", pe);
    if (h.op == AM_FLUSH) {
        struct am_hdr r = {.op = AM_FLUSH_REP};
        send_msg(S.server, S.client_addr[pe], r, NULL, 0, pe);
        return;
    }
    char *at = S.seg[h.seg].base + h.off;
    if (h.op == AM_PUT) {
        USER_DATA_BEGIN();
        fmshmem_copy_out(at, seg, nseg, sizeof(h), len);
        USER_DATA_END();
    } else if (h.op == AM_GET) {
        struct am_hdr r = {.op = AM_GET_REP, .token = h.token};
        USER_DATA_BEGIN();
        send_msg(S.server, S.client_addr[pe], r, at, h.len, pe);
        USER_DATA_END();
    } else {
        uint64_t ops[2];
        fmshmem_copy_out(ops, seg, nseg, sizeof(h), sizeof(ops));
        USER_DATA_BEGIN();
        uint64_t old = fmshmem_amo_apply(at, (enum amo_op)h.amo, h.size, ops[0], ops[1]);
        USER_DATA_END();
        if (h.op == AM_FAMO) {
            struct am_hdr r = {.op = AM_FAMO_REP, .token = h.token};
            send_msg(S.server, S.client_addr[pe], r, &old, h.size, pe);
        }
    }
}

/* Serves up to `max` requests waiting at the server endpoint (serve_lock held). */
static int drain(int max)
{
    struct iovec seg[FM_SEGS_MAX];
    int nseg, n = 0;
    fm_addr src;
    for (; n < max; n++) {
        ssize_t len = fm_recv(S.server, seg, &nseg, &src);
        if (len == FM_EAGAIN)
            break;
        if (len < 0)
            continue; /* a lost peer: the application thread ends the job */
        serve(seg, nseg, (size_t)len, fm_addr_rank(S.ctx, src));
        fm_recv_done(S.server);
    }
    return n;
}

void fmshmem_am_serve_inline(void)
{
    atomic_store_explicit(&last_poll, fm_now_ns(), memory_order_relaxed);
    if (pthread_mutex_trylock(&serve_lock) == 0) {
        drain(32);
        pthread_mutex_unlock(&serve_lock);
    }
}

void fmshmem_am_hand_over(void)
{
    atomic_store_explicit(&last_poll, 0, memory_order_relaxed);
    pthread_mutex_lock(&park_lock);
    pthread_cond_signal(&park_cond);
    pthread_mutex_unlock(&park_lock);
}

/* Sleeps up to PARK_NS or until the application thread hands over. */
static void park(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += PARK_NS;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&park_lock);
    pthread_cond_timedwait(&park_cond, &park_lock, &ts);
    pthread_mutex_unlock(&park_lock);
}

static bool stopping(void) { return atomic_load_explicit(&S.server_stop, memory_order_acquire); }

static void *server_main(void *arg)
{
    (void)arg;
    on_server_thread = true;
    pthread_mutex_lock(&serve_lock);
    while (!stopping()) {
        if (drain(64))
            continue;
        uint64_t polled = atomic_load_explicit(&last_poll, memory_order_relaxed);
        if (fm_now_ns() - polled < PARK_NS) {
            pthread_mutex_unlock(&serve_lock);
            park();
            pthread_mutex_lock(&serve_lock);
            continue;
        }
        fm_wait(S.server, 50);
    }
    pthread_mutex_unlock(&serve_lock);
    return NULL;
}

int fmshmem_am_init(void)
{
    S.server_addr = calloc((size_t)S.npes, sizeof(fm_addr));
    S.client_addr = calloc((size_t)S.npes, sizeof(fm_addr));
    S.dirty = calloc((size_t)S.npes, 1);
    S.dirty_list = calloc((size_t)S.npes, sizeof(int));
    if (!S.server_addr || !S.client_addr || !S.dirty || !S.dirty_list)
        return -1;
    for (int pe = 0; pe < S.npes; pe++) {
        S.server_addr[pe] = fm_addr_of(S.ctx, pe, CH_SERVER);
        S.client_addr[pe] = fm_addr_of(S.ctx, pe, CH_CLIENT);
    }
    pthread_mutexattr_t recursive;
    pthread_mutexattr_init(&recursive);
    pthread_mutexattr_settype(&recursive, PTHREAD_MUTEX_RECURSIVE);
    pthread_mutex_init(&client_lock, &recursive);
    pthread_mutexattr_destroy(&recursive);
    for (int i = 0; i < PENDING_MAX; i++)
        pend_free[i] = PENDING_MAX - 1 - i;
    npend_free = PENDING_MAX;
    int rc = fm_ep_open(S.ctx, CH_SERVER, &S.server);
    if (rc) {
        fm_error(SUBSYS, "cannot open the server endpoint: %s", fm_strerror(rc));
        return -1;
    }
    atomic_store(&S.server_stop, 0);
    if (pthread_create(&S.server_thread, NULL, server_main, NULL) != 0) {
        fm_ep_close(S.server);
        return -1;
    }
    return 0;
}

void fmshmem_am_fini(void)
{
    atomic_store_explicit(&S.server_stop, 1, memory_order_release);
    fmshmem_am_hand_over();
    pthread_join(S.server_thread, NULL);
    fm_ep_close(S.server);
    free(S.server_addr);
    free(S.client_addr);
    free(S.dirty);
    free(S.dirty_list);
}
