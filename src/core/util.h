/* Small helpers shared by every layer: branch hints, alignment, clocks. */
#ifndef FM_UTIL_H
#define FM_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#define FM_CACHE_LINE 64
#define fm_likely(x) __builtin_expect(!!(x), 1)
#define fm_unlikely(x) __builtin_expect(!!(x), 0)
#define FM_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define FM_ALIGN_UP(x, a) (((x) + ((a)-1)) & ~((__typeof__(x))(a)-1))
#define FM_MIN(a, b) ((a) < (b) ? (a) : (b))
#define FM_MAX(a, b) ((a) > (b) ? (a) : (b))

/* Hints the CPU that this is a spin loop (frees the pipeline for a sibling). */
static inline void fm_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#endif
}

/* Monotonic time in nanoseconds (vDSO: no system call). */
static inline uint64_t fm_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Coarse monotonic time (a few ms resolution, cheaper) for rate limits. */
static inline uint64_t fm_now_coarse_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A cheap, fast-running counter for rate limits on hot paths, where even
 * the vDSO clock costs too much (in a VM): the TSC on x86, ticking at 1-5
 * GHz depending on the machine; elsewhere the monotonic clock in ns. */
static inline uint64_t fm_ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
    return __builtin_ia32_rdtsc();
#else
    return fm_now_ns();
#endif
}

static inline int fm_is_pow2(uint64_t x) { return x && !(x & (x - 1)); }

#endif
