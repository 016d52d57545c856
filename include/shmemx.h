/*
 * shmemx.h: OpenSHMEM extensions of libfmshmem. It has none; the
 * specification requires the header to exist all the same, so that
 * programs written for any implementation include it unchanged.
 */
#ifndef FMSHMEM_SHMEMX_H
#define FMSHMEM_SHMEMX_H

#include <shmem.h>

#endif
