/*
 * memory.c: symmetric heap management and memory queries.
 *
 * Covered: shmem_init_thread and shmem_query_thread (this program initialises with
 * shmem_init_thread, the spec's alternative to shmem_init); shmem_info_get_version/name;
 * shmem_malloc/calloc/align/realloc/free: symmetry (a put to the returned address right
 * after the call returns lands in the peer's matching block), alignment, zero fill,
 * contents kept across realloc, zero-size requests, reuse after free; shmem_addr_accessible
 * and shmem_pe_accessible; shmem_ptr: with 1.5 headers it must be non-NULL for every PE of
 * SHMEM_TEAM_SHARED, and stores through it must be visible to that PE after a barrier;
 * elsewhere NULL is allowed and stores are checked only where a pointer was returned.
 *
 * Every PE writes to its right neighbour (me+1)%n and checks what its left one wrote.
 *
 * Guarded: Open MPI 4.1's oshmem (OpenSHMEM 1.4) returns shmem_malloc blocks aligned to 8
 * bytes only, short of alignof(max_align_t) (16 on x86-64) that "suitably aligned for any
 * type of object" means; with 1.4 headers only 8-byte alignment is required.
 */
#include "shtest.h"

#include <stdalign.h>
#include <stdlib.h>

#define HAVE_1_5 (SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 5)

/* Alignment shmem_malloc and shmem_calloc must honour (see the top for the 1.4 case). */
#if HAVE_1_5
#define MALLOC_ALIGN alignof(max_align_t)
#else
#define MALLOC_ALIGN sizeof(void *)
#endif

static int me, npes, right, left;
static long global_word;  /* static data, for the accessibility queries */

static void threads(void)
{
    int provided = -1, queried = -1;

    expect_eq(SHMEM_THREAD_SINGLE < SHMEM_THREAD_FUNNELED &&
                  SHMEM_THREAD_FUNNELED < SHMEM_THREAD_SERIALIZED &&
                  SHMEM_THREAD_SERIALIZED < SHMEM_THREAD_MULTIPLE,
              1, "thread level constants in increasing order");
    expect_eq(shmem_init_thread(SHMEM_THREAD_MULTIPLE, &provided), 0, "shmem_init_thread");
    expect_range(provided, SHMEM_THREAD_SINGLE, SHMEM_THREAD_MULTIPLE + 1,
                 "shmem_init_thread provided level");
    shmem_query_thread(&queried);
    expect_eq(queried, provided, "shmem_query_thread after shmem_init_thread");
}

static void info(void)
{
    int major = -1, minor = -1;
    char name[SHMEM_MAX_NAME_LEN];

    shmem_info_get_version(&major, &minor);
    expect_eq(major, SHMEM_MAJOR_VERSION, "shmem_info_get_version major");
    expect_eq(minor, SHMEM_MINOR_VERSION, "shmem_info_get_version minor");
    memset(name, 'x', sizeof name);
    shmem_info_get_name(name);
    if (memchr(name, '\0', sizeof name) == NULL)
        fail("no NUL", "a terminated string", "shmem_info_get_name");
    if (strcmp(name, SHMEM_VENDOR_STRING) != 0)
        fail(name, SHMEM_VENDOR_STRING, "shmem_info_get_name vs SHMEM_VENDOR_STRING");
}

/* Put a pattern of len bytes into the right neighbour's copy of p, straight away. */
static void put_pattern(void *p, size_t len, unsigned id)
{
    unsigned char *buf = malloc(len);

    if (buf == NULL)
        fail("NULL", "memory", "malloc(%zu)", len);
    fill_pat(buf, len, (unsigned)me * 7919u + id);
    shmem_putmem(p, buf, len, right);
    free(buf);
}

static void check_from_left(const void *p, size_t len, unsigned id, const char *what)
{
    check_pat(p, len, (unsigned)left * 7919u + id, "%s, %zu bytes", what, len);
}

static void check_accessible(const void *p, const char *what)
{
    for (int pe = 0; pe < npes; pe++)
        expect_eq(shmem_addr_accessible(p, pe), 1, "shmem_addr_accessible(%s, %d)", what, pe);
}

static void malloc_free(void)
{
    static const size_t sizes[] = {1, 7, 64, 4096, 65537, ((size_t)1 << 20) + 5};
    enum { NS = sizeof sizes / sizeof sizes[0] };
    void *blk[NS];

    for (size_t i = 0; i < NS; i++) {
        blk[i] = shmem_malloc(sizes[i]);
        if (blk[i] == NULL)
            fail("NULL", "a block", "shmem_malloc(%zu)", sizes[i]);
        expect_eq((uintptr_t)blk[i] % MALLOC_ALIGN, 0, "shmem_malloc(%zu) alignment to %zu",
                  sizes[i], MALLOC_ALIGN);
        put_pattern(blk[i], sizes[i], (unsigned)i);
    }
    shmem_barrier_all();
    for (size_t i = 0; i < NS; i++) {
        check_from_left(blk[i], sizes[i], (unsigned)i, "put into shmem_malloc block");
        check_accessible(blk[i], "shmem_malloc block");
    }
    /* Free out of allocation order, then make sure freed space is handed out again. */
    for (size_t i = 1; i < NS; i += 2)
        shmem_free(blk[i]);
    for (size_t i = 1; i < NS; i += 2) {
        blk[i] = shmem_malloc(sizes[i] * 2);
        if (blk[i] == NULL)
            fail("NULL", "a block", "shmem_malloc(%zu) after frees", sizes[i] * 2);
        put_pattern(blk[i], sizes[i] * 2, 100 + (unsigned)i);
    }
    shmem_barrier_all();
    for (size_t i = 0; i < NS; i++) {
        size_t len = i % 2 ? sizes[i] * 2 : sizes[i];

        check_from_left(blk[i], len, i % 2 ? 100 + (unsigned)i : (unsigned)i,
                        "shmem_malloc block after freeing its neighbours");
    }
    for (size_t i = 0; i < NS; i++)
        shmem_free(blk[i]);

#if HAVE_1_5
    /* New in 1.5: 1.4 left the result of a zero-size shmem_malloc/shmem_align open. */
    expect_eq(shmem_malloc(0) == NULL, 1, "shmem_malloc(0) returns NULL");
    expect_eq(shmem_align(64, 0) == NULL, 1, "shmem_align(64, 0) returns NULL");
#endif
    expect_eq(shmem_calloc(0, 8) == NULL, 1, "shmem_calloc(0, 8) returns NULL");
    expect_eq(shmem_calloc(8, 0) == NULL, 1, "shmem_calloc(8, 0) returns NULL");
    shmem_free(NULL);
}

static void calloc_zero(void)
{
    enum { COUNT = 1000, SIZE = 12 };
    unsigned char *dirty = shmem_malloc(COUNT * SIZE), *z;

    /* Dirty some heap first so that a zero fill cannot come for free. */
    memset(dirty, 0xA5, COUNT * SIZE);
    shmem_free(dirty);
    z = shmem_calloc(COUNT, SIZE);
    if (z == NULL)
        fail("NULL", "a block", "shmem_calloc(%d, %d)", COUNT, SIZE);
    check_fill(z, COUNT * SIZE, 0, "shmem_calloc zero fill");
    expect_eq((uintptr_t)z % MALLOC_ALIGN, 0, "shmem_calloc alignment to %zu", MALLOC_ALIGN);
    /* The neighbour may write into the block as soon as it returns from shmem_calloc. */
    shmem_barrier_all();
    put_pattern(z, COUNT * SIZE, 200);
    shmem_barrier_all();
    check_from_left(z, COUNT * SIZE, 200, "put into shmem_calloc block");
    shmem_free(z);
}

static void align(void)
{
    static const size_t aligns[] = {sizeof(void *), 16, 64, 256, 4096, 65536};
    enum { NA = sizeof aligns / sizeof aligns[0], LEN = 100 };
    void *blk[NA];

    for (size_t i = 0; i < NA; i++) {
        blk[i] = shmem_align(aligns[i], LEN);
        if (blk[i] == NULL)
            fail("NULL", "a block", "shmem_align(%zu, %d)", aligns[i], LEN);
        expect_eq((uintptr_t)blk[i] % aligns[i], 0, "shmem_align(%zu) alignment", aligns[i]);
        put_pattern(blk[i], LEN, 300 + (unsigned)i);
    }
    shmem_barrier_all();
    for (size_t i = 0; i < NA; i++) {
        check_pat(blk[i], LEN, (unsigned)left * 7919u + 300 + (unsigned)i,
                  "put into shmem_align(%zu, %d) block", aligns[i], LEN);
        shmem_free(blk[i]);
    }
}

static void realloc_keep(void)
{
    enum { SMALL = 1000, BIG = 200000, SHRUNK = 500 };
    unsigned char *p = shmem_malloc(SMALL), *q;

    fill_pat(p, SMALL, 400u + (unsigned)me);
    q = shmem_realloc(p, BIG);
    if (q == NULL)
        fail("NULL", "a block", "shmem_realloc(%d -> %d)", SMALL, BIG);
    check_pat(q, SMALL, 400u + (unsigned)me, "shmem_realloc growing keeps contents");
    /* Local checks come first: the neighbour may write as soon as it returns. */
    shmem_barrier_all();
    put_pattern(q, BIG, 401);
    shmem_barrier_all();
    check_from_left(q, BIG, 401, "put into shmem_realloc grown block");

    p = shmem_realloc(q, SHRUNK);
    if (p == NULL)
        fail("NULL", "a block", "shmem_realloc(%d -> %d)", BIG, SHRUNK);
    check_from_left(p, SHRUNK, 401, "shmem_realloc shrinking keeps contents");
    shmem_barrier_all();
    put_pattern(p, SHRUNK, 402);
    shmem_barrier_all();
    check_from_left(p, SHRUNK, 402, "put into shmem_realloc shrunk block");
    shmem_free(p);

    /* realloc(NULL, n) allocates like shmem_malloc. */
    p = shmem_realloc(NULL, 64);
    if (p == NULL)
        fail("NULL", "a block", "shmem_realloc(NULL, 64)");
    put_pattern(p, 64, 403);
    shmem_barrier_all();
    check_from_left(p, 64, 403, "put into shmem_realloc(NULL, 64) block");
    shmem_free(p);
}

static void accessibility(void)
{
    long stack_word = 0;
    long *private_word = malloc(sizeof *private_word);

    check_accessible(&global_word, "static global");
    expect_eq(shmem_addr_accessible(&stack_word, right), 0, "shmem_addr_accessible(stack)");
    expect_eq(shmem_addr_accessible(private_word, right), 0,
              "shmem_addr_accessible(private malloc)");
    for (int pe = 0; pe < npes; pe++)
        expect_eq(shmem_pe_accessible(pe), 1, "shmem_pe_accessible(%d)", pe);
    free(private_word);
}

/*
 * shmem_ptr: every PE stores me+1 into slot [me] of each peer it gets a pointer for, so a
 * slot holds either 0 or the writer's number plus one.  With 1.5 headers every pair within
 * SHMEM_TEAM_SHARED must have had a pointer.
 */
static void direct_pointers(void)
{
    long *slots = shmem_calloc((size_t)npes, sizeof(long));

    if (slots == NULL)
        fail("NULL", "memory", "shmem_calloc for the shmem_ptr test");
    for (int pe = 0; pe < npes; pe++) {
        long *remote = shmem_ptr(slots, pe);

        if (remote != NULL)
            remote[me] = me + 1;
    }
    expect_eq(shmem_ptr(slots, me) == slots, 1, "shmem_ptr to this pe's own block");
    shmem_barrier_all();
    for (int pe = 0; pe < npes; pe++) {
        if (slots[pe] != 0)
            expect_eq(slots[pe], pe + 1, "store through shmem_ptr by pe %d", pe);
    }
#if HAVE_1_5
    for (int i = 0; i < shmem_team_n_pes(SHMEM_TEAM_SHARED); i++) {
        int pe = shmem_team_translate_pe(SHMEM_TEAM_SHARED, i, SHMEM_TEAM_WORLD);

        expect_range(pe, 0, npes, "SHMEM_TEAM_SHARED member %d in world numbering", i);
        expect_eq(shmem_ptr(slots, pe) != NULL, 1, "shmem_ptr for pe %d of SHMEM_TEAM_SHARED",
                  pe);
        expect_eq(slots[pe], pe + 1, "store through shmem_ptr by pe %d of SHMEM_TEAM_SHARED",
                  pe);
#ifdef FMSHMEM_RMA_TYPES /* libfmshmem's header: it has 1.6's shmem_team_ptr too */
        expect_eq(shmem_team_ptr(SHMEM_TEAM_SHARED, slots, i) == shmem_ptr(slots, pe), 1,
                  "shmem_team_ptr for member %d of SHMEM_TEAM_SHARED", i);
#endif
    }
#endif
    shmem_barrier_all();
    shmem_free(slots);
}

int main(void)
{
    threads();
    ring_place(&me, &npes, &right, &left);

    info();
    malloc_free();
    calloc_zero();
    align();
    realloc_keep();
    accessibility();
    direct_pointers();
    return finish("memory");
}
