/* fm_info: what the library sees: version, transports, limits, and every
 * configuration variable with its value and meaning. */
#include "core/config.h"
#include "core/key.h"
#include "core/link.h"
#include "core/name.h"
#include "fastmsg.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/* Whether dir holds the provider; prints it if so. */
static int provider_in(const char *dir, const char *why)
{
    char path[PATH_MAX], real[PATH_MAX];
    snprintf(path, sizeof(path), "%s/libfastmsg-fi.so", dir);
    if (access(path, R_OK) != 0 || !realpath(path, real))
        return 0;
    printf("  %-40s %s\n", real, why);
    return 1;
}

/* Where libfabric would find libfastmsg-fi.so (docs/mpi.md), and the
 * libfabric this machine has. */
static void print_provider(void)
{
    printf("\nlibfabric provider (libfastmsg-fi.so):\n");
    int found = 0;
    const char *env = getenv("FI_PROVIDER_PATH");
    if (env && *env) {
        char *copy = strdup(env), *save = NULL;
        for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
            found += provider_in(d + (*d == '@' || *d == '+'), "(FI_PROVIDER_PATH)");
        free(copy);
    }
    char exe[PATH_MAX], dir[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        *strrchr(exe, '/') = '\0';
        snprintf(dir, sizeof(dir), "%s/../src", exe);
        found += provider_in(dir, "(this build)");
        snprintf(dir, sizeof(dir), "%s/../%s", exe, FM_FI_BESIDE);
        found += provider_in(dir, "(installed beside fm_info)");
    }
    if (!found)
        found += provider_in(FM_FI_INSTALLED, "(installed)");
    if (!found)
        printf("  not found (build with libfabric-dev installed, or set FI_PROVIDER_PATH)\n");
    void *fab = dlopen("libfabric.so.1", RTLD_LAZY | RTLD_LOCAL);
    uint32_t (*version)(void) = fab ? (uint32_t(*)(void))dlsym(fab, "fi_version") : NULL;
    if (version)
        printf("  libfabric %u.%u here; use the provider with FI_PROVIDER_PATH=<its directory> "
               "FI_PROVIDER=fastmsg\n", version() >> 16, version() & 0xffff);
    else
        printf("  no libfabric.so.1 here (apt-get install libfabric1)\n");
    /* Not closed: libfabric keeps what its constructor allocated in its
     * globals, which unmapping would turn into leaks. */
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

    print_provider();

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
