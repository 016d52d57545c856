/*
 * PMI-1 wire format: one command per line, "cmd=name key=value ...\n", with
 * no spaces inside keys or values. Used by the client (pmi1.c) and by the
 * server in fmrun, so both read the protocol the same way.
 */
#ifndef FM_PMI_WIRE_H
#define FM_PMI_WIRE_H

#include <stddef.h>

#define FM_PMI_LINE_MAX 2048 /* hydra: vallen_max 1024 + key + kvsname + words */
#define FM_PMI_ARGS_MAX 16

struct fm_pmi_msg {
    int nargs;
    struct {
        const char *key;
        const char *val;
    } arg[FM_PMI_ARGS_MAX];
};

/*
 * Splits a line (without its newline) in place into key=value words.
 * Returns 0, or -1 if a word has no '=', a key is empty, or there are more
 * than FM_PMI_ARGS_MAX words. The first word must be cmd=... (or mcmd=...).
 */
int fm_pmi_parse(char *line, struct fm_pmi_msg *msg);

/* The value of key, or NULL. */
const char *fm_pmi_get(const struct fm_pmi_msg *msg, const char *key);

/* A key or value that can travel: printable, no space and no '='. */
int fm_pmi_token_ok(const char *s);

#endif
