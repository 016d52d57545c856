#include "memlimit.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static int64_t read_num(const char *dir, const char *file)
{
    char path[PATH_MAX], buf[64];
    snprintf(path, sizeof(path), "%s/%s", dir, file);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    long long v = -1;
    if (fgets(buf, sizeof(buf), f) && strncmp(buf, "max", 3) != 0)
        sscanf(buf, "%lld", &v);
    fclose(f);
    return v;
}

/* Walks from a cgroup directory up to the mount root, keeping the least
 * room left (limit - usage) of any level that sets a limit. */
static int64_t cgroup_room(const char *mount, const char *rel, const char *limit_file,
                           const char *usage_file)
{
    char dir[PATH_MAX];
    int64_t room = INT64_MAX;
    snprintf(dir, sizeof(dir), "%s%s", mount, rel);
    for (;;) {
        int64_t limit = read_num(dir, limit_file), usage = read_num(dir, usage_file);
        /* v1 reports "no limit" as a huge page-rounded number. */
        if (limit > 0 && limit < (INT64_MAX >> 1) && usage >= 0) {
            int64_t r = limit > usage ? limit - usage : 0;
            room = r < room ? r : room;
        }
        char *slash = strrchr(dir, '/');
        if (!slash || (size_t)(slash - dir) < strlen(mount))
            break;
        *slash = '\0';
    }
    return room;
}

static int64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    long long kb = -1;
    if (!f)
        return INT64_MAX;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
            break;
    fclose(f);
    return kb < 0 ? INT64_MAX : (int64_t)kb * 1024;
}

static int64_t read_headroom(void);

/* Reading the cgroup files costs tens of microseconds: a value younger than
 * this is reused, minus what was committed since. */
#define HEADROOM_TTL_NS 100000000u

int64_t fm_mem_headroom(uint64_t commit)
{
    static __thread int64_t cached = -1;
    static __thread uint64_t t_read, committed;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    if (cached < 0 || now - t_read > HEADROOM_TTL_NS || committed + commit > (uint64_t)cached / 4) {
        cached = read_headroom();
        t_read = now;
        committed = 0;
    }
    committed += commit;
    return cached == INT64_MAX ? INT64_MAX : cached - (int64_t)(committed - commit);
}

static int64_t read_headroom(void)
{
    int64_t room = mem_available();
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return room;
    char line[PATH_MAX];
    while (fgets(line, sizeof(line), f)) {
        line[strcspn(line, "\n")] = '\0';
        char *ctrl = strchr(line, ':'), *path = ctrl ? strchr(ctrl + 1, ':') : NULL;
        if (!path)
            continue;
        *path++ = '\0';
        ctrl++;
        int64_t r = INT64_MAX;
        if (strcmp(ctrl, "memory") == 0) /* cgroup v1 */
            r = cgroup_room("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes",
                            "memory.usage_in_bytes");
        else if (*ctrl == '\0') { /* cgroup v2, mounted alone or beside v1 */
            r = cgroup_room("/sys/fs/cgroup", path, "memory.max", "memory.current");
            int64_t u = cgroup_room("/sys/fs/cgroup/unified", path, "memory.max",
                                    "memory.current");
            r = u < r ? u : r;
        }
        room = r < room ? r : room;
    }
    fclose(f);
    return room;
}
