/*
 * The symmetric heap's allocator.
 *
 * Every PE makes the same calls in the same order (the spec requires it), so
 * a deterministic allocator gives every PE the same offsets and an address
 * translates between PEs by its offset alone. The block list lives in
 * private memory, never in the heap itself: a stray remote put cannot
 * corrupt it. First fit over a sorted array keeps it simple; programs make
 * few, large symmetric allocations.
 */
#include "shmem_internal.h"

#include "core/log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIN_ALIGN 64 /* a cache line: two allocations never share one */

struct block {
    size_t off, len;
    bool used;
};

static struct block *blocks;
static size_t nblocks, cap;

void fmshmem_heap_init(void)
{
    cap = 64;
    blocks = malloc(cap * sizeof(*blocks));
    if (!blocks)
        fmshmem_fatal("out of memory");
    nblocks = 1;
    blocks[0] = (struct block){INTERNAL_BYTES, S.seg[SEG_HEAP].size - INTERNAL_BYTES, false};
}

void fmshmem_heap_fini(void)
{
    free(blocks);
    blocks = NULL;
    nblocks = cap = 0;
}

static void insert_at(size_t i, struct block b)
{
    if (nblocks == cap) {
        struct block *nb = realloc(blocks, 2 * cap * sizeof(*blocks));
        if (!nb)
            fmshmem_fatal("out of memory");
        blocks = nb;
        cap *= 2;
    }
    memmove(&blocks[i + 1], &blocks[i], (nblocks - i) * sizeof(*blocks));
    blocks[i] = b;
    nblocks++;
}

static void remove_at(size_t i)
{
    memmove(&blocks[i], &blocks[i + 1], (nblocks - i - 1) * sizeof(*blocks));
    nblocks--;
}

static size_t find_block(size_t off)
{
    size_t lo = 0, hi = nblocks;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (blocks[mid].off < off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < nblocks && blocks[lo].off == off && blocks[lo].used ? lo : SIZE_MAX;
}

/* Returns the offset of a new block, or 0 when nothing fits. */
static size_t alloc_block(size_t align, size_t size)
{
    size = FM_ALIGN_UP(size, (size_t)MIN_ALIGN);
    for (size_t i = 0; i < nblocks; i++) {
        struct block *b = &blocks[i];
        if (b->used)
            continue;
        /* Offsets, not addresses, are aligned: they are the same on every PE
         * (the heap's base is aligned to HEAP_ALIGN). */
        size_t start = FM_ALIGN_UP(b->off, align);
        size_t lead = start - b->off;
        if (lead > b->len || b->len - lead < size)
            continue;
        size_t tail = b->len - lead - size;
        if (lead) {
            b->len = lead;
            insert_at(++i, (struct block){start, size, true});
        } else {
            b->len = size;
            b->used = true;
        }
        if (tail)
            insert_at(i + 1, (struct block){start + size, tail, false});
        return start;
    }
    return 0;
}

static void free_block(size_t i)
{
    blocks[i].used = false;
    if (i + 1 < nblocks && !blocks[i + 1].used) {
        blocks[i].len += blocks[i + 1].len;
        remove_at(i + 1);
    }
    if (i > 0 && !blocks[i - 1].used) {
        blocks[i - 1].len += blocks[i].len;
        remove_at(i);
    }
}

static size_t index_of(void *ptr, const char *what)
{
    char *base = S.seg[SEG_HEAP].base;
    size_t i = SIZE_MAX;
    if ((char *)ptr >= base && (char *)ptr < base + S.seg[SEG_HEAP].size)
        i = find_block((size_t)((char *)ptr - base));
    if (i == SIZE_MAX)
        fmshmem_fatal("%s(%p): not an address shmem_malloc returned", what, ptr);
    return i;
}

static void *allocate(size_t align, size_t size, const char *what)
{
    void *p = NULL;
    if (size) {
        size_t off = alloc_block(align < MIN_ALIGN ? MIN_ALIGN : align, size);
        if (off)
            p = S.seg[SEG_HEAP].base + off;
        else
            fprintf(stderr,
                    "shmem: PE %d: %s(%zu): the symmetric heap is exhausted; raise "
                    "SHMEM_SYMMETRIC_SIZE (now %zu bytes)\n",
                    S.me, what, size, S.seg[SEG_HEAP].size - INTERNAL_BYTES);
    }
    shmem_barrier_all();
    return p;
}

void *shmem_malloc(size_t size) { return allocate(MIN_ALIGN, size, "shmem_malloc"); }

void *shmem_malloc_with_hints(size_t size, long hints)
{
    (void)hints;
    return allocate(MIN_ALIGN, size, "shmem_malloc_with_hints");
}

void *shmem_calloc(size_t count, size_t size)
{
    if (size && count > SIZE_MAX / size) {
        shmem_barrier_all();
        return NULL;
    }
    void *p = allocate(MIN_ALIGN, count * size, "shmem_calloc");
    if (p)
        memset(p, 0, count * size);
    /* Nobody may write to it before every PE has cleared its copy. */
    shmem_barrier_all();
    return p;
}

void *shmem_align(size_t alignment, size_t size)
{
    if (alignment == 0 || (alignment & (alignment - 1)) || alignment > HEAP_ALIGN) {
        shmem_barrier_all();
        return NULL;
    }
    return allocate(alignment, size, "shmem_align");
}

void shmem_free(void *ptr)
{
    shmem_barrier_all();
    if (ptr)
        free_block(index_of(ptr, "shmem_free"));
}

void *shmem_realloc(void *ptr, size_t size)
{
    if (!ptr)
        return shmem_malloc(size);
    if (!size) {
        shmem_free(ptr);
        return NULL;
    }
    /* Every PE must have finished reading the old block before it moves. */
    shmem_barrier_all();
    size_t i = index_of(ptr, "shmem_realloc");
    size_t want = FM_ALIGN_UP(size, (size_t)MIN_ALIGN);
    struct block *b = &blocks[i];
    if (want <= b->len) {
        if (b->len - want >= MIN_ALIGN) {
            size_t rest = b->len - want;
            b->len = want;
            insert_at(i + 1, (struct block){b->off + want, rest, true});
            free_block(i + 1);
        }
    } else if (i + 1 < nblocks && !blocks[i + 1].used && b->len + blocks[i + 1].len >= want) {
        size_t extra = want - b->len;
        b->len = want;
        blocks[i + 1].off += extra;
        blocks[i + 1].len -= extra;
        if (!blocks[i + 1].len)
            remove_at(i + 1);
    } else {
        size_t old_len = b->len;
        size_t off = alloc_block(MIN_ALIGN, size);
        if (!off) {
            fprintf(stderr,
                    "shmem: PE %d: shmem_realloc(%zu): the symmetric heap is exhausted; raise "
                    "SHMEM_SYMMETRIC_SIZE\n",
                    S.me, size);
            shmem_barrier_all();
            return NULL;
        }
        memcpy(S.seg[SEG_HEAP].base + off, ptr, old_len);
        free_block(index_of(ptr, "shmem_realloc"));
        ptr = S.seg[SEG_HEAP].base + off;
    }
    shmem_barrier_all();
    return ptr;
}

void *shmalloc(size_t size) { return shmem_malloc(size); }
void *shmemalign(size_t alignment, size_t size) { return shmem_align(alignment, size); }
void *shrealloc(void *ptr, size_t size) { return shmem_realloc(ptr, size); }
void shfree(void *ptr) { shmem_free(ptr); }
