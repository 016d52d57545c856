/* Endpoint names: a round trip, and every way a name can be broken. */
#include "core/name.h"
#include "testing/fmtest.h"

#include <arpa/inet.h>
#include <string.h>

static struct fm_name sample(int nrails)
{
    struct fm_name n = {.channel = 42, .job = 7, .rank = 3, .epoch = 0xabcdef01, .node = 9,
                        .pid = 4242, .seg_fd = 17, .nrails = nrails};
    for (int i = 0; i < nrails; i++) {
        n.rail[i].ip = htonl(0x0a000001u + (uint32_t)i);
        n.rail[i].port = htons((uint16_t)(5000 + i));
    }
    return n;
}

int main(void)
{
    for (int rails = 0; rails <= FM_NAME_RAILS; rails++) {
        struct fm_name n = sample(rails), d;
        unsigned char buf[FM_NAME_MAX];
        size_t len = fm_name_encode(&n, buf);
        CHECK(len <= FM_NAME_MAX);
        CHECK_EQ(len, fm_name_size(&n));
        CHECK_RC(fm_name_decode(buf, len, &d), 0);
        CHECK(memcmp(&n, &d, sizeof(n)) == 0);
        CHECK(fm_name_same_process(&n, &d));
        /* Truncated or padded: not a name. */
        for (size_t l = 0; l < len; l++)
            CHECK_RC(fm_name_decode(buf, l, &d), FM_EINVAL);
        CHECK_RC(fm_name_decode(buf, len + 1, &d), FM_EINVAL);
        /* Any flipped bit: not a name (the checksum, or a field check). */
        for (size_t i = 0; i < len * 8; i++) {
            buf[i / 8] ^= (unsigned char)(1u << (i % 8));
            CHECK_RC(fm_name_decode(buf, len, &d), FM_EINVAL);
            buf[i / 8] ^= (unsigned char)(1u << (i % 8));
        }
    }
    /* Another version, or a zero epoch, even with a good checksum. */
    struct fm_name n = sample(1), d;
    unsigned char buf[FM_NAME_MAX];
    n.epoch = 0;
    size_t len = fm_name_encode(&n, buf);
    CHECK_RC(fm_name_decode(buf, len, &d), FM_EINVAL);
    n = sample(1);
    len = fm_name_encode(&n, buf);
    buf[1] = FM_NAME_VERSION + 1;
    CHECK_RC(fm_name_decode(buf, len, &d), FM_EINVAL);
    CHECK_RC(fm_name_decode(NULL, len, &d), FM_EINVAL);
    /* Another incarnation of the same process is another process. */
    struct fm_name a = sample(1), b = sample(1);
    b.epoch++;
    CHECK(!fm_name_same_process(&a, &b));
    b = sample(1);
    b.channel = 1;
    CHECK(fm_name_same_process(&a, &b));
    return 0;
}
