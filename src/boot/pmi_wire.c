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
