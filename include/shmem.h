/*
 * OpenSHMEM 1.5 on fastmsg (libfmshmem).
 *
 * The interface is the OpenSHMEM 1.5 specification's; docs/shmem.md says
 * what is implemented, what is left out, and how each call is carried out.
 * Typed routines are declared through the type lists below (the spec's
 * tables), so every TYPENAME gets every routine its table gives it.
 */
#ifndef FMSHMEM_SHMEM_H
#define FMSHMEM_SHMEM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SHMEM_MAJOR_VERSION 1
#define SHMEM_MINOR_VERSION 5
#define SHMEM_MAX_NAME_LEN 256
#define SHMEM_VENDOR_STRING "fastmsg OpenSHMEM"
#define _SHMEM_MAJOR_VERSION SHMEM_MAJOR_VERSION
#define _SHMEM_MINOR_VERSION SHMEM_MINOR_VERSION
#define _SHMEM_MAX_NAME_LEN SHMEM_MAX_NAME_LEN
#define _SHMEM_VENDOR_STRING SHMEM_VENDOR_STRING

#define SHMEM_THREAD_SINGLE 0
#define SHMEM_THREAD_FUNNELED 1
#define SHMEM_THREAD_SERIALIZED 2
#define SHMEM_THREAD_MULTIPLE 3

#define SHMEM_CMP_EQ 0
#define SHMEM_CMP_NE 1
#define SHMEM_CMP_GT 2
#define SHMEM_CMP_GE 3
#define SHMEM_CMP_LT 4
#define SHMEM_CMP_LE 5
#define _SHMEM_CMP_EQ SHMEM_CMP_EQ
#define _SHMEM_CMP_NE SHMEM_CMP_NE
#define _SHMEM_CMP_GT SHMEM_CMP_GT
#define _SHMEM_CMP_GE SHMEM_CMP_GE
#define _SHMEM_CMP_LT SHMEM_CMP_LT
#define _SHMEM_CMP_LE SHMEM_CMP_LE

#define SHMEM_SIGNAL_SET 0
#define SHMEM_SIGNAL_ADD 1

/* Work arrays of the active-set collectives (deprecated forms). A pSync
 * holds the counters of a dissemination barrier: one long per round. */
#define SHMEM_SYNC_VALUE 0L
#define SHMEM_SYNC_SIZE 64
#define SHMEM_BARRIER_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_BCAST_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_REDUCE_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_COLLECT_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_ALLTOALL_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_ALLTOALLS_SYNC_SIZE SHMEM_SYNC_SIZE
#define SHMEM_REDUCE_MIN_WRKDATA_SIZE 1
#define _SHMEM_SYNC_VALUE SHMEM_SYNC_VALUE
#define _SHMEM_BARRIER_SYNC_SIZE SHMEM_BARRIER_SYNC_SIZE
#define _SHMEM_BCAST_SYNC_SIZE SHMEM_BCAST_SYNC_SIZE
#define _SHMEM_REDUCE_SYNC_SIZE SHMEM_REDUCE_SYNC_SIZE
#define _SHMEM_COLLECT_SYNC_SIZE SHMEM_COLLECT_SYNC_SIZE
#define _SHMEM_ALLTOALL_SYNC_SIZE SHMEM_ALLTOALL_SYNC_SIZE
#define _SHMEM_REDUCE_MIN_WRKDATA_SIZE SHMEM_REDUCE_MIN_WRKDATA_SIZE

/* Hints of shmem_malloc_with_hints: accepted, every allocation serves all uses. */
#define SHMEM_MALLOC_ATOMICS_REMOTE 1L
#define SHMEM_MALLOC_SIGNAL_REMOTE 2L

/* Teams. */
typedef struct fmshmem_team *shmem_team_t;
typedef struct {
    int num_contexts;
} shmem_team_config_t;
#define SHMEM_TEAM_NUM_CONTEXTS 1L
extern shmem_team_t SHMEM_TEAM_WORLD;
extern shmem_team_t SHMEM_TEAM_SHARED;
#define SHMEM_TEAM_INVALID ((shmem_team_t)0)

/* ---- the spec's type tables: X(TYPE, TYPENAME) ---- */
#define FMSHMEM_RMA_TYPES(X)                                                                  \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char)               \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong)  \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                 \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8)                \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8)                 \
    X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)             \
    X(ptrdiff_t, ptrdiff)
#define FMSHMEM_AMO_STD_TYPES(X)                                                              \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint)                  \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int32_t, int32)              \
    X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)               \
    X(ptrdiff_t, ptrdiff)
#define FMSHMEM_AMO_EXT_TYPES(X) FMSHMEM_AMO_STD_TYPES(X) X(float, float) X(double, double)
#define FMSHMEM_AMO_BIT_TYPES(X)                                                              \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong)          \
    X(int32_t, int32) X(int64_t, int64) X(uint32_t, uint32) X(uint64_t, uint64)
#define FMSHMEM_SYNC_TYPES(X)                                                                 \
    X(short, short) X(int, int) X(long, long) X(long long, longlong)                        \
    X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong)                 \
    X(unsigned long long, ulonglong) X(int32_t, int32) X(int64_t, int64)                    \
    X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size) X(ptrdiff_t, ptrdiff)
/* Team reductions: AND/OR/XOR, MAX/MIN, SUM/PROD. */
#define FMSHMEM_REDUCE_BIT_TYPES(X)                                                           \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                 \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8)                \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64) X(uint8_t, uint8)                 \
    X(uint16_t, uint16) X(uint32_t, uint32) X(uint64_t, uint64) X(size_t, size)
#define FMSHMEM_REDUCE_CMP_TYPES(X)                                                           \
    X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long)           \
    X(long long, longlong) X(ptrdiff_t, ptrdiff) X(unsigned char, uchar)                    \
    X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong)                 \
    X(unsigned long long, ulonglong) X(int8_t, int8) X(int16_t, int16) X(int32_t, int32)    \
    X(int64_t, int64) X(uint8_t, uint8) X(uint16_t, uint16) X(uint32_t, uint32)             \
    X(uint64_t, uint64) X(size_t, size) X(float, float) X(double, double)                   \
    X(long double, longdouble)
#define FMSHMEM_REDUCE_ARITH_TYPES(X)                                                         \
    FMSHMEM_REDUCE_CMP_TYPES(X) X(double _Complex, complexd) X(float _Complex, complexf)
/* The active-set reductions (TYPE_OP_to_all). */
#define FMSHMEM_TOALL_BIT_TYPES(X) X(short, short) X(int, int) X(long, long) X(long long, longlong)
#define FMSHMEM_TOALL_CMP_TYPES(X)                                                            \
    FMSHMEM_TOALL_BIT_TYPES(X) X(float, float) X(double, double) X(long double, longdouble)
#define FMSHMEM_TOALL_ARITH_TYPES(X)                                                          \
    FMSHMEM_TOALL_CMP_TYPES(X) X(double _Complex, complexd) X(float _Complex, complexf)
/* The same tables without aliases (int32_t is int, ...), for _Generic. */
#define FMSHMEM_G_RMA_TYPES(X)                                                                \
    X(float, float) X(double, double) X(long double, longdouble) X(char, char)               \
    X(signed char, schar) X(short, short) X(int, int) X(long, long) X(long long, longlong)  \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                 \
    X(unsigned long, ulong) X(unsigned long long, ulonglong)
#define FMSHMEM_G_AMO_BIT_TYPES(X)                                                            \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong)          \
    X(int32_t, int32) X(int64_t, int64)
#define FMSHMEM_G_AMO_STD_TYPES(X)                                                            \
    X(int, int) X(long, long) X(long long, longlong) X(unsigned int, uint)                  \
    X(unsigned long, ulong) X(unsigned long long, ulonglong)
#define FMSHMEM_G_AMO_EXT_TYPES(X) FMSHMEM_G_AMO_STD_TYPES(X) X(float, float) X(double, double)
#define FMSHMEM_G_SYNC_TYPES(X)                                                               \
    X(short, short) X(int, int) X(long, long) X(long long, longlong)                        \
    X(unsigned short, ushort) X(unsigned int, uint) X(unsigned long, ulong)                 \
    X(unsigned long long, ulonglong)
#define FMSHMEM_G_REDUCE_BIT_TYPES(X)                                                         \
    X(unsigned char, uchar) X(unsigned short, ushort) X(unsigned int, uint)                 \
    X(unsigned long, ulong) X(unsigned long long, ulonglong) X(int8_t, int8)                \
    X(int16_t, int16) X(int32_t, int32) X(int64_t, int64)
#define FMSHMEM_G_REDUCE_CMP_TYPES(X)                                                         \
    X(char, char) X(signed char, schar) X(short, short) X(int, int) X(long, long)           \
    X(long long, longlong) X(unsigned char, uchar) X(unsigned short, ushort)                \
    X(unsigned int, uint) X(unsigned long, ulong) X(unsigned long long, ulonglong)          \
    X(float, float) X(double, double) X(long double, longdouble)
#define FMSHMEM_G_REDUCE_ARITH_TYPES(X)                                                       \
    FMSHMEM_G_REDUCE_CMP_TYPES(X) X(double _Complex, complexd) X(float _Complex, complexf)
#define FMSHMEM_SIZES(X) X(8) X(16) X(32) X(64) X(128)

/* ---- setup, queries ---- */
void shmem_init(void);
int shmem_init_thread(int requested, int *provided);
void shmem_query_thread(int *provided);
void shmem_finalize(void);
void shmem_global_exit(int status);
int shmem_my_pe(void);
int shmem_n_pes(void);
int shmem_pe_accessible(int pe);
int shmem_addr_accessible(const void *addr, int pe);
void *shmem_ptr(const void *dest, int pe);
/* OpenSHMEM 1.6's: shmem_ptr with pe numbered in team. */
void *shmem_team_ptr(shmem_team_t team, const void *dest, int pe);
void shmem_info_get_version(int *major, int *minor);
void shmem_info_get_name(char *name);
/* Deprecated names. */
void start_pes(int npes);
int _my_pe(void);
int _num_pes(void);

/* ---- symmetric memory ---- */
void *shmem_malloc(size_t size);
void *shmem_malloc_with_hints(size_t size, long hints);
void *shmem_calloc(size_t count, size_t size);
void *shmem_align(size_t alignment, size_t size);
void *shmem_realloc(void *ptr, size_t size);
void shmem_free(void *ptr);
void *shmalloc(size_t size);
void *shmemalign(size_t alignment, size_t size);
void *shrealloc(void *ptr, size_t size);
void shfree(void *ptr);

/* ---- remote memory access ---- */
#define FMSHMEM_DECL_RMA(T, N)                                                                 \
    void shmem_##N##_put(T *dest, const T *source, size_t nelems, int pe);                     \
    void shmem_##N##_put_nbi(T *dest, const T *source, size_t nelems, int pe);                 \
    void shmem_##N##_p(T *dest, T value, int pe);                                              \
    void shmem_##N##_iput(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe);                                              \
    void shmem_##N##_get(T *dest, const T *source, size_t nelems, int pe);                     \
    void shmem_##N##_get_nbi(T *dest, const T *source, size_t nelems, int pe);                 \
    T shmem_##N##_g(const T *source, int pe);                                                  \
    void shmem_##N##_iget(T *dest, const T *source, ptrdiff_t dst, ptrdiff_t sst,              \
                          size_t nelems, int pe);                                              \
    void shmem_##N##_put_signal(T *dest, const T *source, size_t nelems, uint64_t *sig_addr,   \
                                uint64_t signal, int sig_op, int pe);                          \
    void shmem_##N##_put_signal_nbi(T *dest, const T *source, size_t nelems,                   \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
FMSHMEM_RMA_TYPES(FMSHMEM_DECL_RMA)
#define FMSHMEM_DECL_RMA_SIZE(S)                                                               \
    void shmem_put##S(void *dest, const void *source, size_t nelems, int pe);                  \
    void shmem_put##S##_nbi(void *dest, const void *source, size_t nelems, int pe);            \
    void shmem_get##S(void *dest, const void *source, size_t nelems, int pe);                  \
    void shmem_get##S##_nbi(void *dest, const void *source, size_t nelems, int pe);            \
    void shmem_iput##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,           \
                       size_t nelems, int pe);                                                 \
    void shmem_iget##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,           \
                       size_t nelems, int pe);                                                 \
    void shmem_put##S##_signal(void *dest, const void *source, size_t nelems,                  \
                               uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);       \
    void shmem_put##S##_signal_nbi(void *dest, const void *source, size_t nelems,              \
                                   uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
FMSHMEM_SIZES(FMSHMEM_DECL_RMA_SIZE)
void shmem_putmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem(void *dest, const void *source, size_t nelems, int pe);
void shmem_getmem_nbi(void *dest, const void *source, size_t nelems, int pe);
void shmem_putmem_signal(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                         uint64_t signal, int sig_op, int pe);
void shmem_putmem_signal_nbi(void *dest, const void *source, size_t nelems, uint64_t *sig_addr,
                             uint64_t signal, int sig_op, int pe);
uint64_t shmem_signal_fetch(const uint64_t *sig_addr);
uint64_t shmem_signal_wait_until(uint64_t *sig_addr, int cmp, uint64_t cmp_value);

/* ---- atomic memory operations ---- */
#define FMSHMEM_DECL_AMO_EXT(T, N)                                                             \
    T shmem_##N##_atomic_fetch(const T *source, int pe);                                       \
    void shmem_##N##_atomic_fetch_nbi(T *fetch, const T *source, int pe);                      \
    void shmem_##N##_atomic_set(T *dest, T value, int pe);                                     \
    T shmem_##N##_atomic_swap(T *dest, T value, int pe);                                       \
    void shmem_##N##_atomic_swap_nbi(T *fetch, T *dest, T value, int pe);
#define FMSHMEM_DECL_AMO_STD(T, N)                                                             \
    T shmem_##N##_atomic_compare_swap(T *dest, T cond, T value, int pe);                       \
    void shmem_##N##_atomic_compare_swap_nbi(T *fetch, T *dest, T cond, T value, int pe);      \
    T shmem_##N##_atomic_fetch_inc(T *dest, int pe);                                           \
    void shmem_##N##_atomic_fetch_inc_nbi(T *fetch, T *dest, int pe);                          \
    void shmem_##N##_atomic_inc(T *dest, int pe);                                              \
    T shmem_##N##_atomic_fetch_add(T *dest, T value, int pe);                                  \
    void shmem_##N##_atomic_fetch_add_nbi(T *fetch, T *dest, T value, int pe);                 \
    void shmem_##N##_atomic_add(T *dest, T value, int pe);
#define FMSHMEM_DECL_AMO_BIT(T, N)                                                             \
    T shmem_##N##_atomic_fetch_and(T *dest, T value, int pe);                                  \
    void shmem_##N##_atomic_fetch_and_nbi(T *fetch, T *dest, T value, int pe);                 \
    void shmem_##N##_atomic_and(T *dest, T value, int pe);                                     \
    T shmem_##N##_atomic_fetch_or(T *dest, T value, int pe);                                   \
    void shmem_##N##_atomic_fetch_or_nbi(T *fetch, T *dest, T value, int pe);                  \
    void shmem_##N##_atomic_or(T *dest, T value, int pe);                                      \
    T shmem_##N##_atomic_fetch_xor(T *dest, T value, int pe);                                  \
    void shmem_##N##_atomic_fetch_xor_nbi(T *fetch, T *dest, T value, int pe);                 \
    void shmem_##N##_atomic_xor(T *dest, T value, int pe);
FMSHMEM_AMO_EXT_TYPES(FMSHMEM_DECL_AMO_EXT)
FMSHMEM_AMO_STD_TYPES(FMSHMEM_DECL_AMO_STD)
FMSHMEM_AMO_BIT_TYPES(FMSHMEM_DECL_AMO_BIT)
/* Deprecated AMO names (OpenSHMEM 1.3 and earlier). */
#define FMSHMEM_DECL_AMO_OLD(T, N)                                                             \
    T shmem_##N##_cswap(T *dest, T cond, T value, int pe);                                     \
    T shmem_##N##_fadd(T *dest, T value, int pe);                                              \
    T shmem_##N##_finc(T *dest, int pe);                                                       \
    void shmem_##N##_add(T *dest, T value, int pe);                                            \
    void shmem_##N##_inc(T *dest, int pe);
#define FMSHMEM_DECL_AMO_OLD_EXT(T, N)                                                         \
    T shmem_##N##_fetch(const T *source, int pe);                                              \
    void shmem_##N##_set(T *dest, T value, int pe);                                            \
    T shmem_##N##_swap(T *dest, T value, int pe);
FMSHMEM_DECL_AMO_OLD(int, int)
FMSHMEM_DECL_AMO_OLD(long, long)
FMSHMEM_DECL_AMO_OLD(long long, longlong)
FMSHMEM_DECL_AMO_OLD_EXT(int, int)
FMSHMEM_DECL_AMO_OLD_EXT(long, long)
FMSHMEM_DECL_AMO_OLD_EXT(long long, longlong)
FMSHMEM_DECL_AMO_OLD_EXT(float, float)
FMSHMEM_DECL_AMO_OLD_EXT(double, double)
long shmem_swap(long *dest, long value, int pe);

/* ---- contexts ---- */
/* A context is a view of this PE's one communication path, with its PEs
 * numbered in a team: its operations are the default context's, ordered
 * and completed with them (stronger than the spec asks). */
typedef struct fmshmem_ctx *shmem_ctx_t;
extern struct fmshmem_ctx fmshmem_ctx_default;
#define SHMEM_CTX_DEFAULT (&fmshmem_ctx_default)
#define SHMEM_CTX_INVALID ((shmem_ctx_t)0)
#define SHMEM_CTX_SERIALIZED 1L
#define SHMEM_CTX_PRIVATE 2L
#define SHMEM_CTX_NOSTORE 4L
int shmem_ctx_create(long options, shmem_ctx_t *ctx);
int shmem_team_create_ctx(shmem_team_t team, long options, shmem_ctx_t *ctx);
void shmem_ctx_destroy(shmem_ctx_t ctx);
int shmem_ctx_get_team(shmem_ctx_t ctx, shmem_team_t *team);
void shmem_ctx_fence(shmem_ctx_t ctx);
void shmem_ctx_quiet(shmem_ctx_t ctx);
#define FMSHMEM_DECL_CTX_RMA(T, N)                                                             \
    void shmem_ctx_##N##_put(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe); \
    void shmem_ctx_##N##_put_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,     \
                                 int pe);                                                      \
    void shmem_ctx_##N##_p(shmem_ctx_t ctx, T *dest, T value, int pe);                         \
    void shmem_ctx_##N##_iput(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,        \
                              ptrdiff_t sst, size_t nelems, int pe);                           \
    void shmem_ctx_##N##_get(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems, int pe); \
    void shmem_ctx_##N##_get_nbi(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,     \
                                 int pe);                                                      \
    T shmem_ctx_##N##_g(shmem_ctx_t ctx, const T *source, int pe);                             \
    void shmem_ctx_##N##_iget(shmem_ctx_t ctx, T *dest, const T *source, ptrdiff_t dst,        \
                              ptrdiff_t sst, size_t nelems, int pe);                           \
    void shmem_ctx_##N##_put_signal(shmem_ctx_t ctx, T *dest, const T *source, size_t nelems,  \
                                    uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);  \
    void shmem_ctx_##N##_put_signal_nbi(shmem_ctx_t ctx, T *dest, const T *source,             \
                                        size_t nelems, uint64_t *sig_addr, uint64_t signal,    \
                                        int sig_op, int pe);
FMSHMEM_RMA_TYPES(FMSHMEM_DECL_CTX_RMA)
#define FMSHMEM_DECL_CTX_RMA_SIZE(S)                                                           \
    void shmem_ctx_put##S(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,      \
                          int pe);                                                             \
    void shmem_ctx_put##S##_nbi(shmem_ctx_t ctx, void *dest, const void *source,               \
                                size_t nelems, int pe);                                        \
    void shmem_ctx_get##S(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,      \
                          int pe);                                                             \
    void shmem_ctx_get##S##_nbi(shmem_ctx_t ctx, void *dest, const void *source,               \
                                size_t nelems, int pe);                                        \
    void shmem_ctx_iput##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,     \
                           ptrdiff_t sst, size_t nelems, int pe);                              \
    void shmem_ctx_iget##S(shmem_ctx_t ctx, void *dest, const void *source, ptrdiff_t dst,     \
                           ptrdiff_t sst, size_t nelems, int pe);                              \
    void shmem_ctx_put##S##_signal(shmem_ctx_t ctx, void *dest, const void *source,            \
                                   size_t nelems, uint64_t *sig_addr, uint64_t signal,         \
                                   int sig_op, int pe);                                        \
    void shmem_ctx_put##S##_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source,        \
                                       size_t nelems, uint64_t *sig_addr, uint64_t signal,     \
                                       int sig_op, int pe);
FMSHMEM_SIZES(FMSHMEM_DECL_CTX_RMA_SIZE)
void shmem_ctx_putmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_putmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe);
void shmem_ctx_getmem(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems, int pe);
void shmem_ctx_getmem_nbi(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                          int pe);
void shmem_ctx_putmem_signal(shmem_ctx_t ctx, void *dest, const void *source, size_t nelems,
                             uint64_t *sig_addr, uint64_t signal, int sig_op, int pe);
void shmem_ctx_putmem_signal_nbi(shmem_ctx_t ctx, void *dest, const void *source,
                                 size_t nelems, uint64_t *sig_addr, uint64_t signal, int sig_op,
                                 int pe);
#define FMSHMEM_DECL_CTX_AMO_EXT(T, N)                                                         \
    T shmem_ctx_##N##_atomic_fetch(shmem_ctx_t ctx, const T *source, int pe);                  \
    void shmem_ctx_##N##_atomic_fetch_nbi(shmem_ctx_t ctx, T *fetch, const T *source, int pe); \
    void shmem_ctx_##N##_atomic_set(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    T shmem_ctx_##N##_atomic_swap(shmem_ctx_t ctx, T *dest, T value, int pe);                  \
    void shmem_ctx_##N##_atomic_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value, int pe);
#define FMSHMEM_DECL_CTX_AMO_STD(T, N)                                                         \
    T shmem_ctx_##N##_atomic_compare_swap(shmem_ctx_t ctx, T *dest, T cond, T value, int pe);  \
    void shmem_ctx_##N##_atomic_compare_swap_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T cond,   \
                                                 T value, int pe);                             \
    T shmem_ctx_##N##_atomic_fetch_inc(shmem_ctx_t ctx, T *dest, int pe);                      \
    void shmem_ctx_##N##_atomic_fetch_inc_nbi(shmem_ctx_t ctx, T *fetch, T *dest, int pe);     \
    void shmem_ctx_##N##_atomic_inc(shmem_ctx_t ctx, T *dest, int pe);                         \
    T shmem_ctx_##N##_atomic_fetch_add(shmem_ctx_t ctx, T *dest, T value, int pe);             \
    void shmem_ctx_##N##_atomic_fetch_add_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe);                                         \
    void shmem_ctx_##N##_atomic_add(shmem_ctx_t ctx, T *dest, T value, int pe);
#define FMSHMEM_DECL_CTX_AMO_BIT(T, N)                                                         \
    T shmem_ctx_##N##_atomic_fetch_and(shmem_ctx_t ctx, T *dest, T value, int pe);             \
    void shmem_ctx_##N##_atomic_fetch_and_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe);                                         \
    void shmem_ctx_##N##_atomic_and(shmem_ctx_t ctx, T *dest, T value, int pe);                \
    T shmem_ctx_##N##_atomic_fetch_or(shmem_ctx_t ctx, T *dest, T value, int pe);              \
    void shmem_ctx_##N##_atomic_fetch_or_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,      \
                                             int pe);                                          \
    void shmem_ctx_##N##_atomic_or(shmem_ctx_t ctx, T *dest, T value, int pe);                 \
    T shmem_ctx_##N##_atomic_fetch_xor(shmem_ctx_t ctx, T *dest, T value, int pe);             \
    void shmem_ctx_##N##_atomic_fetch_xor_nbi(shmem_ctx_t ctx, T *fetch, T *dest, T value,     \
                                              int pe);                                         \
    void shmem_ctx_##N##_atomic_xor(shmem_ctx_t ctx, T *dest, T value, int pe);
FMSHMEM_AMO_EXT_TYPES(FMSHMEM_DECL_CTX_AMO_EXT)
FMSHMEM_AMO_STD_TYPES(FMSHMEM_DECL_CTX_AMO_STD)
FMSHMEM_AMO_BIT_TYPES(FMSHMEM_DECL_CTX_AMO_BIT)

/* ---- ordering and point-to-point synchronization ---- */
void shmem_fence(void);
void shmem_quiet(void);
#define FMSHMEM_DECL_SYNC(T, N)                                                                \
    void shmem_##N##_wait_until(T *ivar, int cmp, T cmp_value);                                \
    void shmem_##N##_wait_until_all(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T cmp_value);                                              \
    size_t shmem_##N##_wait_until_any(T *ivars, size_t nelems, const int *status, int cmp,     \
                                      T cmp_value);                                            \
    size_t shmem_##N##_wait_until_some(T *ivars, size_t nelems, size_t *indices,               \
                                       const int *status, int cmp, T cmp_value);               \
    void shmem_##N##_wait_until_all_vector(T *ivars, size_t nelems, const int *status,         \
                                           int cmp, T *cmp_values);                            \
    size_t shmem_##N##_wait_until_any_vector(T *ivars, size_t nelems, const int *status,       \
                                             int cmp, T *cmp_values);                          \
    size_t shmem_##N##_wait_until_some_vector(T *ivars, size_t nelems, size_t *indices,        \
                                              const int *status, int cmp, T *cmp_values);      \
    int shmem_##N##_test(T *ivar, int cmp, T cmp_value);                                       \
    int shmem_##N##_test_all(T *ivars, size_t nelems, const int *status, int cmp,              \
                             T cmp_value);                                                     \
    size_t shmem_##N##_test_any(T *ivars, size_t nelems, const int *status, int cmp,           \
                                T cmp_value);                                                  \
    size_t shmem_##N##_test_some(T *ivars, size_t nelems, size_t *indices, const int *status,  \
                                 int cmp, T cmp_value);                                        \
    int shmem_##N##_test_all_vector(T *ivars, size_t nelems, const int *status, int cmp,       \
                                    T *cmp_values);                                            \
    size_t shmem_##N##_test_any_vector(T *ivars, size_t nelems, const int *status, int cmp,    \
                                       T *cmp_values);                                         \
    size_t shmem_##N##_test_some_vector(T *ivars, size_t nelems, size_t *indices,              \
                                        const int *status, int cmp, T *cmp_values);            \
    void shmem_##N##_wait(T *ivar, T cmp_value);
FMSHMEM_SYNC_TYPES(FMSHMEM_DECL_SYNC)
void shmem_wait_until(long *ivar, int cmp, long cmp_value);
void shmem_wait(long *ivar, long cmp_value);

/* ---- distributed locks ---- */
void shmem_set_lock(long *lock);
void shmem_clear_lock(long *lock);
int shmem_test_lock(long *lock);

/* ---- teams ---- */
int shmem_team_my_pe(shmem_team_t team);
int shmem_team_n_pes(shmem_team_t team);
int shmem_team_get_config(shmem_team_t team, long config_mask, shmem_team_config_t *config);
int shmem_team_translate_pe(shmem_team_t src_team, int src_pe, shmem_team_t dest_team);
int shmem_team_split_strided(shmem_team_t parent_team, int start, int stride, int size,
                             const shmem_team_config_t *config, long config_mask,
                             shmem_team_t *new_team);
int shmem_team_split_2d(shmem_team_t parent_team, int xrange,
                        const shmem_team_config_t *xaxis_config, long xaxis_mask,
                        shmem_team_t *xaxis_team, const shmem_team_config_t *yaxis_config,
                        long yaxis_mask, shmem_team_t *yaxis_team);
void shmem_team_destroy(shmem_team_t team);

/* ---- collectives ---- */
void shmem_barrier_all(void);
void shmem_sync_all(void);
int shmem_team_sync(shmem_team_t team);
void shmem_barrier(int PE_start, int logPE_stride, int PE_size, long *pSync);
void shmem_sync(int PE_start, int logPE_stride, int PE_size, long *pSync);

int shmem_broadcastmem(shmem_team_t team, void *dest, const void *source, size_t nelems,
                       int PE_root);
int shmem_collectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_fcollectmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallmem(shmem_team_t team, void *dest, const void *source, size_t nelems);
int shmem_alltoallsmem(shmem_team_t team, void *dest, const void *source, ptrdiff_t dst,
                       ptrdiff_t sst, size_t nelems);
#define FMSHMEM_DECL_COLL(T, N)                                                                \
    int shmem_##N##_broadcast(shmem_team_t team, T *dest, const T *source, size_t nelems,      \
                              int PE_root);                                                    \
    int shmem_##N##_collect(shmem_team_t team, T *dest, const T *source, size_t nelems);       \
    int shmem_##N##_fcollect(shmem_team_t team, T *dest, const T *source, size_t nelems);      \
    int shmem_##N##_alltoall(shmem_team_t team, T *dest, const T *source, size_t nelems);      \
    int shmem_##N##_alltoalls(shmem_team_t team, T *dest, const T *source, ptrdiff_t dst,      \
                              ptrdiff_t sst, size_t nelems);
FMSHMEM_RMA_TYPES(FMSHMEM_DECL_COLL)
#define FMSHMEM_DECL_REDUCE(T, N, OP)                                                          \
    int shmem_##N##_##OP##_reduce(shmem_team_t team, T *dest, const T *source, size_t nreduce);
#define FMSHMEM_DECL_REDUCE_BIT(T, N)                                                          \
    FMSHMEM_DECL_REDUCE(T, N, and) FMSHMEM_DECL_REDUCE(T, N, or) FMSHMEM_DECL_REDUCE(T, N, xor)
#define FMSHMEM_DECL_REDUCE_CMP(T, N) FMSHMEM_DECL_REDUCE(T, N, max) FMSHMEM_DECL_REDUCE(T, N, min)
#define FMSHMEM_DECL_REDUCE_ARITH(T, N)                                                        \
    FMSHMEM_DECL_REDUCE(T, N, sum) FMSHMEM_DECL_REDUCE(T, N, prod)
FMSHMEM_REDUCE_BIT_TYPES(FMSHMEM_DECL_REDUCE_BIT)
FMSHMEM_REDUCE_CMP_TYPES(FMSHMEM_DECL_REDUCE_CMP)
FMSHMEM_REDUCE_ARITH_TYPES(FMSHMEM_DECL_REDUCE_ARITH)

/* Active-set collectives (deprecated in 1.5, what 1.4 programs call). */
#define FMSHMEM_DECL_ACTIVE_SET(S)                                                             \
    void shmem_broadcast##S(void *dest, const void *source, size_t nelems, int PE_root,        \
                            int PE_start, int logPE_stride, int PE_size, long *pSync);         \
    void shmem_collect##S(void *dest, const void *source, size_t nelems, int PE_start,         \
                          int logPE_stride, int PE_size, long *pSync);                         \
    void shmem_fcollect##S(void *dest, const void *source, size_t nelems, int PE_start,        \
                           int logPE_stride, int PE_size, long *pSync);                        \
    void shmem_alltoall##S(void *dest, const void *source, size_t nelems, int PE_start,        \
                           int logPE_stride, int PE_size, long *pSync);                        \
    void shmem_alltoalls##S(void *dest, const void *source, ptrdiff_t dst, ptrdiff_t sst,      \
                            size_t nelems, int PE_start, int logPE_stride, int PE_size,        \
                            long *pSync);
FMSHMEM_DECL_ACTIVE_SET(32)
FMSHMEM_DECL_ACTIVE_SET(64)
#define FMSHMEM_DECL_TO_ALL(T, N, OP)                                                          \
    void shmem_##N##_##OP##_to_all(T *dest, const T *source, int nreduce, int PE_start,        \
                                   int logPE_stride, int PE_size, T *pWrk, long *pSync);
#define FMSHMEM_DECL_TO_ALL_BIT(T, N)                                                          \
    FMSHMEM_DECL_TO_ALL(T, N, and) FMSHMEM_DECL_TO_ALL(T, N, or) FMSHMEM_DECL_TO_ALL(T, N, xor)
#define FMSHMEM_DECL_TO_ALL_CMP(T, N) FMSHMEM_DECL_TO_ALL(T, N, max) FMSHMEM_DECL_TO_ALL(T, N, min)
#define FMSHMEM_DECL_TO_ALL_ARITH(T, N)                                                        \
    FMSHMEM_DECL_TO_ALL(T, N, sum) FMSHMEM_DECL_TO_ALL(T, N, prod)
FMSHMEM_TOALL_BIT_TYPES(FMSHMEM_DECL_TO_ALL_BIT)
FMSHMEM_TOALL_CMP_TYPES(FMSHMEM_DECL_TO_ALL_CMP)
FMSHMEM_TOALL_ARITH_TYPES(FMSHMEM_DECL_TO_ALL_ARITH)

#ifdef __cplusplus
}
#endif

/* C11 generic interfaces: the typed routine chosen by the pointed-to type. */
#if defined(__STDC_VERSION__) && __STDC_VERSION__ >= 201112L && !defined(__cplusplus)
void fmshmem_bad_type(void);

#define FMSHMEM_GR_put(T, N) T * : shmem_##N##_put,
#define FMSHMEM_GR_put_nbi(T, N) T * : shmem_##N##_put_nbi,
#define FMSHMEM_GR_p(T, N) T * : shmem_##N##_p,
#define FMSHMEM_GR_iput(T, N) T * : shmem_##N##_iput,
#define FMSHMEM_GR_get(T, N) T * : shmem_##N##_get,
#define FMSHMEM_GR_get_nbi(T, N) T * : shmem_##N##_get_nbi,
#define FMSHMEM_GR_g(T, N) T * : shmem_##N##_g, const T * : shmem_##N##_g,
#define FMSHMEM_GR_iget(T, N) T * : shmem_##N##_iget,
#define FMSHMEM_GR_put_signal(T, N) T * : shmem_##N##_put_signal,
#define FMSHMEM_GR_put_signal_nbi(T, N) T * : shmem_##N##_put_signal_nbi,
#define FMSHMEM_GRC_put(T, N) T * : shmem_ctx_##N##_put,
#define FMSHMEM_GRC_put_nbi(T, N) T * : shmem_ctx_##N##_put_nbi,
#define FMSHMEM_GRC_p(T, N) T * : shmem_ctx_##N##_p,
#define FMSHMEM_GRC_iput(T, N) T * : shmem_ctx_##N##_iput,
#define FMSHMEM_GRC_get(T, N) T * : shmem_ctx_##N##_get,
#define FMSHMEM_GRC_get_nbi(T, N) T * : shmem_ctx_##N##_get_nbi,
#define FMSHMEM_GRC_g(T, N) T * : shmem_ctx_##N##_g, const T * : shmem_ctx_##N##_g,
#define FMSHMEM_GRC_iget(T, N) T * : shmem_ctx_##N##_iget,
#define FMSHMEM_GRC_put_signal(T, N) T * : shmem_ctx_##N##_put_signal,
#define FMSHMEM_GRC_put_signal_nbi(T, N) T * : shmem_ctx_##N##_put_signal_nbi,
/* A generic whose first argument may be a context: the function is then
 * chosen by the type of the second. */
#define FMSHMEM_ARG0(a, ...) a
#define FMSHMEM_CTX_G(LIST, GR, GRC, first, ...)                                                  \
    _Generic((first), shmem_ctx_t: _Generic((FMSHMEM_ARG0(__VA_ARGS__, 0)), LIST(GRC)               \
                                            default: fmshmem_bad_type),                            \
             default: _Generic((first), LIST(GR) default: fmshmem_bad_type))
#define FMSHMEM_RMA_G(OP, ...)                                                                     \
    FMSHMEM_CTX_G(FMSHMEM_G_RMA_TYPES, FMSHMEM_GR_##OP, FMSHMEM_GRC_##OP, __VA_ARGS__)
#define shmem_put(...) FMSHMEM_RMA_G(put, __VA_ARGS__)(__VA_ARGS__)
#define shmem_put_nbi(...) FMSHMEM_RMA_G(put_nbi, __VA_ARGS__)(__VA_ARGS__)
#define shmem_p(...) FMSHMEM_RMA_G(p, __VA_ARGS__)(__VA_ARGS__)
#define shmem_iput(...) FMSHMEM_RMA_G(iput, __VA_ARGS__)(__VA_ARGS__)
#define shmem_get(...) FMSHMEM_RMA_G(get, __VA_ARGS__)(__VA_ARGS__)
#define shmem_get_nbi(...) FMSHMEM_RMA_G(get_nbi, __VA_ARGS__)(__VA_ARGS__)
#define shmem_g(...) FMSHMEM_RMA_G(g, __VA_ARGS__)(__VA_ARGS__)
#define shmem_iget(...) FMSHMEM_RMA_G(iget, __VA_ARGS__)(__VA_ARGS__)
#define shmem_put_signal(...) FMSHMEM_RMA_G(put_signal, __VA_ARGS__)(__VA_ARGS__)
#define shmem_put_signal_nbi(...) FMSHMEM_RMA_G(put_signal_nbi, __VA_ARGS__)(__VA_ARGS__)

#define FMSHMEM_GA_fetch(T, N) T * : shmem_##N##_atomic_fetch, const T * : shmem_##N##_atomic_fetch,
#define FMSHMEM_GA_fetch_nbi(T, N) T * : shmem_##N##_atomic_fetch_nbi,
#define FMSHMEM_GA_set(T, N) T * : shmem_##N##_atomic_set,
#define FMSHMEM_GA_swap(T, N) T * : shmem_##N##_atomic_swap,
#define FMSHMEM_GA_swap_nbi(T, N) T * : shmem_##N##_atomic_swap_nbi,
#define FMSHMEM_GA_compare_swap(T, N) T * : shmem_##N##_atomic_compare_swap,
#define FMSHMEM_GA_compare_swap_nbi(T, N) T * : shmem_##N##_atomic_compare_swap_nbi,
#define FMSHMEM_GA_fetch_inc(T, N) T * : shmem_##N##_atomic_fetch_inc,
#define FMSHMEM_GA_fetch_inc_nbi(T, N) T * : shmem_##N##_atomic_fetch_inc_nbi,
#define FMSHMEM_GA_inc(T, N) T * : shmem_##N##_atomic_inc,
#define FMSHMEM_GA_fetch_add(T, N) T * : shmem_##N##_atomic_fetch_add,
#define FMSHMEM_GA_fetch_add_nbi(T, N) T * : shmem_##N##_atomic_fetch_add_nbi,
#define FMSHMEM_GA_add(T, N) T * : shmem_##N##_atomic_add,
#define FMSHMEM_GA_fetch_and(T, N) T * : shmem_##N##_atomic_fetch_and,
#define FMSHMEM_GA_fetch_and_nbi(T, N) T * : shmem_##N##_atomic_fetch_and_nbi,
#define FMSHMEM_GA_and(T, N) T * : shmem_##N##_atomic_and,
#define FMSHMEM_GA_fetch_or(T, N) T * : shmem_##N##_atomic_fetch_or,
#define FMSHMEM_GA_fetch_or_nbi(T, N) T * : shmem_##N##_atomic_fetch_or_nbi,
#define FMSHMEM_GA_or(T, N) T * : shmem_##N##_atomic_or,
#define FMSHMEM_GA_fetch_xor(T, N) T * : shmem_##N##_atomic_fetch_xor,
#define FMSHMEM_GA_fetch_xor_nbi(T, N) T * : shmem_##N##_atomic_fetch_xor_nbi,
#define FMSHMEM_GA_xor(T, N) T * : shmem_##N##_atomic_xor,
#define FMSHMEM_GAC_fetch(T, N) T * : shmem_ctx_##N##_atomic_fetch, const T * : shmem_ctx_##N##_atomic_fetch,
#define FMSHMEM_GAC_fetch_nbi(T, N) T * : shmem_ctx_##N##_atomic_fetch_nbi,
#define FMSHMEM_GAC_set(T, N) T * : shmem_ctx_##N##_atomic_set,
#define FMSHMEM_GAC_swap(T, N) T * : shmem_ctx_##N##_atomic_swap,
#define FMSHMEM_GAC_swap_nbi(T, N) T * : shmem_ctx_##N##_atomic_swap_nbi,
#define FMSHMEM_GAC_compare_swap(T, N) T * : shmem_ctx_##N##_atomic_compare_swap,
#define FMSHMEM_GAC_compare_swap_nbi(T, N) T * : shmem_ctx_##N##_atomic_compare_swap_nbi,
#define FMSHMEM_GAC_fetch_inc(T, N) T * : shmem_ctx_##N##_atomic_fetch_inc,
#define FMSHMEM_GAC_fetch_inc_nbi(T, N) T * : shmem_ctx_##N##_atomic_fetch_inc_nbi,
#define FMSHMEM_GAC_inc(T, N) T * : shmem_ctx_##N##_atomic_inc,
#define FMSHMEM_GAC_fetch_add(T, N) T * : shmem_ctx_##N##_atomic_fetch_add,
#define FMSHMEM_GAC_fetch_add_nbi(T, N) T * : shmem_ctx_##N##_atomic_fetch_add_nbi,
#define FMSHMEM_GAC_add(T, N) T * : shmem_ctx_##N##_atomic_add,
#define FMSHMEM_GAC_fetch_and(T, N) T * : shmem_ctx_##N##_atomic_fetch_and,
#define FMSHMEM_GAC_fetch_and_nbi(T, N) T * : shmem_ctx_##N##_atomic_fetch_and_nbi,
#define FMSHMEM_GAC_and(T, N) T * : shmem_ctx_##N##_atomic_and,
#define FMSHMEM_GAC_fetch_or(T, N) T * : shmem_ctx_##N##_atomic_fetch_or,
#define FMSHMEM_GAC_fetch_or_nbi(T, N) T * : shmem_ctx_##N##_atomic_fetch_or_nbi,
#define FMSHMEM_GAC_or(T, N) T * : shmem_ctx_##N##_atomic_or,
#define FMSHMEM_GAC_fetch_xor(T, N) T * : shmem_ctx_##N##_atomic_fetch_xor,
#define FMSHMEM_GAC_fetch_xor_nbi(T, N) T * : shmem_ctx_##N##_atomic_fetch_xor_nbi,
#define FMSHMEM_GAC_xor(T, N) T * : shmem_ctx_##N##_atomic_xor,
#define FMSHMEM_AMO_G(LIST, OP, ...)                                                               \
    FMSHMEM_CTX_G(LIST, FMSHMEM_GA_##OP, FMSHMEM_GAC_##OP, __VA_ARGS__)
/* The deprecated generic atomics (before 1.4's shmem_atomic_*). */
#define FMSHMEM_G_OLD_STD_TYPES(X) X(int, int) X(long, long) X(long long, longlong)
#define FMSHMEM_G_OLD_EXT_TYPES(X) FMSHMEM_G_OLD_STD_TYPES(X) X(float, float) X(double, double)
#define FMSHMEM_GO_fetch(T, N) T * : shmem_##N##_fetch, const T * : shmem_##N##_fetch,
#define FMSHMEM_GO_set(T, N) T * : shmem_##N##_set,
#define FMSHMEM_GO_swap(T, N) T * : shmem_##N##_swap,
#define FMSHMEM_GO_cswap(T, N) T * : shmem_##N##_cswap,
#define FMSHMEM_GO_fadd(T, N) T * : shmem_##N##_fadd,
#define FMSHMEM_GO_finc(T, N) T * : shmem_##N##_finc,
#define FMSHMEM_GO_add(T, N) T * : shmem_##N##_add,
#define FMSHMEM_GO_inc(T, N) T * : shmem_##N##_inc,
#define FMSHMEM_OLD_G(LIST, OP, p) _Generic((p), LIST(FMSHMEM_GO_##OP) default: fmshmem_bad_type)
#define shmem_fetch(src, ...) FMSHMEM_OLD_G(FMSHMEM_G_OLD_EXT_TYPES, fetch, src)(src, __VA_ARGS__)
#define shmem_set(dest, ...) FMSHMEM_OLD_G(FMSHMEM_G_OLD_EXT_TYPES, set, dest)(dest, __VA_ARGS__)
#define shmem_swap(dest, ...) FMSHMEM_OLD_G(FMSHMEM_G_OLD_EXT_TYPES, swap, dest)(dest, __VA_ARGS__)
#define shmem_cswap(dest, ...) FMSHMEM_OLD_G(FMSHMEM_G_OLD_STD_TYPES, cswap, dest)(dest, __VA_ARGS__)
#define shmem_fadd(dest, ...) FMSHMEM_OLD_G(FMSHMEM_G_OLD_STD_TYPES, fadd, dest)(dest, __VA_ARGS__)
#define shmem_finc(dest, ...) FMSHMEM_OLD_G(FMSHMEM_G_OLD_STD_TYPES, finc, dest)(dest, __VA_ARGS__)
#define shmem_add(dest, ...) FMSHMEM_OLD_G(FMSHMEM_G_OLD_STD_TYPES, add, dest)(dest, __VA_ARGS__)
#define shmem_inc(dest, ...) FMSHMEM_OLD_G(FMSHMEM_G_OLD_STD_TYPES, inc, dest)(dest, __VA_ARGS__)
#define shmem_atomic_fetch(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_EXT_TYPES, fetch, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_set(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_EXT_TYPES, set, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_swap(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_EXT_TYPES, swap, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_compare_swap(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_STD_TYPES, compare_swap, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_inc(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_STD_TYPES, fetch_inc, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_inc(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_STD_TYPES, inc, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_add(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_STD_TYPES, fetch_add, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_add(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_STD_TYPES, add, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_and(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_BIT_TYPES, fetch_and, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_and(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_BIT_TYPES, and, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_or(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_BIT_TYPES, fetch_or, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_or(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_BIT_TYPES, or, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_xor(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_BIT_TYPES, fetch_xor, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_xor(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_BIT_TYPES, xor, __VA_ARGS__)(__VA_ARGS__)
/* The fetching nbi forms dispatch on the fetch pointer, their first argument. */
#define shmem_atomic_fetch_nbi(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_EXT_TYPES, fetch_nbi, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_swap_nbi(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_EXT_TYPES, swap_nbi, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_compare_swap_nbi(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_STD_TYPES, compare_swap_nbi, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_inc_nbi(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_STD_TYPES, fetch_inc_nbi, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_add_nbi(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_STD_TYPES, fetch_add_nbi, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_and_nbi(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_BIT_TYPES, fetch_and_nbi, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_or_nbi(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_BIT_TYPES, fetch_or_nbi, __VA_ARGS__)(__VA_ARGS__)
#define shmem_atomic_fetch_xor_nbi(...) FMSHMEM_AMO_G(FMSHMEM_G_AMO_BIT_TYPES, fetch_xor_nbi, __VA_ARGS__)(__VA_ARGS__)

#define FMSHMEM_GS_wait_until(T, N) T * : shmem_##N##_wait_until,
#define FMSHMEM_GS_wait_until_all(T, N) T * : shmem_##N##_wait_until_all,
#define FMSHMEM_GS_wait_until_any(T, N) T * : shmem_##N##_wait_until_any,
#define FMSHMEM_GS_wait_until_some(T, N) T * : shmem_##N##_wait_until_some,
#define FMSHMEM_GS_wait_until_all_vector(T, N) T * : shmem_##N##_wait_until_all_vector,
#define FMSHMEM_GS_wait_until_any_vector(T, N) T * : shmem_##N##_wait_until_any_vector,
#define FMSHMEM_GS_wait_until_some_vector(T, N) T * : shmem_##N##_wait_until_some_vector,
#define FMSHMEM_GS_test(T, N) T * : shmem_##N##_test,
#define FMSHMEM_GS_test_all(T, N) T * : shmem_##N##_test_all,
#define FMSHMEM_GS_test_any(T, N) T * : shmem_##N##_test_any,
#define FMSHMEM_GS_test_some(T, N) T * : shmem_##N##_test_some,
#define FMSHMEM_GS_test_all_vector(T, N) T * : shmem_##N##_test_all_vector,
#define FMSHMEM_GS_test_any_vector(T, N) T * : shmem_##N##_test_any_vector,
#define FMSHMEM_GS_test_some_vector(T, N) T * : shmem_##N##_test_some_vector,
#define FMSHMEM_SYNC_G(OP, p) _Generic((p), FMSHMEM_G_SYNC_TYPES(FMSHMEM_GS_##OP) default: fmshmem_bad_type)
#undef shmem_wait_until
#define shmem_wait_until(ivar, ...) FMSHMEM_SYNC_G(wait_until, ivar)(ivar, __VA_ARGS__)
#define shmem_wait_until_all(ivars, ...) FMSHMEM_SYNC_G(wait_until_all, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_any(ivars, ...) FMSHMEM_SYNC_G(wait_until_any, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_some(ivars, ...) FMSHMEM_SYNC_G(wait_until_some, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_all_vector(ivars, ...) FMSHMEM_SYNC_G(wait_until_all_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_any_vector(ivars, ...) FMSHMEM_SYNC_G(wait_until_any_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_wait_until_some_vector(ivars, ...) FMSHMEM_SYNC_G(wait_until_some_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_test(ivar, ...) FMSHMEM_SYNC_G(test, ivar)(ivar, __VA_ARGS__)
#define shmem_test_all(ivars, ...) FMSHMEM_SYNC_G(test_all, ivars)(ivars, __VA_ARGS__)
#define shmem_test_any(ivars, ...) FMSHMEM_SYNC_G(test_any, ivars)(ivars, __VA_ARGS__)
#define shmem_test_some(ivars, ...) FMSHMEM_SYNC_G(test_some, ivars)(ivars, __VA_ARGS__)
#define shmem_test_all_vector(ivars, ...) FMSHMEM_SYNC_G(test_all_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_test_any_vector(ivars, ...) FMSHMEM_SYNC_G(test_any_vector, ivars)(ivars, __VA_ARGS__)
#define shmem_test_some_vector(ivars, ...) FMSHMEM_SYNC_G(test_some_vector, ivars)(ivars, __VA_ARGS__)

#define FMSHMEM_GC_broadcast(T, N) T * : shmem_##N##_broadcast,
#define FMSHMEM_GC_collect(T, N) T * : shmem_##N##_collect,
#define FMSHMEM_GC_fcollect(T, N) T * : shmem_##N##_fcollect,
#define FMSHMEM_GC_alltoall(T, N) T * : shmem_##N##_alltoall,
#define FMSHMEM_GC_alltoalls(T, N) T * : shmem_##N##_alltoalls,
#define FMSHMEM_COLL_G(OP, p) _Generic((p), FMSHMEM_G_RMA_TYPES(FMSHMEM_GC_##OP) default: fmshmem_bad_type)
#define shmem_broadcast(team, dest, ...) FMSHMEM_COLL_G(broadcast, dest)(team, dest, __VA_ARGS__)
#define shmem_collect(team, dest, ...) FMSHMEM_COLL_G(collect, dest)(team, dest, __VA_ARGS__)
#define shmem_fcollect(team, dest, ...) FMSHMEM_COLL_G(fcollect, dest)(team, dest, __VA_ARGS__)
#define shmem_alltoall(team, dest, ...) FMSHMEM_COLL_G(alltoall, dest)(team, dest, __VA_ARGS__)
#define shmem_alltoalls(team, dest, ...) FMSHMEM_COLL_G(alltoalls, dest)(team, dest, __VA_ARGS__)
#define FMSHMEM_GRD_and(T, N) T * : shmem_##N##_and_reduce,
#define FMSHMEM_GRD_or(T, N) T * : shmem_##N##_or_reduce,
#define FMSHMEM_GRD_xor(T, N) T * : shmem_##N##_xor_reduce,
#define FMSHMEM_GRD_max(T, N) T * : shmem_##N##_max_reduce,
#define FMSHMEM_GRD_min(T, N) T * : shmem_##N##_min_reduce,
#define FMSHMEM_GRD_sum(T, N) T * : shmem_##N##_sum_reduce,
#define FMSHMEM_GRD_prod(T, N) T * : shmem_##N##_prod_reduce,
#define shmem_and_reduce(team, dest, ...) _Generic((dest), FMSHMEM_G_REDUCE_BIT_TYPES(FMSHMEM_GRD_and) default: fmshmem_bad_type)(team, dest, __VA_ARGS__)
#define shmem_or_reduce(team, dest, ...) _Generic((dest), FMSHMEM_G_REDUCE_BIT_TYPES(FMSHMEM_GRD_or) default: fmshmem_bad_type)(team, dest, __VA_ARGS__)
#define shmem_xor_reduce(team, dest, ...) _Generic((dest), FMSHMEM_G_REDUCE_BIT_TYPES(FMSHMEM_GRD_xor) default: fmshmem_bad_type)(team, dest, __VA_ARGS__)
#define shmem_max_reduce(team, dest, ...) _Generic((dest), FMSHMEM_G_REDUCE_CMP_TYPES(FMSHMEM_GRD_max) default: fmshmem_bad_type)(team, dest, __VA_ARGS__)
#define shmem_min_reduce(team, dest, ...) _Generic((dest), FMSHMEM_G_REDUCE_CMP_TYPES(FMSHMEM_GRD_min) default: fmshmem_bad_type)(team, dest, __VA_ARGS__)
#define shmem_sum_reduce(team, dest, ...) _Generic((dest), FMSHMEM_G_REDUCE_ARITH_TYPES(FMSHMEM_GRD_sum) default: fmshmem_bad_type)(team, dest, __VA_ARGS__)
#define shmem_prod_reduce(team, dest, ...) _Generic((dest), FMSHMEM_G_REDUCE_ARITH_TYPES(FMSHMEM_GRD_prod) default: fmshmem_bad_type)(team, dest, __VA_ARGS__)
/* shmem_sync(team) is 1.5's generic name of shmem_team_sync; with four
 * arguments it is the deprecated active-set shmem_sync. */
#define FMSHMEM_PICK5(a, b, c, d, NAME, ...) NAME
#define shmem_sync(...) FMSHMEM_PICK5(__VA_ARGS__, shmem_sync, _, _, shmem_team_sync, _)(__VA_ARGS__)
#endif /* C11 */

#endif /* FMSHMEM_SHMEM_H */
