#include "boot.h"

#include "core/config.h"
#include "fastmsg.h"

#include <stdio.h>
#include <stdlib.h>

/*
 * A process that some launcher started as one of many but that finds no
 * protocol to join through would run on alone as a singleton, and the job
 * would silently be N jobs of one. Names the launcher when one can tell.
 */
static int started_as_many(char *err, size_t errlen)
{
    static const struct {
        const char *var, *hint;
    } launchers[] = {
        {"SLURM_NTASKS", "srun started it without a PMI plugin: use srun --mpi=pmi2 (or "
                         "--mpi=pmix)"},
        {"OMPI_COMM_WORLD_SIZE", "Open MPI's mpirun started it but its PMIx server is not "
                                 "reachable (PMIX_NAMESPACE is unset)"},
    };
    for (size_t i = 0; i < sizeof(launchers) / sizeof(launchers[0]); i++) {
        const char *v = getenv(launchers[i].var);
        if (v && atoi(v) > 1) {
            snprintf(err, errlen, "bootstrap: %s=%s but no PMI_FD, PMI_PORT or PMIX_NAMESPACE: %s",
                     launchers[i].var, v, launchers[i].hint);
            return 1;
        }
    }
    return 0;
}

int fm_boot_open(struct fm_boot *b, int which, char *err, size_t errlen)
{
    b->pmi.fd = -1;
    b->node_of = NULL;
    switch (which) {
    case FM_BOOT_PMI1:
        return fm_boot_pmi1_open(b, err, errlen);
    case FM_BOOT_PMI2:
        return fm_boot_pmi2_open(b, err, errlen);
    case FM_BOOT_PMIX:
        return fm_boot_pmix_open(b, err, errlen);
    case FM_BOOT_SINGLETON:
        return fm_boot_singleton_open(b, err, errlen);
    default:
        if (getenv("PMIX_NAMESPACE"))
            return fm_boot_pmix_open(b, err, errlen);
        if (getenv("PMI_FD") || getenv("PMI_PORT")) {
            /* Slurm's pmi2 plugin sets PMI_JOBID; its PMI-2 fence gathers
             * on the node, where PMI-1 would go to srun for every get. */
            if (getenv("PMI_JOBID"))
                return fm_boot_pmi2_open(b, err, errlen);
            return fm_boot_pmi1_open(b, err, errlen);
        }
        if (started_as_many(err, errlen))
            return FM_EBOOT;
        return fm_boot_singleton_open(b, err, errlen);
    }
}

void fm_boot_close(struct fm_boot *b)
{
    if (b->ops)
        b->ops->finalize(b);
    free(b->node_of);
    b->node_of = NULL;
    b->ops = NULL;
}
