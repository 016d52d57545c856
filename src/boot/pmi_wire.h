/*
 * The PMI wire formats, used by the clients (pmi1.c, pmi2.c) and by the
 * server in fmrun, so both read the protocols the same way.
 *
 * PMI-1: one command per line, "cmd=name key=value ...\n", with no spaces
 * inside keys or values.
 * PMI-2: a frame of a 6-character decimal length, space padded, then
 * "cmd=name;key=value;...;" where ";;" stands for a ';' inside a value.
 */
#ifndef FM_PMI_WIRE_H
#define FM_PMI_WIRE_H

#include <stddef.h>

#define FM_PMI_LINE_MAX 2048 /* hydra: vallen_max 1024 + key + kvsname + words */
#define FM_PMI_ARGS_MAX 32
#define FM_PMI2_HDR 6         /* the length field of a PMI-2 frame */
#define FM_PMI2_MSG_MAX 4096  /* a 1024-byte value escaped, plus key and words */

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

/*
 * Splits a PMI-2 payload of len bytes (without the length field) in place
 * into key=value words, turning ";;" back into ';'. buf must have room for
 * len + 1 bytes. Returns 0, or -1 on the same faults as fm_pmi_parse or a
 * payload that does not end with ';'.
 */
int fm_pmi2_parse(char *buf, size_t len, struct fm_pmi_msg *msg);

/*
 * Appends "key=value;" to the PMI-2 payload buf[0..*len), escaping ';' in
 * the value. Returns 0, or -1 if it does not fit in cap bytes (buf is then
 * left as it was).
 */
int fm_pmi2_append(char *buf, size_t cap, size_t *len, const char *key, const char *val);

/* The value of key, or NULL. */
const char *fm_pmi_get(const struct fm_pmi_msg *msg, const char *key);

/* A key or value that can travel: printable, no space and no '='. */
int fm_pmi_token_ok(const char *s);

#endif
