/*
 * Endpoint names: the portable form of an endpoint's address, FM_NAME_MAX
 * bytes at most, that one process hands to another by any means (a file, a
 * launcher's key-value store, libfabric's fi_getname) so that the other can
 * reach it without a common launcher. docs/API.md ("Peers by name") and
 * docs/wire.md describe the format for a second implementation.
 *
 *   0  u8  'f'                      32 rails: 6 bytes each (IPv4 address and
 *   1  u8  version (1)                 UDP port, network byte order)
 *   2  u8  rails (low 4 bits) and   32+6n u32 CRC32C of every byte before it
 *          flags (FM_NAME_SHM)
 *   3  u8  0
 *   4  u32 channel
 *   8  u32 job: a hash of the launcher's job id (a process started by no
 *          launcher is a job of its own)
 *  12  u32 rank in that job
 *  16  u32 epoch: the process's incarnation, random, never 0
 *  20  u32 node: a hash of the kernel's boot id
 *  24  u32 pid
 *  28  i32 the process's shared segment, as a descriptor in that process
 *
 * Integers are little-endian. A name that is shorter than its rail count
 * says, has another version, a bad checksum, more than four rails or a zero
 * epoch is not a name (FM_EINVAL).
 */
#ifndef FM_NAME_H
#define FM_NAME_H

#include "fastmsg.h"

#include <stddef.h>
#include <stdint.h>

#define FM_NAME_MAGIC 0x66
#define FM_NAME_VERSION 1
#define FM_NAME_RAILS 4
#define FM_NAME_SHM 0x10 /* the shared segment fields hold a segment */

struct fm_name {
    uint32_t channel;
    uint32_t job, rank, epoch, node, pid; /* see the layout above */
    int32_t seg_fd; /* -1: no shared segment */
    int nrails;
    struct {
        uint32_t ip;   /* network byte order */
        uint16_t port; /* network byte order */
    } rail[FM_NAME_RAILS];
};

/* Bytes the encoding of n takes. */
size_t fm_name_size(const struct fm_name *n);
/* Writes n into buf (at least fm_name_size bytes); returns its length. */
size_t fm_name_encode(const struct fm_name *n, void *buf);
/* Reads a name: 0, or FM_EINVAL when buf holds no valid name. */
int fm_name_decode(const void *buf, size_t len, struct fm_name *n);

/* Whether two names belong to one process (everything but the channel). */
int fm_name_same_process(const struct fm_name *a, const struct fm_name *b);

/* The 32-bit hash names use for a job id or a boot id (FNV-1a). */
uint32_t fm_name_hash(const char *s);

#endif
