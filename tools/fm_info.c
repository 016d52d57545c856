/* fm_info: what the library sees: version, transports, limits, and every
 * configuration variable with its value and meaning. */
#include "core/config.h"
#include "core/key.h"
#include "core/link.h"
#include "core/name.h"
#include "fastmsg.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
    char err[256];
    int rc = fm_config_load(&cfg, err, sizeof(err));
    printf("fastmsg %s\n\n", FM_VERSION_STRING);
    if (rc) {
        printf("configuration error: %s\n(the values below are the defaults)\n\n", err);
        for (size_t i = 0; i < fm_cfg_count; i++)
            unsetenv(fm_cfg_table[i].name);
        fm_config_load(&cfg, err, sizeof(err));
    }

    printf("transports:\n");
    for (int i = 0; i < fm_nlinks; i++)
        fm_links[i]->info(&cfg, stdout);

    char source[600];
    fm_key_source(source, sizeof(source));
    printf("\npeers by name:\n");
    printf("  name format   version %d, %d to %d bytes (FM_NAME_MAX %d): channel, job and rank,\n"
           "                epoch, node, pid and shared segment, up to %d rails, CRC32C\n",
           FM_NAME_VERSION, 36, 36 + 6 * FM_NAME_RAILS, FM_NAME_MAX, FM_NAME_RAILS);
    printf("  domain key    %s\n", source);

    printf("\nlimits:\n");
    for (int i = 0; i < fm_nlinks; i++)
        if (fm_links[i]->info_limits)
            fm_links[i]->info_limits(&cfg, stdout);
    printf("  endpoints per process           %lld (FM_EP_MAX)\n", (long long)cfg.ep_max);
    printf("  segments per received message   %d (FM_SEGS_MAX)\n", FM_SEGS_MAX);

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
