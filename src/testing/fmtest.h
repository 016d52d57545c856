/*
 * Test kit: checks that stop the process with a clear message, a watchdog
 * so no test hangs, and the blocking send/receive loops that every
 * multi-process test needs on top of the non-blocking API.
 */
#ifndef FM_TESTKIT_H
#define FM_TESTKIT_H

#include "fastmsg.h"

#include <stddef.h>
#include <stdint.h>

void fmt_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond))                                                                     \
            fmt_fail(__FILE__, __LINE__, "CHECK(%s) failed", #cond);                     \
    } while (0)

#define CHECK_EQ(a, b)                                                                   \
    do {                                                                                 \
        long long fmt_a_ = (long long)(a), fmt_b_ = (long long)(b);                      \
        if (fmt_a_ != fmt_b_)                                                            \
            fmt_fail(__FILE__, __LINE__, "%s == %s failed: %lld vs %lld", #a, #b, fmt_a_, \
                     fmt_b_);                                                            \
    } while (0)

/* A fastmsg call that must return `want` (0 or an FM_E* code). */
#define CHECK_RC(expr, want)                                                             \
    do {                                                                                 \
        long long fmt_rc_ = (long long)(expr);                                           \
        if (fmt_rc_ != (long long)(want))                                                \
            fmt_fail(__FILE__, __LINE__, "%s returned %lld (%s), expected %s", #expr,    \
                     fmt_rc_, fm_strerror((int)fmt_rc_), #want);                         \
    } while (0)

/* Kills the test with a message after `seconds` (a hang is a failure). */
void fmt_watchdog(unsigned seconds);

/* fm_init that must succeed, with the watchdog armed. */
fm_ctx *fmt_init(void);

/* Sends all of buf as one or more messages, waiting on FM_EAGAIN.
 * Returns the number of messages used, or a negative FM_E* code. */
long fmt_send_all(fm_ep *ep, fm_addr dst, const void *buf, size_t len);

/* Receives one message into buf (at most cap bytes), waiting for it.
 * Returns its length or a negative FM_E* code (FM_EPEERLOST included). */
long fmt_recv_copy(fm_ep *ep, void *buf, size_t cap, fm_addr *src);

/* The next of a deterministic sequence (xorshift64; *state not 0). */
static inline uint64_t fmt_rand(uint64_t *state)
{
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    return *state;
}

/* Deterministic bytes for stream checks: byte i of stream `seed`. */
static inline uint8_t fmt_pattern(uint64_t seed, uint64_t i)
{
    uint64_t x = (seed + 1) * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull;
    x ^= x >> 31;
    return (uint8_t)(x ^ (x >> 17));
}

#endif
