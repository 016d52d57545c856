/*
 * How much memory this process may still commit before the kernel would
 * kill it. Committing shared memory beyond a memory cgroup's limit does not
 * fail with an error: the OOM killer ends the process. So the shm link asks
 * first and fails the call with a message instead.
 */
#ifndef FM_SHM_MEMLIMIT_H
#define FM_SHM_MEMLIMIT_H

#include <stdint.h>

/* Bytes that may still be committed before `commit` more are (the tightest
 * memory cgroup on the way to the root, and the system's available
 * memory), or INT64_MAX if unknown. Rereads the limits at most every 100 ms
 * unless a quarter of the room was committed since. */
int64_t fm_mem_headroom(uint64_t commit);

#endif
