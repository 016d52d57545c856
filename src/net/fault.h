/*
 * Fault injection for the network path: FM_FAULT=drop=P,dup=P,reorder=P,
 * corrupt=P,seed=N makes the datagram layer lose, duplicate, reorder and
 * corrupt packets with those probabilities, on send and on receive, from a
 * seeded generator so a failing run can be repeated. on=send or on=recv
 * keeps it to one side: a packet between two processes then meets it once,
 * as a lossy link's packets do. Unset, it costs one predictable branch per
 * batch.
 */
#ifndef FM_NET_FAULT_H
#define FM_NET_FAULT_H

#include <stddef.h>
#include <stdint.h>

struct fm_fault {
    uint32_t drop, dup, reorder, corrupt; /* probabilities in units of 2^-32 */
    uint64_t state;                        /* xorshift generator */
    uint8_t on_send, on_recv;              /* the sides it works on */
};

enum fm_fault_action { FM_FAULT_PASS, FM_FAULT_DROP, FM_FAULT_DUP, FM_FAULT_REORDER };

/* Parses a FM_FAULT string; 0, or -1 with the reason in err. */
int fm_fault_parse(struct fm_fault *f, const char *spec, char *err, size_t errlen);

/* What to do with the next packet, and in *corrupt whether to flip a bit. */
enum fm_fault_action fm_fault_roll(struct fm_fault *f, int *corrupt);

/* Flips one random bit of a packet. */
void fm_fault_corrupt(struct fm_fault *f, void *pkt, size_t len);

/* Both: what to do with the next packet, corrupting it in place. */
enum fm_fault_action fm_fault_next(struct fm_fault *f, void *pkt, size_t len);

#endif
