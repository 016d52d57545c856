/* Rails: the card a process publishes and the matching of a peer's rails
 * to ours by subnet. */
#include "net/rails.h"
#include "fastmsg.h"
#include "testing/fmtest.h"

#include <arpa/inet.h>
#include <string.h>

static void rail(struct fm_udp *u, int idx, const char *ip, int bits, int port)
{
    memset(u, 0, sizeof(*u));
    u->rail = idx;
    u->addr.sin_family = AF_INET;
    inet_pton(AF_INET, ip, &u->addr.sin_addr);
    u->addr.sin_port = htons((uint16_t)port);
    u->netmask = bits ? htonl(~0u << (32 - bits)) : 0;
}

static const char *ip_of(const struct sockaddr_in *a)
{
    static char buf[INET_ADDRSTRLEN];
    return inet_ntop(AF_INET, &a->sin_addr, buf, sizeof(buf));
}

int main(void)
{
    struct fm_udp r[3];
    struct sockaddr_in out[FM_RAILS_MAX];
    char card[256];
    rail(&r[0], 0, "10.1.0.1", 24, 4000);
    rail(&r[1], 1, "10.2.0.1", 24, 4001);
    rail(&r[2], 2, "10.3.0.1", 24, 4002);
    CHECK(fm_rails_card(r, 2, card, sizeof(card)) > 0);
    CHECK(strcmp(card, "10.1.0.1/24:4000,10.2.0.1/24:4001") == 0);
    CHECK_EQ(fm_rails_card(r, 2, card, 10), -1);

    /* The peer lists its rails in another order: matched by subnet. */
    CHECK_EQ(fm_rails_match(r, 2, "10.2.0.2/24:5001,10.1.0.2/24:5000", out), 2);
    CHECK(strcmp(ip_of(&out[0]), "10.1.0.2") == 0);
    CHECK_EQ(ntohs(out[0].sin_port), 5000);
    CHECK(strcmp(ip_of(&out[1]), "10.2.0.2") == 0);

    /* Our third rail has no counterpart: reported as unmatched. */
    CHECK_EQ(fm_rails_match(r, 3, "10.1.0.2/24:5000,10.2.0.2/24:5001", out), 2);
    CHECK_EQ(out[2].sin_family, 0);

    /* One rail, no subnet in common: the peer's first address (routed). */
    CHECK_EQ(fm_rails_match(r, 1, "192.168.5.5/24:6000", out), 1);
    CHECK(strcmp(ip_of(&out[0]), "192.168.5.5") == 0);
    /* Several rails, none in common: nothing matches. */
    CHECK_EQ(fm_rails_match(r, 2, "192.168.5.5/24:6000", out), 0);

    /* Two rails in one subnet pair by index. */
    rail(&r[1], 1, "10.1.0.3", 24, 4001);
    CHECK_EQ(fm_rails_match(r, 2, "10.1.0.2/24:5000,10.1.0.4/24:5001", out), 2);
    CHECK(strcmp(ip_of(&out[0]), "10.1.0.2") == 0);
    CHECK(strcmp(ip_of(&out[1]), "10.1.0.4") == 0);

    /* Malformed cards. */
    const char *bad[] = {"", "10.1.0.2", "10.1.0.2:5000", "10.1.0.2/33:5000",
                         "10.1.0.2/24:0", "10.1.0.2/24:70000", "10.1.0.2/24:5000,",
                         "10.1.0.2/24:5000;10.2.0.2/24:1", "300.1.0.2/24:5000",
                         "1.1.1.1/8:1,1.1.1.2/8:1,1.1.1.3/8:1,1.1.1.4/8:1,1.1.1.5/8:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        CHECK_EQ(fm_rails_match(r, 2, bad[i], out), -1);

    /* Opening: bad lists are refused with a reason, a missing rail of
     * several is left out, loopback always opens. */
    static struct fm_udp open[FM_RAILS_MAX]; /* static: fm_udp is large */
    char err[256];
    CHECK_EQ(fm_rails_open(open, "a,b,c,d,e", err, sizeof(err)), FM_EINVAL);
    CHECK(strstr(err, "more than 4") != NULL);
    CHECK_EQ(fm_rails_open(open, ",", err, sizeof(err)), FM_EINVAL);
    CHECK_EQ(fm_rails_open(open, "lo,lo", err, sizeof(err)), FM_EINVAL);
    CHECK(strstr(err, "same interface") != NULL);
    CHECK_EQ(fm_rails_open(open, "no-such-if", err, sizeof(err)), FM_EUNREACH);
    CHECK_EQ(fm_rails_open(open, "no-such-if,lo", err, sizeof(err)), 1);
    CHECK_EQ(open[0].rail, 0);
    CHECK(fm_rails_card(open, 1, card, sizeof(card)) > 0);
    CHECK(strncmp(card, "127.0.0.1/8:", 12) == 0);
    fm_rails_close(open, 1);
    return 0;
}
