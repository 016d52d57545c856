/* Hex text for the small binary values that travel through the bootstrap's
 * key-value store or a file: the job key, the domain key, endpoint names. */
#ifndef FM_HEX_H
#define FM_HEX_H

#include <stddef.h>
#include <stdint.h>

/* Writes n bytes as 2n lowercase hex digits and a terminating NUL. */
static inline void fm_hex_encode(const uint8_t *b, size_t n, char *out)
{
    static const char digit[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digit[b[i] >> 4];
        out[2 * i + 1] = digit[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static inline int fm_hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0'
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                  : -1;
}

/* Reads n bytes from the first 2n characters of s: 0, or -1 if one of
 * them is not a hex digit (the text's end included). */
static inline int fm_hex_decode(const char *s, uint8_t *out, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int hi = fm_hex_digit(s[2 * i]), lo = hi < 0 ? -1 : fm_hex_digit(s[2 * i + 1]);
        if (lo < 0)
            return -1;
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

#endif
