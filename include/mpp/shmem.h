/* The header's older place (OpenSHMEM 1.5 keeps it: "Header Directory: mpp"). */
#include <shmem.h>
