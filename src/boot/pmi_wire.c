#include "pmi_wire.h"

#include <string.h>

int fm_pmi_token_ok(const char *s)
{
    for (; *s; s++)
        if (*s <= ' ' || *s == '=' || *s == 0x7f)
            return 0;
    return 1;
}

int fm_pmi_parse(char *line, struct fm_pmi_msg *msg)
{
    msg->nargs = 0;
    char *p = line;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        char *word = p;
        while (*p && *p != ' ')
            p++;
        if (*p)
            *p++ = '\0';
        char *eq = strchr(word, '=');
        if (!eq || eq == word || msg->nargs == FM_PMI_ARGS_MAX)
            return -1;
        *eq = '\0';
        msg->arg[msg->nargs].key = word;
        msg->arg[msg->nargs].val = eq + 1;
        msg->nargs++;
    }
    if (msg->nargs == 0 ||
        (strcmp(msg->arg[0].key, "cmd") != 0 && strcmp(msg->arg[0].key, "mcmd") != 0))
        return -1;
    return 0;
}

const char *fm_pmi_get(const struct fm_pmi_msg *msg, const char *key)
{
    for (int i = 0; i < msg->nargs; i++)
        if (strcmp(msg->arg[i].key, key) == 0)
            return msg->arg[i].val;
    return NULL;
}

int fm_pmi2_parse(char *buf, size_t len, struct fm_pmi_msg *msg)
{
    msg->nargs = 0;
    buf[len] = '\0';
    if (len == 0 || buf[len - 1] != ';' || memchr(buf, '\0', len))
        return -1;
    size_t i = 0;
    while (i < len) {
        char *key = buf + i;
        while (i < len && buf[i] != '=' && buf[i] != ';')
            i++;
        if (i == len || buf[i] != '=' || buf + i == key || msg->nargs == FM_PMI_ARGS_MAX)
            return -1;
        buf[i++] = '\0';
        /* The value ends at a single ';'; ";;" is an escaped ';'. */
        char *val = buf + i, *out = val;
        for (;;) {
            if (i == len)
                return -1;
            if (buf[i] == ';') {
                if (i + 1 < len && buf[i + 1] == ';') {
                    *out++ = ';';
                    i += 2;
                    continue;
                }
                i++;
                break;
            }
            *out++ = buf[i++];
        }
        *out = '\0';
        msg->arg[msg->nargs].key = key;
        msg->arg[msg->nargs].val = val;
        msg->nargs++;
    }
    return strcmp(msg->arg[0].key, "cmd") == 0 ? 0 : -1;
}

int fm_pmi2_append(char *buf, size_t cap, size_t *len, const char *key, const char *val)
{
    size_t n = *len, klen = strlen(key);
    if (n + klen + 1 > cap)
        return -1;
    memcpy(buf + n, key, klen);
    n += klen;
    buf[n++] = '=';
    for (const char *v = val; *v; v++) {
        if (n + 2 > cap)
            return -1;
        if (*v == ';')
            buf[n++] = ';';
        buf[n++] = *v;
    }
    if (n + 1 > cap)
        return -1;
    buf[n++] = ';';
    *len = n;
    return 0;
}
