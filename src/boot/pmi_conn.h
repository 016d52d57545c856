/*
 * The client's connection to a PMI launcher: the socket in PMI_FD, or a TCP
 * connection to PMI_PORT (host:port) for a process that did not inherit
 * one, as hydra's -pmi-port mode and fmrun --hosts give. Reads are buffered
 * so that a reply split over several segments, or two replies in one
 * segment, come out whole.
 */
#ifndef FM_PMI_CONN_H
#define FM_PMI_CONN_H

#include "pmi_wire.h"

#include <stddef.h>

struct fm_pmi_conn {
    int fd;
    int by_port;   /* connected to PMI_PORT: the process must say who it is */
    int id;        /* PMI_ID in port mode */
    size_t len;    /* bytes buffered */
    char buf[FM_PMI2_MSG_MAX + FM_PMI2_HDR];
};

/*
 * Connects as the environment says: PMI_FD, else PMI_PORT with PMI_ID.
 * `who` names the bootstrap in the message left in err on failure.
 */
int fm_pmi_conn_open(struct fm_pmi_conn *c, const char *who, char *err, size_t errlen);
void fm_pmi_conn_close(struct fm_pmi_conn *c);

int fm_pmi_conn_write(struct fm_pmi_conn *c, const char *p, size_t len);
/* One line without its newline, NUL-terminated, of at most max-1 bytes. */
int fm_pmi_conn_line(struct fm_pmi_conn *c, char *line, size_t max);
/* Exactly n bytes. */
int fm_pmi_conn_bytes(struct fm_pmi_conn *c, char *out, size_t n);
/* Waits up to timeout_ms for the launcher to close the connection, reading
 * and dropping whatever it sends meanwhile. */
void fm_pmi_conn_await_close(struct fm_pmi_conn *c, int timeout_ms);

/* A decimal number in [0, 2^30] (a rank, a size): 0, or -1 when s is NULL
 * or not such a number. */
int fm_parse_count(const char *s, int *out);
/* The same for an environment variable. */
int fm_env_int(const char *name, int *out);

#endif
