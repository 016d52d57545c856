/* CRC32C and SipHash against published check values. */
#include "core/crc32c.h"
#include "core/siphash.h"
#include "testing/fmtest.h"

#include <string.h>

int main(void)
{
    /* The CRC32C check value of "123456789" (RFC 3720 appendix B.4 family). */
    CHECK_EQ(fm_crc32c(0, "123456789", 9), 0xE3069283u);
    /* 32 bytes of zeros and of 0xff (RFC 3720 B.4). */
    unsigned char buf[300];
    memset(buf, 0, 32);
    CHECK_EQ(fm_crc32c(0, buf, 32), 0x8A9136AAu);
    memset(buf, 0xff, 32);
    CHECK_EQ(fm_crc32c(0, buf, 32), 0x62A8AB43u);
    /* Incremental and unaligned calls give the same value as one call. */
    for (int i = 0; i < 300; i++)
        buf[i] = (unsigned char)(i * 7 + 3);
    uint32_t whole = fm_crc32c(0, buf + 1, 299);
    uint32_t parts = fm_crc32c(fm_crc32c(fm_crc32c(0, buf + 1, 5), buf + 6, 100), buf + 106, 194);
    CHECK_EQ(whole, parts);
    /* Long buffers (the three-lane path) against the table, byte by byte. */
    static unsigned char big[5000];
    for (size_t i = 0; i < sizeof(big); i++)
        big[i] = (unsigned char)(i * 131 + 7);
    for (size_t len = 380; len < sizeof(big); len += 397) {
        uint32_t fast = fm_crc32c(0, big + 3, len), slow = 0;
        for (size_t i = 0; i < len; i++)
            slow = fm_crc32c(slow, big + 3 + i, 1);
        CHECK_EQ(fast, slow);
    }
    /* Every length around the folding path's thresholds (256 bytes, its
     * loops of 256, 64 and 16), from a nonzero state and odd addresses. */
    for (size_t len = 200; len < 1200; len++) {
        uint32_t fast = fm_crc32c(0x5eed, big + len % 61, len), slow = 0x5eed;
        for (size_t i = 0; i < len; i++)
            slow = fm_crc32c(slow, big + len % 61 + i, 1);
        CHECK_EQ(fast, slow);
    }
    /* A 64-byte head and then the data: the CRC of both in a row. */
    for (size_t len = 0; len < 1200; len += len < 300 ? 1 : 7) {
        const unsigned char *data = big + 200 + len % 61;
        CHECK_EQ(fm_crc32c_after(0x5eed, big + 7, data, len),
                 fm_crc32c(fm_crc32c(0x5eed, big + 7, 64), data, len));
    }
    /* A shorter head padded into a block counts as the head alone. */
    for (size_t n = 1; n <= 64; n += 13) {
        unsigned char block[64] = {0};
        memcpy(block + 64 - n, big + 3, n);
        uint32_t start = fm_crc32c_pad_start(64 - n);
        for (size_t len = 0; len < 700; len += 97)
            CHECK_EQ(fm_crc32c_after(start, block, big + 200, len),
                     fm_crc32c(fm_crc32c(0, big + 3, n), big + 200, len));
    }
    /* The same while copying the data (every byte of it, none beyond). */
    static unsigned char to[1400];
    for (size_t len = 0; len < 1200; len += len < 300 ? 1 : 7) {
        memset(to, 0xa5, sizeof(to));
        const unsigned char *data = big + 200 + len % 61;
        CHECK_EQ(fm_crc32c_copy_after(0x5eed, big + 7, to + 5, data, len),
                 fm_crc32c(fm_crc32c(0x5eed, big + 7, 64), data, len));
        CHECK(memcmp(to + 5, data, len) == 0);
        CHECK(to[4] == 0xa5 && to[5 + len] == 0xa5);
    }
    /* The copying CRC: the same value, every byte copied, none beyond. */
    static unsigned char dst[1400];
    for (size_t len = 0; len < 1200; len += len < 300 ? 1 : 7) {
        memset(dst, 0xa5, sizeof(dst));
        const unsigned char *src = big + len % 61;
        CHECK_EQ(fm_crc32c_copy(0x5eed, dst + 5, src, len), fm_crc32c(0x5eed, src, len));
        CHECK(memcmp(dst + 5, src, len) == 0);
        CHECK(dst[4] == 0xa5 && dst[5 + len] == 0xa5);
    }

    /* SipHash-2-4 reference vectors: key 00..0f, messages 00..(n-1). */
    uint8_t key[16], msg[64];
    for (int i = 0; i < 16; i++)
        key[i] = (uint8_t)i;
    for (int i = 0; i < 64; i++)
        msg[i] = (uint8_t)i;
    CHECK_EQ(fm_siphash(key, msg, 0), 0x726fdb47dd0e0e31ull);
    CHECK_EQ(fm_siphash(key, msg, 15), 0xa129ca6149be45e5ull);
    /* One bit of key or message changes the hash. */
    uint64_t h = fm_siphash(key, msg, 40);
    msg[20] ^= 1;
    CHECK(fm_siphash(key, msg, 40) != h);
    msg[20] ^= 1;
    key[3] ^= 0x80;
    CHECK(fm_siphash(key, msg, 40) != h);
    return 0;
}
