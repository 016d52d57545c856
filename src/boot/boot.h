/*
 * Bootstrap: how a process learns its rank, the job size, which ranks share
 * its node, and how it exchanges small key-value cards with the others.
 * One ops table per launcher protocol.
 */
#ifndef FM_BOOT_H
#define FM_BOOT_H

#include "pmi_conn.h"

#include <stddef.h>

#define FM_BOOT_VAL_MAX 1024 /* longest value every launcher accepts */
#define FM_BOOT_ABORT_WAIT_MS 5000 /* an abort waits this long for the launcher */

struct fm_boot;

struct fm_boot_ops {
    const char *name;
    /* Publishes key=val for this rank; visible to others after fence. */
    int (*put)(struct fm_boot *b, const char *key, const char *val);
    /* Collective: every rank's puts become visible to all, and no rank
     * returns before every rank has entered it. */
    int (*fence)(struct fm_boot *b);
    /* Reads key as published by `rank` (after a fence). FM_EBOOT if missing. */
    int (*get)(struct fm_boot *b, int rank, const char *key, char *val, size_t len);
    int (*finalize)(struct fm_boot *b);
    /* Asks the launcher to end every rank of the job, with `status` as the
     * job's exit status where the protocol carries one, and returns once
     * the launcher has taken the request (or after a few seconds). NULL
     * where there is no launcher to ask (a singleton). */
    void (*abort)(struct fm_boot *b, int status);
};

struct fm_boot {
    const struct fm_boot_ops *ops;
    int rank;
    int size;
    int *node_of;         /* node index of every rank, from the launcher */
    char job[256];          /* job name (kvs name, PMIx namespace), unique per job */
    struct fm_pmi_conn pmi; /* PMI-1 and PMI-2: the connection to the launcher */
};

/*
 * Joins the job as FM_BOOTSTRAP (a fm_config word index) says. On failure
 * returns FM_EBOOT (or FM_ENOMEM) and writes which bootstrap was tried and
 * why in err.
 */
int fm_boot_open(struct fm_boot *b, int which, char *err, size_t errlen);
void fm_boot_close(struct fm_boot *b);

/* The bootstraps. */
int fm_boot_pmi1_open(struct fm_boot *b, char *err, size_t errlen);
int fm_boot_pmi2_open(struct fm_boot *b, char *err, size_t errlen);
int fm_boot_pmix_open(struct fm_boot *b, char *err, size_t errlen);
int fm_boot_singleton_open(struct fm_boot *b, char *err, size_t errlen);

#endif
