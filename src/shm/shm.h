/*
 * The shared-memory link: endpoints of processes on one node talk through
 * rings in the receiver's segment (segment.h). Its routes are direct: the
 * core writes a message into the receiver's ring itself, with one release
 * store, and calls the link only to wake a receiver that sleeps. Its ops
 * table is fm_shm_link (core/link.h); nothing else is exported.
 */
#ifndef FM_SHM_H
#define FM_SHM_H

#include "core/link.h"

extern const struct fm_link fm_shm_link;

#endif
