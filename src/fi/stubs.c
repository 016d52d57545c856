/*
 * Operations the provider does not offer: each fails with -FI_ENOSYS. The
 * stubs have the exact prototypes of their slots (calling through a cast
 * function pointer would be undefined), and ignore every argument.
 */
#include "fmfi.h"

#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>

#pragma GCC diagnostic ignored "-Wunused-parameter"

int fmfi_no_control(struct fid *fid, int command, void *arg)
{
    return -FI_ENOSYS;
}

int fmfi_no_ops_open(struct fid *fid, const char *name, uint64_t flags, void **ops, void *context)
{
    return -FI_ENOSYS;
}

int fmfi_no_bind(struct fid *fid, struct fid *bfid, uint64_t flags)
{
    return -FI_ENOSYS;
}

/* ---- connection management (an endpoint fills in its own name calls) ---------- */
static int no_setname(fid_t fid, void *addr, size_t addrlen)
{
    return -FI_ENOSYS;
}
static int no_getname(fid_t fid, void *addr, size_t *addrlen)
{
    return -FI_ENOSYS;
}
static int no_getpeer(struct fid_ep *ep, void *addr, size_t *addrlen)
{
    return -FI_ENOSYS;
}
static int no_connect(struct fid_ep *ep, const void *addr, const void *param, size_t paramlen)
{
    return -FI_ENOSYS;
}
static int no_listen(struct fid_pep *pep)
{
    return -FI_ENOSYS;
}
static int no_accept(struct fid_ep *ep, const void *param, size_t paramlen)
{
    return -FI_ENOSYS;
}
static int no_reject(struct fid_pep *pep, fid_t handle, const void *param, size_t paramlen)
{
    return -FI_ENOSYS;
}
static int no_shutdown(struct fid_ep *ep, uint64_t flags)
{
    return -FI_ENOSYS;
}
static int no_join(struct fid_ep *ep, const void *addr, uint64_t flags, struct fid_mc **mc,
                   void *context)
{
    return -FI_ENOSYS;
}

struct fi_ops_cm fmfi_no_cm_ops = {
    .size = sizeof(struct fi_ops_cm),
    .setname = no_setname,
    .getname = no_getname,
    .getpeer = no_getpeer,
    .connect = no_connect,
    .listen = no_listen,
    .accept = no_accept,
    .reject = no_reject,
    .shutdown = no_shutdown,
    .join = no_join,
};

/* ---- atomics ---------------------------------------------------------------- */
static ssize_t no_atomic_write(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                               fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                               enum fi_datatype datatype, enum fi_op op, void *context)
{
    return -FI_ENOSYS;
}
static ssize_t no_atomic_writev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                size_t count, fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                                enum fi_datatype datatype, enum fi_op op, void *context)
{
    return -FI_ENOSYS;
}
static ssize_t no_atomic_writemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                  uint64_t flags)
{
    return -FI_ENOSYS;
}
static ssize_t no_atomic_inject(struct fid_ep *ep, const void *buf, size_t count,
                                fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                                enum fi_datatype datatype, enum fi_op op)
{
    return -FI_ENOSYS;
}
static ssize_t no_atomic_readwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                                   void *result, void *result_desc, fi_addr_t dest_addr,
                                   uint64_t addr, uint64_t key, enum fi_datatype datatype,
                                   enum fi_op op, void *context)
{
    return -FI_ENOSYS;
}
static ssize_t no_atomic_readwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                    size_t count, struct fi_ioc *resultv, void **result_desc,
                                    size_t result_count, fi_addr_t dest_addr, uint64_t addr,
                                    uint64_t key, enum fi_datatype datatype, enum fi_op op,
                                    void *context)
{
    return -FI_ENOSYS;
}
static ssize_t no_atomic_readwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                      struct fi_ioc *resultv, void **result_desc,
                                      size_t result_count, uint64_t flags)
{
    return -FI_ENOSYS;
}
static ssize_t no_atomic_compwrite(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                                   const void *compare, void *compare_desc, void *result,
                                   void *result_desc, fi_addr_t dest_addr, uint64_t addr,
                                   uint64_t key, enum fi_datatype datatype, enum fi_op op,
                                   void *context)
{
    return -FI_ENOSYS;
}
static ssize_t no_atomic_compwritev(struct fid_ep *ep, const struct fi_ioc *iov, void **desc,
                                    size_t count, const struct fi_ioc *comparev,
                                    void **compare_desc, size_t compare_count,
                                    struct fi_ioc *resultv, void **result_desc, size_t result_count,
                                    fi_addr_t dest_addr, uint64_t addr, uint64_t key,
                                    enum fi_datatype datatype, enum fi_op op, void *context)
{
    return -FI_ENOSYS;
}
static ssize_t no_atomic_compwritemsg(struct fid_ep *ep, const struct fi_msg_atomic *msg,
                                      const struct fi_ioc *comparev, void **compare_desc,
                                      size_t compare_count, struct fi_ioc *resultv,
                                      void **result_desc, size_t result_count, uint64_t flags)
{
    return -FI_ENOSYS;
}
/* One function for the three *valid slots: they share a prototype. */
static int no_atomic_valid(struct fid_ep *ep, enum fi_datatype datatype, enum fi_op op,
                           size_t *count)
{
    return -FI_ENOSYS;
}

struct fi_ops_atomic fmfi_no_atomic_ops = {
    .size = sizeof(struct fi_ops_atomic),
    .write = no_atomic_write,
    .writev = no_atomic_writev,
    .writemsg = no_atomic_writemsg,
    .inject = no_atomic_inject,
    .readwrite = no_atomic_readwrite,
    .readwritev = no_atomic_readwritev,
    .readwritemsg = no_atomic_readwritemsg,
    .compwrite = no_atomic_compwrite,
    .compwritev = no_atomic_compwritev,
    .compwritemsg = no_atomic_compwritemsg,
    .writevalid = no_atomic_valid,
    .readwritevalid = no_atomic_valid,
    .compwritevalid = no_atomic_valid,
};

/* ---- collectives ------------------------------------------------------------ */
static ssize_t no_barrier(struct fid_ep *ep, fi_addr_t coll_addr, void *context)
{
    return -FI_ENOSYS;
}
static ssize_t no_broadcast(struct fid_ep *ep, void *buf, size_t count, void *desc,
                            fi_addr_t coll_addr, fi_addr_t root_addr, enum fi_datatype datatype,
                            uint64_t flags, void *context)
{
    return -FI_ENOSYS;
}
/* alltoall and allgather share a prototype. */
static ssize_t no_gather_all(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                             void *result, void *result_desc, fi_addr_t coll_addr,
                             enum fi_datatype datatype, uint64_t flags, void *context)
{
    return -FI_ENOSYS;
}
/* allreduce and reduce_scatter share a prototype. */
static ssize_t no_reduce_all(struct fid_ep *ep, const void *buf, size_t count, void *desc,
                             void *result, void *result_desc, fi_addr_t coll_addr,
                             enum fi_datatype datatype, enum fi_op op, uint64_t flags,
                             void *context)
{
    return -FI_ENOSYS;
}
static ssize_t no_reduce(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
                         void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr,
                         enum fi_datatype datatype, enum fi_op op, uint64_t flags, void *context)
{
    return -FI_ENOSYS;
}
/* scatter and gather share a prototype. */
static ssize_t no_rooted(struct fid_ep *ep, const void *buf, size_t count, void *desc, void *result,
                         void *result_desc, fi_addr_t coll_addr, fi_addr_t root_addr,
                         enum fi_datatype datatype, uint64_t flags, void *context)
{
    return -FI_ENOSYS;
}
static ssize_t no_coll_msg(struct fid_ep *ep, const struct fi_msg_collective *msg,
                           struct fi_ioc *resultv, void **result_desc, size_t result_count,
                           uint64_t flags)
{
    return -FI_ENOSYS;
}
static ssize_t no_barrier2(struct fid_ep *ep, fi_addr_t coll_addr, uint64_t flags, void *context)
{
    return -FI_ENOSYS;
}

struct fi_ops_collective fmfi_no_collective_ops = {
    .size = sizeof(struct fi_ops_collective),
    .barrier = no_barrier,
    .broadcast = no_broadcast,
    .alltoall = no_gather_all,
    .allreduce = no_reduce_all,
    .allgather = no_gather_all,
    .reduce_scatter = no_reduce_all,
    .reduce = no_reduce,
    .scatter = no_rooted,
    .gather = no_rooted,
    .msg = no_coll_msg,
    .barrier2 = no_barrier2,
};
