/*
 * The PMI-1 server fmrun runs for its ranks: one connection per rank (a
 * socket it inherited, or TCP for ranks on other hosts), a
 * key-value store, barriers. Event-driven: fmrun feeds it bytes as they
 * arrive and it writes replies (blocking writes of short lines).
 */
#ifndef FMRUN_PMI_SERVER_H
#define FMRUN_PMI_SERVER_H

#include <stddef.h>

struct pmi_server;

/* A server for `size` ranks of job `kvsname`; mapping is the
 * PMI_process_mapping value. NULL when out of memory. */
struct pmi_server *pmi_server_new(int size, const char *kvsname, const char *mapping);
void pmi_server_free(struct pmi_server *s);

/* Rank `rank` talks on fd (the server's end of its socket). */
void pmi_server_attach(struct pmi_server *s, int rank, int fd);
/* The same for a rank that connected to PMI_PORT and named itself: it is
 * told the job size and its rank. */
void pmi_server_attach_by_port(struct pmi_server *s, int rank, int fd);

/* Handles what is readable on rank's fd. Returns 0, or -1 when the rank's
 * connection closed or it broke the protocol (the fd is then closed). */
int pmi_server_input(struct pmi_server *s, int rank);

/* Whether the rank asked to end the job (PMI abort); *code is the status
 * it gave (1 when it gave none). */
int pmi_server_aborted(const struct pmi_server *s, int rank, int *code);

/* The rank's process is gone: a barrier it never entered fails for the
 * others instead of waiting forever. */
void pmi_server_rank_exited(struct pmi_server *s, int rank);

/* How many ranks wait in the current barrier. */
int pmi_server_waiting(const struct pmi_server *s);

/* fd of a rank, or -1 once closed. */
int pmi_server_fd(const struct pmi_server *s, int rank);
/* Whether the rank called finalize / init. */
int pmi_server_finalized(const struct pmi_server *s, int rank);
int pmi_server_initialized(const struct pmi_server *s, int rank);

#endif
