#include "board.h"

#include "boot/boot.h"
#include "core/core_api.h"
#include "fastmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t board_size(int nprocs) { return (size_t)nprocs * sizeof(struct fm_board_slot); }

/* Maps the board and writes this process's slot. */
static int map_and_publish(struct fm_board *b, int proc, int segment_fd, char *err,
                           size_t errlen)
{
    b->slot = mmap(NULL, b->size, PROT_READ | PROT_WRITE, MAP_SHARED, b->fd, 0);
    if (b->slot == MAP_FAILED) {
        b->slot = NULL;
        snprintf(err, errlen, "shm: cannot map the node board: %s", strerror(errno));
        return FM_ENOMEM;
    }
    struct fm_board_slot *s = &b->slot[proc];
    s->pid = (uint32_t)getpid();
    s->fd = segment_fd;
    __atomic_store_n(&s->ready, 1, __ATOMIC_RELEASE);
    return 0;
}

int fm_board_create(struct fm_board *b, struct fm_boot *boot, int nprocs, int segment_fd,
                    char *err, size_t errlen)
{
    b->size = board_size(nprocs);
    b->fd = memfd_create("fastmsg-board", MFD_CLOEXEC);
    if (b->fd < 0 || fchmod(b->fd, 0600) < 0 || ftruncate(b->fd, (off_t)b->size) < 0) {
        snprintf(err, errlen, "shm: cannot create the node board: %s", strerror(errno));
        return FM_ESYS;
    }
    int rc = map_and_publish(b, 0, segment_fd, err, errlen);
    if (rc)
        return rc;
    char card[FM_BOOT_VAL_MAX], boot_id[FM_KERNEL_ID_MAX];
    fm_kernel_id(boot_id, sizeof(boot_id));
    snprintf(card, sizeof(card), "%d,%d,%s", (int)getpid(), b->fd, boot_id);
    rc = boot->ops->put(boot, "board", card);
    if (rc)
        snprintf(err, errlen, "shm: cannot publish the node board through the %s bootstrap",
                 boot->ops->name);
    return rc;
}

int fm_board_join(struct fm_board *b, struct fm_boot *boot, int first, int nprocs, int proc,
                  int segment_fd, char *err, size_t errlen)
{
    char card[FM_BOOT_VAL_MAX], boot_id[FM_KERNEL_ID_MAX], their_id[FM_KERNEL_ID_MAX], path[64];
    int pid, fd;
    if (boot->ops->get(boot, first, "board", card, sizeof(card)) != 0 ||
        sscanf(card, "%d,%d,%95s", &pid, &fd, their_id) != 3) {
        snprintf(err, errlen, "shm: rank %d published no usable node board", first);
        return FM_EBOOT;
    }
    fm_kernel_id(boot_id, sizeof(boot_id));
    if (strcmp(boot_id, their_id) != 0) {
        snprintf(err, errlen,
                 "shm: the launcher places rank %d on this node, but it runs under another "
                 "kernel (boot_id %s, ours %s): fix the launcher's host list",
                 first, their_id, boot_id);
        return FM_EBOOT;
    }
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", pid, fd);
    b->size = board_size(nprocs);
    b->fd = open(path, O_RDWR | O_CLOEXEC);
    if (b->fd < 0) {
        int e = errno;
        snprintf(err, errlen,
                 "shm: cannot open the node board of rank %d through %s: %s. Ranks of one "
                 "node must run as the same user, in one PID namespace, with /proc mounted",
                 first, path, strerror(e));
        return e == ENOENT ? FM_EPEERLOST : FM_EBOOT;
    }
    struct stat st;
    if (fstat(b->fd, &st) < 0 || (size_t)st.st_size != b->size) {
        snprintf(err, errlen, "shm: the node board of rank %d has another size than this "
                              "node's process count says", first);
        return FM_EBOOT;
    }
    return map_and_publish(b, proc, segment_fd, err, errlen);
}

int fm_board_read(const struct fm_board *b, int proc, pid_t *pid, int *fd)
{
    const struct fm_board_slot *s = &b->slot[proc];
    if (!__atomic_load_n(&s->ready, __ATOMIC_ACQUIRE))
        return -1;
    *pid = (pid_t)s->pid;
    *fd = s->fd;
    return 0;
}

void fm_board_close(struct fm_board *b)
{
    if (b->slot)
        munmap(b->slot, b->size);
    if (b->fd >= 0)
        close(b->fd);
    b->slot = NULL;
    b->fd = -1;
}
