/*
 * Teams: strided sets of world PEs (every split of a strided set is one).
 *
 * A team's barrier counters live in one of TEAM_SLOTS slots of the heap's
 * internal area. Splitting is collective over the parent, so the parent's
 * members agree on a slot by AND-ing their free-slot masks: any later team
 * sharing a member with this one sees the slot taken in that member's mask.
 */
#include "shmem_internal.h"

#include "core/log.h"

#include <stdlib.h>

static int valid(shmem_team_t t) { return t != SHMEM_TEAM_INVALID; }

int shmem_team_my_pe(shmem_team_t team) { return valid(team) ? team->my_pe : -1; }
int shmem_team_n_pes(shmem_team_t team) { return valid(team) ? team->size : -1; }

int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config)
{
    if (!valid(team) || !config)
        return -1;
    if (config_mask & SHMEM_TEAM_NUM_CONTEXTS)
        config->num_contexts = team->config.num_contexts;
    return 0;
}

static int world_pe(const struct fmshmem_team *t, int i) { return t->start + i * t->stride; }

void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe)
{
    if (!valid(team) || pe < 0 || pe >= team->size)
        return NULL;
    return shmem_ptr(dest, world_pe(team, pe));
}

int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team)
{
    if (!valid(src_team) || !valid(dest_team) || src_pe < 0 || src_pe >= src_team->size)
        return -1;
    int w = world_pe(src_team, src_pe), d = w - dest_team->start;
    if (d < 0 || d % dest_team->stride || d / dest_team->stride >= dest_team->size)
        return -1;
    return d / dest_team->stride;
}

/* Over the parent's members: the slots free on all of them. */
static uint64_t agree_free_slots(struct fmshmem_team *parent)
{
    long *scratch = fmshmem_team_psync(parent->slot) + SLOT_SCRATCH;
    scratch[0] = (long)S.team_slots_free;
    fmshmem_team_sync_internal(parent);
    uint64_t mask = S.team_slots_free;
    for (int i = 0; i < parent->size; i++) {
        long v;
        fmshmem_get(&v, scratch, sizeof(v), world_pe(parent, i), false);
        mask &= (uint64_t)v;
    }
    fmshmem_team_sync_internal(parent); /* nobody rewrites scratch before all read it */
    return mask;
}

static int take_slot(uint64_t *mask)
{
    if (!*mask)
        return -1;
    int slot = __builtin_ctzll(*mask);
    *mask &= *mask - 1;
    return slot;
}

/* Every team slot is in use on some member of the parent (they agreed on
 * the free ones, so all of them fail alike): the split fails, as the spec
 * allows, and the program may destroy a team and try again. */
static int no_slot(const char *what)
{
    fm_log_limited(FM_LOG_WARN, SUBSYS, 3, "%s: more than %d teams at once", what,
                   TEAM_SLOTS - 2);
    return -1;
}

static shmem_team_t make_team(int start, int stride, int size, int slot,
                              const shmem_team_config_t *config, long mask)
{
    int d = S.me - start;
    if (d < 0 || d % stride || d / stride >= size)
        return SHMEM_TEAM_INVALID;
    struct fmshmem_team *t = calloc(1, sizeof(*t));
    if (!t)
        fmshmem_fatal("out of memory");
    bool on_node = true;
    for (int i = 0; i < size; i++)
        on_node &= S.local[start + i * stride];
    *t = (struct fmshmem_team){start, stride, size, d / stride, slot, on_node, {0}};
    if (config && (mask & SHMEM_TEAM_NUM_CONTEXTS))
        t->config = *config;
    S.team_slots_free &= ~((uint64_t)1 << slot);
    return t;
}

int shmem_team_split_strided(shmem_team_t parent, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask,
                             shmem_team_t *new_team)
{
    *new_team = SHMEM_TEAM_INVALID;
    if (!valid(parent) || parent->my_pe < 0)
        return -1;
    uint64_t mask = agree_free_slots(parent);
    if (size < 1 || start < 0 || (stride < 1 && size > 1) ||
        start + (long long)(size - 1) * (size > 1 ? stride : 0) >= parent->size)
        return -1;
    int slot = take_slot(&mask);
    if (slot < 0)
        return no_slot("shmem_team_split_strided");
    *new_team = make_team(world_pe(parent, start), parent->stride * (size > 1 ? stride : 1),
                          size, slot, config, config_mask);
    return 0;
}

int shmem_team_split_2d(shmem_team_t parent, int xrange, const shmem_team_config_t *xaxis_config,
                        long xaxis_mask, shmem_team_t *xaxis_team,
                        const shmem_team_config_t *yaxis_config, long yaxis_mask,
                        shmem_team_t *yaxis_team)
{
    *xaxis_team = *yaxis_team = SHMEM_TEAM_INVALID;
    if (!valid(parent) || parent->my_pe < 0)
        return -1;
    uint64_t mask = agree_free_slots(parent);
    if (xrange < 1)
        return -1;
    if (xrange > parent->size)
        xrange = parent->size;
    /* All x teams are disjoint, so they share one slot; the y teams another. */
    int xslot = take_slot(&mask), yslot = take_slot(&mask);
    if (xslot < 0 || yslot < 0)
        return no_slot("shmem_team_split_2d");
    int me = parent->my_pe;
    int x0 = me / xrange * xrange, xsize = FM_MIN(xrange, parent->size - x0);
    int y0 = me % xrange, ysize = (parent->size - y0 + xrange - 1) / xrange;
    *xaxis_team = make_team(world_pe(parent, x0), parent->stride, xsize, xslot, xaxis_config,
                            xaxis_mask);
    *yaxis_team = make_team(world_pe(parent, y0), parent->stride * xrange, ysize, yslot,
                            yaxis_config, yaxis_mask);
    /* Each new team is synchronized before use (the spec's rule). */
    fmshmem_team_sync_internal(parent);
    return 0;
}

void shmem_team_destroy(shmem_team_t team)
{
    if (!valid(team) || team == SHMEM_TEAM_WORLD || team == SHMEM_TEAM_SHARED)
        return;
    S.team_slots_free |= (uint64_t)1 << team->slot;
    free(team);
}
