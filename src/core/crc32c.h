/* CRC32C (Castagnoli), the checksum of every fastmsg packet: AVX-512
 * carry-less folding or the SSE4.2 instruction where the CPU has them, a
 * table otherwise. */
#ifndef FM_NET_CRC32C_H
#define FM_NET_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC32C over data: start with crc = 0. */
uint32_t fm_crc32c(uint32_t crc, const void *data, size_t len);

/* Copies len bytes from src to dst (which do not overlap) and continues the
 * CRC32C over them, in one pass where the CPU folds with AVX-512. */
uint32_t fm_crc32c_copy(uint32_t crc, void *dst, const void *src, size_t len);

/* Continues a CRC32C over the 64 bytes at head, then the len at data: one
 * pass where the CPU folds with AVX-512 (a packet's headers and payload). */
uint32_t fm_crc32c_after(uint32_t crc, const void *head, const void *data, size_t len);

/* The same while copying the len bytes from src to dst (not the head). */
uint32_t fm_crc32c_copy_after(uint32_t crc, const void *head, void *dst, const void *src,
                              size_t len);

/* The CRC to start a 64-byte head from whose first pad (< 64) bytes are
 * zeros that do not count: with a block of pad zeros and then n = 64 - pad
 * bytes of head, fm_crc32c_after(that, block, data, len) is the CRC32C of
 * those n bytes and then the data (shorter headers fold as one block too). */
uint32_t fm_crc32c_pad_start(size_t pad);

/* How this CPU computes it, in words (for fm_info). */
const char *fm_crc32c_method(void);

#endif
