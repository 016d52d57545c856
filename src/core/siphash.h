/* SipHash-2-4 (Aumasson and Bernstein): a keyed hash, used to prove that a
 * session request comes from a process that holds the job's key. */
#ifndef FM_NET_SIPHASH_H
#define FM_NET_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

uint64_t fm_siphash(const uint8_t key[16], const void *data, size_t len);

#endif
