/*
 * Ordering, waiting, barriers and locks.
 *
 * Barriers are dissemination barriers whose counters are symmetric longs:
 * in round r a PE adds one to the counter r of the PE 2^r after it (a CPU
 * atomic on this node, an AMO message across nodes) and waits for its own
 * counter r to become non-zero, then takes one away. Counting instead of
 * flagging lets a fast PE enter the next barrier early without confusing
 * the slow one, and leaves the counters at zero (SHMEM_SYNC_VALUE) once
 * every PE is through.
 */
#include "shmem_internal.h"

#include "core/ctx.h"

#include <sched.h>
#include <time.h>

/* Waiting: spin (when the node has a CPU per PE), then yield, then nap, so
 * eight PEs on two cores progress and a long wait costs little CPU. */
#define YIELDS_BEFORE_NAP 2000
#define NAP_NS 20000
#define CHECK_EVERY_NS 100000000u

void fmshmem_wait_step(uint64_t *spins)
{
    uint64_t n = (*spins)++;
    bool napping = n >= S.spin_before_yield + YIELDS_BEFORE_NAP;
    if (S.any_remote) {
        /* Moves the network along (our sends, arriving acks, replies) and
         * serves requests without waking the server thread; a napping
         * thread would hold requests up, so the server thread serves then. */
        fm_links_progress(S.ctx, 1);
        fmshmem_am_poll();
        if (!napping)
            fmshmem_am_serve_inline();
        else if (n == S.spin_before_yield + YIELDS_BEFORE_NAP)
            fmshmem_am_hand_over();
    }
    if (n < S.spin_before_yield) {
        fm_cpu_relax();
        return;
    }
    static _Thread_local uint64_t last_check;
    if (!napping) {
        sched_yield();
    } else {
        struct timespec ts = {0, NAP_NS};
        nanosleep(&ts, NULL);
    }
    if ((n & 63) == 0) {
        uint64_t now = fm_now_ns();
        if (now - last_check > CHECK_EVERY_NS) {
            last_check = now;
            fmshmem_check_peers();
        }
    }
}

void shmem_fence(void)
{
    /* Across nodes messages to one PE stay in order: only local stores
     * need ordering. */
    __atomic_thread_fence(__ATOMIC_RELEASE);
}

void shmem_quiet(void)
{
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    if (S.any_remote)
        fmshmem_am_quiet();
}

/* ---- barriers ---- */

long *fmshmem_team_psync(int slot)
{
    return (long *)(S.seg[SEG_HEAP].base + (size_t)slot * TEAM_SLOT_LONGS * sizeof(long));
}

void fmshmem_set_sync(int start, int stride, int size, int my_index, long *psync)
{
    if (size <= 1)
        return;
    for (int r = 0, d = 1; d < size; r++, d <<= 1) {
        int partner = start + ((my_index + d) % size) * stride;
        fmshmem_amo(&psync[r], partner, AMO_ADD, sizeof(long), 1, 0, false, "barrier");
        FMSHMEM_WAIT_WHILE(__atomic_load_n(&psync[r], __ATOMIC_ACQUIRE) == 0);
        __atomic_fetch_sub(&psync[r], 1, __ATOMIC_ACQ_REL);
    }
}

/* A team whose members all share this node: every member adds one to a
 * counter in the first member's slot and waits for its generation to move;
 * the last to arrive resets the counter and moves the generation. One wait
 * instead of log2(N) chained ones, which matters when PEs outnumber CPUs
 * and each hop of a dissemination barrier may wait for a context switch. */
static void central_sync(struct fmshmem_team *t)
{
    long *w = fmshmem_local_ptr(fmshmem_team_psync(t->slot), TEAM_SLOT_LONGS * sizeof(long),
                                t->start, "barrier");
    long gen = __atomic_load_n(&w[SLOT_CENTRAL_GEN], __ATOMIC_ACQUIRE);
    if (__atomic_fetch_add(&w[SLOT_CENTRAL_COUNT], 1, __ATOMIC_ACQ_REL) == t->size - 1) {
        __atomic_store_n(&w[SLOT_CENTRAL_COUNT], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&w[SLOT_CENTRAL_GEN], gen + 1, __ATOMIC_RELEASE);
        return;
    }
    FMSHMEM_WAIT_WHILE(__atomic_load_n(&w[SLOT_CENTRAL_GEN], __ATOMIC_ACQUIRE) == gen);
}

void fmshmem_team_sync_internal(struct fmshmem_team *t)
{
    if (t->on_node && t->size > 1)
        central_sync(t);
    else
        fmshmem_set_sync(t->start, t->stride, t->size, t->my_pe, fmshmem_team_psync(t->slot));
}

void shmem_barrier_all(void)
{
    shmem_quiet();
    fmshmem_team_sync_internal(&S.world);
}

void shmem_sync_all(void) { fmshmem_team_sync_internal(&S.world); }

int shmem_team_sync(shmem_team_t team)
{
    if (!team || team->my_pe < 0)
        return -1;
    fmshmem_team_sync_internal(team);
    return 0;
}

/* The active set's index of this PE, or -1 if it is not a member. */
static int active_index(int start, int log_stride, int size)
{
    int stride = 1 << log_stride;
    int d = S.me - start;
    if (d < 0 || d % stride || d / stride >= size)
        return -1;
    return d / stride;
}

void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
    int i = active_index(PE_start, logPE_stride, PE_size);
    if (i < 0)
        fmshmem_fatal("shmem_barrier: PE %d is not in the active set (start %d, log stride %d, "
                      "size %d)",
                      S.me, PE_start, logPE_stride, PE_size);
    shmem_quiet();
    fmshmem_set_sync(PE_start, 1 << logPE_stride, PE_size, i, pSync);
}

void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync)
{
    int i = active_index(PE_start, logPE_stride, PE_size);
    if (i < 0)
        fmshmem_fatal("shmem_sync: PE %d is not in the active set", S.me);
    fmshmem_set_sync(PE_start, 1 << logPE_stride, PE_size, i, pSync);
}

/* ---- point-to-point synchronization ---- */

#define CMP(a, cmp, b)                                                                         \
    ((cmp) == SHMEM_CMP_EQ   ? (a) == (b)                                                      \
     : (cmp) == SHMEM_CMP_NE ? (a) != (b)                                                      \
     : (cmp) == SHMEM_CMP_GT ? (a) > (b)                                                       \
     : (cmp) == SHMEM_CMP_GE ? (a) >= (b)                                                      \
     : (cmp) == SHMEM_CMP_LT ? (a) < (b)                                                       \
                             : (a) <= (b))

/* A test moves this PE's replies along, as a wait does: a program that
 * polls a flag with test_all, say, while a get of its own is out left the
 * reply unread, and the target's server, blocked sending it, served nobody
 * else (the spec requires progress whatever the program polls with). */
void fmshmem_test_progress(void)
{
    if (S.any_remote)
        fmshmem_am_poll();
}

/* Where the next test_any or wait_until_any on an array starts to look:
 * after the element the last call on it returned, so that repeated calls
 * return each satisfying element in turn (the spec: a series of calls must
 * eventually return every index that satisfies the test). Kept for a few
 * arrays at once, by address: a program may poll several in alternation;
 * per thread, as each thread's series of calls must be fair. */
#define ANY_ARRAYS 16
static _Thread_local struct {
    const void *ivars;
    size_t next;
} any_at[ANY_ARRAYS];

static size_t *any_next(const void *ivars)
{
    size_t h = ((uintptr_t)ivars / 8) % ANY_ARRAYS;
    if (any_at[h].ivars != ivars) {
        any_at[h].ivars = ivars;
        any_at[h].next = 0;
    }
    return &any_at[h].next;
}

static void check_cmp(int cmp, const char *what)
{
    if (cmp < SHMEM_CMP_EQ || cmp > SHMEM_CMP_LE)
        fmshmem_fatal("%s: %d is not a SHMEM_CMP_ constant", what, cmp);
}

#define DEF_SYNC(T, N)                                                                         \
    static inline bool N##_ok(T *ivar, int cmp, T v)                                           \
    {                                                                                          \
        T x = __atomic_load_n(ivar, __ATOMIC_ACQUIRE);                                         \
        return CMP(x, cmp, v);                                                                 \
    }                                                                                          \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value)                                 \
    {                                                                                          \
        check_cmp(cmp, "shmem_wait_until");                                                    \
        FMSHMEM_WAIT_WHILE(!N##_ok(ivar, cmp, cmp_value));                                     \
    }                                                                                          \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value)                                        \
    {                                                                                          \
        check_cmp(cmp, "shmem_test");                                                          \
        fmshmem_test_progress();                                                               \
        return N##_ok(ivar, cmp, cmp_value);                                                   \
    }                                                                                          \
    void shmem_##N##_wait(T *ivar, T cmp_value)                                                \
    {                                                                                          \
        shmem_##N##_wait_until(ivar, SHMEM_CMP_NE, cmp_value);                                 \
    }                                                                                          \
    /* The vector forms: values[i] (vec) or the one value. Returns how many  \
     * of the unmasked elements now satisfy it; those go to indices (some). */ \
    static size_t N##_scan(T *ivars, size_t nelems, const int *status, int cmp, const T *vals, \
                           T val, size_t *indices)                                             \
    {                                                                                          \
        size_t n = 0;                                                                          \
        for (size_t i = 0; i < nelems; i++) {                                                  \
            if (status && status[i])                                                           \
                continue;                                                                      \
            if (N##_ok(&ivars[i], cmp, vals ? vals[i] : val)) {                                \
                if (indices)                                                                   \
                    indices[n] = i;                                                            \
                n++;                                                                           \
            }                                                                                  \
        }                                                                                      \
        return n;                                                                              \
    }                                                                                          \
    /* The first unmasked element from `start` on, round the end, that now   \
     * satisfies it; SIZE_MAX if none. */                                    \
    static size_t N##_first(T *ivars, size_t nelems, const int *status, int cmp,              \
                            const T *vals, T val, size_t start)                                \
    {                                                                                          \
        for (size_t k = 0; k < nelems; k++) {                                                  \
            size_t i = (start + k) % nelems;                                                   \
            if (!(status && status[i]) && N##_ok(&ivars[i], cmp, vals ? vals[i] : val))        \
                return i;                                                                      \
        }                                                                                      \
        return SIZE_MAX;                                                                       \
    }                                                                                          \
    static size_t N##_active(size_t nelems, const int *status)                                 \
    {                                                                                          \
        size_t n = 0;                                                                          \
        for (size_t i = 0; i < nelems; i++)                                                    \
            n += !(status && status[i]);                                                       \
        return n;                                                                              \
    }                                                                                          \
    static int N##_all(T *ivars, size_t nelems, const int *status, int cmp, const T *vals,     \
                       T val)                                                                  \
    {                                                                                          \
        return N##_scan(ivars, nelems, status, cmp, vals, val, NULL) ==                        \
               N##_active(nelems, status);                                                     \
    }                                                                                          \
    void shmem_##N##_wait_until_all(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T cmp_value)                                               \
    {                                                                                          \
        check_cmp(cmp, "shmem_wait_until_all");                                                \
        FMSHMEM_WAIT_WHILE(!N##_all(ivars, nelems, status, cmp, NULL, cmp_value));             \
    }                                                                                          \
    void shmem_##N##_wait_until_all_vector(T *ivars, size_t nelems, const int *status,         \
                                           int cmp, T *cmp_values)                             \
    {                                                                                          \
        check_cmp(cmp, "shmem_wait_until_all_vector");                                         \
        FMSHMEM_WAIT_WHILE(!N##_all(ivars, nelems, status, cmp, cmp_values, 0));               \
    }                                                                                          \
    int shmem_##N##_test_all(T *ivars, size_t nelems, const int *status, int cmp,              \
                             T cmp_value)                                                      \
    {                                                                                          \
        check_cmp(cmp, "shmem_test_all");                                                      \
        fmshmem_test_progress();                                                               \
        return N##_all(ivars, nelems, status, cmp, NULL, cmp_value);                           \
    }                                                                                          \
    int shmem_##N##_test_all_vector(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T *cmp_values)                                             \
    {                                                                                          \
        check_cmp(cmp, "shmem_test_all_vector");                                               \
        fmshmem_test_progress();                                                               \
        return N##_all(ivars, nelems, status, cmp, cmp_values, 0);                             \
    }                                                                                          \
    static size_t N##_any(T *ivars, size_t nelems, const int *status, int cmp, const T *vals,  \
                          T val, bool wait)                                                    \
    {                                                                                          \
        size_t first = SIZE_MAX;                                                               \
        if (N##_active(nelems, status) == 0)                                                   \
            return first;                                                                      \
        size_t *next = any_next(ivars), start = *next % nelems;                                \
        if (wait)                                                                              \
            FMSHMEM_WAIT_WHILE((first = N##_first(ivars, nelems, status, cmp, vals, val,       \
                                                  start)) == SIZE_MAX);                        \
        else {                                                                                 \
            fmshmem_test_progress();                                                           \
            first = N##_first(ivars, nelems, status, cmp, vals, val, start);                   \
        }                                                                                      \
        if (first != SIZE_MAX)                                                                 \
            *next = first + 1;                                                                 \
        return first;                                                                          \
    }                                                                                          \
    size_t shmem_##N##_wait_until_any(T *ivars, size_t nelems, const int *status, int cmp,     \
                                      T cmp_value)                                             \
    {                                                                                          \
        check_cmp(cmp, "shmem_wait_until_any");                                                \
        return N##_any(ivars, nelems, status, cmp, NULL, cmp_value, true);                     \
    }                                                                                          \
    size_t shmem_##N##_wait_until_any_vector(T *ivars, size_t nelems, const int *status,       \
                                             int cmp, T *cmp_values)                           \
    {                                                                                          \
        check_cmp(cmp, "shmem_wait_until_any_vector");                                         \
        return N##_any(ivars, nelems, status, cmp, cmp_values, 0, true);                       \
    }                                                                                          \
    size_t shmem_##N##_test_any(T *ivars, size_t nelems, const int *status, int cmp,           \
                                T cmp_value)                                                   \
    {                                                                                          \
        check_cmp(cmp, "shmem_test_any");                                                      \
        return N##_any(ivars, nelems, status, cmp, NULL, cmp_value, false);                    \
    }                                                                                          \
    size_t shmem_##N##_test_any_vector(T *ivars, size_t nelems, const int *status, int cmp,    \
                                       T *cmp_values)                                          \
    {                                                                                          \
        check_cmp(cmp, "shmem_test_any_vector");                                               \
        return N##_any(ivars, nelems, status, cmp, cmp_values, 0, false);                      \
    }                                                                                          \
    static size_t N##_some(T *ivars, size_t nelems, size_t *indices, const int *status,        \
                           int cmp, const T *vals, T val, bool wait)                           \
    {                                                                                          \
        size_t n = 0;                                                                          \
        if (N##_active(nelems, status) == 0)                                                   \
            return 0;                                                                          \
        if (wait)                                                                              \
            FMSHMEM_WAIT_WHILE((n = N##_scan(ivars, nelems, status, cmp, vals, val,            \
                                             indices)) == 0);                                  \
        else {                                                                                 \
            fmshmem_test_progress();                                                           \
            n = N##_scan(ivars, nelems, status, cmp, vals, val, indices);                      \
        }                                                                                      \
        return n;                                                                              \
    }                                                                                          \
    size_t shmem_##N##_wait_until_some(T *ivars, size_t nelems, size_t *indices,               \
                                       const int *status, int cmp, T cmp_value)                \
    {                                                                                          \
        check_cmp(cmp, "shmem_wait_until_some");                                               \
        return N##_some(ivars, nelems, indices, status, cmp, NULL, cmp_value, true);           \
    }                                                                                          \
    size_t shmem_##N##_wait_until_some_vector(T *ivars, size_t nelems, size_t *indices,        \
                                              const int *status, int cmp, T *cmp_values)       \
    {                                                                                          \
        check_cmp(cmp, "shmem_wait_until_some_vector");                                        \
        return N##_some(ivars, nelems, indices, status, cmp, cmp_values, 0, true);             \
    }                                                                                          \
    size_t shmem_##N##_test_some(T *ivars, size_t nelems, size_t *indices, const int *status,  \
                                 int cmp, T cmp_value)                                         \
    {                                                                                          \
        check_cmp(cmp, "shmem_test_some");                                                     \
        return N##_some(ivars, nelems, indices, status, cmp, NULL, cmp_value, false);          \
    }                                                                                          \
    size_t shmem_##N##_test_some_vector(T *ivars, size_t nelems, size_t *indices,              \
                                        const int *status, int cmp, T *cmp_values)             \
    {                                                                                          \
        check_cmp(cmp, "shmem_test_some_vector");                                              \
        return N##_some(ivars, nelems, indices, status, cmp, cmp_values, 0, false);            \
    }
FMSHMEM_SYNC_TYPES(DEF_SYNC)

/* The deprecated untyped forms work on longs. A C11 program reaches the
 * generic macro of the same name instead (shmem.h). */
#undef shmem_wait_until
void shmem_wait_until(long *ivar, int cmp, long cmp_value)
{
    shmem_long_wait_until(ivar, cmp, cmp_value);
}

void shmem_wait(long *ivar, long cmp_value) { shmem_long_wait_until(ivar, SHMEM_CMP_NE, cmp_value); }

uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value)
{
    shmem_uint64_wait_until(sig_addr, cmp, cmp_value);
    return __atomic_load_n(sig_addr, __ATOMIC_ACQUIRE);
}

/* ---- locks ----
 * A ticket lock in PE 0's copy of the lock word: the high half hands out
 * tickets, the low half says whose turn it is. FIFO, so no PE starves. */

#define TICKET ((uint64_t)1 << 32)

void shmem_set_lock(long *lock)
{
    uint64_t t = fmshmem_amo(lock, 0, AMO_ADD, 8, TICKET, 0, true, "shmem_set_lock") >> 32;
    FMSHMEM_WAIT_WHILE((uint32_t)fmshmem_amo(lock, 0, AMO_FETCH, 8, 0, 0, true,
                                             "shmem_set_lock") != (uint32_t)t);
}

int shmem_test_lock(long *lock)
{
    uint64_t v = fmshmem_amo(lock, 0, AMO_FETCH, 8, 0, 0, true, "shmem_test_lock");
    if ((uint32_t)(v >> 32) != (uint32_t)v)
        return 1; /* held */
    uint64_t old = fmshmem_amo(lock, 0, AMO_CSWAP, 8, v + TICKET, v, true, "shmem_test_lock");
    return old == v ? 0 : 1;
}

void shmem_clear_lock(long *lock)
{
    /* What was written under the lock is complete before the next holder runs. */
    shmem_quiet();
    uint64_t v = fmshmem_amo(lock, 0, AMO_FETCH, 8, 0, 0, true, "shmem_clear_lock");
    for (;;) {
        uint64_t next = (v & ~(TICKET - 1)) | (uint32_t)(v + 1);
        uint64_t old = fmshmem_amo(lock, 0, AMO_CSWAP, 8, next, v, true, "shmem_clear_lock");
        if (old == v)
            break;
        v = old;
    }
}
