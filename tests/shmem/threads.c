/*
 * threads.c: SHMEM_THREAD_MULTIPLE, several threads of each PE communicating at once.
 *
 * Each of THREADS threads, on every PE: puts its own block to the right neighbour (half
 * blocking, half nonblocking), gets the left neighbour's copy of it back, adds to a counter
 * on the right neighbour and to one on PE 0 with fetching atomics, and calls shmem_quiet;
 * odd threads do all of it through a private context of their own. After the threads join:
 * every block, both counters and each thread's fetched values are checked. A PE given less
 * than SHMEM_THREAD_MULTIPLE says so and checks nothing.
 */
#include "shtest.h"

#include <pthread.h>
#include <stdlib.h>

enum { THREADS = 4, ROUNDS = 200, BLOCK = 512 };

static int me, npes, right, left;
static long blocks[THREADS][BLOCK]; /* written by the left neighbour's thread t */
static long counter, total;         /* counter: the left neighbour's adds; total: on PE 0 */

static long value_of(int pe, int t, int round, int i)
{
    return ((long)pe << 40) | ((long)t << 32) | ((long)round << 16) | i;
}

struct job {
    int t;
    int failed_at; /* the first round whose check failed, or -1 */
};

static void *work(void *arg)
{
    struct job *j = arg;
    int t = j->t;
    long src[BLOCK], back[BLOCK], last_fetched = -1;
    shmem_ctx_t ctx = SHMEM_CTX_DEFAULT;

    j->failed_at = -1;
    if (t % 2 && shmem_ctx_create(SHMEM_CTX_PRIVATE, &ctx) != 0)
        ctx = SHMEM_CTX_DEFAULT;
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < BLOCK; i++)
            src[i] = value_of(me, t, r, i);
        if (r % 2)
            shmem_ctx_long_put_nbi(ctx, blocks[t], src, BLOCK, right);
        else
            shmem_ctx_long_put(ctx, blocks[t], src, BLOCK, right);
        shmem_ctx_quiet(ctx);
        /* Only this thread writes blocks[t] at the right neighbour. */
        shmem_ctx_long_get(ctx, back, blocks[t], BLOCK, right);
        long fetched = shmem_ctx_long_atomic_fetch_add(ctx, &counter, 1, right);
        shmem_ctx_long_atomic_add(ctx, &total, 1, 0);
        shmem_ctx_quiet(ctx);
        if (j->failed_at < 0 && (memcmp(back, src, sizeof(src)) != 0 || fetched <= last_fetched))
            j->failed_at = r;
        last_fetched = fetched;
    }
    if (ctx != SHMEM_CTX_DEFAULT)
        shmem_ctx_destroy(ctx);
    return NULL;
}

int main(void)
{
    int provided;

    shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided);
    ring_place(&me, &npes, &right, &left);
    if (provided != SHMEM_THREAD_MULTIPLE) {
        if (me == 0)
            printf("threads: SHMEM_THREAD_MULTIPLE not provided (%d), nothing checked\n",
                   provided);
        return finish("threads");
    }
    shmem_barrier_all();

    pthread_t tid[THREADS];
    struct job jobs[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t].t = t;
        if (pthread_create(&tid[t], NULL, work, &jobs[t]) != 0)
            fail("error", "0", "pthread_create");
    }
    for (int t = 0; t < THREADS; t++)
        pthread_join(tid[t], NULL);
    for (int t = 0; t < THREADS; t++)
        expect_eq(jobs[t].failed_at, -1, "thread %d: first round whose get or fetch was wrong",
                  t);
    shmem_barrier_all();
    for (int t = 0; t < THREADS; t++)
        for (int i = 0; i < BLOCK; i++)
            expect_eq(blocks[t][i], value_of(left, t, ROUNDS - 1, i),
                      "block of thread %d, element %d", t, i);
    expect_eq(counter, (long)THREADS * ROUNDS, "the left neighbour's fetch_adds");
    if (me == 0)
        expect_eq(total, (long)THREADS * ROUNDS * npes, "every thread's adds on PE 0");
    return finish("threads");
}
