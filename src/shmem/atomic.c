/*
 * Atomic memory operations.
 *
 * On a PE of this node an AMO is a CPU atomic on the mapped object; on
 * another node the target's server thread applies the same CPU atomic
 * (fmshmem_amo_apply), so both kinds are atomic with respect to each other,
 * which is all the spec asks. Operands travel as their bits: 4 or 8 bytes,
 * floats included (fetch, set and swap only move bits).
 */
#include "shmem_internal.h"

#include <string.h>

#define APPLY(T)                                                                               \
    do {                                                                                       \
        T *q = p, v = (T)value, c = (T)cond, old;                                              \
        switch (op) {                                                                          \
        case AMO_FETCH: return __atomic_load_n(q, __ATOMIC_SEQ_CST);                           \
        case AMO_SET: __atomic_store_n(q, v, __ATOMIC_SEQ_CST); return 0;                      \
        case AMO_SWAP: return __atomic_exchange_n(q, v, __ATOMIC_SEQ_CST);                     \
        case AMO_CSWAP:                                                                        \
            old = c;                                                                           \
            __atomic_compare_exchange_n(q, &old, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
            return old;                                                                        \
        case AMO_ADD: return __atomic_fetch_add(q, v, __ATOMIC_SEQ_CST);                       \
        case AMO_AND: return __atomic_fetch_and(q, v, __ATOMIC_SEQ_CST);                       \
        case AMO_OR: return __atomic_fetch_or(q, v, __ATOMIC_SEQ_CST);                         \
        case AMO_XOR: return __atomic_fetch_xor(q, v, __ATOMIC_SEQ_CST);                       \
        }                                                                                      \
        return 0;                                                                              \
    } while (0)

uint64_t fmshmem_amo_apply(void *p, enum amo_op op, int size, uint64_t value, uint64_t cond)
{
    if (size == 4)
        APPLY(uint32_t);
    APPLY(uint64_t);
}

uint64_t fmshmem_amo(void *dest, int pe, enum amo_op op, int size, uint64_t value,
                     uint64_t cond, bool fetch, const char *what)
{
    fmshmem_check_pe(pe, what);
    uint64_t off;
    enum seg s = fmshmem_seg_of(dest, (size_t)size, &off, what);
    char *base = S.peer_base[s][pe];
    if (fm_likely(base != NULL))
        return fmshmem_amo_apply(base + off, op, size, value, cond);
    uint64_t old = 0;
    fmshmem_am_amo(pe, s, off, op, size, value, cond, fetch ? &old : NULL, true);
    return old;
}

/* The fetching nbi forms: the old value lands in *fetch by the next quiet. */
static void amo_nbi(void *fetch, void *dest, int pe, enum amo_op op, int size, uint64_t value,
                    uint64_t cond, const char *what)
{
    fmshmem_check_pe(pe, what);
    uint64_t off;
    enum seg s = fmshmem_seg_of(dest, (size_t)size, &off, what);
    char *base = S.peer_base[s][pe];
    if (base) {
        uint64_t old = fmshmem_amo_apply(base + off, op, size, value, cond);
        memcpy(fetch, &old, (size_t)size); /* little-endian: the low bytes */
        return;
    }
    fmshmem_am_amo(pe, s, off, op, size, value, cond, fetch, false);
}

/* Bits of a value as the 64-bit operand, and back (compound literals give
 * the macros below an object to copy through). */
static inline uint64_t to_bits(const void *x, size_t size)
{
    uint64_t b = 0;
    memcpy(&b, x, size);
    return b;
}

static inline void *from_bits(void *x, uint64_t b, size_t size)
{
    memcpy(x, &b, size);
    return x;
}
#define TO_BITS(T, x) to_bits((T[1]){(x)}, sizeof(T))
#define FROM_BITS(T, b) (*(T *)from_bits((T[1]){0}, (b), sizeof(T)))
#define AMO(T, dest, pe, op, v, c, fetch, what)                                                \
    fmshmem_amo((void *)(dest), pe, op, (int)sizeof(T), TO_BITS(T, v), TO_BITS(T, c), fetch, what)

#define DEF_AMO_EXT(T, N)                                                                      \
    T shmem_##N##_atomic_fetch(const T *source, int pe)                                        \
    {                                                                                          \
        return FROM_BITS(T, AMO(T, source, pe, AMO_FETCH, 0, 0, true, "shmem_atomic_fetch"));  \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_nbi(T *fetch, const T *source, int pe)                       \
    {                                                                                          \
        amo_nbi(fetch, (void *)source, pe, AMO_FETCH, sizeof(T), 0, 0, "shmem_atomic_fetch_nbi"); \
    }                                                                                          \
    void shmem_##N##_atomic_set(T *dest, T value, int pe)                                      \
    {                                                                                          \
        AMO(T, dest, pe, AMO_SET, value, 0, false, "shmem_atomic_set");                        \
    }                                                                                          \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe)                                        \
    {                                                                                          \
        return FROM_BITS(T, AMO(T, dest, pe, AMO_SWAP, value, 0, true, "shmem_atomic_swap"));  \
    }                                                                                          \
    void shmem_##N##_atomic_swap_nbi(T *fetch, T *dest, T value, int pe)                       \
    {                                                                                          \
        amo_nbi(fetch, dest, pe, AMO_SWAP, sizeof(T), TO_BITS(T, value), 0,                   \
                "shmem_atomic_swap_nbi");                                                      \
    }
FMSHMEM_AMO_EXT_TYPES(DEF_AMO_EXT)

#define DEF_AMO_STD(T, N)                                                                      \
    T shmem_##N##_atomic_compare_swap(T *dest, T cond, T value, int pe)                        \
    {                                                                                          \
        return FROM_BITS(T, AMO(T, dest, pe, AMO_CSWAP, value, cond, true,                     \
                                "shmem_atomic_compare_swap"));                                 \
    }                                                                                          \
    void shmem_##N##_atomic_compare_swap_nbi(T *fetch, T *dest, T cond, T value, int pe)       \
    {                                                                                          \
        amo_nbi(fetch, dest, pe, AMO_CSWAP, sizeof(T), TO_BITS(T, value), TO_BITS(T, cond),    \
                "shmem_atomic_compare_swap_nbi");                                              \
    }                                                                                          \
    T shmem_##N##_atomic_fetch_inc(T *dest, int pe)                                            \
    {                                                                                          \
        return FROM_BITS(T, AMO(T, dest, pe, AMO_ADD, (T)1, 0, true, "shmem_atomic_fetch_inc")); \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_inc_nbi(T *fetch, T *dest, int pe)                           \
    {                                                                                          \
        amo_nbi(fetch, dest, pe, AMO_ADD, sizeof(T), 1, 0, "shmem_atomic_fetch_inc_nbi");      \
    }                                                                                          \
    void shmem_##N##_atomic_inc(T *dest, int pe)                                               \
    {                                                                                          \
        AMO(T, dest, pe, AMO_ADD, (T)1, 0, false, "shmem_atomic_inc");                         \
    }                                                                                          \
    T shmem_##N##_atomic_fetch_add(T *dest, T value, int pe)                                   \
    {                                                                                          \
        return FROM_BITS(T, AMO(T, dest, pe, AMO_ADD, value, 0, true, "shmem_atomic_fetch_add")); \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_add_nbi(T *fetch, T *dest, T value, int pe)                  \
    {                                                                                          \
        amo_nbi(fetch, dest, pe, AMO_ADD, sizeof(T), TO_BITS(T, value), 0,                     \
                "shmem_atomic_fetch_add_nbi");                                                 \
    }                                                                                          \
    void shmem_##N##_atomic_add(T *dest, T value, int pe)                                      \
    {                                                                                          \
        AMO(T, dest, pe, AMO_ADD, value, 0, false, "shmem_atomic_add");                        \
    }
FMSHMEM_AMO_STD_TYPES(DEF_AMO_STD)

#define DEF_AMO_BIT_OP(T, N, OP, CODE)                                                         \
    T shmem_##N##_atomic_fetch_##OP(T *dest, T value, int pe)                                  \
    {                                                                                          \
        return FROM_BITS(T, AMO(T, dest, pe, CODE, value, 0, true, "shmem_atomic_fetch_" #OP)); \
    }                                                                                          \
    void shmem_##N##_atomic_fetch_##OP##_nbi(T *fetch, T *dest, T value, int pe)               \
    {                                                                                          \
        amo_nbi(fetch, dest, pe, CODE, sizeof(T), TO_BITS(T, value), 0,                        \
                "shmem_atomic_fetch_" #OP "_nbi");                                             \
    }                                                                                          \
    void shmem_##N##_atomic_##OP(T *dest, T value, int pe)                                     \
    {                                                                                          \
        AMO(T, dest, pe, CODE, value, 0, false, "shmem_atomic_" #OP);                          \
    }
#define DEF_AMO_BIT(T, N)                                                                      \
    DEF_AMO_BIT_OP(T, N, and, AMO_AND)                                                         \
    DEF_AMO_BIT_OP(T, N, or, AMO_OR) DEF_AMO_BIT_OP(T, N, xor, AMO_XOR)
FMSHMEM_AMO_BIT_TYPES(DEF_AMO_BIT)

/* The deprecated names. */
#define DEF_AMO_OLD(T, N)                                                                      \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe)                                      \
    {                                                                                          \
        return shmem_##N##_atomic_compare_swap(dest, cond, value, pe);                         \
    }                                                                                          \
    T shmem_##N##_fadd(T *dest, T value, int pe)                                               \
    {                                                                                          \
        return shmem_##N##_atomic_fetch_add(dest, value, pe);                                  \
    }                                                                                          \
    T shmem_##N##_finc(T *dest, int pe) { return shmem_##N##_atomic_fetch_inc(dest, pe); }     \
    void shmem_##N##_add(T *dest, T value, int pe) { shmem_##N##_atomic_add(dest, value, pe); } \
    void shmem_##N##_inc(T *dest, int pe) { shmem_##N##_atomic_inc(dest, pe); }
#define DEF_AMO_OLD_EXT(T, N)                                                                  \
    T shmem_##N##_fetch(const T *source, int pe) { return shmem_##N##_atomic_fetch(source, pe); } \
    void shmem_##N##_set(T *dest, T value, int pe) { shmem_##N##_atomic_set(dest, value, pe); } \
    T shmem_##N##_swap(T *dest, T value, int pe) { return shmem_##N##_atomic_swap(dest, value, pe); }
DEF_AMO_OLD(int, int)
DEF_AMO_OLD(long, long)
DEF_AMO_OLD(long long, longlong)
DEF_AMO_OLD_EXT(int, int)
DEF_AMO_OLD_EXT(long, long)
DEF_AMO_OLD_EXT(long long, longlong)
DEF_AMO_OLD_EXT(float, float)
DEF_AMO_OLD_EXT(double, double)
/* The SGI name; C11 callers reach the typed swaps through shmem.h's
 * generic shmem_swap, which the parentheses keep out of this definition. */
long (shmem_swap)(long *dest, long value, int pe)
{
    return shmem_long_atomic_swap(dest, value, pe);
}
