/* Logging: quiet by default, by level from FM_LOG. */
#ifndef FM_LOG_H
#define FM_LOG_H

#include <stddef.h>
#include <stdint.h>

enum fm_log_level {
    FM_LOG_NONE = 0,
    FM_LOG_ERROR, /* a call fails for a reason outside the program: says what to change */
    FM_LOG_WARN,  /* something degraded but the job goes on */
    FM_LOG_INFO,  /* what the library chose (transports, sizes) */
    FM_LOG_DEBUG, /* per-event detail; compiled out of release builds */
};

extern int fm_log_level_cur;

void fm_log_init(void);
/* Lines name this rank from now on. */
void fm_log_set_rank(int rank);
/* "fastmsg[rank]", or "fastmsg[pid N]" for a process that is no rank of a
 * job: what begins every line the library prints. */
int fm_log_label(char *buf, size_t len);
/* Parses a level name; returns -1 if unknown. */
int fm_log_parse_level(const char *s);
void fm_log_write(int level, const char *subsys, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define fm_log(level, subsys, ...)                                             \
    do {                                                                       \
        if ((level) <= fm_log_level_cur)                                       \
            fm_log_write((level), (subsys), __VA_ARGS__);                      \
    } while (0)

#define fm_error(subsys, ...) fm_log(FM_LOG_ERROR, subsys, __VA_ARGS__)
#define fm_warn(subsys, ...) fm_log(FM_LOG_WARN, subsys, __VA_ARGS__)
#define fm_info(subsys, ...) fm_log(FM_LOG_INFO, subsys, __VA_ARGS__)
#ifdef NDEBUG
#define fm_debug(subsys, ...) ((void)0)
#else
#define fm_debug(subsys, ...) fm_log(FM_LOG_DEBUG, subsys, __VA_ARGS__)
#endif

/* Logs at most `burst` times per call site, then once in every 1000. */
#define fm_log_limited(level, subsys, burst, ...)                              \
    do {                                                                       \
        static uint64_t fm_log_count_;                                         \
        if ((level) <= fm_log_level_cur &&                                     \
            (fm_log_count_++ < (burst) || fm_log_count_ % 1000 == 0))          \
            fm_log_write((level), (subsys), __VA_ARGS__);                      \
    } while (0)

#endif
