#include "pmi_server.h"

#include "boot/pmi_wire.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct kv {
    char *key;
    char *val;
};

struct client {
    int fd;
    int initialized;
    int finalized;
    int in_barrier;
    int exited;
    int aborted;    /* asked to end the job, with abort_code as its status */
    int abort_code;
    size_t len;
    char buf[FM_PMI_LINE_MAX + 1];
};

struct pmi_server {
    int size;
    char kvsname[128];
    char mapping[1024];
    struct client *c;
    int nbarrier; /* ranks waiting in the current barrier */
    struct kv *kv;  /* open addressing by key */
    size_t kv_cap, kv_count;
};

static size_t hash(const char *s)
{
    size_t h = 1469598103934665603u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static struct kv *kv_find(struct pmi_server *s, const char *key)
{
    size_t i = hash(key) & (s->kv_cap - 1);
    while (s->kv[i].key && strcmp(s->kv[i].key, key) != 0)
        i = (i + 1) & (s->kv_cap - 1);
    return &s->kv[i];
}

static int kv_grow(struct pmi_server *s)
{
    struct kv *old = s->kv;
    size_t old_cap = s->kv_cap;
    s->kv_cap = old_cap ? old_cap * 2 : 256;
    s->kv = calloc(s->kv_cap, sizeof(*s->kv));
    if (!s->kv) {
        s->kv = old;
        s->kv_cap = old_cap;
        return -1;
    }
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key)
            *kv_find(s, old[i].key) = old[i];
    free(old);
    return 0;
}

static int kv_put(struct pmi_server *s, const char *key, const char *val)
{
    if ((s->kv_count + 1) * 2 > s->kv_cap && kv_grow(s))
        return -1;
    struct kv *e = kv_find(s, key);
    char *v = strdup(val);
    if (!v)
        return -1;
    if (!e->key) {
        e->key = strdup(key);
        if (!e->key) {
            free(v);
            return -1;
        }
        s->kv_count++;
    }
    free(e->val);
    e->val = v;
    return 0;
}

struct pmi_server *pmi_server_new(int size, const char *kvsname, const char *mapping)
{
    struct pmi_server *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->size = size;
    snprintf(s->kvsname, sizeof(s->kvsname), "%s", kvsname);
    snprintf(s->mapping, sizeof(s->mapping), "%s", mapping);
    s->c = calloc((size_t)size, sizeof(*s->c));
    if (!s->c || kv_grow(s)) {
        pmi_server_free(s);
        return NULL;
    }
    for (int i = 0; i < size; i++)
        s->c[i].fd = -1;
    return s;
}

void pmi_server_free(struct pmi_server *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->kv_cap; i++) {
        free(s->kv[i].key);
        free(s->kv[i].val);
    }
    free(s->kv);
    if (s->c)
        for (int i = 0; i < s->size; i++)
            if (s->c[i].fd >= 0)
                close(s->c[i].fd);
    free(s->c);
    free(s);
}

void pmi_server_attach(struct pmi_server *s, int rank, int fd) { s->c[rank].fd = fd; }
int pmi_server_fd(const struct pmi_server *s, int rank) { return s->c[rank].fd; }
int pmi_server_waiting(const struct pmi_server *s) { return s->nbarrier; }
int pmi_server_finalized(const struct pmi_server *s, int rank) { return s->c[rank].finalized; }
int pmi_server_initialized(const struct pmi_server *s, int rank)
{
    return s->c[rank].initialized;
}

static void reply(struct pmi_server *s, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply(struct pmi_server *s, int rank, const char *fmt, ...)
{
    char line[FM_PMI_LINE_MAX + 2];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= (int)sizeof(line) - 1)
        return;
    line[n++] = '\n';
    int fd = s->c[rank].fd;
    for (int off = 0; fd >= 0 && off < n;) {
        ssize_t w = write(fd, line + off, (size_t)(n - off));
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* the rank is gone; its exit is reported elsewhere */
        off += (int)w;
    }
}

void pmi_server_attach_by_port(struct pmi_server *s, int rank, int fd)
{
    s->c[rank].fd = fd;
    reply(s, rank, "cmd=initack rc=0");
    reply(s, rank, "cmd=set size=%d", s->size);
    reply(s, rank, "cmd=set rank=%d", rank);
    reply(s, rank, "cmd=set debug=0");
}

/* Releases the barrier when every rank that can still come has come. */
static void barrier_check(struct pmi_server *s)
{
    int missing = 0, failed = 0;
    for (int i = 0; i < s->size; i++) {
        if (s->c[i].in_barrier)
            continue;
        if (s->c[i].exited || s->c[i].finalized)
            failed = 1;
        else
            missing = 1;
    }
    if (s->nbarrier == 0 || (missing && !failed))
        return;
    for (int i = 0; i < s->size; i++) {
        if (!s->c[i].in_barrier)
            continue;
        if (failed)
            reply(s, i, "cmd=barrier_out rc=-1 msg=a_rank_exited_before_the_barrier");
        else
            reply(s, i, "cmd=barrier_out");
        s->c[i].in_barrier = 0;
    }
    s->nbarrier = 0;
}

static int handle(struct pmi_server *s, int rank, char *line)
{
    struct fm_pmi_msg m;
    if (fm_pmi_parse(line, &m) < 0)
        return -1;
    const char *cmd = fm_pmi_get(&m, "cmd");
    if (!cmd)
        return -1;
    struct client *c = &s->c[rank];
    if (strcmp(cmd, "init") == 0) {
        c->initialized = 1;
        reply(s, rank, "cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0");
    } else if (strcmp(cmd, "get_maxes") == 0) {
        reply(s, rank, "cmd=maxes kvsname_max=128 keylen_max=64 vallen_max=1024");
    } else if (strcmp(cmd, "get_my_kvsname") == 0) {
        reply(s, rank, "cmd=my_kvsname kvsname=%s", s->kvsname);
    } else if (strcmp(cmd, "get_universe_size") == 0) {
        reply(s, rank, "cmd=universe_size size=%d", s->size);
    } else if (strcmp(cmd, "get_appnum") == 0) {
        reply(s, rank, "cmd=appnum appnum=0");
    } else if (strcmp(cmd, "put") == 0) {
        const char *k = fm_pmi_get(&m, "key"), *v = fm_pmi_get(&m, "value");
        if (!k || !v || strlen(k) > 64 || strlen(v) > 1024 || kv_put(s, k, v) < 0)
            reply(s, rank, "cmd=put_result rc=-1 msg=bad_put");
        else
            reply(s, rank, "cmd=put_result rc=0 msg=success");
    } else if (strcmp(cmd, "get") == 0) {
        const char *k = fm_pmi_get(&m, "key");
        struct kv *e = k ? kv_find(s, k) : NULL;
        if (k && strcmp(k, "PMI_process_mapping") == 0)
            reply(s, rank, "cmd=get_result rc=0 msg=success value=%s", s->mapping);
        else if (e && e->key)
            reply(s, rank, "cmd=get_result rc=0 msg=success value=%s", e->val);
        else
            reply(s, rank, "cmd=get_result rc=-1 msg=key_not_found value=unknown");
    } else if (strcmp(cmd, "barrier_in") == 0) {
        if (!c->in_barrier) {
            c->in_barrier = 1;
            s->nbarrier++;
        }
        barrier_check(s);
    } else if (strcmp(cmd, "finalize") == 0) {
        c->finalized = 1;
        reply(s, rank, "cmd=finalize_ack");
        barrier_check(s);
    } else if (strcmp(cmd, "abort") == 0) {
        /* No reply: closing the connection tells the rank it was heard. */
        const char *code = fm_pmi_get(&m, "exitcode");
        char *end;
        long v = code ? strtol(code, &end, 10) : 1;
        c->aborted = 1;
        c->abort_code = code && *code && !*end ? (int)(v & 0xff) : 1;
        return -1;
    } else {
        reply(s, rank, "cmd=%s_result rc=-1 msg=unknown_command", cmd);
    }
    return 0;
}

static void drop(struct pmi_server *s, int rank)
{
    if (s->c[rank].fd >= 0)
        close(s->c[rank].fd);
    s->c[rank].fd = -1;
}

int pmi_server_input(struct pmi_server *s, int rank)
{
    struct client *c = &s->c[rank];
    ssize_t n;
    do
        n = read(c->fd, c->buf + c->len, FM_PMI_LINE_MAX - c->len);
    while (n < 0 && errno == EINTR);
    if (n <= 0) {
        drop(s, rank);
        return -1;
    }
    c->len += (size_t)n;
    char *start = c->buf, *nl;
    while ((nl = memchr(start, '\n', c->len - (size_t)(start - c->buf)))) {
        *nl = '\0';
        if (handle(s, rank, start) < 0) {
            drop(s, rank);
            return -1;
        }
        start = nl + 1;
    }
    c->len -= (size_t)(start - c->buf);
    memmove(c->buf, start, c->len);
    if (c->len == FM_PMI_LINE_MAX) { /* no newline in a whole line's worth */
        drop(s, rank);
        return -1;
    }
    return 0;
}

int pmi_server_aborted(const struct pmi_server *s, int rank, int *code)
{
    *code = s->c[rank].abort_code;
    return s->c[rank].aborted;
}

void pmi_server_rank_exited(struct pmi_server *s, int rank)
{
    s->c[rank].exited = 1;
    drop(s, rank);
    barrier_check(s);
}
