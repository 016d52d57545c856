/*
 * The symmetric segments and their mappings on the PEs of this node.
 *
 * The heap is a memfd of SHMEM_SYMMETRIC_SIZE bytes. The executable's
 * writable data (.data and .bss, what the spec calls symmetric static data)
 * is moved onto a memfd in place at shmem_init: copied into the memfd, which
 * is then mapped over the same addresses. Local peers open both memfds
 * through /proc/<pid>/fd/<fd>, as the shm link maps segments, so a put to a
 * global is a memcpy, as on the heap, and not a system call per access.
 * After fork() parent and child would share their globals (docs/shmem.md).
 */
#include "shmem_internal.h"

#include "core/core_api.h"
#include "core/log.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DEFAULT_HEAP_SIZE ((size_t)64 << 20)
#define CARD_MAGIC 0x464d5348u /* "FMSH" */

/* What a PE tells its local peers so they can map its segments. */
struct card {
    uint32_t magic;
    int32_t pid;
    int32_t fd[SEG_COUNT];
    uint64_t size[SEG_COUNT];
    char kernel[FM_KERNEL_ID_MAX]; /* the same kernel, or /proc/<pid> is another process */
};

static size_t page_size(void) { return (size_t)sysconf(_SC_PAGESIZE); }

/* SHMEM_SYMMETRIC_SIZE: bytes, with an optional K, M or G suffix (the spec's
 * variable; SMA_SYMMETRIC_SIZE is the older name). */
static size_t heap_size_from_env(void)
{
    const char *v = getenv("SHMEM_SYMMETRIC_SIZE");
    if (!v)
        v = getenv("SMA_SYMMETRIC_SIZE");
    if (!v || !*v)
        return DEFAULT_HEAP_SIZE;
    char *end;
    errno = 0;
    double n = strtod(v, &end);
    size_t mult = 1;
    switch (*end) {
    case 'k': case 'K': mult = (size_t)1 << 10; end++; break;
    case 'm': case 'M': mult = (size_t)1 << 20; end++; break;
    case 'g': case 'G': mult = (size_t)1 << 30; end++; break;
    default: break;
    }
    if (errno || *end || n <= 0 || n * (double)mult > (double)((size_t)1 << 46))
        fmshmem_fatal("SHMEM_SYMMETRIC_SIZE=%s is not a size (bytes, K, M or G)", v);
    return (size_t)(n * (double)mult);
}

static int memfd_sized(const char *name, size_t size)
{
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    if (ftruncate(fd, (off_t)size) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* The main program's writable segment, less the part made read-only after
 * relocation (PT_GNU_RELRO), as page-aligned [start, end). */
struct data_range {
    uintptr_t start, end;
};

static int find_data(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct data_range *r = arg;
    uintptr_t pg = page_size(), relro_end = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_W) && !r->end) {
            r->start = a & ~(pg - 1);
            r->end = (a + ph->p_memsz + pg - 1) & ~(pg - 1);
        } else if (ph->p_type == PT_GNU_RELRO) {
            relro_end = (a + ph->p_memsz) & ~(pg - 1); /* ld.so protects whole pages only */
        }
    }
    if (relro_end > r->start && relro_end <= r->end)
        r->start = relro_end;
    return 1; /* the first object is the executable */
}

static int threads_running(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return 0;
    char line[128];
    int n = 1;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Threads: %d", &n) == 1)
            break;
    fclose(f);
    return n > 1;
}

/* Moves the executable's data onto a memfd at the same addresses. Between
 * the copy and the mapping nothing may write to the program's globals: only
 * this thread runs, and it makes system calls only. */
static int remap_static(struct segment *sg)
{
    struct data_range r = {0, 0};
    dl_iterate_phdr(find_data, &r);
    if (r.end <= r.start)
        return -1;
    if (threads_running())
        fm_warn(SUBSYS, "another thread runs during shmem_init: globals written by it while "
                        "they move to shared memory may be lost");
    size_t size = r.end - r.start;
    int fd = memfd_sized("fmshmem-static", size);
    if (fd < 0)
        return -1;
    /* The kernel copies (a raw system call: sanitizers would take the
     * redzones between globals for overflows). */
    for (size_t done = 0; done < size;) {
        long n = syscall(SYS_pwrite64, fd, (char *)r.start + done, size - done, (off_t)done);
        if (n <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)n;
    }
    void *at = mmap((void *)r.start, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (at == MAP_FAILED) {
        close(fd);
        return -1;
    }
    sg->base = (char *)r.start;
    sg->size = size;
    sg->fd = fd;
    return 0;
}

/* Maps fd at an address aligned to HEAP_ALIGN, so that offsets the
 * allocator aligns (the same on every PE) are aligned addresses too. */
static void *map_aligned(int fd, size_t size)
{
    size_t span = size + HEAP_ALIGN;
    char *r = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
        return MAP_FAILED;
    char *at = (char *)FM_ALIGN_UP((uintptr_t)r, (uintptr_t)HEAP_ALIGN);
    void *p = mmap(at, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0);
    if (p == MAP_FAILED) {
        munmap(r, span);
        return MAP_FAILED;
    }
    if (at > r)
        munmap(r, (size_t)(at - r));
    munmap(at + size, (size_t)(r + span - (at + size)));
    return at;
}

int fmshmem_segments_create(void)
{
    struct segment *heap = &S.seg[SEG_HEAP];
    heap->size = FM_ALIGN_UP(heap_size_from_env(), page_size()) + INTERNAL_BYTES;
    heap->fd = memfd_sized("fmshmem-heap", heap->size);
    if (heap->fd < 0)
        fmshmem_fatal("cannot create the symmetric heap (%zu bytes): %s; set "
                      "SHMEM_SYMMETRIC_SIZE lower",
                      heap->size, strerror(errno));
    heap->base = map_aligned(heap->fd, heap->size);
    if (heap->base == MAP_FAILED)
        fmshmem_fatal("cannot map the symmetric heap (%zu bytes): %s; set SHMEM_SYMMETRIC_SIZE "
                      "lower",
                      heap->size, strerror(errno));
    if (remap_static(&S.seg[SEG_STATIC]) < 0)
        fmshmem_fatal("cannot move the program's static data to shared memory: %s",
                      strerror(errno));
    return 0;
}

size_t fmshmem_segments_card(void *buf, size_t cap)
{
    struct card c = {.magic = CARD_MAGIC, .pid = getpid()};
    for (int s = 0; s < SEG_COUNT; s++) {
        c.fd[s] = S.seg[s].fd;
        c.size[s] = S.seg[s].size;
    }
    fm_kernel_id(c.kernel, sizeof(c.kernel));
    if (cap < sizeof(c))
        return 0;
    memcpy(buf, &c, sizeof(c));
    return sizeof(c);
}

int fmshmem_segments_map_peer(int pe, const void *buf, size_t len)
{
    struct card c;
    char kernel[FM_KERNEL_ID_MAX] = {0};
    errno = EPROTO; /* a card that is not one of ours */
    if (len != sizeof(c))
        return -1;
    memcpy(&c, buf, sizeof(c));
    fm_kernel_id(kernel, sizeof(kernel));
    if (c.magic != CARD_MAGIC || strncmp(c.kernel, kernel, sizeof(kernel)) != 0)
        return -1;
    for (int s = 0; s < SEG_COUNT; s++) {
        /* Same program, same heap size: anything else is a foreign card. */
        if (c.size[s] != S.seg[s].size)
            return -1;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)c.pid, (int)c.fd[s]);
        int fd = open(path, O_RDWR | O_CLOEXEC);
        if (fd < 0)
            return -1;
        void *p = mmap(NULL, S.seg[s].size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (p == MAP_FAILED)
            return -1;
        S.peer_base[s][pe] = p;
    }
    return 0;
}

void fmshmem_segments_destroy(void)
{
    for (int s = 0; s < SEG_COUNT; s++) {
        if (!S.peer_base[s])
            continue;
        for (int pe = 0; pe < S.npes; pe++)
            if (pe != S.me && S.peer_base[s][pe])
                munmap(S.peer_base[s][pe], S.seg[s].size);
        free(S.peer_base[s]);
        S.peer_base[s] = NULL;
    }
    /* The static segment stays mapped (the program's globals live there);
     * the heap goes. */
    munmap(S.seg[SEG_HEAP].base, S.seg[SEG_HEAP].size);
    close(S.seg[SEG_HEAP].fd);
}
