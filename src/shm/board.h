/*
 * The node board: how the processes of one node learn where each other's
 * segments are with one bootstrap lookup each, instead of one per local
 * peer (O(N) round trips to the launcher for N ranks on a node). The
 * node's first process creates a small memfd with a slot per local process
 * and publishes it; every other one opens it through /proc, as segments
 * are opened, and writes its pid and segment descriptor into its slot.
 *
 *   fm_board_create (first process)  |  fence  |  fm_board_join (others)
 *   fence  |  fm_board_read for each peer, then fm_board_close
 */
#ifndef FM_BOARD_H
#define FM_BOARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fm_boot;

struct fm_board_slot {
    uint32_t pid;
    int32_t fd;     /* its segment's descriptor in its process */
    uint32_t ready; /* written last, with release order */
    uint32_t pad;
};

struct fm_board {
    int fd;
    size_t size;
    struct fm_board_slot *slot; /* [nprocs], or NULL */
};

/* The node's first process (local index 0) of nprocs. */
int fm_board_create(struct fm_board *b, struct fm_boot *boot, int nprocs, int segment_fd,
                    char *err, size_t errlen);
/* Local process `proc`; first_rank is the rank of local process 0. */
int fm_board_join(struct fm_board *b, struct fm_boot *boot, int first_rank, int nprocs, int proc,
                  int segment_fd, char *err, size_t errlen);
/* Where local process `proc` published its segment; -1 if it did not. */
int fm_board_read(const struct fm_board *b, int proc, pid_t *pid, int *fd);
void fm_board_close(struct fm_board *b);

#endif
