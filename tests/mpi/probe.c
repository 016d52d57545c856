/* Probes: MPI_Probe to size a receive, MPI_Iprobe polling (progress made by
 * probing alone, a probe does not consume), MPI_Improbe + MPI_Mrecv (the
 * matched message is taken out of matching, so a wildcard receive posted
 * in between cannot steal it), MPI_Mprobe + MPI_Imrecv up to 2 MiB, and
 * MPI_PROC_NULL. 2 or more ranks. */
#include "mpitest.h"

static int msg_size(int src, int i) { return i == 0 ? 0 : src * 1000 + i * 333; }

/* Everyone sends 3 messages to rank 0, which sizes each with MPI_Probe. */
static void probe_sized(void)
{
    if (mt_rank != 0) {
        for (int i = 0; i < 3; i++) {
            int n = msg_size(mt_rank, i);
            char *b = mt_alloc(n);
            mt_fill(b, n, mt_rank, 200 + i);
            MPI_Send(b, n, MPI_BYTE, 0, 200 + i, MPI_COMM_WORLD);
            free(b);
        }
        return;
    }
    int seen[64][3] = {{0}};
    CHECK(mt_size <= 64, "at most 64 ranks");
    for (int m = 0; m < 3 * (mt_size - 1); m++) {
        MPI_Status st, st2;
        int n, n2;
        MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
        MPI_Get_count(&st, MPI_BYTE, &n);
        int s = st.MPI_SOURCE, i = st.MPI_TAG - 200;
        CHECK(s > 0 && s < mt_size && i >= 0 && i < 3, "probe: source %d tag %d", s, st.MPI_TAG);
        CHECK(n == msg_size(s, i), "probe: count %d from %d tag %d, expected %d", n, s, st.MPI_TAG,
              msg_size(s, i));
        CHECK(!seen[s][i], "message %d from %d seen twice", i, s);
        seen[s][i] = 1;
        char *b = mt_alloc(n);
        MPI_Recv(b, n, MPI_BYTE, s, st.MPI_TAG, MPI_COMM_WORLD, &st2);
        MPI_Get_count(&st2, MPI_BYTE, &n2);
        CHECK(n2 == n && st2.MPI_SOURCE == s && mt_verify(b, n, s, st.MPI_TAG) < 0,
              "receive after probe from %d tag %d: count %d", s, st.MPI_TAG, n2);
        free(b);
    }
}

/* Iprobe alone makes progress; a second probe sees the same message. */
static void iprobe_poll(int peer, int sender)
{
    enum { N = 1 << 20 };
    char *b = mt_alloc(N);
    if (mt_rank == sender) {
        mt_fill(b, N, sender, 250);
        MPI_Send(b, N, MPI_BYTE, peer, 250, MPI_COMM_WORLD);
        mt_fill(b, 10, sender, 251);
        MPI_Send(b, 10, MPI_BYTE, peer, 251, MPI_COMM_WORLD);
    } else {
        MPI_Status st, st2;
        int flag = 0, n, n2;
        double t0 = MPI_Wtime();
        while (!flag) {
            MPI_Iprobe(peer, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
            CHECK(MPI_Wtime() - t0 < 60, "MPI_Iprobe polled 60 s without seeing the message");
        }
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(st.MPI_SOURCE == peer && st.MPI_TAG == 250 && n == N,
              "iprobe: source %d tag %d count %d (expected the first message, %d bytes)",
              st.MPI_SOURCE, st.MPI_TAG, n, N);
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st2);
        MPI_Get_count(&st2, MPI_BYTE, &n2);
        CHECK(flag && st2.MPI_SOURCE == peer && st2.MPI_TAG == 250 && n2 == N,
              "a second iprobe saw another message (flag %d, tag %d)", flag, st2.MPI_TAG);
        MPI_Recv(b, N, MPI_BYTE, peer, 250, MPI_COMM_WORLD, &st);
        CHECK(mt_verify(b, N, peer, 250) < 0, "content after iprobe");
        MPI_Probe(peer, 251, MPI_COMM_WORLD, &st);
        MPI_Recv(b, 10, MPI_BYTE, peer, 251, MPI_COMM_WORLD, &st);
        CHECK(mt_verify(b, 10, peer, 251) < 0, "content of the second message");
    }
    free(b);
}

/* Everyone but 0 sends two messages with tag 300. Rank 0 matches one with
 * MPI_Improbe, posts a wildcard receive, then MPI_Mrecv's the matched one:
 * the wildcard receive must get a different message. */
static void improbe_mrecv(void)
{
    if (mt_rank != 0) {
        for (int seq = 0; seq < 2; seq++) {
            int v[2] = {mt_rank, seq};
            MPI_Send(v, 2, MPI_INT, 0, 300, MPI_COMM_WORLD);
        }
        return;
    }
    int next[64] = {0}, flag = 0, got = 0, v[2], w[2];
    MPI_Message msg;
    MPI_Status st, st2;
    MPI_Request rq;
    double t0 = MPI_Wtime();
    while (!flag) {
        MPI_Improbe(MPI_ANY_SOURCE, 300, MPI_COMM_WORLD, &flag, &msg, &st);
        CHECK(MPI_Wtime() - t0 < 60, "MPI_Improbe found nothing in 60 s");
    }
    CHECK(msg != MPI_MESSAGE_NULL, "improbe: flag set but MPI_MESSAGE_NULL");
    int s = st.MPI_SOURCE;
    MPI_Irecv(w, 2, MPI_INT, MPI_ANY_SOURCE, 300, MPI_COMM_WORLD, &rq);
    MPI_Mrecv(v, 2, MPI_INT, &msg, &st2);
    CHECK(msg == MPI_MESSAGE_NULL, "MPI_Mrecv did not reset the message handle");
    CHECK(st2.MPI_SOURCE == s && v[0] == s && v[1] == 0,
          "MPI_Mrecv got {%d,%d} from %d, but the probe matched source %d seq 0", v[0], v[1],
          st2.MPI_SOURCE, s);
    next[s] = 1;
    got = 1;
    MPI_Wait(&rq, &st);
    CHECK(w[0] == st.MPI_SOURCE && w[1] == next[w[0]],
          "wildcard receive got {%d,%d}: the matched message was stolen or order broken", w[0], w[1]);
    next[w[0]]++;
    got++;
    for (; got < 2 * (mt_size - 1); got++) {
        MPI_Mprobe(MPI_ANY_SOURCE, 300, MPI_COMM_WORLD, &msg, &st);
        MPI_Mrecv(v, 2, MPI_INT, &msg, &st2);
        CHECK(v[0] == st.MPI_SOURCE && v[0] == st2.MPI_SOURCE && v[1] == next[v[0]],
              "mprobe/mrecv got {%d,%d} from %d", v[0], v[1], st2.MPI_SOURCE);
        next[v[0]]++;
    }
    /* nothing left with tag 300 */
    MPI_Improbe(MPI_ANY_SOURCE, 300, MPI_COMM_WORLD, &flag, &msg, &st);
    CHECK(!flag, "MPI_Improbe matched a message nobody sent (from %d)", st.MPI_SOURCE);
}

/* Mprobe + Imrecv between pairs: 0 B, 1000 B and 2 MiB, any tag. */
static void mprobe_imrecv(int peer, int sender)
{
    static const int sizes[] = {0, 1000, 2 << 20};
    if (mt_rank == sender) {
        for (int i = 0; i < 3; i++) {
            char *b = mt_alloc(sizes[i]);
            mt_fill(b, sizes[i], sender, 310 + i);
            MPI_Send(b, sizes[i], MPI_BYTE, peer, 310 + i, MPI_COMM_WORLD);
            free(b);
        }
        return;
    }
    for (int i = 0; i < 3; i++) {
        MPI_Message msg;
        MPI_Status st;
        MPI_Request rq;
        int n;
        MPI_Mprobe(peer, MPI_ANY_TAG, MPI_COMM_WORLD, &msg, &st);
        MPI_Get_count(&st, MPI_BYTE, &n);
        CHECK(st.MPI_TAG == 310 + i && n == sizes[i], "mprobe %d: tag %d count %d", i, st.MPI_TAG, n);
        char *b = mt_alloc(n);
        MPI_Imrecv(b, n, MPI_BYTE, &msg, &rq);
        MPI_Wait(&rq, &st);
        CHECK(mt_verify(b, n, peer, 310 + i) < 0, "imrecv %d bytes: content", n);
        free(b);
    }
}

static void proc_null(void)
{
    MPI_Message msg;
    MPI_Status st;
    int flag, n;
    MPI_Mprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &msg, &st);
    CHECK(msg == MPI_MESSAGE_NO_PROC && st.MPI_SOURCE == MPI_PROC_NULL,
          "mprobe of MPI_PROC_NULL: not MPI_MESSAGE_NO_PROC");
    MPI_Mrecv(NULL, 0, MPI_BYTE, &msg, &st);
    MPI_Get_count(&st, MPI_BYTE, &n);
    CHECK(st.MPI_SOURCE == MPI_PROC_NULL && n == 0, "mrecv of MPI_MESSAGE_NO_PROC");
    MPI_Iprobe(MPI_PROC_NULL, 5, MPI_COMM_WORLD, &flag, &st);
    CHECK(flag && st.MPI_SOURCE == MPI_PROC_NULL, "iprobe of MPI_PROC_NULL");
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, "probe");
    CHECK(mt_size >= 2, "needs at least 2 ranks");
    int peer = (mt_rank ^ 1) < mt_size ? mt_rank ^ 1 : -1;
    probe_sized();
    mt_ok("MPI_Probe (any source, any tag) to size receives, 0 B to ~4 KiB");
    for (int dir = 0; dir < 2 && peer >= 0; dir++)
        iprobe_poll(peer, dir ? mt_rank | 1 : mt_rank & ~1);
    mt_ok("MPI_Iprobe polling alone makes progress; probing does not consume (1 MiB)");
    improbe_mrecv();
    mt_ok("MPI_Improbe + MPI_Mrecv: a matched message cannot be stolen; MPI_Mprobe");
    for (int dir = 0; dir < 2 && peer >= 0; dir++)
        mprobe_imrecv(peer, dir ? mt_rank | 1 : mt_rank & ~1);
    mt_ok("MPI_Mprobe + MPI_Imrecv, 0 B to 2 MiB");
    proc_null();
    mt_ok("probes of MPI_PROC_NULL");
    return mt_finish();
}
