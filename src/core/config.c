#include "config.h"

#include "fastmsg.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct fm_cfg_var fm_cfg_table[] = {
#define FM_CFG_ENTRY(field, kind, name, def, min, max, choices, desc)                     \
    {name, kind, def, min, max, choices, desc, offsetof(struct fm_config, field)},
    FM_CONFIG_VARS(FM_CFG_ENTRY)
#undef FM_CFG_ENTRY
};
const size_t fm_cfg_count = sizeof(fm_cfg_table) / sizeof(fm_cfg_table[0]);

/* Index of word [s, s+len) in the comma-separated list, or -1. */
static int word_index(const char *choices, const char *s, size_t len)
{
    int idx = 0;
    for (const char *c = choices; *c; idx++) {
        const char *end = strchr(c, ',');
        size_t clen = end ? (size_t)(end - c) : strlen(c);
        if (clen == len && strncmp(c, s, len) == 0)
            return idx;
        if (!end)
            break;
        c = end + 1;
    }
    return -1;
}

static int parse_int(const struct fm_cfg_var *var, const char *s, int64_t *out, char *err,
                     size_t errlen)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    int64_t mult = 1;
    if (var->kind == FM_CFG_SIZE && end != s) {
        switch (toupper((unsigned char)*end)) {
        case 'K': mult = 1024; end++; break;
        case 'M': mult = 1024 * 1024; end++; break;
        case 'G': mult = 1024 * 1024 * 1024; end++; break;
        }
        if (mult > 1 && toupper((unsigned char)*end) == 'B')
            end++;
    }
    if (errno || end == s || *end != '\0') {
        snprintf(err, errlen, "%s=%s: not %s", var->name, s,
                 var->kind == FM_CFG_SIZE ? "a size (like 64K or 1M)" : "an integer");
        return FM_EINVAL;
    }
    if (v < var->min / mult || v > var->max / mult ||
        v * mult < var->min || v * mult > var->max) {
        snprintf(err, errlen, "%s=%s: out of range [%lld, %lld]", var->name, s,
                 (long long)var->min, (long long)var->max);
        return FM_EINVAL;
    }
    *out = v * mult;
    return 0;
}

int fm_config_parse(const struct fm_cfg_var *var, const char *s, void *outp, char *err,
                    size_t errlen)
{
    int64_t *out = outp;
    switch (var->kind) {
    case FM_CFG_STR:
        if (strlen(s) >= sizeof(fm_cfg_str)) {
            snprintf(err, errlen, "%s: longer than %zu characters", var->name,
                     sizeof(fm_cfg_str) - 1);
            return FM_EINVAL;
        }
        memcpy(outp, s, strlen(s) + 1);
        return 0;
    case FM_CFG_INT:
    case FM_CFG_SIZE:
        return parse_int(var, s, out, err, errlen);
    case FM_CFG_WORD: {
        int i = word_index(var->choices, s, strlen(s));
        if (i < 0) {
            snprintf(err, errlen, "%s=%s: must be one of %s", var->name, s, var->choices);
            return FM_EINVAL;
        }
        *out = i;
        return 0;
    }
    case FM_CFG_LIST: {
        int64_t mask = 0;
        for (const char *p = s; *p;) {
            const char *end = strchr(p, ',');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            int i = word_index(var->choices, p, len);
            if (i < 0) {
                snprintf(err, errlen, "%s=%s: '%.*s' is not one of %s", var->name, s,
                         (int)len, p, var->choices);
                return FM_EINVAL;
            }
            mask |= (int64_t)1 << i;
            p = end ? end + 1 : p + len;
        }
        if (!mask) {
            snprintf(err, errlen, "%s is empty: name at least one of %s", var->name,
                     var->choices);
            return FM_EINVAL;
        }
        *out = mask;
        return 0;
    }
    }
    return FM_EINVAL;
}

void fm_config_format(const struct fm_cfg_var *var, const struct fm_config *cfg, char *buf,
                      size_t len)
{
    if (var->kind == FM_CFG_STR) {
        snprintf(buf, len, "%s", (const char *)cfg + var->offset);
        return;
    }
    int64_t v = *(const int64_t *)((const char *)cfg + var->offset);
    if (var->kind == FM_CFG_INT || var->kind == FM_CFG_SIZE) {
        snprintf(buf, len, "%lld", (long long)v);
        return;
    }
    /* WORD: the v-th word; LIST: the words whose bits are set. */
    size_t n = 0;
    int idx = 0;
    buf[0] = '\0';
    for (const char *c = var->choices; *c; idx++) {
        const char *end = strchr(c, ',');
        size_t clen = end ? (size_t)(end - c) : strlen(c);
        int on = var->kind == FM_CFG_WORD ? v == idx : (v >> idx) & 1;
        if (on && n + clen + 2 < len) {
            n += (size_t)snprintf(buf + n, len - n, "%s%.*s", n ? "," : "", (int)clen, c);
        }
        if (!end)
            break;
        c = end + 1;
    }
}

/* var's default: its entry in `defaults` ("NAME=value", NULL-terminated) if
 * there is one, else the table's. */
static const char *default_of(const struct fm_cfg_var *var, const char *const *defaults)
{
    size_t n = strlen(var->name);
    for (; defaults && *defaults; defaults++)
        if (strncmp(*defaults, var->name, n) == 0 && (*defaults)[n] == '=')
            return *defaults + n + 1;
    return var->def;
}

int fm_config_load(struct fm_config *cfg, char *err, size_t errlen)
{
    return fm_config_load_with(cfg, NULL, err, errlen);
}

int fm_config_load_with(struct fm_config *cfg, const char *const *defaults, char *err,
                        size_t errlen)
{
    memset(cfg, 0, sizeof(*cfg));
    for (size_t i = 0; i < fm_cfg_count; i++) {
        const struct fm_cfg_var *var = &fm_cfg_table[i];
        const char *s = getenv(var->name);
        if (!s || (!*s && var->kind != FM_CFG_STR))
            s = default_of(var, defaults);
        int rc = fm_config_parse(var, s, (char *)cfg + var->offset, err, errlen);
        if (rc)
            return rc;
    }
    if (cfg->shm_ring_size & (cfg->shm_ring_size - 1)) {
        snprintf(err, errlen, "FM_SHM_RING_SIZE=%lld: must be a power of two",
                 (long long)cfg->shm_ring_size);
        return FM_EINVAL;
    }
    if (cfg->net_ring_size & (cfg->net_ring_size - 1)) {
        snprintf(err, errlen, "FM_NET_RING_SIZE=%lld: must be a power of two",
                 (long long)cfg->net_ring_size);
        return FM_EINVAL;
    }
    if (cfg->net_ring_min & (cfg->net_ring_min - 1)) {
        snprintf(err, errlen, "FM_NET_RING_MIN=%lld: must be a power of two",
                 (long long)cfg->net_ring_min);
        return FM_EINVAL;
    }
    /* A small FM_NET_RING_SIZE alone means rings of that size. */
    if (cfg->net_ring_min > cfg->net_ring_size)
        cfg->net_ring_min = cfg->net_ring_size;
    if (cfg->shm_max_msg > cfg->shm_ring_size / 2) {
        snprintf(err, errlen,
                 "FM_SHM_MAX_MSG=%lld is more than half of FM_SHM_RING_SIZE=%lld: lower it "
                 "or raise the ring size",
                 (long long)cfg->shm_max_msg, (long long)cfg->shm_ring_size);
        return FM_EINVAL;
    }
    return 0;
}
