#include "fastmsg.h"

const char *fm_strerror(int code)
{
    if (code >= 0)
        return "success";
    switch (code) {
    case FM_EAGAIN: return "try again: no space or no message now";
    case FM_EINVAL: return "invalid argument";
    case FM_EMSGSIZE: return "message too long";
    case FM_ENOMEM: return "out of memory";
    case FM_EPEERLOST: return "peer lost: the process died or stopped answering";
    case FM_ETIMEDOUT: return "timed out";
    case FM_EBUSY: return "channel already open in this process";
    case FM_ELIMIT: return "too many endpoints open (FM_EP_MAX)";
    case FM_EUNREACH: return "no transport reaches that rank";
    case FM_EBOOT: return "bootstrap failed: the launcher protocol did not work";
    case FM_ESYS: return "a system call failed";
    case FM_ENONAME: return "no publication of that name";
    default: return "unknown error";
    }
}
