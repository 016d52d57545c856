/*
 * The node's replica of the name table, in a memfd that the agent writes
 * and every client maps read-only: a lookup is a binary search in shared
 * memory, no message and no system call (docs/names.md, "Lookup").
 *
 * Layout: a header, then two areas of `cap` entries. The agent keeps the
 * table privately (struct nt_writer) and, when it changed, writes it sorted
 * by (type, lower, upper, node, id) into the area readers are not using,
 * then flips `active` inside a sequence lock. A reader copies nothing: it
 * reads the active area and retries if the sequence moved meanwhile. Each
 * entry carries the largest `upper` of its type up to itself, so the ranges
 * holding an instance are found by walking back from the last entry whose
 * lower bound is <= the instance until that maximum falls below it (TIPC's
 * augmented interval tree, flattened into an array).
 */
#ifndef FM_NAMES_TABLE_H
#define FM_NAMES_TABLE_H

#include <stddef.h>
#include <stdint.h>

#define NT_MAGIC 0x544e4d46u /* "FMNT" */
#define NT_VERSION 1
#define NT_NAME_MAX 64

struct nt_entry {
    uint32_t type, lower, upper;
    uint32_t node;     /* the publisher's node (agent) */
    uint32_t maxupper; /* largest upper of this type up to here (set by nt_commit) */
    uint8_t scope;     /* FM_SCOPE_NODE or FM_SCOPE_CLUSTER */
    uint8_t namelen;   /* bytes of name: the publisher endpoint's fastmsg name */
    uint16_t reserved;
    uint64_t id; /* unique per node */
    uint8_t name[NT_NAME_MAX];
};

struct nt_shm {
    uint32_t magic, version;
    uint32_t seq;    /* odd while `active` changes */
    uint32_t active; /* area readers use: 0 or 1 */
    uint32_t cap;    /* entries per area */
    uint32_t node;   /* this node's id */
    uint32_t n[2];   /* entries in each area */
    uint64_t commits;
    uint64_t reserved[4];
    struct nt_entry area[]; /* [0, cap) area 0, [cap, 2 cap) area 1; then each area's
                               keys, type << 32 | lower, 2 x cap of uint64_t: the
                               binary search reads 8 bytes a step, not an entry */
};

/* Bytes of a replica holding cap entries per area. */
size_t nt_shm_size(uint32_t cap);

/* ---- Writer (the agent) ---- */

struct nt_writer;

/* A writer for the replica at shm (nt_shm_size(cap) bytes, zeroed); NULL
 * if cap is above 2^30 or memory is short. */
struct nt_writer *nt_writer_new(struct nt_shm *shm, uint32_t cap, uint32_t node);
void nt_writer_free(struct nt_writer *w);

/* Adds an entry (maxupper ignored). -EEXIST if (node, id) is present,
 * -ENOSPC at cap entries, -EINVAL for lower > upper or a name too long,
 * -ENOMEM. */
int nt_add(struct nt_writer *w, const struct nt_entry *e);
/* Removes the entry (node, id) and copies it to *out if out != NULL.
 * -ENOENT if absent. */
int nt_remove(struct nt_writer *w, uint32_t node, uint64_t id, struct nt_entry *out);
/* The entry (node, id), or NULL. */
const struct nt_entry *nt_find(const struct nt_writer *w, uint32_t node, uint64_t id);
size_t nt_count(const struct nt_writer *w);
/* Calls fn for every entry (in no order). */
void nt_each(const struct nt_writer *w, void (*fn)(void *arg, const struct nt_entry *e),
             void *arg);
/* Makes the changes visible to readers, if there were any. */
void nt_commit(struct nt_writer *w);

/* ---- Readers (any process that mapped the replica) ---- */


/* Writes up to max entries that hold `instance` (lower <= instance <= upper)
 * of `type` into out, those of node `local_node` only if only_node is set;
 * returns how many. A consistent snapshot: retried while the agent commits. */
size_t nt_lookup(const struct nt_shm *shm, uint32_t type, uint32_t instance, int only_node,
                 uint32_t local_node, struct nt_entry *out, size_t max);

/* Every entry of `type` whose range overlaps [lower, upper]: fills up to
 * max, returns the total count. */
size_t nt_lookup_range(const struct nt_shm *shm, uint32_t type, uint32_t lower, uint32_t upper,
                       struct nt_entry *out, size_t max);

#endif
