/* Thousands of outstanding nonblocking operations: 4096 isend and 4096
 * irecv each way between pairs, receives posted in a shuffled tag order and
 * sends in reverse; 4096 unexpected messages received in reverse tag order;
 * 4096 messages of one tag that must stay in order (non-overtaking) with
 * large ones mixed in; and any-source receives from every rank at once.
 * 2 or more ranks. */
#include "mpitest.h"

enum { N = 4096 };

/* Message size for a tag/sequence number: mostly small, some large. */
static int msz(int i) { return i % 512 == 511 ? 65536 + i : i % 97; }

static void check(const char *what, const char *b, MPI_Status *st, int src, int tag, int id)
{
    int n;
    MPI_Get_count(st, MPI_BYTE, &n);
    CHECK(st->MPI_SOURCE == src && st->MPI_TAG == tag && n == msz(id),
          "%s: message %d: source %d tag %d count %d, expected %d/%d/%d", what, id, st->MPI_SOURCE,
          st->MPI_TAG, n, src, tag, msz(id));
    CHECK(mt_verify(b, n, src, id) < 0, "%s: message %d: content", what, id);
}

/* Permutation of 0..N-1 from a small LCG, the same on every rank. */
static void shuffle(int *p, unsigned seed)
{
    for (int i = 0; i < N; i++)
        p[i] = i;
    for (int i = N - 1; i > 0; i--) {
        seed = seed * 1103515245u + 12345u;
        int j = (int)((seed >> 8) % (unsigned)(i + 1)), t = p[i];
        p[i] = p[j];
        p[j] = t;
    }
}

struct bufs {
    char *s, *r;           /* N slots of 70000 bytes each */
    MPI_Request rq[2 * N]; /* receives then sends */
    MPI_Status st[2 * N];
    int perm[N];
};
#define SLOT 70000
#define S(b, i) ((b)->s + (size_t)(i) * SLOT)
#define R(b, i) ((b)->r + (size_t)(i) * SLOT)

/* Distinct tags: receives in shuffled order, then sends in reverse order. */
static void distinct_tags(struct bufs *b, int peer)
{
    shuffle(b->perm, 7);
    for (int k = 0; k < N; k++) {
        int t = b->perm[k];
        MPI_Irecv(R(b, t), SLOT, MPI_BYTE, peer, t, MPI_COMM_WORLD, &b->rq[t]);
    }
    for (int t = N - 1; t >= 0; t--) {
        mt_fill(S(b, t), msz(t), mt_rank, t);
        MPI_Isend(S(b, t), msz(t), MPI_BYTE, peer, t, MPI_COMM_WORLD, &b->rq[N + t]);
    }
    MPI_Waitall(2 * N, b->rq, b->st);
    for (int t = 0; t < N; t++)
        check("distinct tags", R(b, t), &b->st[t], peer, t, t);
}

/* Unexpected: all sends first, then (after a handshake) receives posted in
 * reverse tag order, half of them with MPI_ANY_SOURCE. */
static void unexpected(struct bufs *b, int peer)
{
    for (int t = 0; t < N; t++) {
        mt_fill(S(b, t), msz(t), mt_rank, t);
        MPI_Isend(S(b, t), msz(t), MPI_BYTE, peer, t, MPI_COMM_WORLD, &b->rq[N + t]);
    }
    MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, 30000, NULL, 0, MPI_BYTE, peer, 30000, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    for (int t = N - 1; t >= 0; t--)
        MPI_Irecv(R(b, t), SLOT, MPI_BYTE, t % 2 ? MPI_ANY_SOURCE : peer, t, MPI_COMM_WORLD, &b->rq[t]);
    MPI_Waitall(2 * N, b->rq, b->st);
    for (int t = 0; t < N; t++)
        check("unexpected", R(b, t), &b->st[t], peer, t, t);
}

/* One tag: every receive matches every message, so order is everything. */
static void one_tag(struct bufs *b, int peer)
{
    for (int i = 0; i < N; i++)
        MPI_Irecv(R(b, i), SLOT, MPI_BYTE, i % 3 ? peer : MPI_ANY_SOURCE, 77, MPI_COMM_WORLD, &b->rq[i]);
    for (int i = 0; i < N; i++) {
        mt_fill(S(b, i), msz(i), mt_rank, i);
        MPI_Isend(S(b, i), msz(i), MPI_BYTE, peer, 77, MPI_COMM_WORLD, &b->rq[N + i]);
    }
    MPI_Waitall(2 * N, b->rq, b->st);
    for (int i = 0; i < N; i++)
        check("one tag, in order", R(b, i), &b->st[i], peer, 77, i);
}

/* Every rank sends M messages to every other; each receives them all with
 * MPI_ANY_SOURCE. Per source, sequence numbers must arrive in order. */
static void any_source_all(struct bufs *b)
{
    int M = N / (mt_size - 1), total = M * (mt_size - 1), nr = 0, ns = 0;
    int *seq = mt_alloc(total * sizeof *seq), next[64] = {0};
    for (int i = 0; i < total; i++)
        MPI_Irecv(&seq[i], 1, MPI_INT, MPI_ANY_SOURCE, 88, MPI_COMM_WORLD, &b->rq[nr++]);
    int *out = (int *)b->s;
    for (int i = 0; i < M; i++)
        for (int d = 1; d < mt_size; d++) {
            int *v = &out[ns];
            *v = i;
            MPI_Isend(v, 1, MPI_INT, (mt_rank + d) % mt_size, 88, MPI_COMM_WORLD, &b->rq[nr + ns++]);
        }
    MPI_Waitall(nr + ns, b->rq, b->st);
    for (int i = 0; i < total; i++) {
        int s = b->st[i].MPI_SOURCE;
        CHECK(s >= 0 && s < 64 && s != mt_rank, "any-source receive %d: source %d", i, s);
        CHECK(seq[i] == next[s], "from %d: got sequence %d, expected %d (overtaken)", s, seq[i],
              next[s]);
        next[s]++;
    }
    free(seq);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "many");
    CHECK(mt_size >= 2 && mt_size <= 64, "needs 2 to 64 ranks");
    struct bufs *b = mt_alloc(sizeof *b);
    b->s = mt_alloc((size_t)N * SLOT);
    b->r = mt_alloc((size_t)N * SLOT);
    int peer = (mt_rank ^ 1) < mt_size ? mt_rank ^ 1 : -1;
    if (peer >= 0)
        distinct_tags(b, peer);
    mt_ok("4096 irecv (shuffled tags) + 4096 isend (reverse) outstanding each way");
    if (peer >= 0)
        unexpected(b, peer);
    mt_ok("4096 unexpected messages, received in reverse tag order");
    if (peer >= 0)
        one_tag(b, peer);
    mt_ok("4096 messages of one tag, mixed sizes, stay in order");
    any_source_all(b);
    mt_ok("any-source receives of 4096 messages from every other rank at once");
    free(b->s);
    free(b->r);
    free(b);
    return mt_finish();
}
