/*
 * alltoall_stress.c: deadlock freedom and integrity under all-to-all traffic.
 *
 * Every PE puts 1 MiB to every other PE and gets 1 MiB from every other PE, all at once, in
 * four rounds:
 *   0. blocking, in CHUNK pieces, targets staggered (PE me starts with me+1);
 *   1. blocking, in CHUNK pieces, every PE going through targets 0, 1, 2, ... in the same
 *      order, so all PEs converge on one target at a time (incast);
 *   2. nonblocking, in CHUNK pieces, staggered, everything issued before a single quiet;
 *   3. nonblocking, 1 MiB per call, same order, then a single quiet.
 * A put and a get to the same peer alternate, so every PE is origin and target of both at
 * the same time.  Each block's pattern names its writer, its reader and the round.
 *
 * Symmetric heap needed per PE: (n + 1) MiB.
 */
#include "shtest.h"

#include <stdlib.h>

enum { BYTES = 1 << 20, CHUNK = 64 * 1024, ROUNDS = 4 };

static int me, npes;

static unsigned put_seed(int from, int to, int round)
{
    return (unsigned)(from * 1000 + to) * 16u + (unsigned)round;
}

static unsigned get_seed(int owner, int round)
{
    return 0x80000000u + (unsigned)owner * 16u + (unsigned)round;
}

static void transfer(unsigned char *recv, unsigned char *src, unsigned char *out,
                     unsigned char *got, int peer, int round)
{
    unsigned char *dst = recv + (size_t)me * BYTES;
    unsigned char *o = out + (size_t)peer * BYTES, *g = got + (size_t)peer * BYTES;

    switch (round) {
    case 0:
    case 1:
        for (size_t c = 0; c < BYTES; c += CHUNK) {
            shmem_putmem(dst + c, o + c, CHUNK, peer);
            shmem_getmem(g + c, src + c, CHUNK, peer);
        }
        break;
    case 2:
        for (size_t c = 0; c < BYTES; c += CHUNK) {
            shmem_putmem_nbi(dst + c, o + c, CHUNK, peer);
            shmem_getmem_nbi(g + c, src + c, CHUNK, peer);
        }
        break;
    default:
        shmem_putmem_nbi(dst, o, BYTES, peer);
        shmem_getmem_nbi(g, src, BYTES, peer);
    }
}

int main(void)
{
    shmem_init();
    me = shmem_my_pe();
    npes = shmem_n_pes();

    unsigned char *recv = shmem_malloc((size_t)npes * BYTES);  /* block p: written by p */
    unsigned char *src = shmem_malloc(BYTES);                    /* read by everybody */
    unsigned char *out = malloc((size_t)npes * BYTES);           /* what we put to each */
    unsigned char *got = malloc((size_t)npes * BYTES);           /* what we got from each */

    if (recv == NULL || src == NULL || out == NULL || got == NULL)
        fail("NULL", "memory", "buffers for %d PEs", npes);

    for (int round = 0; round < ROUNDS; round++) {
        int staggered = round % 2 == 0;

        fill_pat(src, BYTES, get_seed(me, round));
        for (int p = 0; p < npes; p++) {
            if (p != me)
                fill_pat(out + (size_t)p * BYTES, BYTES, put_seed(me, p, round));
        }
        /* Nobody may read src or write recv of this round before everybody prepared. */
        shmem_barrier_all();

        for (int i = 0; i < npes; i++) {
            int peer = staggered ? (me + 1 + i) % npes : i;

            if (peer != me)
                transfer(recv, src, out, got, peer, round);
        }
        shmem_quiet();

        for (int p = 0; p < npes; p++) {
            if (p != me)
                check_pat(got + (size_t)p * BYTES, BYTES, get_seed(p, round),
                          "round %d: get from pe %d", round, p);
        }
        /* Completes everybody's puts; also keeps src and recv stable until all checked. */
        shmem_barrier_all();
        for (int p = 0; p < npes; p++) {
            if (p != me)
                check_pat(recv + (size_t)p * BYTES, BYTES, put_seed(p, me, round),
                          "round %d: put from pe %d", round, p);
        }
    }

    shmem_barrier_all();
    free(got);
    free(out);
    shmem_free(src);
    shmem_free(recv);
    return finish("alltoall_stress");
}
