/* Collectives, with their results checked: barrier, bcast (every root, up to
 * 4 MiB), allreduce (sum, max, minloc, in place, 8 MiB), reduce, alltoall,
 * alltoallv (zero counts included), gather(v), allgather, scatter,
 * nonblocking iallreduce/ibarrier, and MPI_Comm_split with collectives in
 * the sub-communicators. 2 or more ranks. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "mpitest.h"
#include <time.h>

static void barrier(void)
{
    for (int i = 0; i < 200; i++)
        MPI_Barrier(MPI_COMM_WORLD);
    /* the last rank arrives 500 ms late: nobody may leave before it */
    double t0 = MPI_Wtime();
    if (mt_rank == mt_size - 1) {
        struct timespec ts = {0, 500000000L};
        nanosleep(&ts, NULL);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double dt = MPI_Wtime() - t0;
    CHECK(dt > 0.1, "left the barrier after %.3f s, before the late rank arrived", dt);
}

static void bcast(void)
{
    static const int sizes[] = {1, 1000, 1 << 20, 4 << 20};
    char *b = mt_alloc(4 << 20);
    for (int root = 0; root < mt_size; root++)
        for (int k = 0; k < 4; k++) {
            int n = sizes[k];
            if (mt_rank == root)
                mt_fill(b, n, root, k);
            else
                memset(b, 0, n);
            MPI_Bcast(b, n, MPI_BYTE, root, MPI_COMM_WORLD);
            CHECK(mt_verify(b, n, root, k) < 0, "bcast of %d bytes from %d", n, root);
        }
    free(b);
}

static void reductions(void)
{
    const int P = mt_size, N = 1 << 20;
    int x = mt_rank + 1, sum = 0;
    MPI_Allreduce(&x, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    CHECK(sum == P * (P + 1) / 2, "allreduce sum: %d", sum);
    double d = mt_rank * 1.5, dmax = 0;
    MPI_Allreduce(&d, &dmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    CHECK(dmax == (P - 1) * 1.5, "allreduce max: %g", dmax);
    struct { int v, r; } in = {100 - mt_rank % 3, mt_rank}, out;
    MPI_Allreduce(&in, &out, 1, MPI_2INT, MPI_MINLOC, MPI_COMM_WORLD);
    int want = P >= 3 ? 98 : 100 - (P - 1);
    CHECK(out.v == want && out.r == (want == 98 ? 2 : P - 1), "minloc: %d at %d", out.v, out.r);
    /* 8 MiB in place: element i is the sum over ranks of (rank * 7 + i) */
    long long *v = mt_alloc(N * sizeof *v);
    for (int i = 0; i < N; i++)
        v[i] = (long long)mt_rank * 7 + i;
    MPI_Allreduce(MPI_IN_PLACE, v, N, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    for (int i = 0; i < N; i++)
        CHECK(v[i] == 7LL * P * (P - 1) / 2 + (long long)P * i, "in-place allreduce, element %d", i);
    /* reduce to the last rank */
    for (int i = 0; i < 1000; i++)
        v[i] = mt_rank + i;
    MPI_Reduce(mt_rank == P - 1 ? MPI_IN_PLACE : v, v, 1000, MPI_LONG_LONG, MPI_SUM, P - 1,
               MPI_COMM_WORLD);
    if (mt_rank == P - 1)
        for (int i = 0; i < 1000; i++)
            CHECK(v[i] == (long long)P * (P - 1) / 2 + (long long)P * i, "reduce, element %d", i);
    /* nonblocking */
    MPI_Request rq[2];
    x = 1;
    MPI_Iallreduce(MPI_IN_PLACE, &x, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD, &rq[0]);
    MPI_Ibarrier(MPI_COMM_WORLD, &rq[1]);
    MPI_Waitall(2, rq, MPI_STATUSES_IGNORE);
    CHECK(x == P, "iallreduce: %d", x);
    free(v);
}

/* The value rank src sends to rank dst as element i. */
static int a2a(int src, int dst, int i) { return src * 1000000 + dst * 10000 + i; }

static void alltoall(MPI_Comm c)
{
    int me, P;
    MPI_Comm_rank(c, &me);
    MPI_Comm_size(c, &P);
    for (int blk = 1; blk <= 1000; blk *= 1000) {
        int *s = mt_alloc((size_t)P * blk * sizeof(int)), *r = mt_alloc((size_t)P * blk * sizeof(int));
        for (int d = 0; d < P; d++)
            for (int i = 0; i < blk; i++)
                s[d * blk + i] = a2a(me, d, i);
        MPI_Alltoall(s, blk, MPI_INT, r, blk, MPI_INT, c);
        for (int q = 0; q < P; q++)
            for (int i = 0; i < blk; i++)
                CHECK(r[q * blk + i] == a2a(q, me, i), "alltoall block %d from %d element %d", blk, q, i);
        free(s);
        free(r);
    }
    /* alltoallv: src sends (src + dst) % 3 * 500 elements to dst (some 0) */
    int sc[64], sd[64], rc[64], rd[64], ns = 0, nr = 0;
    for (int q = 0; q < P; q++) {
        sc[q] = (me + q) % 3 * 500, sd[q] = ns, ns += sc[q];
        rc[q] = (q + me) % 3 * 500, rd[q] = nr, nr += rc[q];
    }
    int *s = mt_alloc(ns * sizeof(int)), *r = mt_alloc(nr * sizeof(int));
    for (int q = 0; q < P; q++)
        for (int i = 0; i < sc[q]; i++)
            s[sd[q] + i] = a2a(me, q, i);
    MPI_Alltoallv(s, sc, sd, MPI_INT, r, rc, rd, MPI_INT, c);
    for (int q = 0; q < P; q++)
        for (int i = 0; i < rc[q]; i++)
            CHECK(r[rd[q] + i] == a2a(q, me, i), "alltoallv from %d element %d", q, i);
    free(s);
    free(r);
}

static void gathers(void)
{
    const int P = mt_size, n = 1000;
    char *mine = mt_alloc(n), *all = mt_alloc((size_t)P * n);
    mt_fill(mine, n, mt_rank, 9);
    for (int root = 0; root < P; root++) {
        memset(all, 0, (size_t)P * n);
        MPI_Gather(mine, n, MPI_BYTE, all, n, MPI_BYTE, root, MPI_COMM_WORLD);
        if (mt_rank == root)
            for (int q = 0; q < P; q++)
                CHECK(mt_verify(all + q * n, n, q, 9) < 0, "gather to %d: block of %d", root, q);
    }
    /* gatherv: rank q contributes q*10 bytes */
    int cnt[64] = {0}, dsp[64] = {0}, tot = 0;
    for (int q = 0; q < P; q++)
        cnt[q] = q * 10, dsp[q] = tot, tot += cnt[q];
    MPI_Gatherv(mine, mt_rank * 10, MPI_BYTE, all, cnt, dsp, MPI_BYTE, 0, MPI_COMM_WORLD);
    if (mt_rank == 0)
        for (int q = 0; q < P; q++)
            CHECK(mt_verify(all + dsp[q], cnt[q], q, 9) < 0, "gatherv: block of %d", q);
    MPI_Allgather(mine, n, MPI_BYTE, all, n, MPI_BYTE, MPI_COMM_WORLD);
    for (int q = 0; q < P; q++)
        CHECK(mt_verify(all + q * n, n, q, 9) < 0, "allgather: block of %d", q);
    /* scatter from the last rank: block q is what rank q would fill */
    if (mt_rank == P - 1)
        for (int q = 0; q < P; q++)
            mt_fill(all + q * n, n, q, 10);
    MPI_Scatter(all, n, MPI_BYTE, mine, n, MPI_BYTE, P - 1, MPI_COMM_WORLD);
    CHECK(mt_verify(mine, n, mt_rank, 10) < 0, "scatter: my block");
    free(mine);
    free(all);
}

/* Split by parity with reversed keys, and into pairs; collectives inside. */
static void split(void)
{
    MPI_Comm c, pairs, none;
    int me, P, world_sum = 0, want = 0;
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank % 2, -mt_rank, &c);
    MPI_Comm_rank(c, &me);
    MPI_Comm_size(c, &P);
    int expect_P = (mt_size - mt_rank % 2 + 1) / 2;
    CHECK(P == expect_P, "split by parity: size %d, expected %d", P, expect_P);
    /* keys reversed: the highest world rank of my colour is rank 0 */
    int hi = (mt_size - 1) - ((mt_size - 1 - mt_rank) % 2);
    CHECK(me == (hi - mt_rank) / 2, "split: rank %d in the sub-communicator", me);
    MPI_Allreduce(&mt_rank, &world_sum, 1, MPI_INT, MPI_SUM, c);
    for (int r = mt_rank % 2; r < mt_size; r += 2)
        want += r;
    CHECK(world_sum == want, "allreduce in the sub-communicator: %d, expected %d", world_sum, want);
    int v = mt_rank;
    MPI_Bcast(&v, 1, MPI_INT, 0, c);
    CHECK(v == hi, "bcast from the sub-communicator's rank 0: %d, expected %d", v, hi);
    MPI_Barrier(c);
    alltoall(c);
    /* pairs, and a split that leaves the last rank out */
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank / 2, mt_rank, &pairs);
    int s = 0;
    MPI_Allreduce(&mt_rank, &s, 1, MPI_INT, MPI_SUM, pairs);
    int first = mt_rank & ~1;
    CHECK(s == first + (first + 1 < mt_size ? first + 1 : 0), "pair allreduce: %d", s);
    MPI_Comm_split(MPI_COMM_WORLD, mt_rank == mt_size - 1 ? MPI_UNDEFINED : 0, 0, &none);
    CHECK((mt_rank == mt_size - 1) == (none == MPI_COMM_NULL), "MPI_UNDEFINED colour");
    if (none != MPI_COMM_NULL) {
        MPI_Barrier(none);
        MPI_Comm_free(&none);
    }
    MPI_Comm_free(&pairs);
    MPI_Comm_free(&c);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "coll");
    CHECK(mt_size >= 2 && mt_size <= 64, "needs 2 to 64 ranks");
    barrier();
    mt_ok("barrier (200 times; nobody leaves before the last arrives)");
    bcast();
    mt_ok("bcast from every root, 1 B to 4 MiB");
    reductions();
    mt_ok("allreduce (sum, max, minloc, 8 MiB in place), reduce, iallreduce, ibarrier");
    alltoall(MPI_COMM_WORLD);
    mt_ok("alltoall (1 and 1000 ints per rank), alltoallv with zero counts");
    gathers();
    mt_ok("gather to every root, gatherv, allgather, scatter");
    split();
    mt_ok("MPI_Comm_split (parity, reversed keys; pairs; MPI_UNDEFINED) + collectives inside");
    return mt_finish();
}
