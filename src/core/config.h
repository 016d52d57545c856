/*
 * The one configuration table: every FM_* environment variable is declared
 * once in FM_CONFIG_VARS, which gives the field of struct fm_config, its
 * parsing, its limits, and the line fm_info prints about it.
 */
#ifndef FM_CONFIG_H
#define FM_CONFIG_H

#include <stddef.h>
#include <stdint.h>

enum fm_cfg_kind {
    FM_CFG_INT,  /* decimal integer */
    FM_CFG_SIZE, /* bytes, with an optional K, M or G suffix (powers of 1024) */
    FM_CFG_WORD, /* one of the words listed in `choices` */
    FM_CFG_LIST, /* comma-separated words, each one of `choices` */
};

/* X(field, kind, env name, default, min, max, choices, meaning) */
#define FM_CONFIG_VARS(X)                                                                \
    X(log, FM_CFG_WORD, "FM_LOG", "error", 0, 0, "none,error,warn,info,debug",           \
      "what the library prints to stderr: errors that make a call fail say what to "     \
      "change; warn adds degraded paths, info the choices made, debug every event")      \
    X(bootstrap, FM_CFG_WORD, "FM_BOOTSTRAP", "auto", 0, 0, "auto,pmi1,singleton",       \
      "how the process joins its job: auto takes PMI-1 when PMI_FD is set, else a "      \
      "singleton of size 1")                                                             \
    X(transports, FM_CFG_LIST, "FM_TRANSPORTS", "shm", 0, 0, "shm",                      \
      "links that may be used, in order of preference for ranks of the same node")       \
    X(ep_max, FM_CFG_INT, "FM_EP_MAX", "8", 1, 64, NULL,                                 \
      "endpoints (channels) one process may have open at once")                          \
    X(shm_ring_size, FM_CFG_SIZE, "FM_SHM_RING_SIZE", "256K", 4096, 1 << 30, NULL,       \
      "bytes of one shared-memory receive ring (a power of two); each local sender "     \
      "endpoint that talks to an endpoint gets one ring there")                          \
    X(shm_max_msg, FM_CFG_SIZE, "FM_SHM_MAX_MSG", "64K", 64, 1 << 29, NULL,              \
      "largest message one shm fm_send puts in a ring; longer sends take a prefix, so "  \
      "the receiver can read one part while the sender writes the next")                 \
    X(wait_spin_us, FM_CFG_INT, "FM_WAIT_SPIN_US", "50", 0, 1000000, NULL,               \
      "microseconds fm_wait polls before it blocks in the kernel; when the node has "    \
      "more ranks than CPUs it yields a few times instead (0: block at once)")            \
    X(peer_check_ms, FM_CFG_INT, "FM_PEER_CHECK_MS", "10", 1, 1000, NULL,                \
      "how often a caller retrying on FM_EAGAIN checks that its peers are alive")

struct fm_config {
#define FM_CFG_FIELD(field, kind, name, def, min, max, choices, desc) int64_t field;
    FM_CONFIG_VARS(FM_CFG_FIELD)
#undef FM_CFG_FIELD
    char transports_str[128]; /* the FM_TRANSPORTS string as given */
};

struct fm_cfg_var {
    const char *name;
    enum fm_cfg_kind kind;
    const char *def;
    int64_t min, max;
    const char *choices; /* comma-separated, for WORD and LIST */
    const char *desc;
    size_t offset; /* of the field in struct fm_config */
};

extern const struct fm_cfg_var fm_cfg_table[];
extern const size_t fm_cfg_count;

/*
 * Fills cfg from the environment (defaults where unset). WORD variables are
 * stored as the index of the word in `choices`, LIST variables as a bit mask
 * of word indices. On a bad value returns FM_EINVAL and writes why in err.
 */
int fm_config_load(struct fm_config *cfg, char *err, size_t errlen);

/* Parses one value of a variable into *out; 0 or FM_EINVAL with err written. */
int fm_config_parse(const struct fm_cfg_var *var, const char *s, int64_t *out,
                    char *err, size_t errlen);

/* Writes the value of cfg for var as text (the inverse of fm_config_parse). */
void fm_config_format(const struct fm_cfg_var *var, const struct fm_config *cfg,
                      char *buf, size_t len);

/* Indices of FM_BOOTSTRAP words and bits of FM_TRANSPORTS. */
enum { FM_BOOT_AUTO, FM_BOOT_PMI1, FM_BOOT_SINGLETON };
enum { FM_TRANSPORT_SHM = 1 << 0 };

#endif
