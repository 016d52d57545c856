/*
 * PMI_PORT mode, for ranks on other hosts: fmrun listens on TCP, a rank
 * connects to the address in its PMI_PORT and names itself with
 * "cmd=initack pmiid=N" before anything else. Connections that have not
 * named themselves yet wait here.
 */
#ifndef FMRUN_PMI_LISTEN_H
#define FMRUN_PMI_LISTEN_H

#include <poll.h>
#include <stddef.h>

struct pmi_listen;

/*
 * Listens on addr (an IPv4 address or host name) for at most `ranks`
 * connections; writes "addr:port" for PMI_PORT into where. NULL on failure
 * with the reason in err.
 */
struct pmi_listen *pmi_listen_open(const char *addr, int ranks, char *where, size_t wlen,
                                   char *err, size_t errlen);
void pmi_listen_close(struct pmi_listen *l);

/* Fills pfd with the listener and the unnamed connections; returns how many. */
int pmi_listen_pollfds(const struct pmi_listen *l, struct pollfd *pfd);

/*
 * Handles what poll reported on fd (one of pmi_listen_pollfds). Returns the
 * rank a connection has just named, with its descriptor in *conn, which
 * then belongs to the caller; -1 otherwise. A connection that breaks the
 * protocol, names a rank out of range or already taken is dropped.
 */
int pmi_listen_input(struct pmi_listen *l, int fd, int *conn, const int *taken);

#endif
