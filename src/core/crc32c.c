#include "crc32c.h"

#include <string.h>

#define POLY 0x82F63B78u /* reflected Castagnoli polynomial */

static uint32_t table[8][256];
static int hw = -1; /* -1: not decided yet */

/*
 * Three streams at once: the CRC instruction takes three cycles but can
 * start one per cycle, so a single dependent chain uses a third of it.
 * The buffer is cut into blocks of LANE bytes, three at a time, each lane
 * from state zero, and the lanes are joined by the CRC's linearity:
 * crc(A|B|C) = zeros(|B|+|C|, crc(A)) ^ zeros(|C|, crc(B)) ^ crc(C), where
 * zeros(n, s) runs state s over n zero bytes, a table lookup per byte.
 */
#define LANE 128
static uint32_t zeros1[4][256], zeros2[4][256]; /* zeros(LANE, .), zeros(2 LANE, .) */

/* Runs raw state s over n zero bytes, in software. */
static uint32_t zero_bytes(uint32_t s, size_t n)
{
    while (n--)
        s = (s >> 8) ^ table[0][s & 0xff];
    return s;
}

static uint32_t shift(const uint32_t t[4][256], uint32_t s)
{
    return t[0][s & 0xff] ^ t[1][(s >> 8) & 0xff] ^ t[2][(s >> 16) & 0xff] ^ t[3][s >> 24];
}

/* zeros(n, .) as tables: running over zero bytes is linear in the state, so
 * each entry is the XOR of the entries of its bits, and only 32 states need
 * the byte-by-byte run (a process's first checksum, which names make at
 * every fm_init, then costs microseconds, not half a millisecond). */
static void zeros_table(uint32_t t[4][256], size_t n)
{
    for (int k = 0; k < 4; k++) {
        uint32_t bit[8];
        for (int j = 0; j < 8; j++)
            bit[j] = zero_bytes(1u << (8 * k + j), n);
        t[k][0] = 0;
        for (uint32_t b = 1; b < 256; b++)
            t[k][b] = t[k][b & (b - 1)] ^ bit[__builtin_ctz(b)];
    }
}

static void init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
        table[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            table[t][i] = (table[t - 1][i] >> 8) ^ table[0][table[t - 1][i] & 0xff];
    zeros_table(zeros1, LANE);
    zeros_table(zeros2, 2 * LANE);
#if defined(__x86_64__)
    __builtin_cpu_init();
    hw = __builtin_cpu_supports("sse4.2");
#else
    hw = 0;
#endif
}

/* Slicing-by-8 in software. */
static uint32_t crc_sw(uint32_t crc, const unsigned char *p, size_t len)
{
    while (len && ((uintptr_t)p & 7)) {
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
        len--;
    }
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= crc;
        crc = table[7][w & 0xff] ^ table[6][(w >> 8) & 0xff] ^ table[5][(w >> 16) & 0xff] ^
              table[4][(w >> 24) & 0xff] ^ table[3][(w >> 32) & 0xff] ^
              table[2][(w >> 40) & 0xff] ^ table[1][(w >> 48) & 0xff] ^ table[0][w >> 56];
    }
    while (len--)
        crc = (crc >> 8) ^ table[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_hw(uint32_t crc, const unsigned char *p,
                                                          size_t len)
{
    uint64_t c = crc;
    while (len && ((uintptr_t)p & 7)) {
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
        len--;
    }
    for (; len >= 3 * LANE; len -= 3 * LANE, p += 3 * LANE) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < LANE; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + LANE + i, 8);
            memcpy(&w2, p + 2 * LANE + i, 8);
            c = __builtin_ia32_crc32di(c, w0);
            c1 = __builtin_ia32_crc32di(c1, w1);
            c2 = __builtin_ia32_crc32di(c2, w2);
        }
        c = shift(zeros2, (uint32_t)c) ^ shift(zeros1, (uint32_t)c1) ^ (uint32_t)c2;
    }
    for (; len >= 8; len -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = __builtin_ia32_crc32di(c, w);
    }
    while (len--)
        c = __builtin_ia32_crc32qi((uint32_t)c, *p++);
    return (uint32_t)c;
}
#endif

uint32_t fm_crc32c(uint32_t crc, const void *data, size_t len)
{
    if (__builtin_expect(hw < 0, 0))
        init();
    crc = ~crc;
#if defined(__x86_64__)
    if (hw)
        return ~crc_hw(crc, data, len);
#endif
    return ~crc_sw(crc, data, len);
}

int fm_crc32c_hw(void)
{
    if (hw < 0)
        init();
    return hw;
}
