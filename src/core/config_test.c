/* The configuration table: defaults, sizes, words, lists and bad values. */
#include "core/config.h"
#include "testing/fmtest.h"

#include <stdlib.h>
#include <string.h>

static const struct fm_cfg_var *var(const char *name)
{
    for (size_t i = 0; i < fm_cfg_count; i++)
        if (strcmp(fm_cfg_table[i].name, name) == 0)
            return &fm_cfg_table[i];
    fmt_fail(__FILE__, __LINE__, "no variable %s", name);
}

int main(void)
{
    struct fm_config cfg;
    char err[256];
    int64_t v;

    for (size_t i = 0; i < fm_cfg_count; i++)
        unsetenv(fm_cfg_table[i].name);
    CHECK_RC(fm_config_load(&cfg, err, sizeof(err)), 0);
    CHECK_EQ(cfg.shm_ring_size, 256 * 1024);
    CHECK_EQ(cfg.ep_max, 8);

    /* Every variable documents itself and its default parses. */
    for (size_t i = 0; i < fm_cfg_count; i++) {
        fm_cfg_str any;
        CHECK(strlen(fm_cfg_table[i].desc) > 20);
        CHECK_RC(fm_config_parse(&fm_cfg_table[i], fm_cfg_table[i].def, any, err, sizeof(err)),
                 0);
    }

    CHECK_RC(fm_config_parse(var("FM_SHM_RING_SIZE"), "1M", &v, err, sizeof(err)), 0);
    CHECK_EQ(v, 1 << 20);
    CHECK_RC(fm_config_parse(var("FM_SHM_RING_SIZE"), "64KB", &v, err, sizeof(err)), 0);
    CHECK_EQ(v, 64 << 10);
    CHECK_RC(fm_config_parse(var("FM_SHM_RING_SIZE"), "12x", &v, err, sizeof(err)), FM_EINVAL);
    CHECK(strstr(err, "FM_SHM_RING_SIZE=12x") != NULL);
    CHECK_RC(fm_config_parse(var("FM_SHM_RING_SIZE"), "16G", &v, err, sizeof(err)), FM_EINVAL);
    CHECK_RC(fm_config_parse(var("FM_EP_MAX"), "0", &v, err, sizeof(err)), FM_EINVAL);
    CHECK_RC(fm_config_parse(var("FM_EP_MAX"), "", &v, err, sizeof(err)), FM_EINVAL);
    CHECK_RC(fm_config_parse(var("FM_LOG"), "debug", &v, err, sizeof(err)), 0);
    CHECK_RC(fm_config_parse(var("FM_LOG"), "loud", &v, err, sizeof(err)), FM_EINVAL);
    CHECK(strstr(err, "none,error,warn,info,debug") != NULL);
    CHECK_RC(fm_config_parse(var("FM_TRANSPORTS"), "shm", &v, err, sizeof(err)), 0);
    CHECK_EQ(v, FM_TRANSPORT_SHM);
    CHECK_RC(fm_config_parse(var("FM_TRANSPORTS"), "udp,shm", &v, err, sizeof(err)), 0);
    CHECK_EQ(v, FM_TRANSPORT_SHM | FM_TRANSPORT_UDP);
    fm_cfg_str str;
    CHECK_RC(fm_config_parse(var("FM_RAILS"), "10.1.0.0/24", str, err, sizeof(err)), 0);
    CHECK(strcmp(str, "10.1.0.0/24") == 0);
    CHECK_RC(fm_config_parse(var("FM_TRANSPORTS"), "shm,carrier-pigeon", &v, err, sizeof(err)),
             FM_EINVAL);

    setenv("FM_SHM_RING_SIZE", "96K", 1);
    CHECK_RC(fm_config_load(&cfg, err, sizeof(err)), FM_EINVAL);
    CHECK(strstr(err, "power of two") != NULL);
    setenv("FM_SHM_RING_SIZE", "64K", 1);
    setenv("FM_SHM_MAX_MSG", "64K", 1);
    CHECK_RC(fm_config_load(&cfg, err, sizeof(err)), FM_EINVAL);
    setenv("FM_SHM_MAX_MSG", "16K", 1);
    CHECK_RC(fm_config_load(&cfg, err, sizeof(err)), 0);

    char buf[64];
    fm_config_format(var("FM_LOG"), &cfg, buf, sizeof(buf));
    CHECK(strcmp(buf, "error") == 0);
    fm_config_format(var("FM_SHM_MAX_MSG"), &cfg, buf, sizeof(buf));
    CHECK(strcmp(buf, "16384") == 0);
    return 0;
}
