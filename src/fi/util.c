/* Small helpers shared by the provider's files. */
#include "fmfi.h"

#include "core/util.h"

#include <stdio.h>
#include <string.h>

size_t fmfi_iov_len(const struct iovec *iov, size_t cnt)
{
    size_t len = 0;
    for (size_t i = 0; i < cnt; i++)
        len += iov[i].iov_len;
    return len;
}

size_t fmfi_iov_copy(const struct iovec *dst, size_t dstcnt, size_t dst_off,
                     const struct iovec *src, size_t srccnt, size_t src_skip, size_t len)
{
    /* Most messages: one ring segment into one user buffer. */
    if (fm_likely(dstcnt == 1 && srccnt == 1)) {
        if (dst_off >= dst->iov_len || src_skip >= src->iov_len)
            return 0;
        size_t n = FM_MIN(len, FM_MIN(dst->iov_len - dst_off, src->iov_len - src_skip));
        memcpy((char *)dst->iov_base + dst_off, (const char *)src->iov_base + src_skip, n);
        return n;
    }
    size_t d = 0, s = 0, done = 0;
    while (done < len && d < dstcnt && s < srccnt) {
        /* Offsets first step over whole segments (and empty ones). */
        if (dst_off >= dst[d].iov_len) {
            dst_off -= dst[d++].iov_len;
        } else if (src_skip >= src[s].iov_len) {
            src_skip -= src[s++].iov_len;
        } else {
            size_t n =
                FM_MIN(len - done, FM_MIN(dst[d].iov_len - dst_off, src[s].iov_len - src_skip));
            memcpy((char *)dst[d].iov_base + dst_off, (const char *)src[s].iov_base + src_skip, n);
            done += n;
            dst_off += n;
            src_skip += n;
        }
    }
    return done;
}

int fmfi_fm_err(int fm_code)
{
    if (fm_code >= 0)
        return fm_code; /* success passes through */
    switch (fm_code) {
    case FM_EAGAIN: return -FI_EAGAIN;
    case FM_EINVAL: return -FI_EINVAL;
    case FM_EMSGSIZE: return -FI_EMSGSIZE;
    case FM_ENOMEM: return -FI_ENOMEM;
    /* A lost peer: neither Open MPI's MTL nor MPICH's netmod tells one CQ
     * error from another beyond ETRUNC/ECANCELED/ENOMSG, and consumers that
     * do (Mercury) read ECONNRESET and its kin as "peer unreachable" but
     * EIO as a local failure. ECONNRESET also is fastmsg's own code. */
    case FM_EPEERLOST: return -FI_ECONNRESET;
    case FM_EUNREACH: return -FI_EHOSTUNREACH;
    case FM_ETIMEDOUT: return -FI_ETIMEDOUT;
    case FM_EBUSY: return -FI_EBUSY;
    case FM_ELIMIT: return -FI_EMFILE;
    case FM_ESYS: return -FI_EIO;
    default: return -FI_EOTHER;
    }
}

int fmfi_wait_obj_ok(enum fi_wait_obj w, int subsys)
{
    switch (w) {
    case FI_WAIT_NONE:
    case FI_WAIT_UNSPEC:
    case FI_WAIT_YIELD:
        return 0;
    case FI_WAIT_SET:
    case FI_WAIT_FD:
    case FI_WAIT_MUTEX_COND:
    case FI_WAIT_POLLFD:
        FMFI_WARN((enum fi_log_subsys)subsys, "wait object %d not supported\n", (int)w);
        return -FI_ENOSYS;
    default:
        FMFI_WARN((enum fi_log_subsys)subsys, "unknown wait object %d\n", (int)w);
        return -FI_EINVAL;
    }
}

const char *fmfi_strerror(int prov_errno, char *buf, size_t len)
{
    const char *s = fi_strerror(prov_errno);
    if (!buf || !len)
        return s;
    snprintf(buf, len, "%s", s);
    return buf;
}
