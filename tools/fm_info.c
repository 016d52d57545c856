/* fm_info: what the library sees: version, transports, limits, and every
 * configuration variable with its value and meaning. */
#include "core/config.h"
#include "fastmsg.h"
#include "net/crc32c.h"
#include "net/rails.h"
#include "shm/ring.h"

#include <arpa/inet.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Whether the shm link can work here: a memfd that reopens through /proc. */
static const char *shm_status(char *why, size_t len)
{
    int fd = memfd_create("fm_info", MFD_CLOEXEC);
    if (fd < 0) {
        snprintf(why, len, "unavailable: memfd_create: %s", strerror(errno));
        return why;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)getpid(), fd);
    int fd2 = open(path, O_RDWR | O_CLOEXEC);
    if (fd2 < 0)
        snprintf(why, len, "unavailable: cannot reopen a memfd through /proc: %s",
                 strerror(errno));
    else
        snprintf(why, len, "available");
    if (fd2 >= 0)
        close(fd2);
    close(fd);
    return why;
}

static void print_wrapped(const char *indent, const char *text, int width)
{
    const char *p = text;
    while (*p) {
        int n = (int)strlen(p);
        if (n > width) {
            n = width;
            while (n > 0 && p[n] != ' ')
                n--;
            if (n == 0)
                n = width;
        }
        printf("%s%.*s\n", indent, n, p);
        p += n;
        while (*p == ' ')
            p++;
    }
}

int main(int argc, char **argv)
{
    if (argc > 1) {
        int help = strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0;
        if (strcmp(argv[1], "-V") == 0 || strcmp(argv[1], "--version") == 0) {
            printf("fastmsg %s\n", FM_VERSION_STRING);
            return 0;
        }
        fprintf(help ? stdout : stderr,
                "usage: fm_info [--version]\nPrints the fastmsg version, transports, limits "
                "and configuration variables.\n");
        return help ? 0 : 2;
    }
    struct fm_config cfg;
    char err[256], why[160];
    int rc = fm_config_load(&cfg, err, sizeof(err));
    printf("fastmsg %s\n\n", FM_VERSION_STRING);
    if (rc) {
        printf("configuration error: %s\n(the values below are the defaults)\n\n", err);
        for (size_t i = 0; i < fm_cfg_count; i++)
            unsetenv(fm_cfg_table[i].name);
        fm_config_load(&cfg, err, sizeof(err));
    }

    printf("transports:\n");
    printf("  shm   shared-memory rings between ranks of one node: %s%s\n",
           shm_status(why, sizeof(why)),
           (cfg.transports & FM_TRANSPORT_SHM) ? "" : " (disabled by FM_TRANSPORTS)");

    struct fm_udp *rails = calloc(FM_RAILS_MAX, sizeof(*rails));
    char uerr[256];
    int nrails = rails ? fm_rails_open(rails, cfg.rails, uerr, sizeof(uerr)) : FM_ENOMEM;
    if (nrails > 0) {
        char policy[32] = "";
        for (size_t i = 0; i < fm_cfg_count; i++)
            if (strcmp(fm_cfg_table[i].name, "FM_RAIL_POLICY") == 0)
                fm_config_format(&fm_cfg_table[i], &cfg, policy, sizeof(policy));
        printf("  udp   reliable session over UDP between nodes: available on %d rail%s "
               "(FM_RAILS=%s, policy %s)%s\n",
               nrails, nrails > 1 ? "s" : "", cfg.rails,
               policy,
               (cfg.transports & FM_TRANSPORT_UDP) ? "" : " (disabled by FM_TRANSPORTS)");
        for (int r = 0; r < nrails; r++) {
            const struct fm_udp *u = &rails[r];
            printf("        rail %d: %s/%d on %s, MTU %d, %u bytes per packet%s%s\n", r,
                   inet_ntoa(u->addr.sin_addr), __builtin_popcount(u->netmask), u->ifname,
                   u->mtu, u->payload, u->gso ? ", GSO" : "", u->gro ? ", GRO" : "");
        }
        if (nrails > 1)
            printf("        a peer's rail pairs with the local rail whose subnet holds its "
                   "address; a rail with no partner is not used towards that peer "
                   "(FM_LOG=info shows each pairing)\n");
        fm_rails_close(rails, nrails);
    } else {
        printf("  udp   reliable session over UDP between nodes: unavailable: %s\n",
               rails ? uerr : "out of memory");
    }
    free(rails);
    printf("        packet checksum CRC32C: %s\n",
           fm_crc32c_hw() ? "SSE4.2 instruction, three streams" : "table (no SSE4.2)");

    printf("\nlimits:\n");
    printf("  largest message per send (shm)  %lld bytes (FM_SHM_MAX_MSG; longer sends take "
           "a prefix)\n", (long long)cfg.shm_max_msg);
    printf("  receive ring per sender (shm)   %lld bytes (FM_SHM_RING_SIZE)\n",
           (long long)cfg.shm_ring_size);
    printf("  largest message per send (udp)  %lld bytes (FM_NET_RING_SIZE / 4)\n",
           (long long)cfg.net_ring_size / 4);
    printf("  ring per network flow (udp)     %lld bytes (FM_NET_RING_SIZE), on both sides\n",
           (long long)cfg.net_ring_size);
    printf("  endpoints per process           %lld (FM_EP_MAX)\n", (long long)cfg.ep_max);
    printf("  segments per received message   %d (FM_SEGS_MAX)\n", FM_SEGS_MAX);
    printf("  shared memory per process, L ranks on the node, E endpoints open, S sending\n"
           "  endpoints that have talked to them:\n"
           "      committed = 4 KiB + E * ceil4K(L * %lld * %zu B) + S * %lld B\n"
           "      at most   = 4 KiB + E * (L * %lld * (%zu B + %lld B))\n",
           (long long)cfg.ep_max, sizeof(struct fm_ring_ctl), (long long)cfg.shm_ring_size,
           (long long)cfg.ep_max, sizeof(struct fm_ring_ctl), (long long)cfg.shm_ring_size);

    printf("\nconfiguration (environment variables):\n");
    for (size_t i = 0; i < fm_cfg_count; i++) {
        const struct fm_cfg_var *v = &fm_cfg_table[i];
        char val[128];
        fm_config_format(v, &cfg, val, sizeof(val));
        const char *set = getenv(v->name);
        printf("  %s=%s%s\n", v->name, val,
               set && *set ? "" : "   (default)");
        print_wrapped("      ", v->desc, 72);
    }
    return 0;
}
