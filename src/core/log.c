#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int fm_log_level_cur = FM_LOG_ERROR;
static int log_rank = -1;

static const char *const level_names[] = {"none", "error", "warn", "info", "debug"};

int fm_log_parse_level(const char *s)
{
    for (int i = 0; i < (int)(sizeof(level_names) / sizeof(level_names[0])); i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    return -1;
}

void fm_log_init(void)
{
    const char *s = getenv("FM_LOG");
    if (s && *s) {
        int l = fm_log_parse_level(s);
        fm_log_level_cur = l >= 0 ? l : FM_LOG_WARN;
    }
    /* The rank is known for sure only after the bootstrap; until then the
     * launcher's variables name it, where they do. */
    const char *r = getenv("PMI_RANK");
    if (!r)
        r = getenv("PMIX_RANK");
    log_rank = r ? atoi(r) : -1;
}

void fm_log_set_rank(int rank) { log_rank = rank; }

int fm_log_label(char *buf, size_t len)
{
    if (log_rank >= 0)
        return snprintf(buf, len, "fastmsg[%d]", log_rank);
    return snprintf(buf, len, "fastmsg[pid %d]", (int)getpid());
}

void fm_log_write(int level, const char *subsys, const char *fmt, ...)
{
    char line[1024];
    int n = fm_log_label(line, sizeof(line));
    n += snprintf(line + n, sizeof(line) - (size_t)n, " %s %s: ", level_names[level], subsys);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    line[len++] = '\n';
    /* One write() per line so lines of different ranks do not interleave. */
    ssize_t rc = write(STDERR_FILENO, line, len);
    (void)rc;
}
