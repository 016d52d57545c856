/* Point-to-point semantics real applications lean on: any-source and
 * any-tag receives (status source, tag and count), zero-byte messages,
 * non-overtaking order across eager and large messages, synchronous sends
 * that complete only after the match, truncation reported as
 * MPI_ERR_TRUNCATE, and cancel of posted receives. 2 or more ranks. */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include "mpitest.h"
#include <time.h>

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Every rank sends K messages of distinct tags and sizes to rank 0, which
 * takes them with MPI_ANY_SOURCE + MPI_ANY_TAG; then the reverse, received
 * with a wildcard on one side only. */
static void any_source_any_tag(void)
{
    enum { K = 6 };
    char buf[4096];
    if (mt_rank != 0) {
        for (int i = 0; i < K; i++) {
            int tag = 100 + mt_rank * K + i, n = i == 0 ? 0 : mt_rank * 37 + i * 100;
            mt_fill(buf, n, mt_rank, tag);
            MPI_Send(buf, n, MPI_BYTE, 0, tag, MPI_COMM_WORLD);
        }
    } else {
        int next[64] = {0};
        CHECK(mt_size <= 64, "at most 64 ranks");
        for (int m = 0; m < (mt_size - 1) * K; m++) {
            MPI_Status st;
            int n;
            MPI_Recv(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &n);
            int src = st.MPI_SOURCE, i = st.MPI_TAG - 100 - src * K;
            CHECK(src > 0 && src < mt_size, "status source %d", src);
            /* both messages match the wildcard receive: they arrive in order */
            CHECK(i == next[src], "from %d: tag %d, expected index %d", src, st.MPI_TAG, next[src]);
            next[src]++;
            int want = i == 0 ? 0 : src * 37 + i * 100;
            CHECK(n == want, "from %d tag %d: count %d, expected %d", src, st.MPI_TAG, n, want);
            CHECK(mt_verify(buf, n, src, st.MPI_TAG) < 0, "from %d tag %d: content", src, st.MPI_TAG);
        }
    }
    /* rank 0 -> everyone: tag 7 by any source, then any tag from source 0 */
    if (mt_rank == 0) {
        for (int r = 1; r < mt_size; r++) {
            mt_fill(buf, 64, r, 7);
            MPI_Send(buf, 64, MPI_BYTE, r, 7, MPI_COMM_WORLD);
            mt_fill(buf, 128, r, 9);
            MPI_Send(buf, 128, MPI_BYTE, r, 9, MPI_COMM_WORLD);
        }
    } else {
        MPI_Status st;
        int n;
        MPI_Recv(buf, sizeof buf, MPI_BYTE, MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 7 && n == 64, "src %d tag %d count %d",
              st.MPI_SOURCE, st.MPI_TAG, n);
        CHECK(mt_verify(buf, 64, mt_rank, 7) < 0, "content of tag 7");
        MPI_Recv(buf, sizeof buf, MPI_BYTE, 0, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(st.MPI_SOURCE == 0 && st.MPI_TAG == 9 && n == 128, "src %d tag %d count %d",
              st.MPI_SOURCE, st.MPI_TAG, n);
        CHECK(mt_verify(buf, 128, mt_rank, 9) < 0, "content of tag 9");
    }
    mt_ok("any-source and any-tag receives, status source/tag/count");
}

/* Zero-byte messages in every form, and a receive from MPI_PROC_NULL. */
static void zero_bytes(int peer)
{
    char sbuf[8] = {0}, rbuf[64];
    MPI_Status st;
    MPI_Request rq[3];
    int n = -1;
    MPI_Sendrecv(sbuf, 0, MPI_BYTE, peer, 20, rbuf, sizeof rbuf, MPI_BYTE, peer, 20,
                 MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_BYTE, &n);
    CHECK(n == 0 && st.MPI_SOURCE == peer && st.MPI_TAG == 20, "sendrecv: count %d src %d tag %d",
          n, st.MPI_SOURCE, st.MPI_TAG);
    MPI_Irecv(rbuf, 0, MPI_BYTE, peer, 21, MPI_COMM_WORLD, &rq[0]);
    MPI_Irecv(rbuf, sizeof rbuf, MPI_BYTE, MPI_ANY_SOURCE, 22, MPI_COMM_WORLD, &rq[1]);
    MPI_Isend(NULL, 0, MPI_BYTE, peer, 21, MPI_COMM_WORLD, &rq[2]);
    MPI_Wait(&rq[2], MPI_STATUS_IGNORE);
    MPI_Ssend(sbuf, 0, MPI_INT, peer, 22, MPI_COMM_WORLD);
    for (int i = 0; i < 2; i++) {
        MPI_Wait(&rq[i], &st);
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(n == 0 && st.MPI_SOURCE == peer && st.MPI_TAG == 21 + i, "irecv %d: count %d src %d",
              i, n, st.MPI_SOURCE);
    }
    MPI_Recv(rbuf, 1, MPI_INT, MPI_PROC_NULL, 5, MPI_COMM_WORLD, &st);
    MPI_Get_count(&st, MPI_INT, &n);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && st.MPI_TAG == MPI_ANY_TAG && n == 0,
          "recv from MPI_PROC_NULL: src %d tag %d count %d", st.MPI_SOURCE, st.MPI_TAG, n);
    mt_ok("zero-byte messages (send, isend, ssend, sendrecv, MPI_PROC_NULL)");
}

/* Non-overtaking: N messages of one tag, small and large mixed, posted as
 * nonblocking sends at once; received in order, partly by pre-posted
 * receives, partly by blocking ones, some with MPI_ANY_SOURCE. */
static size_t order_size(int i) { return i % 10 == 9 ? (size_t)(70000 + i) : (size_t)(i % 7) * 150; }

static void ordering(int sender, int receiver)
{
    enum { N = 1000, PRE = 64 };
    if (mt_rank == sender) {
        size_t total = 0, off = 0;
        for (int i = 0; i < N; i++)
            total += order_size(i);
        char *buf = mt_alloc(total);
        MPI_Request *rq = mt_alloc(N * sizeof *rq);
        for (int i = 0; i < N; i++) {
            mt_fill(buf + off, order_size(i), sender, i);
            MPI_Isend(buf + off, (int)order_size(i), MPI_BYTE, receiver, 30, MPI_COMM_WORLD, &rq[i]);
            off += order_size(i);
        }
        MPI_Waitall(N, rq, MPI_STATUSES_IGNORE);
        free(rq);
        free(buf);
    } else if (mt_rank == receiver) {
        char *buf = mt_alloc((size_t)PRE * 72000);
        MPI_Request rq[PRE];
        MPI_Status st;
        int n;
        for (int i = 0; i < PRE; i++)
            MPI_Irecv(buf + (size_t)i * 72000, 72000, MPI_BYTE, i % 2 ? MPI_ANY_SOURCE : sender, 30,
                      MPI_COMM_WORLD, &rq[i]);
        for (int i = 0; i < N; i++) {
            char *p = buf;
            if (i < PRE) {
                MPI_Wait(&rq[i], &st);
                p = buf + (size_t)i * 72000;
            } else {
                MPI_Recv(buf, 72000, MPI_BYTE, i % 3 ? sender : MPI_ANY_SOURCE, 30, MPI_COMM_WORLD, &st);
            }
            MPI_Get_count(&st, MPI_BYTE, &n);
            CHECK(st.MPI_SOURCE == sender && n == (int)order_size(i),
                  "message %d: src %d count %d, expected %zu (overtaken?)", i, st.MPI_SOURCE, n,
                  order_size(i));
            CHECK(mt_verify(p, n, sender, i) < 0, "message %d: content (overtaken?)", i);
        }
        free(buf);
    }
}

/* Issend must not complete before the receiver has matched it: the receiver
 * posts its receive only after a "go" that the sender sends after testing
 * for a while. Then blocking MPI_Ssend of several sizes. */
static void synchronous(int peer, int sender)
{
    static const int sizes[] = {0, 64, 4096, 1 << 20};
    char *buf = mt_alloc(1 << 20);
    for (unsigned k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        int n = sizes[k], flag = 0;
        if (mt_rank == sender) {
            MPI_Request rq;
            mt_fill(buf, n, sender, 40 + k);
            MPI_Issend(buf, n, MPI_BYTE, peer, 40, MPI_COMM_WORLD, &rq);
            for (int t = 0; t < 20 && !flag; t++) {
                MPI_Test(&rq, &flag, MPI_STATUS_IGNORE);
                sleep_ms(5);
            }
            CHECK(!flag, "MPI_Issend of %d bytes completed before the receive was posted", n);
            MPI_Send(NULL, 0, MPI_BYTE, peer, 41, MPI_COMM_WORLD);
            MPI_Wait(&rq, MPI_STATUS_IGNORE);
            MPI_Ssend(buf, n, MPI_BYTE, peer, 42, MPI_COMM_WORLD);
        } else {
            MPI_Status st;
            int got;
            MPI_Recv(NULL, 0, MPI_BYTE, peer, 41, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Recv(buf, 1 << 20, MPI_BYTE, peer, 40, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &got);
            CHECK(got == n && mt_verify(buf, n, peer, 40 + k) < 0, "issend %d bytes: got %d", n, got);
            sleep_ms(10);
            MPI_Recv(buf, 1 << 20, MPI_BYTE, peer, 42, MPI_COMM_WORLD, &st);
            MPI_Get_count(&st, MPI_BYTE, &got);
            CHECK(got == n && mt_verify(buf, n, peer, 40 + k) < 0, "ssend %d bytes: got %d", n, got);
        }
    }
    free(buf);
}

/* A message longer than the receive buffer: MPI_ERR_TRUNCATE is returned
 * (MPI_ERRORS_RETURN on the communicator), small and large, by MPI_Recv,
 * MPI_Wait and MPI_Waitall; the communicator keeps working afterwards. */
static void truncation(MPI_Comm c, int peer, int sender)
{
    static const int sizes[] = {400, 1 << 20, 100000};
    char *buf = mt_alloc(1 << 20);
    for (int k = 0; k < 3; k++) {
        int n = sizes[k], rc, cls;
        if (mt_rank == sender) {
            mt_fill(buf, n, sender, 50 + k);
            rc = MPI_Send(buf, n, MPI_BYTE, peer, 50, c);
            CHECK(rc == MPI_SUCCESS, "sender of a truncated message got error %d", rc);
            mt_fill(buf, 100, sender, 60 + k);
            rc = MPI_Send(buf, 100, MPI_BYTE, peer, 51, c);
            CHECK(rc == MPI_SUCCESS, "send after truncation: error %d", rc);
            continue;
        }
        MPI_Status st[2];
        MPI_Request rq[2];
        st[0].MPI_ERROR = MPI_SUCCESS;
        if (k == 0) {
            rc = MPI_Recv(buf, 40, MPI_BYTE, peer, 50, c, &st[0]);
        } else if (k == 1) {
            MPI_Irecv(buf, 1024, MPI_BYTE, peer, 50, c, &rq[0]);
            rc = MPI_Wait(&rq[0], &st[0]);
        } else {
            MPI_Irecv(buf, 1000, MPI_BYTE, peer, 50, c, &rq[0]);
            MPI_Irecv(buf + 4096, 100, MPI_BYTE, peer, 51, c, &rq[1]);
            /* multiple completion: some MPIs raise the error on MPI_COMM_WORLD */
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
            rc = MPI_Waitall(2, rq, st);
            MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
            CHECK(rc == MPI_ERR_IN_STATUS, "MPI_Waitall returned %d, not MPI_ERR_IN_STATUS", rc);
            rc = st[0].MPI_ERROR;
            /* the other request completed, or is left pending (MPI_ERR_PENDING) */
            if (st[1].MPI_ERROR == MPI_ERR_PENDING)
                st[1].MPI_ERROR = MPI_Wait(&rq[1], &st[1]);
            CHECK(st[1].MPI_ERROR == MPI_SUCCESS, "the untruncated receive has error %d",
                  st[1].MPI_ERROR);
            CHECK(mt_verify(buf + 4096, 100, sender, 60 + k) < 0, "message after truncation");
        }
        MPI_Error_class(rc, &cls);
        CHECK(cls == MPI_ERR_TRUNCATE, "%d bytes into a smaller buffer: error class %d, not "
              "MPI_ERR_TRUNCATE (%d)", n, cls, MPI_ERR_TRUNCATE);
        if (k < 2) {
            rc = MPI_Recv(buf, 100, MPI_BYTE, peer, 51, c, MPI_STATUS_IGNORE);
            CHECK(rc == MPI_SUCCESS && mt_verify(buf, 100, sender, 60 + k) < 0,
                  "receive after truncation: error %d or bad content", rc);
        }
    }
    free(buf);
}

/* Cancel: a posted receive nothing matches is cancelled; a cancelled receive
 * does not consume the message sent later; a receive already matched is
 * either completed or cancelled, and the message is never lost. */
static void cancel(int peer, int sender)
{
    MPI_Request rq;
    MPI_Status st;
    int flag, v = -1;
    MPI_Irecv(&v, 1, MPI_INT, MPI_ANY_SOURCE, 70, MPI_COMM_WORLD, &rq);
    MPI_Cancel(&rq);
    MPI_Wait(&rq, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag, "an unmatched any-source receive was not cancelled");
    MPI_Irecv(&v, 1, MPI_INT, peer, 71, MPI_COMM_WORLD, &rq);
    MPI_Cancel(&rq);
    MPI_Wait(&rq, &st);
    MPI_Test_cancelled(&st, &flag);
    CHECK(flag, "an unmatched receive from %d was not cancelled", peer);
    /* both have cancelled before anything is sent */
    MPI_Sendrecv(NULL, 0, MPI_BYTE, peer, 74, NULL, 0, MPI_BYTE, peer, 74, MPI_COMM_WORLD,
                 MPI_STATUS_IGNORE);
    if (mt_rank == sender) {
        int x = 710, y = 720;
        MPI_Send(&x, 1, MPI_INT, peer, 71, MPI_COMM_WORLD);
        MPI_Send(&y, 1, MPI_INT, peer, 72, MPI_COMM_WORLD); /* posted before: matched */
        MPI_Send(&x, 0, MPI_INT, peer, 73, MPI_COMM_WORLD);
    } else {
        MPI_Recv(&v, 1, MPI_INT, peer, 71, MPI_COMM_WORLD, &st);
        CHECK(v == 710, "message after a cancelled receive: %d", v);
        v = -1;
        MPI_Irecv(&v, 1, MPI_INT, peer, 72, MPI_COMM_WORLD, &rq);
        MPI_Recv(NULL, 0, MPI_INT, peer, 73, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Cancel(&rq);
        MPI_Wait(&rq, &st);
        MPI_Test_cancelled(&st, &flag);
        if (flag) { /* cancelled after all: the message must still be there */
            MPI_Recv(&v, 1, MPI_INT, peer, 72, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        }
        CHECK(v == 720, "matched-then-cancelled receive lost its message (v=%d)", v);
    }
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "p2p");
    CHECK(mt_size >= 2, "needs at least 2 ranks");
    /* pairs (0,1), (2,3), ...; an odd last rank sits out the pair tests */
    int peer = (mt_rank ^ 1) < mt_size ? mt_rank ^ 1 : -1;
    any_source_any_tag();
    if (peer >= 0)
        zero_bytes(peer);
    else
        mt_ok("zero-byte messages");
    for (int dir = 0; dir < 2; dir++)
        if (peer >= 0)
            ordering(dir ? peer | 1 : peer & ~1, dir ? peer & ~1 : peer | 1);
    mt_ok("non-overtaking order, 1000 messages of mixed sizes, both directions");
    for (int dir = 0; dir < 2 && peer >= 0; dir++)
        synchronous(peer, dir ? (mt_rank | 1) : (mt_rank & ~1));
    mt_ok("MPI_Issend/MPI_Ssend complete only after the match (0 B to 1 MiB)");
    MPI_Comm c; /* collective: every rank */
    MPI_Comm_dup(MPI_COMM_WORLD, &c);
    MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
    if (peer >= 0)
        truncation(c, peer, mt_rank & ~1);
    MPI_Comm_free(&c);
    mt_ok("truncation reported as MPI_ERR_TRUNCATE (Recv, Wait, Waitall)");
    if (peer >= 0)
        cancel(peer, mt_rank & ~1);
    mt_ok("cancel of posted receives (MPI_Cancel + MPI_Test_cancelled)");
    return mt_finish();
}
