/*
 * rma.c: OpenSHMEM remote memory access (put/get in all their forms).
 *
 * Covered, for every standard RMA type: shmem_TYPE_{put,get,p,g,put_nbi,get_nbi,iput,iget};
 * for every size: shmem_{put,get}{8,16,32,64,128}[_nbi] and shmem_i{put,get}{8,...,128};
 * shmem_{put,get}mem[_nbi] from 1 B to 4 MiB at unaligned offsets; bursts of 4096 one-element
 * gets and puts in flight before one shmem_quiet.  Each runs against the
 * symmetric heap and against static data: 1 MiB file-scope .bss arrays, initialised
 * file-scope data and static locals.
 *
 * Every PE writes to its right neighbour (me+1)%n and reads from its left one (me+n-1)%n.
 * Each datum encodes the PE that produced it, so a transfer to or from the wrong PE, to the
 * wrong offset or of the wrong length is caught; bytes around each target are checked too.
 *
 * A phase: prepare local buffers, barrier, issue, quiet, check gets, barrier, check puts.
 * The second barrier both completes the puts and keeps the next phase's preparation from
 * overwriting a buffer a neighbour may still be reading.
 *
 * Guarded: Open MPI 4.1's oshmem (OpenSHMEM 1.4) returns from shmem_quiet before a
 * shmem_getmem_nbi from static (non-heap) data has landed, at 4 PEs and up: always for
 * 1 MiB, and once in many CI runs for a 64 KiB case packed beside others.  The
 * nonblocking cases of 64 KiB and more on static data are therefore built only against 1.5
 * headers; smaller nonblocking cases on static data and all heap cases run everywhere.
 */
#include "shtest.h"

#include <stdlib.h>

#define HAVE_1_5 (SHMEM_MAJOR_VERSION > 1 || SHMEM_MINOR_VERSION >= 5)
#define GUARD 0xEE                             /* bytes no transfer may touch */
#define HEAP_CAP (((size_t)4 << 20) + 4096)    /* 4 MiB transfers at an offset, plus gaps */
#define STATIC_CAP (((size_t)1 << 20) + 4096)  /* 1 MiB transfers at an offset, plus gaps */

static int me, npes, right, left;
static unsigned char *loc;  /* private source of puts */
static unsigned char *got;  /* private destination of gets */

/* Large file-scope arrays land in .bss, which an implementation must make symmetric too. */
static _Alignas(64) unsigned char static_src[STATIC_CAP];
static _Alignas(64) unsigned char static_dst[STATIC_CAP];

/* Initialised file-scope data (.data): put into one array, get from the other. */
long data_put[8] = {1, 2, 3, 4, 5, 6, 7, 8};
long data_get[8] = {1, 2, 3, 4, 5, 6, 7, 8};

struct region {
    const char *name;
    unsigned char *src;  /* symmetric: read by the right neighbour's gets */
    unsigned char *dst;  /* symmetric: written by the left neighbour's puts */
    size_t cap;
};

static unsigned seedof(int pe, unsigned id)
{
    return (unsigned)pe * 1000003u + id;
}

static size_t round_up(size_t x, size_t a)
{
    return (x + a - 1) / a * a;
}

/*
 * Typed routines.  Each type owns four slots per direction: contiguous, elemental (p/g,
 * first NP elements), nonblocking, and strided (IN elements, target stride DST, source
 * stride SST).  A slot has NEL elements to write plus spares that must stay untouched, so
 * an overrun by one element is caught.  Values stay below 97 so that every type, down to
 * signed char and float, represents them exactly.
 */
enum { NEL = 37, SL = NEL + 3, NP = 5, IN = 13, DST = 3, SST = 2 };
enum { PREPARE, ISSUE, CHECK_GETS, CHECK_PUTS };

#define VAL(T, pe, var, i) ((T)(((pe) * 13 + (var) * 7 + (int)(i)) % 97))

static const char *const get_ops[4] = {"get", "g", "get_nbi", "iget"};
static const char *const put_ops[4] = {"put", "p", "put_nbi", "iput"};

/* Which source element ends up in element i of a slot; 0 if i must stay untouched. */
static int slot_source(int slot, size_t written, size_t i, size_t *j)
{
    if (slot == 3) {
        *j = i / DST * SST;
        return i % DST == 0 && i / DST < written;
    }
    *j = i;
    return i < written;
}

#define DEFINE_TYPED(T, N)                                                                         \
    static void typed_##N(const struct region *r, size_t off, int stage)                           \
    {                                                                                              \
        T *dst = (T *)(r->dst + off), *src = (T *)(r->src + off);                                  \
        T *l = (T *)(loc + off), *g = (T *)(got + off);                                            \
                                                                                                   \
        switch (stage) {                                                                           \
        case PREPARE:                                                                              \
            memset(dst, GUARD, 4 * SL * sizeof(T));                                                \
            memset(g, GUARD, 4 * SL * sizeof(T));                                                  \
            for (int s = 0; s < 4; s++) {                                                          \
                for (size_t i = 0; i < NEL; i++) {                                                 \
                    src[s * SL + i] = VAL(T, me, s, i);                                            \
                    l[s * SL + i] = VAL(T, me, s + 4, i);                                          \
                }                                                                                  \
            }                                                                                      \
            break;                                                                                 \
        case ISSUE:                                                                                \
            shmem_##N##_put(dst, l, NEL, right);                                                   \
            for (size_t i = 0; i < NP; i++)                                                        \
                shmem_##N##_p(dst + SL + i, l[SL + i], right);                                     \
            shmem_##N##_put_nbi(dst + 2 * SL, l + 2 * SL, NEL, right);                             \
            shmem_##N##_iput(dst + 3 * SL, l + 3 * SL, DST, SST, IN, right);                       \
            shmem_##N##_get(g, src, NEL, left);                                                    \
            for (size_t i = 0; i < NP; i++)                                                        \
                g[SL + i] = shmem_##N##_g(src + SL + i, left);                                     \
            shmem_##N##_get_nbi(g + 2 * SL, src + 2 * SL, NEL, left);                              \
            shmem_##N##_iget(g + 3 * SL, src + 3 * SL, DST, SST, IN, left);                        \
            break;                                                                                 \
        default:                                                                                   \
            for (int s = 0; s < 4; s++) {                                                          \
                const char *op = stage == CHECK_GETS ? get_ops[s] : put_ops[s];                    \
                const size_t written[4] = {NEL, NP, NEL, IN};                                      \
                                                                                                   \
                for (size_t i = 0; i < SL; i++) {                                                  \
                    const T *e = (stage == CHECK_GETS ? g : dst) + s * SL + i;                     \
                    int var = stage == CHECK_GETS ? s : s + 4;                                     \
                    size_t j;                                                                      \
                                                                                                   \
                    if (slot_source(s, written[s], i, &j))                                         \
                        expect_fp(*e, VAL(T, left, var, j), "%s shmem_" #N "_%s elem %zu",         \
                                  r->name, op, i);                                                 \
                    else                                                                           \
                        check_fill(e, sizeof(T), GUARD, "%s shmem_" #N "_%s elem %zu",             \
                                   r->name, op, i);                                                \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }

#define RMA_TYPES(X)                                                                               \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char)                     \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong)         \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                        \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8)                       \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8)                        \
    X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)                    \
    X(ptrdiff_t, ptrdiff)

RMA_TYPES(DEFINE_TYPED)

static const struct {
    void (*fn)(const struct region *, size_t, int);
    size_t size;
} typed[] = {
#define TYPED_ENTRY(T, N) {typed_##N, sizeof(T)},
    RMA_TYPES(TYPED_ENTRY)
#undef TYPED_ENTRY
};

/*
 * Sized routines: three slots per direction (contiguous, nonblocking, strided) of SN
 * elements plus spares, checked byte by byte against patterns.
 */
enum { SN = 29, SSL = SN + 2, SIN = 9 };

typedef void (*xfer_fn)(void *, const void *, size_t, int);
typedef void (*strided_fn)(void *, const void *, ptrdiff_t, ptrdiff_t, size_t, int);

static const struct {
    size_t bits;
    xfer_fn put, get, put_nbi, get_nbi;
    strided_fn iput, iget;
} sized[] = {
    {8, shmem_put8, shmem_get8, shmem_put8_nbi, shmem_get8_nbi, shmem_iput8, shmem_iget8},
    {16, shmem_put16, shmem_get16, shmem_put16_nbi, shmem_get16_nbi, shmem_iput16,
     shmem_iget16},
    {32, shmem_put32, shmem_get32, shmem_put32_nbi, shmem_get32_nbi, shmem_iput32,
     shmem_iget32},
    {64, shmem_put64, shmem_get64, shmem_put64_nbi, shmem_get64_nbi, shmem_iput64,
     shmem_iget64},
    {128, shmem_put128, shmem_get128, shmem_put128_nbi, shmem_get128_nbi, shmem_iput128,
     shmem_iget128},
};

static void check_sized_slot(const unsigned char *slot, size_t es, int strided, unsigned seed,
                             const char *rname, const char *op)
{
    for (size_t i = 0; i < SSL; i++) {
        size_t j;

        if (slot_source(strided ? 3 : 0, strided ? SIN : SN, i, &j)) {
            for (size_t b = 0; b < es; b++) {
                expect_eq(slot[i * es + b], pat(seed, j * es + b), "%s %s elem %zu byte %zu",
                          rname, op, i, b);
            }
        } else {
            check_fill(slot + i * es, es, GUARD, "%s %s elem %zu", rname, op, i);
        }
    }
}

static void sized_stage(const struct region *r, size_t off, size_t k, int stage)
{
    size_t es = sized[k].bits / 8, slot = SSL * es;
    unsigned bits = (unsigned)sized[k].bits;
    unsigned char *dst = r->dst + off, *src = r->src + off, *l = loc + off, *g = got + off;

    switch (stage) {
    case PREPARE:
        memset(dst, GUARD, 3 * slot);
        memset(g, GUARD, 3 * slot);
        for (unsigned s = 0; s < 3; s++) {
            fill_pat(src + s * slot, slot, seedof(me, 300 + bits + s));
            fill_pat(l + s * slot, slot, seedof(me, 600 + bits + s));
        }
        break;
    case ISSUE:
        sized[k].put(dst, l, SN, right);
        sized[k].put_nbi(dst + slot, l + slot, SN, right);
        sized[k].iput(dst + 2 * slot, l + 2 * slot, DST, SST, SIN, right);
        sized[k].get(g, src, SN, left);
        sized[k].get_nbi(g + slot, src + slot, SN, left);
        sized[k].iget(g + 2 * slot, src + 2 * slot, DST, SST, SIN, left);
        break;
    default:
        for (unsigned s = 0; s < 3; s++) {
            int gets = stage == CHECK_GETS;
            char op[32];

            snprintf(op, sizeof op, "shmem_%s%s%u%s", s == 2 ? "i" : "", gets ? "get" : "put",
                     bits, s == 1 ? "_nbi" : "");
            check_sized_slot((gets ? g : dst) + s * slot, es, s == 2,
                             seedof(left, (gets ? 300 : 600) + bits + s), r->name, op);
        }
    }
}

/* One phase covering every typed and sized routine on a region. */
static void typed_phase(const struct region *r)
{
    size_t toff[sizeof typed / sizeof typed[0]], soff[sizeof sized / sizeof sized[0]];
    size_t cur = 0;

    for (size_t t = 0; t < sizeof typed / sizeof typed[0]; t++) {
        toff[t] = cur;
        cur = round_up(cur + 4 * SL * typed[t].size, 64);
    }
    for (size_t k = 0; k < sizeof sized / sizeof sized[0]; k++) {
        soff[k] = cur;
        cur = round_up(cur + 3 * SSL * sized[k].bits / 8, 64);
    }
    if (cur > r->cap)
        fail("too small", "large enough", "%s region for typed phase", r->name);

    for (int stage = PREPARE; stage <= CHECK_PUTS; stage++) {
        if (stage == ISSUE || stage == CHECK_PUTS)
            shmem_barrier_all();
        for (size_t t = 0; t < sizeof typed / sizeof typed[0]; t++)
            typed[t].fn(r, toff[t], stage);
        for (size_t k = 0; k < sizeof sized / sizeof sized[0]; k++)
            sized_stage(r, soff[k], k, stage);
        if (stage == ISSUE)
            shmem_quiet();
    }
}

/*
 * Bulk putmem/getmem.  Cases are packed into a region one after another, each starting at
 * its offset past a 64-byte boundary, with guard gaps between them; when the region is
 * full the packed cases run as one phase.
 */
struct bcase {
    size_t len, off;
    int nbi;
    size_t pos;  /* where the case lands in the region, set while packing */
};

enum { GAP = 16 };

static void check_gaps(const unsigned char *buf, const struct bcase *c, size_t nc,
                       const char *what)
{
    size_t prev = 0;

    for (size_t i = 0; i < nc; i++) {
        check_fill(buf + prev, c[i].pos - prev, GUARD, "%s before case len %zu off %zu", what,
                   c[i].len, c[i].off);
        prev = c[i].pos + c[i].len;
    }
    check_fill(buf + prev, GAP, GUARD, "%s after last case", what);
}

static void bulk_phase(const struct region *r, const struct bcase *c, size_t nc, size_t extent,
                       unsigned id0)
{
    memset(r->dst, GUARD, extent);
    memset(got, GUARD, extent);
    for (size_t i = 0; i < nc; i++) {
        fill_pat(r->src + c[i].pos, c[i].len, seedof(me, id0 + 2 * (unsigned)i));
        fill_pat(loc + c[i].pos, c[i].len, seedof(me, id0 + 2 * (unsigned)i + 1));
    }
    shmem_barrier_all();

    for (size_t i = 0; i < nc; i++) {
        size_t p = c[i].pos;

        if (c[i].nbi) {
            shmem_putmem_nbi(r->dst + p, loc + p, c[i].len, right);
            shmem_getmem_nbi(got + p, r->src + p, c[i].len, left);
        } else {
            shmem_putmem(r->dst + p, loc + p, c[i].len, right);
            shmem_getmem(got + p, r->src + p, c[i].len, left);
        }
    }
    shmem_quiet();

    for (size_t i = 0; i < nc; i++) {
        check_pat(got + c[i].pos, c[i].len, seedof(left, id0 + 2 * (unsigned)i),
                  "%s shmem_getmem%s len %zu off %zu", r->name, c[i].nbi ? "_nbi" : "",
                  c[i].len, c[i].off);
    }
    check_gaps(got, c, nc, "getmem destination");
    shmem_barrier_all();

    for (size_t i = 0; i < nc; i++) {
        check_pat(r->dst + c[i].pos, c[i].len, seedof(left, id0 + 2 * (unsigned)i + 1),
                  "%s shmem_putmem%s len %zu off %zu", r->name, c[i].nbi ? "_nbi" : "",
                  c[i].len, c[i].off);
    }
    check_gaps(r->dst, c, nc, r->name);
}

/* Whether a case would meet oshmem 4.1's early shmem_quiet (see the top); 1.5 runs them all. */
static int oshmem_misses(const struct region *r, size_t len, int nbi)
{
    return !HAVE_1_5 && nbi && r->src == static_src && len >= 65535;
}

static void bulk(const struct region *r)
{
    static const size_t lens[] = {1,   2,   3,   7,    8,    15,   16,   17,    63,    64,   65,
                                  127, 128, 129, 1000, 4095, 4096, 4097, 65535, 65536, 65539};
    static const size_t offs[] = {0, 1, 3, 7};
    static const struct bcase large[] = {
        {(size_t)1 << 20, 0, 0, 0},       {(size_t)1 << 20, 3, 1, 0},
        {((size_t)1 << 20) - 5, 1, 0, 0}, {(size_t)4 << 20, 0, 1, 0},
        {(size_t)4 << 20, 5, 0, 0},
    };
    struct bcase all[sizeof lens / sizeof lens[0] * 8 + sizeof large / sizeof large[0]];
    size_t na = 0, first = 0, cur = 0;
    unsigned id = 10000;

    for (size_t l = 0; l < sizeof lens / sizeof lens[0]; l++)
        for (size_t o = 0; o < sizeof offs / sizeof offs[0]; o++)
            for (int nbi = 0; nbi < 2; nbi++)
                if (!oshmem_misses(r, lens[l], nbi))
                    all[na++] = (struct bcase){lens[l], offs[o], nbi, 0};
    for (size_t i = 0; i < sizeof large / sizeof large[0]; i++) {
        if (oshmem_misses(r, large[i].len, large[i].nbi))
            continue;
        if (large[i].off + large[i].len + GAP <= r->cap)
            all[na++] = large[i];
    }

    for (size_t i = 0; i < na; i++) {
        size_t pos = round_up(cur, 64) + all[i].off;

        if (pos + all[i].len + GAP > r->cap) {
            bulk_phase(r, all + first, i - first, cur + GAP, id);
            id += 2 * (unsigned)(i - first);
            first = i;
            pos = all[i].off;
        }
        all[i].pos = pos;
        cur = pos + all[i].len;
    }
    bulk_phase(r, all + first, na - first, cur + GAP, id);
}

/*
 * Many small transfers in flight at once, then one shmem_quiet: every get must land and every
 * put must be complete.  An implementation that ships each one as a request to the target
 * fills its queue to that PE here, and must keep what it could not send at once (a get
 * request, or the quiet's flush, is as small as a message gets).
 */
static void burst(const struct region *r)
{
    enum { N = 4096 };
    long *src = (long *)r->src, *dst = (long *)r->dst, *into = (long *)got;

    for (int i = 0; i < N; i++) {
        src[i] = (long)seedof(me, 50000u + (unsigned)i);
        dst[i] = -1;
        into[i] = -1;
    }
    shmem_barrier_all();
    for (int i = 0; i < N; i++) {
        shmem_long_get_nbi(into + i, src + i, 1, left);
        shmem_long_p(dst + i, (long)seedof(me, 60000u + (unsigned)i), right);
    }
    shmem_quiet();
    for (int i = 0; i < N; i++)
        expect_eq((unsigned long long)into[i], seedof(left, 50000u + (unsigned)i),
                  "%s burst: shmem_long_get_nbi %d of %d", r->name, i, N);
    shmem_barrier_all();
    for (int i = 0; i < N; i++)
        expect_eq((unsigned long long)dst[i], seedof(left, 60000u + (unsigned)i),
                  "%s burst: shmem_long_p %d of %d", r->name, i, N);
    shmem_barrier_all();
}

/* Static locals are symmetric as well; these live in .bss and .data respectively. */
static void static_locals(int **put_target, double **get_source)
{
    static int sl_put[4];
    static double sl_get[3] = {0.5, 1.5, 2.5};

    *put_target = sl_put;
    *get_source = sl_get;
}

static void segments(void)
{
    int *sl_put;
    double *sl_get, dgot[3];
    long lv[8], lgot[8];

    static_locals(&sl_put, &sl_get);
    for (int i = 0; i < 8; i++) {
        lv[i] = 1000L * me + i;
        data_get[i] = 2000L * me + i;
    }
    for (int i = 0; i < 3; i++)
        sl_get[i] = me + i * 0.25;
    shmem_barrier_all();

    shmem_long_put(data_put, lv, 8, right);
    for (int i = 0; i < 4; i++)
        shmem_int_p(&sl_put[i], 77 * me + i, right);
    shmem_long_get(lgot, data_get, 8, left);
    shmem_double_get(dgot, sl_get, 3, left);
    shmem_barrier_all();

    for (int i = 0; i < 8; i++) {
        expect_eq(data_put[i], 1000L * left + i, "shmem_long_put to .data elem %d", i);
        expect_eq(lgot[i], 2000L * left + i, "shmem_long_get from .data elem %d", i);
    }
    for (int i = 0; i < 4; i++)
        expect_eq(sl_put[i], 77 * left + i, "shmem_int_p to static local elem %d", i);
    for (int i = 0; i < 3; i++)
        expect_fp(dgot[i], left + i * 0.25, "shmem_double_get from static local elem %d", i);
}

int main(void)
{
    shmem_init();
    ring_place(&me, &npes, &right, &left);

    struct region heap = {"heap", shmem_malloc(HEAP_CAP), shmem_malloc(HEAP_CAP), HEAP_CAP};
    struct region stat = {"static", static_src, static_dst, STATIC_CAP};

    loc = malloc(HEAP_CAP);
    got = malloc(HEAP_CAP);
    if (heap.src == NULL || heap.dst == NULL || loc == NULL || got == NULL)
        fail("NULL", "memory", "allocating %zu-byte buffers", HEAP_CAP);

    typed_phase(&heap);
    typed_phase(&stat);
    bulk(&heap);
    bulk(&stat);
    burst(&heap);
    burst(&stat);
    segments();

    shmem_barrier_all();
    shmem_free(heap.dst);
    shmem_free(heap.src);
    free(got);
    free(loc);
    return finish("rma");
}
