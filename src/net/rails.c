#include "rails.h"

#include "core/util.h"
#include "fastmsg.h"
#include "core/log.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void fm_rails_close(struct fm_udp *rails, int n)
{
    for (int r = 0; r < n; r++)
        fm_udp_close(&rails[r]);
}

int fm_rails_open(struct fm_udp rails[FM_RAILS_MAX], const char *spec, char *err,
                  size_t errlen)
{
    char buf[512];
    char *word[FM_RAILS_MAX + 1];
    int nwords = 0;
    if (strlen(spec) >= sizeof(buf)) {
        snprintf(err, errlen, "udp: FM_RAILS is too long");
        return FM_EINVAL;
    }
    memcpy(buf, spec, strlen(spec) + 1);
    for (char *save = NULL, *one = strtok_r(buf, ",", &save); one;
         one = strtok_r(NULL, ",", &save)) {
        if (nwords == FM_RAILS_MAX) {
            snprintf(err, errlen, "udp: FM_RAILS=%s names more than %d rails", spec,
                     FM_RAILS_MAX);
            return FM_EINVAL;
        }
        word[nwords++] = one;
    }
    if (!nwords) {
        snprintf(err, errlen, "udp: FM_RAILS='%s' names no rail", spec);
        return FM_EINVAL;
    }
    int n = 0;
    for (int w = 0; w < nwords; w++) {
        int rc = fm_udp_open(&rails[n], word[w], err, errlen);
        if (rc == FM_EUNREACH && nwords > 1) {
            /* A node without one of the rails runs on the others. */
            fm_warn("udp", "%s: rail '%s' left out", err, word[w]);
            continue;
        }
        if (rc) {
            fm_rails_close(rails, n);
            return rc;
        }
        rails[n].rail = n;
        for (int k = 0; k < n; k++)
            if (rails[k].addr.sin_addr.s_addr == rails[n].addr.sin_addr.s_addr) {
                snprintf(err, errlen,
                         "udp: FM_RAILS=%s: '%s' is the same interface (%s) as rail %d",
                         spec, word[w], rails[n].ifname, k);
                fm_rails_close(rails, n + 1);
                return FM_EINVAL;
            }
        n++;
    }
    if (!n) {
        snprintf(err, errlen, "udp: no interface that is up matches any rail of FM_RAILS=%s",
                 spec);
        return FM_EUNREACH;
    }
    /* Connected senders (udp.c) with one rail only: with rails of unequal
     * speed the dispatch no longer followed them (tests/rails_test.sh, 200
     * + 60 Mbit/s: the slower rail carried more in 2 of 4 runs, in none of
     * 4 without them); why is not known yet. */
    for (int r = 0; r < n; r++)
        rails[r].connect_peers = n == 1;
    return n;
}

static int prefix_len(uint32_t netmask) { return __builtin_popcount(netmask); }

int fm_rails_card(const struct fm_udp *rails, int n, char *buf, size_t len)
{
    size_t at = 0;
    for (int r = 0; r < n; r++) {
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &rails[r].addr.sin_addr, ip, sizeof(ip));
        int k = snprintf(buf + at, len - at, "%s%s/%d:%u", r ? "," : "", ip,
                         prefix_len(rails[r].netmask), ntohs(rails[r].addr.sin_port));
        if (k < 0 || (size_t)k >= len - at)
            return -1;
        at += (size_t)k;
    }
    return (int)at;
}

/* Reads "a.b.c.d/len:port" at *p (up to ',' or the end). */
static int parse_entry(const char **p, struct sockaddr_in *out)
{
    char ip[INET_ADDRSTRLEN];
    unsigned bits, port;
    int used = 0;
    if (sscanf(*p, "%15[0-9.]/%u:%u%n", ip, &bits, &port, &used) != 3 || bits > 32 ||
        port == 0 || port > 65535)
        return -1;
    memset(out, 0, sizeof(*out));
    out->sin_family = AF_INET;
    out->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, ip, &out->sin_addr) != 1)
        return -1;
    *p += used;
    return 0;
}

int fm_rails_match(const struct fm_udp *rails, int n, const char *card,
                   struct sockaddr_in out[FM_RAILS_MAX])
{
    struct sockaddr_in peer[FM_RAILS_MAX];
    int npeer = 0;
    for (const char *p = card;;) {
        if (npeer == FM_RAILS_MAX || parse_entry(&p, &peer[npeer]) < 0)
            return -1;
        npeer++;
        if (*p == '\0')
            break;
        if (*p++ != ',')
            return -1;
    }
    return fm_rails_pair(rails, n, peer, npeer, out);
}

int fm_rails_pair(const struct fm_udp *rails, int n, const struct sockaddr_in *peer, int npeer,
                  struct sockaddr_in out[FM_RAILS_MAX])
{
    if (npeer < 1)
        return -1;
    int matched = 0;
    for (int r = 0; r < n; r++) {
        memset(&out[r], 0, sizeof(out[r]));
        uint32_t mask = rails[r].netmask, net = rails[r].addr.sin_addr.s_addr & mask;
        /* The peer's rail of the same index first: two rails may share a subnet. */
        for (int k = 0; k < npeer; k++) {
            int j = (r + k) % npeer;
            if ((peer[j].sin_addr.s_addr & mask) == net) {
                out[r] = peer[j];
                matched++;
                break;
            }
        }
    }
    if (n == 1 && !matched) {
        out[0] = peer[0];
        matched = 1;
    }
    return matched;
}
