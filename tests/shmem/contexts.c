/*
 * contexts.c: OpenSHMEM communication contexts (1.4; team contexts 1.5).
 *
 * A context made with shmem_ctx_create: typed and generic puts, gets, p/g and atomics
 * through it, nonblocking puts completed by shmem_ctx_quiet alone, shmem_ctx_fence ordering
 * a payload before its flag. SHMEM_CTX_DEFAULT in the generic forms. With 1.5 headers: a
 * context of the team of even PEs, whose operations number PEs in that team, and
 * shmem_ctx_get_team. Each PE writes to its right neighbour and checks what its left one
 * wrote, as in rma.c.
 */
#include "shtest.h"

#define HAVE_1_5 (SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 5)

enum { N = 1000 };

static int me, npes, right, left;
static long dst[N], flag, counter;
static double dval;

static long value_of(int pe, int i) { return (long)pe * 100000 + i; }

static void world_context(shmem_ctx_t ctx, const char *name)
{
    long src[N];

    for (int i = 0; i < N; i++)
        src[i] = value_of(me, i);
    counter = 0;
    flag = 0;
    shmem_barrier_all();
    shmem_ctx_long_put_nbi(ctx, dst, src, N / 2, right);
    shmem_put_nbi(ctx, dst + N / 2, src + N / 2, N - N / 2, right);
    shmem_ctx_fence(ctx);
    shmem_p(ctx, &flag, 1L, right);
    shmem_atomic_add(ctx, &counter, 5L, right);
    shmem_ctx_long_atomic_inc(ctx, &counter, right);
    shmem_p(ctx, &dval, 0.25 * me, right);
    shmem_ctx_quiet(ctx);
    shmem_barrier_all();
    expect_eq(flag, 1, "%s: flag", name);
    for (int i = 0; i < N; i++)
        expect_eq(dst[i], value_of(left, i), "%s: element %d of the put", name, i);
    expect_eq(counter, 6, "%s: shmem_atomic_add + shmem_ctx_long_atomic_inc", name);
    expect_fp(dval, 0.25 * left, "%s: shmem_p(double)", name);
    shmem_barrier_all(); /* every PE checked its counter before it changes */
    /* Reads from the right neighbour, which holds this PE's data now. */
    long back[N];
    shmem_get(ctx, back, dst, N, right);
    for (int i = 0; i < N; i++)
        expect_eq(back[i], value_of(me, i), "%s: element %d of the get", name, i);
    expect_eq(shmem_g(ctx, &dst[7], right), value_of(me, 7), "%s: shmem_g", name);
    expect_eq(shmem_ctx_long_atomic_fetch_add(ctx, &counter, 1, right), 6,
              "%s: shmem_ctx_long_atomic_fetch_add", name);
    expect_eq(shmem_atomic_fetch(ctx, &counter, right), 7, "%s: shmem_atomic_fetch", name);
    shmem_barrier_all();
}

#if HAVE_1_5
/* The team of even PEs: PE numbers given to its context are team numbers. */
static void team_context(void)
{
    shmem_team_t evens;
    shmem_ctx_t ctx = SHMEM_CTX_INVALID;

    shmem_team_split_strided(SHMEM_TEAM_WORLD, 0, 2, (npes + 1) / 2, NULL, 0, &evens);
    flag = -1;
    shmem_barrier_all();
    if (evens != SHMEM_TEAM_INVALID) {
        int tme = shmem_team_my_pe(evens), tn = shmem_team_n_pes(evens);
        shmem_team_t got;

        expect_eq(shmem_team_create_ctx(evens, 0, &ctx), 0, "shmem_team_create_ctx");
        expect_eq(shmem_ctx_get_team(ctx, &got), 0, "shmem_ctx_get_team");
        expect_eq(got == evens, 1, "shmem_ctx_get_team names the team");
        shmem_ctx_long_p(ctx, &flag, me, (tme + 1) % tn);
        shmem_ctx_quiet(ctx);
    }
    shmem_barrier_all();
    if (evens != SHMEM_TEAM_INVALID) {
        int tn = shmem_team_n_pes(evens), tme = shmem_team_my_pe(evens);
        int from = shmem_team_translate_pe(evens, (tme + tn - 1) % tn, SHMEM_TEAM_WORLD);

        expect_eq(flag, from, "a p through the team context, from team PE %d",
                  (tme + tn - 1) % tn);
        shmem_ctx_destroy(ctx);
        shmem_team_destroy(evens);
    } else {
        expect_eq(flag, -1, "an odd PE written through the evens' context");
    }
    shmem_team_t team;
    expect_eq(shmem_ctx_get_team(SHMEM_CTX_DEFAULT, &team), 0, "shmem_ctx_get_team(default)");
    expect_eq(team == SHMEM_TEAM_WORLD, 1, "SHMEM_CTX_DEFAULT's team is the world");
    shmem_barrier_all();
}
#endif

int main(void)
{
    shmem_init();
    ring_place(&me, &npes, &right, &left);

    shmem_ctx_t ctx;
    expect_eq(shmem_ctx_create(0, &ctx), 0, "shmem_ctx_create");
    world_context(ctx, "a created context");
    shmem_ctx_destroy(ctx);
    world_context(SHMEM_CTX_DEFAULT, "SHMEM_CTX_DEFAULT");
#if HAVE_1_5
    team_context();
#endif
    return finish("contexts");
}
