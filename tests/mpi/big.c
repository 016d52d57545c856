/* Multi-MiB messages with their content checked: 1, 4 and 16 MiB (and odd
 * sizes around them) both ways at once, blocking one way, sent before the
 * receive is posted (unexpected), into a larger buffer, many senders to one
 * receiver at once, and a strided datatype. 2 or more ranks; with 4 the
 * pairs are formed twice (r^1, then r^2) so both neighbours are used. */
#include "mpitest.h"

#define MiB (1 << 20)
static const int sizes[] = {1 * MiB, 4 * MiB, 16 * MiB, MiB + 1, 16 * MiB - 3};
#define NSIZES (int)(sizeof sizes / sizeof *sizes)

static void check_recv(const char *what, const char *buf, MPI_Status *st, int n, int src, int id)
{
    int got;
    long bad;
    MPI_Get_count(st, MPI_BYTE, &got);
    CHECK(st->MPI_SOURCE == src && got == n, "%s: %d bytes from %d, expected %d from %d", what,
          got, st->MPI_SOURCE, n, src);
    bad = mt_verify(buf, n, src, id);
    CHECK(bad < 0, "%s (%d bytes from %d): first wrong byte at offset %ld", what, n, src, bad);
}

/* Both ways at once, nonblocking; then one way blocking; then unexpected. */
static void pair(int peer, char *sb, char *rb)
{
    for (int k = 0; k < NSIZES; k++) {
        int n = sizes[k];
        MPI_Request rq[2];
        MPI_Status st[2];
        mt_fill(sb, n, mt_rank, 1000 + k);
        MPI_Irecv(rb, 16 * MiB, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[0]);
        MPI_Isend(sb, n, MPI_BYTE, peer, 1, MPI_COMM_WORLD, &rq[1]);
        MPI_Waitall(2, rq, st);
        check_recv("isend/irecv both ways", rb, &st[0], n, peer, 1000 + k);
    }
    int lo = mt_rank < peer;
    for (int k = 0; k < NSIZES; k++) { /* blocking, lower rank sends */
        int n = sizes[k];
        MPI_Status st;
        if (lo) {
            mt_fill(sb, n, mt_rank, 2000 + k);
            MPI_Send(sb, n, MPI_BYTE, peer, 2, MPI_COMM_WORLD);
        } else {
            MPI_Recv(rb, n, MPI_BYTE, peer, 2, MPI_COMM_WORLD, &st);
            check_recv("send/recv", rb, &st, n, peer, 2000 + k);
        }
    }
    for (int k = 0; k < NSIZES; k++) { /* unexpected: the receive is posted late */
        int n = sizes[k];
        MPI_Status st;
        if (!lo) {
            MPI_Request rq;
            mt_fill(sb, n, mt_rank, 3000 + k);
            MPI_Isend(sb, n, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &rq);
            MPI_Send(NULL, 0, MPI_BYTE, peer, 4, MPI_COMM_WORLD); /* "it is on its way" */
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
        } else {
            MPI_Recv(NULL, 0, MPI_BYTE, peer, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(rb, 16 * MiB, MPI_BYTE, peer, 3, MPI_COMM_WORLD, &st);
            check_recv("unexpected", rb, &st, n, peer, 3000 + k);
        }
    }
}

/* Every rank sends 4 MiB to rank 0 at the same time (any-source receives). */
static void many_to_one(char *sb, char *rb)
{
    int n = 4 * MiB;
    if (mt_rank != 0) {
        mt_fill(sb, n, mt_rank, 4000);
        MPI_Send(sb, n, MPI_BYTE, 0, 5, MPI_COMM_WORLD);
        return;
    }
    int seen[64] = {0};
    for (int m = 1; m < mt_size; m++) {
        MPI_Status st;
        MPI_Recv(rb, n, MPI_BYTE, MPI_ANY_SOURCE, 5, MPI_COMM_WORLD, &st);
        CHECK(st.MPI_SOURCE > 0 && st.MPI_SOURCE < 64 && !seen[st.MPI_SOURCE],
              "source %d unexpected or repeated", st.MPI_SOURCE);
        seen[st.MPI_SOURCE] = 1;
        check_recv("many to one", rb, &st, n, st.MPI_SOURCE, 4000);
    }
}

/* Every other 4 KiB block of 8 MiB, as a vector datatype, received
 * contiguously (4 MiB): the MPI library packs, the transport sees bytes. */
static void strided(int peer, char *sb, char *rb)
{
    MPI_Datatype vec;
    MPI_Type_vector(1024, 4096, 8192, MPI_BYTE, &vec);
    MPI_Type_commit(&vec);
    if (mt_rank < peer) {
        mt_fill(sb, 8 * MiB, mt_rank, 5000);
        MPI_Send(sb, 1, vec, peer, 6, MPI_COMM_WORLD);
    } else {
        MPI_Status st;
        int n;
        MPI_Recv(rb, 4 * MiB, MPI_BYTE, peer, 6, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(n == 4 * MiB, "strided: %d bytes", n);
        for (int b = 0; b < 1024; b++)
            for (int i = 0; i < 4096; i++)
                CHECK(rb[b * 4096 + i] == (char)mt_byte(peer, 5000, (size_t)b * 8192 + i),
                      "strided: block %d byte %d", b, i);
    }
    MPI_Type_free(&vec);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "big");
    CHECK(mt_size >= 2 && mt_size <= 64, "needs 2 to 64 ranks");
    char *sb = mt_alloc(16 * MiB), *rb = mt_alloc(16 * MiB);
    for (int bit = 1; bit < mt_size && bit <= 2; bit <<= 1) {
        int peer = mt_rank ^ bit;
        if (peer < mt_size)
            pair(peer, sb, rb);
        mt_ok(bit == 1 ? "1, 4, 16 MiB (+odd sizes): both ways, blocking, unexpected; pairs r^1"
                       : "the same with pairs r^2");
    }
    many_to_one(sb, rb);
    mt_ok("4 MiB from every rank to rank 0 at once");
    if ((mt_rank ^ 1) < mt_size)
        strided(mt_rank ^ 1, sb, rb);
    mt_ok("strided datatype, 4 MiB of an 8 MiB buffer");
    free(sb);
    free(rb);
    return mt_finish();
}
