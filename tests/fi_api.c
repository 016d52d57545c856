/*
 * The fastmsg libfabric provider against libfabric's documented API (the
 * man pages fi_getinfo, fi_av, fi_cq, fi_cntr, fi_msg, fi_tagged, fi_rma,
 * fi_endpoint), through the public headers only.
 *
 * The program forks: parent and child each open the provider (prov_name
 * "fastmsg", FI_EP_RDM), swap endpoint names over a socketpair, insert each
 * other, and run the cases below in lock step. The parent prints
 * "ok: <case>" or "FAIL: <case>: <detail>" (a case fails if either side
 * does) and exits non-zero on any failure. The last case kills the child.
 * Every wait is bounded; a 30 s alarm fails a hang.
 *
 *   FI_PROVIDER_PATH=build/release/src ./fi_api
 */
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define VER FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION)
#define TMO 5000 /* ms: any one wait */
#define NFMT 3   /* the other CQ formats: CONTEXT, MSG, DATA */
#define MIB ((size_t)1 << 20)
#define UNTAGGED UINT64_MAX
#define ULL(x) ((unsigned long long)(x))

/* ---- state and harness --------------------------------------------------------- */

static struct {
    bool parent, failed, nopump; /* nopump: socket waits do not drive progress */
    pid_t child;
    int sock, nfail;
    const char *case_name;
    char err[512];
    struct fi_info *info;
    struct fid_fabric *fab;
    struct fid_domain *dom;
    struct fid_av *av, *av_map;     /* TABLE: main and sel eps; MAP: the fmt eps */
    struct fid_cntr *scntr, *rcntr; /* bound to the main ep */
    struct fid_ep *ep, *sel, *fmt[NFMT];
    struct fid_cq *tx, *rx, *sel_tx, *sel_rx, *fmt_cq[NFMT];
    int av_rc, av_map_rc; /* what the setup's inserts returned */
    fi_addr_t peer, peer_sel, peer_fmt[NFMT];
    uint8_t name[2 + NFMT][FI_NAME_MAX], pname[2 + NFMT][FI_NAME_MAX];
    size_t namelen, eager, big; /* the eager limit; a size above it */
} g;

__attribute__((format(printf, 2, 3))) static void fail_at(int line, const char *fmt, ...)
{
    if (g.failed)
        return; /* the first failure is the one reported */
    g.failed = true;
    int n = snprintf(g.err, sizeof(g.err), "%s line %d: ", g.parent ? "parent" : "child", line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g.err + n, sizeof(g.err) - (size_t)n, fmt, ap);
    va_end(ap);
}
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c))                                                                                  \
            fail_at(__LINE__, __VA_ARGS__);                                                        \
    } while (0)
#define CHECK_RC(rc, what) CHECK((rc) == 0, "%s: %d (%s)", what, (int)(rc), fi_strerror((int)-(rc)))

static void on_alarm(int sig)
{
    (void)sig;
    char m[256];
    int n = snprintf(m, sizeof(m), "FAIL: %s: hung (30 s alarm, in the %s)\n",
                     g.case_name ? g.case_name : "setup", g.parent ? "parent" : "child");
    if (write(1, m, (size_t)n) < 0)
        n = 0;
    if (g.parent && g.child > 0)
        kill(g.child, SIGKILL);
    _exit(1);
}

static uint64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

/* Manual progress: reading a counter drives it (fi_domain(3)). */
static void pump(void)
{
    fi_cntr_read(g.scntr);
    fi_cntr_read(g.rcntr);
}

/* The other process died: the child leaves; the parent says how it ended
 * (a sanitizer's report is on stderr) and stops. */
static void peer_gone(void)
{
    if (!g.parent)
        _exit(1);
    int st = 0;
    waitpid(g.child, &st, 0);
    printf("FAIL: %s: the child died (%s %d)\n", g.case_name ? g.case_name : "setup",
           WIFSIGNALED(st) ? "signal" : "exit status",
           WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    exit(1);
}

/* The socketpair: whole reads and writes; reads are bounded and progress. */
static void xsend(const void *p, size_t n)
{
    for (const char *c = p; n;) {
        ssize_t k = write(g.sock, c, n);
        if (k <= 0)
            peer_gone();
        c += k, n -= (size_t)k;
    }
}

static bool xrecv(void *p, size_t n, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    for (char *c = p; n;) {
        struct pollfd pfd = {g.sock, POLLIN, 0};
        if (poll(&pfd, 1, 0) == 0) {
            if (now_ms() > end)
                return false;
            if (g.dom && !g.nopump)
                pump();
            usleep(50);
            continue;
        }
        ssize_t k = read(g.sock, c, n);
        if (k <= 0)
            peer_gone();
        c += k, n -= (size_t)k;
    }
    return true;
}

static void barrier(void)
{
    char b = 'b';
    xsend(&b, 1);
    CHECK(xrecv(&b, 1, 2 * TMO) && b == 'b', "barrier: out of step");
}

/* Data: a pattern per seed. */
static uint8_t pat(size_t i, unsigned seed)
{
    return (uint8_t)(i * 7 + seed * 13 + (i >> 9));
}
static void fill(void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)p)[i] = pat(i, seed);
}
static long bad(const void *p, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++)
        if (((const uint8_t *)p)[i] != pat(i, seed))
            return (long)i;
    return -1;
}

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        abort();
    return memset(p, 0xEE, n ? n : 1);
}

/* Frees a buffer, unless the case failed: an operation may still be
 * posted on it then, so it is kept until the endpoints are closed. */
static void **graveyard;
static size_t ngrave;
static void drop(void *p)
{
    void **gy;
    if (!g.failed)
        free(p);
    else if ((gy = realloc(graveyard, (ngrave + 1) * sizeof(*gy))))
        graveyard = gy, graveyard[ngrave++] = p;
}

/* Posts, retrying on -FI_EAGAIN after progress (fi_msg(3)). */
#define POST(call)                                                                                 \
    do {                                                                                           \
        ssize_t r_;                                                                                \
        uint64_t end_ = now_ms() + TMO;                                                            \
        while ((r_ = (call)) == -FI_EAGAIN && now_ms() < end_)                                     \
            pump();                                                                                \
        CHECK(r_ == 0, "%s = %zd (%s)", #call, r_, fi_strerror((int)-r_));                         \
    } while (0)

/* A completion, good or failed, from a TAGGED-format CQ. */
struct comp {
    void *ctx;
    uint64_t flags, data, tag;
    size_t len, olen;
    void *buf;
    fi_addr_t src;
    int err; /* 0, or the error entry's err */
};

/* Waits up to ms for a completion: 1 (in *c), or 0. */
static int get(struct fid_cq *cq, struct comp *c, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    for (;;) {
        struct fi_cq_tagged_entry e;
        fi_addr_t src = FI_ADDR_NOTAVAIL;
        ssize_t n = fi_cq_readfrom(cq, &e, 1, &src);
        if (n == 1) {
            *c = (struct comp){e.op_context, e.flags, e.data, e.tag, e.len, 0, e.buf, src, 0};
            return 1;
        }
        if (n == -FI_EAVAIL) {
            struct fi_cq_err_entry ee;
            memset(&ee, 0, sizeof(ee));
            n = fi_cq_readerr(cq, &ee, 0);
            CHECK(n == 1 && ee.err > 0, "fi_cq_readerr after -FI_EAVAIL: %zd, err %d", n, ee.err);
            *c = (struct comp){ee.op_context, ee.flags, ee.data,          ee.tag, ee.len,
                               ee.olen,       ee.buf,   FI_ADDR_NOTAVAIL, ee.err};
            return n == 1;
        }
        CHECK(n == -FI_EAGAIN, "fi_cq_readfrom: %zd (%s)", n, fi_strerror((int)-n));
        if (n != -FI_EAGAIN || now_ms() >= end)
            return 0;
    }
}

/* A completion of context ctx within TMO, checked to be an error (err)
 * or, with err 0, a success. */
static bool get_ctx(struct fid_cq *cq, void *ctx, int err, struct comp *c, const char *what)
{
    struct comp x;
    if (!c)
        c = &x;
    if (!get(cq, c, TMO)) {
        CHECK(0, "%s: no completion", what);
        return false;
    }
    CHECK(c->ctx == ctx, "%s: completion for %p, not %p", what, c->ctx, ctx);
    CHECK(c->err == err, "%s: err %d (%s), want %d", what, c->err, fi_strerror(c->err), err);
    return c->ctx == ctx && c->err == err;
}

static void progress_for(int ms)
{
    for (uint64_t end = now_ms() + (uint64_t)ms; now_ms() < end;)
        pump();
}

/* A message of a case: the send, or the receive waiting for it. */
struct msg {
    size_t len;
    uint64_t tag; /* UNTAGGED: fi_send, fi_recv */
    unsigned seed;
    uint8_t *buf;
    struct fi_context ctx;
    struct comp c; /* its completion */
};

static struct msg *msgs(int n, const size_t *len, uint64_t tag0, unsigned seed0)
{
    struct msg *m = calloc((size_t)n, sizeof(*m));
    for (int i = 0; i < n; i++)
        m[i] = (struct msg){len[i], tag0 == UNTAGGED ? UNTAGGED : tag0 + (uint64_t)i,
                            seed0 + (unsigned)i, xmalloc(len[i])};
    return m;
}

static void msgs_free(struct msg *m, int n)
{
    for (int i = 0; i < n; i++)
        drop(m[i].buf);
    drop(m);
}

static void msgs_send(struct fid_ep *ep, fi_addr_t to, struct msg *m, int n)
{
    for (int i = 0; i < n && !g.failed; i++) {
        fill(m[i].buf, m[i].len, m[i].seed);
        if (m[i].tag == UNTAGGED)
            POST(fi_send(ep, m[i].buf, m[i].len, NULL, to, &m[i].ctx));
        else
            POST(fi_tsend(ep, m[i].buf, m[i].len, NULL, to, m[i].tag, &m[i].ctx));
    }
}

static void msgs_recv(struct msg *m, int n)
{
    for (int i = 0; i < n && !g.failed; i++) {
        if (m[i].tag == UNTAGGED)
            POST(fi_recv(g.ep, m[i].buf, m[i].len, NULL, FI_ADDR_UNSPEC, &m[i].ctx));
        else
            POST(fi_trecv(g.ep, m[i].buf, m[i].len, NULL, FI_ADDR_UNSPEC, m[i].tag, 0, &m[i].ctx));
    }
}

/* Waits for the n ops' completions on cq, in any order: all came, no error. */
static bool msgs_wait(struct fid_cq *cq, struct msg *m, int n)
{
    int got = 0;
    struct comp c;
    uint64_t end = now_ms() + TMO;
    while (got < n && !g.failed && get(cq, &c, (int)(end > now_ms() ? end - now_ms() : 0))) {
        int i = 0;
        while (i < n && c.ctx != &m[i].ctx)
            i++;
        CHECK(i < n, "a completion for %p, none of this case's", c.ctx);
        CHECK(i == n || !c.err, "op %d (%zu bytes): err %d (%s)", i, m[i].len, c.err,
              fi_strerror(c.err));
        if (i < n)
            m[i].c = c, got++;
    }
    CHECK(got == n, "%d of %d completions within %d ms", got, n, TMO);
    return got == n && !g.failed;
}

/* Sends done: FI_SEND and FI_MSG or FI_TAGGED flagged (fi_cq(3)). */
static void msgs_sent(struct fid_cq *cq, struct msg *m, int n)
{
    if (!msgs_wait(cq, m, n))
        return;
    for (int i = 0; i < n; i++) {
        uint64_t want = FI_SEND | (m[i].tag == UNTAGGED ? FI_MSG : FI_TAGGED);
        CHECK((m[i].c.flags & want) == want, "send %d: flags %#llx", i, ULL(m[i].c.flags));
    }
}

/* One receive's completion: its length, flags, tag and data. */
static void rx_check(const struct msg *m, const char *what)
{
    const struct comp *c = &m->c;
    uint64_t want = FI_RECV | (m->tag == UNTAGGED ? FI_MSG : FI_TAGGED);
    CHECK(c->len == m->len, "%s: len %zu, want %zu", what, c->len, m->len);
    CHECK((c->flags & want) == want, "%s: flags %#llx", what, ULL(c->flags));
    CHECK(m->tag == UNTAGGED || c->tag == m->tag, "%s: tag %#llx", what, ULL(c->tag));
    long b = bad(m->buf, m->len, m->seed);
    CHECK(b < 0, "%s: data differs at byte %ld of %zu", what, b, m->len);
}

/* Receives done, each whole, from `from` (FI_SOURCE; FI_ADDR_UNSPEC: any). */
static void msgs_received(struct msg *m, int n, fi_addr_t from)
{
    if (!msgs_wait(g.rx, m, n))
        return;
    for (int i = 0; i < n && !g.failed; i++) {
        char what[48];
        snprintf(what, sizeof(what), "message %d (%zu bytes)", i, m[i].len);
        rx_check(&m[i], what);
        CHECK(from == FI_ADDR_UNSPEC || m[i].c.src == from, "%s: source %#llx, want %#llx", what,
              ULL(m[i].c.src), ULL(from));
    }
}

/* What a case leaves in a CQ is a stray completion. */
static void no_strays(void)
{
    struct fid_cq *cqs[] = {g.tx, g.rx, g.sel_tx, g.sel_rx, g.fmt_cq[0], g.fmt_cq[1], g.fmt_cq[2]};
    for (size_t i = 0; i < sizeof(cqs) / sizeof(cqs[0]); i++) {
        uint8_t e[64];
        struct fi_cq_err_entry ee;
        ssize_t n;
        while ((n = fi_cq_read(cqs[i], e, 1)) != -FI_EAGAIN) {
            memset(&ee, 0, sizeof(ee));
            if (n == -FI_EAVAIL && fi_cq_readerr(cqs[i], &ee, 0) == 1)
                CHECK(0, "stray error completion on CQ %zu: err %d, ctx %p", i, ee.err,
                      ee.op_context);
            else
                CHECK(n == 1 && 0, "stray completion on CQ %zu (read %zd)", i, n);
            if (n != 1 && n != -FI_EAVAIL)
                break;
        }
    }
}

/* Runs a case on both sides; the parent reports it. */
static void run(const char *name, void (*fn)(void))
{
    g.case_name = name;
    g.failed = false;
    barrier();
    fn();
    barrier();
    no_strays();
    uint16_t len = (uint16_t)(g.failed ? strlen(g.err) : 0);
    if (!g.parent) {
        xsend(&len, sizeof(len));
        xsend(g.err, len);
        return;
    }
    char cerr[sizeof(g.err)] = "child: no report";
    uint16_t clen = 0;
    bool heard = xrecv(&clen, sizeof(clen), TMO) && clen < sizeof(cerr) && xrecv(cerr, clen, TMO);
    if (heard)
        cerr[clen] = 0;
    if (g.failed || clen || !heard) {
        printf("FAIL: %s: %s%s%s\n", name, g.failed ? g.err : "", g.failed && *cerr ? "; " : "",
               cerr);
        g.nfail++;
    } else {
        printf("ok: %s\n", name);
    }
}

/* ---- setup ----------------------------------------------------------------------- */

static struct fi_info *hints(uint64_t caps, enum fi_ep_type type)
{
    struct fi_info *h = fi_allocinfo();
    h->fabric_attr->prov_name = strdup("fastmsg");
    h->caps = caps;
    h->mode = FI_CONTEXT;
    h->ep_attr->type = type;
    h->domain_attr->threading = FI_THREAD_DOMAIN;
    /* What a modern consumer can handle; the answer says what applies. */
    h->domain_attr->mr_mode = FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
    return h;
}

static struct fid_cq *open_cq(enum fi_cq_format f)
{
    struct fi_cq_attr a = {.format = f, .wait_obj = FI_WAIT_UNSPEC};
    struct fid_cq *cq = NULL;
    CHECK_RC(fi_cq_open(g.dom, &a, &cq, NULL), "fi_cq_open");
    return cq;
}

static struct fid_ep *open_ep(struct fid_av *av, struct fid_cq *tx, struct fid_cq *rx, uint64_t sel,
                              bool cntrs, uint8_t *name)
{
    struct fid_ep *ep = NULL;
    int rc = fi_endpoint(g.dom, g.info, &ep, NULL);
    CHECK_RC(rc, "fi_endpoint");
    if (rc)
        return NULL;
    CHECK_RC(fi_ep_bind(ep, &av->fid, 0), "bind av");
    CHECK_RC(fi_ep_bind(ep, &tx->fid, FI_TRANSMIT | sel), "bind tx cq");
    CHECK_RC(fi_ep_bind(ep, &rx->fid, FI_RECV | sel), "bind rx cq");
    if (cntrs) {
        CHECK_RC(fi_ep_bind(ep, &g.scntr->fid, FI_SEND), "bind send cntr");
        CHECK_RC(fi_ep_bind(ep, &g.rcntr->fid, FI_RECV), "bind recv cntr");
    }
    CHECK_RC(fi_enable(ep), "fi_enable");
    size_t len = FI_NAME_MAX;
    CHECK_RC(fi_getname(&ep->fid, name, &len), "fi_getname");
    CHECK(!g.namelen || len == g.namelen, "names of different lengths");
    g.namelen = len;
    return ep;
}

static void setup(void)
{
    struct fi_info *h = hints(
        FI_MSG | FI_TAGGED | FI_RMA | FI_DIRECTED_RECV | FI_SOURCE | FI_MULTI_RECV, FI_EP_RDM);
    int rc = fi_getinfo(VER, NULL, NULL, 0, h, &g.info);
    fi_freeinfo(h);
    CHECK(!rc, "fi_getinfo(fastmsg, FI_EP_RDM): %s (FI_PROVIDER_PATH?)", fi_strerror(-rc));
    if (!rc) {
        CHECK_RC(fi_fabric(g.info->fabric_attr, &g.fab, NULL), "fi_fabric");
        CHECK_RC(fi_domain(g.fab, g.info, &g.dom, NULL), "fi_domain");
    }
    struct fi_av_attr at = {.type = FI_AV_TABLE}, am = {.type = FI_AV_MAP};
    struct fi_cntr_attr ca = {.events = FI_CNTR_EVENTS_COMP, .wait_obj = FI_WAIT_UNSPEC};
    if (!g.failed) {
        CHECK_RC(fi_av_open(g.dom, &at, &g.av, NULL), "fi_av_open TABLE");
        CHECK_RC(fi_av_open(g.dom, &am, &g.av_map, NULL), "fi_av_open MAP");
        CHECK_RC(fi_cntr_open(g.dom, &ca, &g.scntr, NULL), "fi_cntr_open");
        CHECK_RC(fi_cntr_open(g.dom, &ca, &g.rcntr, NULL), "fi_cntr_open");
    }
    if (!g.failed) {
        g.tx = open_cq(FI_CQ_FORMAT_TAGGED), g.rx = open_cq(FI_CQ_FORMAT_TAGGED);
        g.sel_tx = open_cq(FI_CQ_FORMAT_TAGGED), g.sel_rx = open_cq(FI_CQ_FORMAT_TAGGED);
        g.ep = open_ep(g.av, g.tx, g.rx, 0, true, g.name[0]);
        g.sel = open_ep(g.av, g.sel_tx, g.sel_rx, FI_SELECTIVE_COMPLETION, false, g.name[1]);
        static const enum fi_cq_format f[NFMT] = {FI_CQ_FORMAT_CONTEXT, FI_CQ_FORMAT_MSG,
                                                  FI_CQ_FORMAT_DATA};
        for (int i = 0; i < NFMT; i++) {
            g.fmt_cq[i] = open_cq(f[i]);
            g.fmt[i] = open_ep(g.av_map, g.fmt_cq[i], g.fmt_cq[i], 0, false, g.name[2 + i]);
        }
    }
    if (g.failed) {
        printf("FAIL: setup: %s\n", g.err);
        if (g.parent)
            kill(g.child, SIGKILL);
        exit(1);
    }
    /* Names both ways, then each side inserts the other's. */
    xsend(g.name, sizeof(g.name));
    CHECK(xrecv(g.pname, sizeof(g.pname), TMO), "no names from the other side");
    uint8_t names[(2 + NFMT) * FI_NAME_MAX]; /* fi_av(3): an array of addresses */
    for (int i = 0; i < 2 + NFMT; i++)
        memcpy(names + (size_t)i * g.namelen, g.pname[i], g.namelen);
    fi_addr_t a[2];
    g.av_rc = fi_av_insert(g.av, names, 2, a, 0, NULL);
    g.peer = a[0], g.peer_sel = a[1];
    g.av_map_rc = fi_av_insert(g.av_map, names + 2 * g.namelen, NFMT, g.peer_fmt, 0, NULL);
    const char *e = getenv("FI_FASTMSG_EAGER_MAX");
    g.eager = e ? strtoull(e, NULL, 0) : 32768;
    g.big = g.eager + 7777;
}

/* ---- cases ------------------------------------------------------------------------ */

static void t_getinfo(void)
{
    if (!g.parent)
        return;
    struct fi_info *h = hints(0, FI_EP_UNSPEC), *info = NULL;
    CHECK_RC(fi_getinfo(VER, NULL, NULL, 0, h, &info), "fi_getinfo, any ep type");
    bool rdm = false, dgram = false;
    for (struct fi_info *i = info; i; i = i->next) {
        rdm |= i->ep_attr->type == FI_EP_RDM;
        dgram |= i->ep_attr->type == FI_EP_DGRAM;
        CHECK(!strcmp(i->fabric_attr->prov_name, "fastmsg"), "prov %s", i->fabric_attr->prov_name);
    }
    CHECK(rdm && dgram, "RDM %d, DGRAM %d listed", rdm, dgram);
    fi_freeinfo(info);
    info = NULL;
    h->ep_attr->type = FI_EP_RDM;
    h->caps = FI_TAGGED | FI_DIRECTED_RECV;
    int rc = fi_getinfo(VER, NULL, NULL, 0, h, &info);
    CHECK_RC(rc, "fi_getinfo, tagged");
    if (!rc) {
        CHECK((info->caps & h->caps) == h->caps, "caps %#llx lack those asked", ULL(info->caps));
        CHECK(info->domain_attr->threading == FI_THREAD_DOMAIN, "threading %d, asked DOMAIN",
              (int)info->domain_attr->threading);
        CHECK(info->ep_attr->type == FI_EP_RDM && info->ep_attr->max_msg_size >= 16 * MIB &&
                  info->tx_attr->inject_size >= 4096 && info->domain_attr->cq_data_size >= 8,
              "type %d, max_msg_size %zu, inject_size %zu, cq_data_size %zu",
              (int)info->ep_attr->type, info->ep_attr->max_msg_size, info->tx_attr->inject_size,
              info->domain_attr->cq_data_size);
    }
    fi_freeinfo(info);
    /* fi_getinfo(3): nothing matches, -FI_ENODATA. */
    const uint64_t caps[] = {FI_TAGGED | FI_HMEM, FI_TAGGED | FI_ATOMIC, FI_MSG, FI_MSG};
    const enum fi_ep_type type[] = {FI_EP_RDM, FI_EP_RDM, FI_EP_MSG, FI_EP_SOCK_STREAM};
    for (int i = 0; i < 4; i++) {
        info = NULL;
        h->caps = caps[i];
        h->ep_attr->type = type[i];
        rc = fi_getinfo(VER, NULL, NULL, 0, h, &info);
        CHECK(rc == -FI_ENODATA, "caps %#llx type %d: %d, want -FI_ENODATA", ULL(caps[i]),
              (int)type[i], rc);
        if (!rc)
            fi_freeinfo(info);
    }
    /* A node that resolves is served (names go out of band); one that does
     * not has no path to it (fabtests' negative unit tests). */
    h->caps = FI_TAGGED;
    h->ep_attr->type = FI_EP_RDM;
    const char *node[] = {"127.0.0.1", "no-such-host.invalid"};
    for (int i = 0; i < 2; i++) {
        info = NULL;
        rc = fi_getinfo(VER, node[i], "9228", 0, h, &info);
        CHECK(i ? rc == -FI_ENODATA : rc == 0, "node %s: %d", node[i], rc);
        if (!rc)
            fi_freeinfo(info);
    }
    fi_freeinfo(h);
}

static bool lookup_is(struct fid_av *av, fi_addr_t a, const uint8_t *name)
{
    uint8_t out[FI_NAME_MAX];
    size_t len = sizeof(out);
    return fi_av_lookup(av, a, out, &len) == 0 && len == g.namelen && !memcmp(out, name, len);
}

static void t_av(void)
{
    CHECK(g.av_rc == 2 && g.peer == 0 && g.peer_sel == 1,
          "TABLE insert of 2: %d, fi_addr %llu %llu", g.av_rc, ULL(g.peer),
          ULL(g.peer_sel)); /* fi_av(3): TABLE indices from 0 */
    CHECK(g.av_map_rc == NFMT, "MAP insert of %d: %d", NFMT, g.av_map_rc);
    for (int i = 0; i < NFMT; i++)
        CHECK(g.peer_fmt[i] != FI_ADDR_NOTAVAIL && (!i || g.peer_fmt[i] != g.peer_fmt[i - 1]) &&
                  lookup_is(g.av_map, g.peer_fmt[i], g.pname[2 + i]),
              "MAP fi_addr %d (%#llx): lookup", i, ULL(g.peer_fmt[i]));
    CHECK(lookup_is(g.av, g.peer, g.pname[0]) && lookup_is(g.av, g.peer_sel, g.pname[1]),
          "fi_av_lookup: not the names inserted");
    uint8_t small[4];
    size_t len = sizeof(small);
    CHECK(fi_av_lookup(g.av, g.peer, small, &len) == 0 && len == g.namelen &&
              !memcmp(small, g.pname[0], 4),
          "fi_av_lookup into 4 bytes: len %zu", len);
    char s[4 * FI_NAME_MAX], tiny[8];
    size_t slen = sizeof(s), tlen = sizeof(tiny);
    const char *r = fi_av_straddr(g.av, g.pname[0], s, &slen);
    CHECK(r == s && strlen(s) > 0 && slen == strlen(s) + 1, "fi_av_straddr: len %zu", slen);
    fi_av_straddr(g.av, g.pname[0], tiny, &tlen);
    CHECK(tlen == slen && strnlen(tiny, sizeof(tiny)) < sizeof(tiny),
          "fi_av_straddr into 8 bytes: len %zu (want %zu), or not terminated", tlen, slen);
    /* Garbage is refused (fi_av(3): fewer inserted, fi_addr FI_ADDR_NOTAVAIL). */
    struct fid_av *av = NULL;
    struct fi_av_attr at = {.type = FI_AV_TABLE};
    CHECK_RC(fi_av_open(g.dom, &at, &av, NULL), "fi_av_open");
    uint8_t *junk = xmalloc(2 * g.namelen); /* exactly: ASan sees any over-read */
    srand((unsigned)getpid());
    for (int k = 0; av && k < 20; k++) {
        for (size_t i = 0; i < g.namelen; i++)
            junk[i] = (uint8_t)rand();
        if (k == 1) /* a real name with a bit flipped */
            memcpy(junk, g.pname[0], g.namelen), junk[g.namelen / 2] ^= 4;
        junk[2] = k == 2 ? 0xff : junk[2]; /* the most rails a name byte can claim */
        memcpy(junk + g.namelen, g.pname[0], g.namelen);
        fi_addr_t a[2] = {0, 0};
        int n = k < 10 ? 1 : 2, rc = fi_av_insert(av, junk, (size_t)n, a, 0, NULL);
        CHECK(rc == n - 1 && a[0] == FI_ADDR_NOTAVAIL, "garbage %d: %d inserted, fi_addr %#llx", k,
              rc, ULL(a[0]));
        CHECK(n == 1 || (a[1] != FI_ADDR_NOTAVAIL && lookup_is(av, a[1], g.pname[0])),
              "a good name after garbage: fi_addr %#llx", ULL(a[1]));
    }
    drop(junk);
    if (av)
        CHECK_RC(fi_close(&av->fid), "fi_close av");
}

/* 0 B to 16 MiB: untagged parent -> child, tagged child -> parent. */
static void sizes(bool tagged)
{
    static const size_t sz[] = {0, 1, 8, 4096, 32768, 65536, MIB, 16 * MIB};
    enum { N = sizeof(sz) / sizeof(sz[0]) };
    struct msg *m = msgs(N, sz, tagged ? 0x10 : UNTAGGED, 1);
    if (tagged ? !g.parent : g.parent) {
        barrier();
        msgs_send(g.ep, g.peer, m, N);
        msgs_sent(g.tx, m, N);
    } else {
        msgs_recv(m, N);
        barrier();
        msgs_received(m, N, g.peer); /* FI_SOURCE: fi_cq_readfrom names the sender */
    }
    msgs_free(m, N);
}
static void t_msg_sizes(void)
{
    sizes(false);
}
static void t_tagged_sizes(void)
{
    sizes(true);
}

/* fi_sendv/fi_recvv and the tagged forms: 4 iovecs cut apart differently. */
static void t_iov(void)
{
    static const size_t cut[2][2][4] = {{{3, 5, 7, 11}, {1, 333, 4097, 0}},    /* sender */
                                        {{7, 1, 17, 1}, {7000, 1, 20000, 0}}}; /* receiver */
    size_t len[2] = {26, g.big + 4431};
    struct msg *m = msgs(2, len, UNTAGGED, 40);
    m[1].tag = 0x42;
    for (int k = 0; k < 2; k++) {
        struct iovec iov[4];
        for (size_t i = 0, off = 0; i < 4; off += iov[i++].iov_len) {
            size_t l = cut[!g.parent][k][i];
            iov[i] = (struct iovec){m[k].buf + off, l ? l : len[k] - off};
        }
        if (g.parent)
            fill(m[k].buf, len[k], m[k].seed);
        if (g.parent && !k)
            POST(fi_sendv(g.ep, iov, NULL, 4, g.peer, &m[k].ctx));
        else if (g.parent)
            POST(fi_tsendv(g.ep, iov, NULL, 4, g.peer, 0x42, &m[k].ctx));
        else if (!k)
            POST(fi_recvv(g.ep, iov, NULL, 4, FI_ADDR_UNSPEC, &m[k].ctx));
        else
            POST(fi_trecvv(g.ep, iov, NULL, 4, FI_ADDR_UNSPEC, 0x42, 0, &m[k].ctx));
    }
    if (g.parent)
        msgs_sent(g.tx, m, 2);
    else
        msgs_received(m, 2, g.peer);
    msgs_free(m, 2);
}

/* fi_inject/fi_tinject: the buffer is free on return; no CQ entry, but
 * the counter counts them (fi_endpoint(3), FI_SELECTIVE_COMPLETION). The
 * FI_INJECT flag of fi_sendmsg asks only for the buffer back: its
 * completion still comes (fi_msg(3)). Whatever the eager limit (the
 * small_eager run lowers it below inject_size). */
static void t_inject(void)
{
    size_t len[3] = {100, g.info->tx_attr->inject_size, 200};
    struct msg *m = msgs(3, len, UNTAGGED, 60);
    m[1].tag = 0x61;
    if (g.parent) {
        uint64_t s0 = fi_cntr_read(g.scntr);
        fill(m[0].buf, len[0], m[0].seed);
        POST(fi_inject(g.ep, m[0].buf, len[0], g.peer));
        memset(m[0].buf, 0, len[0]);
        fill(m[1].buf, len[1], m[1].seed);
        POST(fi_tinject(g.ep, m[1].buf, len[1], g.peer, 0x61));
        memset(m[1].buf, 0, len[1]);
        struct comp c;
        CHECK(!get(g.tx, &c, 200), "a completion (ctx %p) for an inject", c.ctx);
        fill(m[2].buf, len[2], m[2].seed);
        struct iovec v = {m[2].buf, len[2]};
        struct fi_msg msg = {.msg_iov = &v, .iov_count = 1, .addr = g.peer,
                             .context = &m[2].ctx};
        POST(fi_sendmsg(g.ep, &msg, FI_INJECT | FI_COMPLETION));
        memset(m[2].buf, 0, len[2]);
        get_ctx(g.tx, &m[2].ctx, 0, NULL, "fi_sendmsg with FI_INJECT | FI_COMPLETION");
        CHECK(fi_cntr_wait(g.scntr, s0 + 3, TMO) == 0, "send counter %llu, want %llu",
              ULL(fi_cntr_read(g.scntr)), ULL(s0 + 3));
    } else {
        msgs_recv(m, 3);
        msgs_received(m, 3, g.peer);
    }
    msgs_free(m, 3);
}

/* Remote CQ data: senddata, tsenddata (small, rendezvous), tinjectdata. */
static void t_cq_data(void)
{
    enum { N = 5 }; /* the last is the inject: no completion at the sender */
    static const uint64_t data[N] = {0xD0000000000000A0ull, 0xA1, 0xA2, 0, 0xA4};
    size_t len[N] = {100, 100, MIB, 10, 64};
    struct msg *m = msgs(N, len, 0x70, 70);
    m[0].tag = m[3].tag = UNTAGGED;
    if (g.parent) {
        barrier();
        for (int i = 0; i < N; i++)
            fill(m[i].buf, len[i], m[i].seed);
        POST(fi_senddata(g.ep, m[0].buf, len[0], NULL, data[0], g.peer, &m[0].ctx));
        for (int i = 1; i < 3; i++)
            POST(fi_tsenddata(g.ep, m[i].buf, len[i], NULL, data[i], g.peer, m[i].tag, &m[i].ctx));
        POST(fi_send(g.ep, m[3].buf, len[3], NULL, g.peer, &m[3].ctx));
        POST(fi_tinjectdata(g.ep, m[4].buf, len[4], data[4], g.peer, m[4].tag));
        msgs_sent(g.tx, m, N - 1);
    } else {
        msgs_recv(m, N);
        barrier();
        msgs_received(m, N, g.peer);
        for (int i = 0; i < N && !g.failed; i++)
            CHECK(!!(m[i].c.flags & FI_REMOTE_CQ_DATA) == (i != 3) && m[i].c.data == data[i],
                  "message %d: flags %#llx, data %#llx", i, ULL(m[i].c.flags), ULL(m[i].c.data));
    }
    msgs_free(m, N);
}

/* FI_DIRECTED_RECV: a receive for one source ignores another's message. */
static void t_directed_recv(void)
{
    size_t len[2] = {64, 64};
    struct msg *m = msgs(2, len, 0x500, 81);
    m[1].tag = 0x500; /* m[0] from the child's main ep, m[1] from its other one */
    if (g.parent) {
        POST(fi_trecv(g.ep, m[0].buf, 64, NULL, g.peer, 0x500, 0, &m[0].ctx));
        barrier(); /* the child's other endpoint sends */
        barrier();
        struct comp c;
        CHECK(!get(g.rx, &c, 200), "the directed receive took another source's message");
        msgs_recv(m + 1, 1); /* any source */
        msgs_received(m + 1, 1, g.peer_sel);
        barrier();
        msgs_received(m, 1, g.peer);
    } else {
        barrier();
        fill(m[1].buf, 64, m[1].seed); /* selective, without FI_COMPLETION: no entry */
        POST(fi_tsend(g.sel, m[1].buf, 64, NULL, g.peer, 0x500, NULL));
        progress_for(100);
        barrier();
        barrier();
        msgs_send(g.ep, g.peer, m, 1);
        msgs_sent(g.tx, m, 1);
    }
    msgs_free(m, 2);
}

/* Tags: ignore bits, exact matches, the top bit; a message no receive
 * matches (0x3401, sent before 0x3400) waits for one. */
static void t_tag_ignore(void)
{
    enum { N = 4 };
    static const uint64_t stag[N] = {0x12AB, 0x3400, 0xF000000000000123ull, 0x3401};
    static const uint64_t rtag[N] = {0x1200, 0x3400, 0xF000000000000000ull, 0x3401};
    static const uint64_t ign[N] = {0xFF, 0, 0xFFF, 0};
    size_t len[N] = {32, 32, 32, 32};
    struct msg *m = msgs(N, len, 0, 90);
    for (int i = 0; i < N; i++)
        m[i].tag = stag[i];
    if (g.parent) {
        barrier();
        msgs_send(g.ep, g.peer, m + 3, 1);
        msgs_send(g.ep, g.peer, m, 3);
        msgs_sent(g.tx, m, N);
    } else {
        for (int i = 0; i < 3; i++)
            POST(fi_trecv(g.ep, m[i].buf, 32, NULL, FI_ADDR_UNSPEC, rtag[i], ign[i], &m[i].ctx));
        barrier();
        msgs_received(m, 3, g.peer);
        msgs_recv(m + 3, 1);
        msgs_received(m + 3, 1, g.peer);
    }
    msgs_free(m, N);
}

/* 1000 messages, small and rendezvous, arrive in send order (FI_ORDER_SAS);
 * half the receives are posted only after the first half completed. */
static void t_ordering(void)
{
    enum { N = 1000 };
    CHECK(g.info->tx_attr->msg_order & g.info->rx_attr->msg_order & FI_ORDER_SAS,
          "FI_ORDER_SAS not offered");
    size_t *len = calloc(N, sizeof(*len));
    for (int i = 0; i < N; i++)
        len[i] = i % 10 == 9 ? g.big + (size_t)i : (size_t)(i * 37) % 2000;
    struct msg *m = msgs(N, len, UNTAGGED, 0);
    if (g.parent) {
        barrier();
        msgs_send(g.ep, g.peer, m, N);
        msgs_sent(g.tx, m, N);
    } else {
        msgs_recv(m, N / 2);
        barrier();
        msgs_received(m, N / 2, g.peer);
        msgs_recv(m + N / 2, N / 2);
        msgs_received(m + N / 2, N / 2, g.peer);
    }
    msgs_free(m, N);
    free(len);
}

/* Sends before the receives: small (buffered) and large (rendezvous). */
static void t_unexpected(void)
{
    size_t len[4] = {100, MIB, 3000, 4 * MIB};
    struct msg *m = msgs(4, len, 0x600, 100);
    m[2].tag = m[3].tag = UNTAGGED;
    if (g.parent) {
        msgs_send(g.ep, g.peer, m, 4);
        barrier();
        msgs_sent(g.tx, m, 4);
    } else {
        barrier();
        progress_for(50);    /* all arrives, unmatched */
        msgs_recv(m + 1, 1); /* the tagged ones in reverse */
        msgs_recv(m, 1);
        msgs_recv(m + 2, 2);
        msgs_received(m, 4, g.peer);
    }
    msgs_free(m, 4);
}

/* Messages just under the eager limit into a receiver that does not
 * progress: its ring fills, and fastmsg may take part of a message
 * (docs/shm.md, "Prefixes"). Each must arrive whole, and once. */
static void t_backpressure(void)
{
    enum { N = 64 };
    size_t len[N + 1];
    for (int i = 0; i <= N; i++)
        len[i] = g.eager > 1000 ? g.eager - 1000 : g.eager;
    struct msg *m = msgs(N + 1, len, UNTAGGED, 160);
    if (g.parent) {
        barrier();
        msgs_send(g.ep, g.peer, m, N);
        barrier();
        msgs_sent(g.tx, m, N);
    } else {
        barrier();
        g.nopump = true; /* the sender fills our ring meanwhile */
        barrier();
        g.nopump = false;
        msgs_recv(m, N + 1);
        msgs_received(m, N, g.peer);
        CHECK(!get(g.rx, &m[N].c, 200), "one more message than sent (len %zu)", m[N].c.len);
        if (!fi_cancel(&g.ep->fid, &m[N].ctx))
            get_ctx(g.rx, &m[N].ctx, FI_ECANCELED, NULL, "cancel");
    }
    msgs_free(m, N + 1);
}

/* Truncation: an error entry FI_ETRUNC, len what fit, olen the rest. */
static void t_truncation(void)
{
    size_t slen[3] = {1024, MIB, 1024}, rlen[3] = {100, 65536, 100};
    struct msg *m = msgs(3, slen, 0x800, 110);
    if (g.parent) {
        barrier();
        msgs_send(g.ep, g.peer, m, 3);
        barrier();
        msgs_sent(g.tx, m, 3);
        msgs_free(m, 3);
        return;
    }
    for (int i = 0; i < 3; i++)
        m[i].len = rlen[i];
    msgs_recv(m, 2); /* the third arrives before its receive */
    barrier();
    barrier();
    msgs_recv(m + 2, 1);
    for (int i = 0; i < 3; i++) {
        struct comp c;
        if (!get(g.rx, &c, TMO)) {
            CHECK(0, "%d of 3 truncated messages", i);
            break;
        }
        int k = c.ctx == &m[0].ctx ? 0 : c.ctx == &m[1].ctx ? 1 : 2;
        CHECK(c.err == FI_ETRUNC && c.len == rlen[k] && c.olen == slen[k] - rlen[k] &&
                  c.tag == m[k].tag && (c.flags & FI_RECV),
              "message %d: err %d len %zu olen %zu tag %#llx flags %#llx, want FI_ETRUNC %zu %zu",
              k, c.err, c.len, c.olen, ULL(c.tag), ULL(c.flags), rlen[k], slen[k] - rlen[k]);
        CHECK(bad(m[k].buf, rlen[k], m[k].seed) < 0 && m[k].buf[rlen[k]] == 0xEE,
              "message %d: the part that fit differs, or more was written", k);
    }
    struct fi_cq_err_entry ee;
    memset(&ee, 0, sizeof(ee));
    ssize_t r = fi_cq_readerr(g.rx, &ee, 0);
    CHECK(r == -FI_EAGAIN, "fi_cq_readerr with no error queued: %zd, want -FI_EAGAIN", r);
    msgs_free(m, 3);
}

/* A FI_PEEK / FI_CLAIM receive of tag (no buffer, unless m); its completion. */
static bool peek(uint64_t tag, uint64_t flags, void *ctx, struct msg *m, struct comp *c)
{
    struct iovec iov = {m ? m->buf : NULL, m ? m->len : 0};
    struct fi_msg_tagged t = {.msg_iov = m ? &iov : NULL,
                              .iov_count = m ? 1 : 0,
                              .addr = FI_ADDR_UNSPEC,
                              .tag = tag,
                              .context = ctx};
    POST(fi_trecvmsg(g.ep, &t, flags));
    return get(g.rx, c, TMO) && c->ctx == ctx;
}

/* FI_PEEK (with flags) until the message has arrived (manual progress). */
static void peek_found(uint64_t tag, uint64_t flags, void *ctx, size_t len)
{
    struct comp c;
    for (uint64_t end = now_ms() + TMO; !g.failed;) {
        if (!peek(tag, FI_PEEK | flags, ctx, NULL, &c)) {
            CHECK(0, "FI_PEEK: no completion for its context");
            return;
        }
        if (!c.err) {
            CHECK(c.len == len && c.tag == tag && (c.flags & FI_RECV),
                  "FI_PEEK: len %zu tag %#llx flags %#llx, want %zu %#llx", c.len, ULL(c.tag),
                  ULL(c.flags), len, ULL(tag));
            return;
        }
        CHECK(c.err == FI_ENOMSG && now_ms() < end, "FI_PEEK: err %d (want FI_ENOMSG until found)",
              c.err);
        pump();
    }
}

/* FI_PEEK, FI_CLAIM, FI_DISCARD (fi_tagged(3)) on six messages of a tag,
 * small then rendezvous. */
static void t_peek_claim_discard(void)
{
    for (int kind = 0; kind < 2 && !g.failed; kind++) {
        size_t len[6];
        for (int i = 0; i < 6; i++)
            len[i] = kind ? g.big : 100;
        uint64_t tag = kind ? 0x200 : 0x100;
        struct msg *m = msgs(6, len, tag, kind ? 200 : 100);
        for (int i = 0; i < 6; i++)
            m[i].tag = tag;
        if (g.parent) {
            msgs_send(g.ep, g.peer, m, 6);
            barrier();
            msgs_sent(g.tx, m, 6); /* the discarded ones end too */
            msgs_free(m, 6);
            continue;
        }
        barrier();
        struct fi_context cp, cn, cd, ca, cb;
        struct comp c;
        peek_found(tag, 0, &cp, len[0]);
        /* Not there: an error entry FI_ENOMSG. */
        if (peek(tag + 1, FI_PEEK, &cn, NULL, &c))
            CHECK(c.err == FI_ENOMSG, "FI_PEEK of an absent tag: err %d", c.err);
        /* PEEK|CLAIM m0; a receive then gets m1, the FI_CLAIM receive m0. */
        peek_found(tag, FI_CLAIM, &ca, len[0]);
        msgs_recv(m + 1, 1);
        msgs_received(m + 1, 1, g.peer);
        if (peek(tag, FI_CLAIM, &ca, m, &m[0].c)) {
            CHECK(!m[0].c.err, "FI_CLAIM receive: err %d", m[0].c.err);
            rx_check(m, "FI_CLAIM receive");
        }
        /* PEEK|DISCARD drops m2: the next receive gets m3. */
        peek_found(tag, FI_DISCARD, &cd, len[0]);
        msgs_recv(m + 3, 1);
        msgs_received(m + 3, 1, g.peer);
        /* PEEK|CLAIM m4, then CLAIM|DISCARD it: the next receive gets m5. */
        peek_found(tag, FI_CLAIM, &cb, len[0]);
        struct fi_msg_tagged t = {.addr = FI_ADDR_UNSPEC, .tag = tag, .context = &cb};
        POST(fi_trecvmsg(g.ep, &t, FI_CLAIM | FI_DISCARD));
        if (get(g.rx, &c, 200)) /* fi_tagged(3) does not say whether it completes */
            CHECK(c.ctx == &cb && !c.err, "FI_CLAIM|FI_DISCARD: ctx %p err %d", c.ctx, c.err);
        msgs_recv(m + 5, 1);
        msgs_received(m + 5, 1, g.peer);
        if (peek(tag, FI_PEEK, &cn, NULL, &c))
            CHECK(c.err == FI_ENOMSG, "a seventh message: err %d len %zu", c.err, c.len);
        msgs_free(m, 6);
    }
}

/* fi_cancel: an error entry FI_ECANCELED with the context; nothing for an
 * unknown context; the message goes to a later receive. */
static void t_cancel(void)
{
    size_t len[3] = {64, 64, 64};
    struct msg *m = msgs(3, len, 0x777, 120);
    m[1].tag = UNTAGGED;
    m[2].tag = 0x777;
    if (g.parent) {
        barrier();
        msgs_send(g.ep, g.peer, m + 2, 1);
        msgs_sent(g.tx, m + 2, 1);
    } else {
        msgs_recv(m, 2);
        for (int i = 0; i < 2; i++) {
            CHECK_RC(fi_cancel(&g.ep->fid, &m[i].ctx), "fi_cancel");
            get_ctx(g.rx, &m[i].ctx, FI_ECANCELED, NULL, "cancelled receive");
        }
        /* fi_endpoint(3) names no code for an unknown context: 0 or -FI_ENOENT. */
        struct fi_context unknown;
        ssize_t rc = fi_cancel(&g.ep->fid, &unknown);
        CHECK(rc == 0 || rc == -FI_ENOENT, "fi_cancel of an unknown context: %zd", rc);
        barrier();
        msgs_recv(m + 2, 1);
        msgs_received(m + 2, 1, g.peer);
        CHECK(m[0].buf[0] == 0xEE, "the cancelled receive's buffer was written");
    }
    msgs_free(m, 3);
}

/* Posts len bytes at big as a multi-receive buffer of context mc. */
static void post_multi(uint8_t *big, size_t len, struct fi_context *mc)
{
    struct iovec iov = {big, len};
    struct fi_msg fm = {.msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = mc};
    POST(fi_recvmsg(g.ep, &fm, FI_MULTI_RECV));
}

/* FI_MULTI_RECV: 64 KiB take 1000-byte messages until less than
 * FI_OPT_MIN_MULTI_RECV is left, then the rest go to other receives. */
static void t_multi_recv(void)
{
    enum { N = 70, LEN = 1000, BUF = 65536, MIN = 4096 };
    size_t len[N];
    for (int i = 0; i < N; i++)
        len[i] = LEN;
    struct msg *m = msgs(N, len, UNTAGGED, 130);
    if (g.parent) {
        barrier();
        msgs_send(g.ep, g.peer, m, N);
        msgs_sent(g.tx, m, N);
        msgs_free(m, N);
        return;
    }
    size_t min = MIN, got = 0, glen = sizeof(got);
    CHECK_RC(fi_setopt(&g.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)),
             "fi_setopt FI_OPT_MIN_MULTI_RECV");
    CHECK(!fi_getopt(&g.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &got, &glen) && got == MIN,
          "fi_getopt FI_OPT_MIN_MULTI_RECV: %zu", got);
    uint8_t *big = xmalloc(BUF);
    struct fi_context mc;
    post_multi(big, BUF, &mc);
    barrier();
    int k = 0;
    size_t end = 0; /* where the last message ended */
    struct comp c;
    /* fi_cq(3): FI_MULTI_RECV on the last message, or on an entry of its own */
    for (bool released = false; !released && !g.failed;) {
        if (!get_ctx(g.rx, &mc, 0, &c, "multi-recv"))
            break;
        if (c.flags & FI_RECV) {
            uint8_t *p = c.buf;
            CHECK(BUF - end >= MIN, "message %d placed after the buffer should be released", k);
            CHECK(p >= big + end && p + c.len <= big + BUF, "message %d: buf %p outside the rest",
                  k, (void *)p);
            if (g.failed)
                break;
            m[k].c = c;
            memcpy(m[k].buf, p, LEN);
            rx_check(&m[k++], "multi-recv message");
            end = (size_t)(p - big) + c.len;
        }
        released = c.flags & FI_MULTI_RECV;
    }
    CHECK(BUF - end < MIN, "released with %zu bytes left (minimum %d)", BUF - end, MIN);
    msgs_recv(m + k, N - k);
    msgs_received(m + k, N - k, g.peer);
    drop(big);
    msgs_free(m, N);
}

/* A multi-receive buffer is released with its last message, not with the
 * one that used it up: a 40,000-byte message waits for its data (a
 * rendezvous across nodes, or without process_vm_readv) while a small one
 * after it fills the buffer. Released early, the buffer would be reposted
 * under the first message's data. */
static void t_multi_recv_late(void)
{
    enum { BUF = 45000, MIN = 4096 };
    size_t len[2] = {40000, 1000};
    struct msg *m = msgs(2, len, UNTAGGED, 140);
    if (g.parent) {
        barrier();
        msgs_send(g.ep, g.peer, m, 2);
        msgs_sent(g.tx, m, 2);
        msgs_free(m, 2);
        return;
    }
    size_t min = MIN;
    CHECK_RC(fi_setopt(&g.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)),
             "fi_setopt FI_OPT_MIN_MULTI_RECV");
    uint8_t *big = xmalloc(BUF);
    struct fi_context mc;
    post_multi(big, BUF, &mc);
    barrier();
    int k = 0;
    struct comp c;
    for (bool released = false; !released && !g.failed;) {
        if (!get_ctx(g.rx, &mc, 0, &c, "multi-recv"))
            break;
        if (c.flags & FI_RECV) {
            int i = c.len == len[0] ? 0 : 1;
            CHECK(c.len == len[i], "multi-recv: a message of %zu bytes", c.len);
            m[i].c = c;
            memcpy(m[i].buf, c.buf, c.len < len[i] ? c.len : len[i]);
            rx_check(&m[i], "multi-recv message");
            k++;
        }
        released = c.flags & FI_MULTI_RECV;
    }
    CHECK(k == 2, "the buffer was released after %d of its 2 messages", k);
    CHECK(!get(g.rx, &c, 200), "a completion (ctx %p, %zu bytes) after the release", c.ctx,
          c.len);
    size_t zero = 64;
    fi_setopt(&g.ep->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &zero, sizeof(zero));
    drop(big);
    msgs_free(m, 2);
}

/* FI_DELIVERY_COMPLETE on a rendezvous send: its completion means the data
 * is in the receive buffer (fi_cq(3)). The receiver posts its receive for
 * an unexpected RTS and then makes no progress for 500 ms: a sender told
 * "complete" meanwhile must find the data already placed (as a
 * process_vm_readv receive places it at once), not still in transit. */
static void t_delivery_complete(void)
{
    enum { LEN = 16 * 1024 }; /* a rendezvous on this node (above 8 KiB) that fits a ring */
    uint8_t *buf = xmalloc(LEN);
    struct fi_context ctx;
    char t;
    if (g.parent) {
        fill(buf, LEN, 190);
        barrier();
        struct iovec v = {buf, LEN};
        struct fi_msg m = {.msg_iov = &v, .iov_count = 1, .addr = g.peer, .context = &ctx};
        POST(fi_sendmsg(g.ep, &m, FI_DELIVERY_COMPLETE | FI_COMPLETION));
        get_ctx(g.tx, &ctx, 0, NULL, "a FI_DELIVERY_COMPLETE send");
        xsend("t", 1);
        barrier();
        drop(buf);
        return;
    }
    memset(buf, 0, LEN);
    barrier();
    progress_for(100); /* its RTS arrives, unexpected */
    POST(fi_recv(g.ep, buf, LEN, NULL, FI_ADDR_UNSPEC, &ctx));
    struct pollfd pfd = {g.sock, POLLIN, 0};
    if (poll(&pfd, 1, 500) == 1) /* the sender says complete, and we did no progress */
        CHECK(bad(buf, LEN, 190) < 0, "the send completed before its data was delivered");
    get_ctx(g.rx, &ctx, 0, NULL, "the receive of a FI_DELIVERY_COMPLETE send");
    CHECK(bad(buf, LEN, 190) < 0, "FI_DELIVERY_COMPLETE send: data differs");
    CHECK(xrecv(&t, 1, TMO) && t == 't', "no word from the sender");
    barrier();
    drop(buf);
}

/* FI_SELECTIVE_COMPLETION: only sends with FI_COMPLETION are reported;
 * of a multi-receive without it, only the release (fi_msg(3)). */
static void t_selective_completion(void)
{
    enum { N = 5, NM = 4, MLEN = 1000 }; /* COMPLETION: small, rendezvous; not: 3 */
    size_t len[N] = {50, g.big, 50, 50, g.big}, mlen[NM] = {MLEN, MLEN, MLEN, MLEN};
    struct msg *m = msgs(N, len, UNTAGGED, 140), *mm = msgs(NM, mlen, UNTAGGED, 145);
    if (!g.parent) {
        size_t min = 1024; /* 4096 bytes: released after the fourth message */
        CHECK_RC(fi_setopt(&g.sel->fid, FI_OPT_ENDPOINT, FI_OPT_MIN_MULTI_RECV, &min, sizeof(min)),
                 "fi_setopt");
        uint8_t *buf = xmalloc(NM * MLEN + 96);
        struct fi_context mc;
        struct iovec iov = {buf, NM * MLEN + 96};
        struct fi_msg fm = {
            .msg_iov = &iov, .iov_count = 1, .addr = FI_ADDR_UNSPEC, .context = &mc};
        POST(fi_recvmsg(g.sel, &fm, FI_MULTI_RECV));
        msgs_recv(m, N);
        barrier();
        msgs_received(m, N, g.peer_sel);
        struct comp c = {0};
        while (get(g.sel_rx, &c, TMO) && !(c.flags & FI_MULTI_RECV))
            CHECK(0, "a multi-receive entry without FI_COMPLETION: flags %#llx", ULL(c.flags));
        CHECK(c.ctx == &mc && (c.flags & FI_MULTI_RECV) && !c.err,
              "no FI_MULTI_RECV entry with FI_SELECTIVE_COMPLETION: ctx %p flags %#llx", c.ctx,
              ULL(c.flags));
        CHECK(!(c.flags & FI_RECV) || bad(c.buf, MLEN, 148) < 0, "the last message differs");
        barrier();
        drop(buf);
    } else {
        barrier();
        for (int i = 0; i < N; i++) {
            fill(m[i].buf, len[i], m[i].seed);
            struct iovec iov = {m[i].buf, len[i]};
            struct fi_msg fm = {
                .msg_iov = &iov, .iov_count = 1, .addr = g.peer, .context = &m[i].ctx};
            if (i == 3)
                POST(fi_send(g.sel, m[i].buf, len[i], NULL, g.peer, &m[i].ctx));
            else
                POST(fi_sendmsg(g.sel, &fm, i < 2 ? FI_COMPLETION : 0));
        }
        msgs_send(g.ep, g.peer_sel, mm, NM);
        msgs_sent(g.sel_tx, m, 2);
        msgs_sent(g.tx, mm, NM);
        barrier(); /* the child has them all */
        struct comp c;
        CHECK(!get(g.sel_tx, &c, 100), "a completion for a send without FI_COMPLETION (%p)", c.ctx);
    }
    msgs_free(m, N);
    msgs_free(mm, NM);
}

/* Counters: the count, fi_cntr_wait reaching a threshold or timing out. */
static void t_counters(void)
{
    size_t len[5] = {40, 40, 40, 40, 40};
    struct msg *m = msgs(5, len, UNTAGGED, 150);
    struct fid_cntr *cn = g.parent ? g.scntr : g.rcntr;
    uint64_t v0 = fi_cntr_read(cn), e0 = fi_cntr_readerr(cn);
    if (g.parent) {
        barrier();
        msgs_send(g.ep, g.peer, m, 5);
    } else {
        msgs_recv(m, 5);
        barrier();
    }
    CHECK_RC(fi_cntr_wait(cn, v0 + 5, TMO), "fi_cntr_wait to the count");
    CHECK(fi_cntr_read(cn) == v0 + 5, "counter %llu, want %llu", ULL(fi_cntr_read(cn)),
          ULL(v0 + 5));
    uint64_t t0 = now_ms();
    int rc = fi_cntr_wait(cn, v0 + 6, 100), dt = (int)(now_ms() - t0);
    CHECK(rc == -FI_ETIMEDOUT, "fi_cntr_wait past the count: %d, want -FI_ETIMEDOUT", rc);
    CHECK(dt >= 90 && dt < 2000, "fi_cntr_wait(100 ms) took %d ms", dt);
    CHECK(fi_cntr_readerr(cn) == e0, "the error count moved");
    if (g.parent) /* the same ops' CQ entries */
        msgs_sent(g.tx, m, 5);
    else
        msgs_received(m, 5, g.peer);
    msgs_free(m, 5);
}

/* fi_cq_sread: -FI_EAGAIN once the timeout passed (fi_cq(3)), the entry
 * as soon as one comes. */
static void t_cq_sread(void)
{
    size_t len[1] = {16};
    struct msg *m = msgs(1, len, UNTAGGED, 155);
    if (g.parent) {
        barrier();
        usleep(100 * 1000);
        msgs_send(g.ep, g.peer, m, 1);
        msgs_sent(g.tx, m, 1);
    } else {
        struct fi_cq_tagged_entry e;
        uint64_t t0 = now_ms();
        ssize_t n = fi_cq_sread(g.rx, &e, 1, NULL, 200);
        int dt = (int)(now_ms() - t0);
        CHECK(n == -FI_EAGAIN, "fi_cq_sread with nothing to read: %zd, want -FI_EAGAIN", n);
        CHECK(dt >= 190 && dt < 2000, "fi_cq_sread(200 ms) took %d ms", dt);
        msgs_recv(m, 1);
        barrier();
        t0 = now_ms();
        n = fi_cq_sread(g.rx, &e, 1, NULL, TMO);
        dt = (int)(now_ms() - t0);
        CHECK(n == 1 && e.op_context == &m[0].ctx && dt < TMO - 1000,
              "fi_cq_sread: %zd, ctx %p, after %d ms", n, n == 1 ? e.op_context : NULL, dt);
    }
    msgs_free(m, 1);
}

/* Where the initiator's RMA goes: the target's key and address. */
struct remote {
    uint64_t key, addr;
};

/* Registers len bytes at reg for remote reads and writes (under key, if
 * the consumer picks keys) and tells the initiator where they are. */
static struct fid_mr *expose(uint8_t *reg, size_t len, uint64_t key)
{
    uint64_t mode = (uint64_t)g.info->domain_attr->mr_mode;
    struct fid_mr *mr = NULL;
    int rc = fi_mr_reg(g.dom, reg, len, FI_REMOTE_READ | FI_REMOTE_WRITE, 0, key, 0, &mr, NULL);
    CHECK_RC(rc, "fi_mr_reg");
    if (!rc && (mode & FI_MR_ENDPOINT)) {
        CHECK_RC(fi_mr_bind(mr, &g.ep->fid, 0), "fi_mr_bind");
        CHECK_RC(fi_mr_enable(mr), "fi_mr_enable");
    }
    /* fi_mr(3): virtual addresses with FI_MR_VIRT_ADDR, else offsets. */
    struct remote rem = {mr ? fi_mr_key(mr) : 0,
                         (mode & FI_MR_VIRT_ADDR) ? (uint64_t)(uintptr_t)reg : 0};
    xsend(&rem, sizeof(rem));
    return mr;
}

/* RMA: writes and reads of 8 B and 1 MiB, writedata, and refused ones (a
 * wrong key, past the end) that fail at the initiator only. */
static void t_rma(void)
{
    enum { REG = 2 * MIB + 8192, RD = MIB + 8192 }; /* the region; where reads read */
    static const struct {
        size_t off, len;
        unsigned seed;
    } w[] = {{0, 8, 151}, {4096, MIB, 152}, {100, 64, 153}, {16, 8, 154}};
    struct remote rem = {0, 0};
    uint8_t *reg = xmalloc(REG);
    if (!g.parent) {
        memset(reg, 0, REG);
        fill(reg + RD, MIB, 150);
        struct fid_mr *mr = expose(reg, REG, 0xC0DE);
        struct comp c;
        if (get_ctx(g.rx, NULL, 0, &c, "fi_writedata at the target")) {
            uint64_t want = FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
            CHECK((c.flags & want) == want && c.data == 0xDA7A,
                  "writedata at the target: flags %#llx data %#llx", ULL(c.flags), ULL(c.data));
            if (FI_VERSION_GE(fi_version(), FI_VERSION(1, 18))) /* fi_cq(3) from 1.18 on */
                CHECK(c.len == 64, "writedata at the target: len %zu, want 64", c.len);
        }
        barrier(); /* the initiator is done (the barrier progresses us) */
        for (int i = 0; i < 4; i++)
            CHECK(bad(reg + w[i].off, w[i].len, w[i].seed) < 0, "write %d: target memory", i);
        CHECK(!reg[8] && !reg[4095] && !reg[4096 + MIB] && bad(reg + RD, MIB, 150) < 0,
              "memory written outside the writes");
        if (mr)
            CHECK_RC(fi_close(&mr->fid), "fi_close mr");
        drop(reg);
        return;
    }
    CHECK(xrecv(&rem, sizeof(rem), TMO), "no key from the target");
    for (int i = 0; i < 4; i++)
        fill(reg + w[i].off, w[i].len, w[i].seed);
    uint8_t *r8 = xmalloc(8), *r1 = xmalloc(MIB);
    struct fi_context ctx[9];
    uint64_t a = rem.addr, k = rem.key;
    POST(fi_write(g.ep, reg, 8, NULL, g.peer, a, k, &ctx[0]));
    POST(fi_write(g.ep, reg + 4096, MIB, NULL, g.peer, a + 4096, k, &ctx[1]));
    POST(fi_read(g.ep, r8, 8, NULL, g.peer, a + RD, k, &ctx[2]));
    POST(fi_read(g.ep, r1, MIB, NULL, g.peer, a + RD, k, &ctx[3]));
    POST(fi_writedata(g.ep, reg + 100, 64, NULL, 0xDA7A, g.peer, a + 100, k, &ctx[4]));
    POST(fi_write(g.ep, reg, 8, NULL, g.peer, a, k ^ 0x5555, &ctx[5]));
    POST(fi_read(g.ep, r8, 8, NULL, g.peer, a + REG - 4, k, &ctx[6]));
    POST(fi_write(g.ep, reg, 8, NULL, g.peer, a + REG + 4096, k, &ctx[7]));
    for (int n = 0; n < 8 && !g.failed; n++) {
        struct comp c;
        if (!get(g.tx, &c, TMO)) {
            CHECK(0, "%d of 8 RMA completions", n);
            break;
        }
        int i = (int)((struct fi_context *)c.ctx - ctx);
        uint64_t want = FI_RMA | (i == 2 || i == 3 ? FI_READ : FI_WRITE);
        CHECK(i >= 0 && i < 8, "a completion for %p", c.ctx);
        CHECK(i < 5 ? !c.err && (c.flags & want) == want : c.err != 0,
              "RMA %d: err %d flags %#llx (5-7 are refused)", i, c.err, ULL(c.flags));
    }
    CHECK(bad(r8, 8, 150) < 0 && bad(r1, MIB, 150) < 0, "read data differs");
    /* The target lives on. */
    POST(fi_write(g.ep, reg + 16, 8, NULL, g.peer, a + 16, k, &ctx[8]));
    get_ctx(g.tx, &ctx[8], 0, NULL, "a write after refused ones");
    barrier();
    drop(r8), drop(r1), drop(reg);
}

/* FI_ORDER_WAR (advertised): a 1 MiB read, then a write of the same bytes,
 * to one target. The read returns what was there before the write, even
 * when its answer cannot go whole at once and the write's data arrives
 * while it streams. */
static void t_rma_war(void)
{
    struct remote rem = {0, 0};
    uint8_t *reg = xmalloc(MIB);
    if (!g.parent) {
        fill(reg, MIB, 160);
        struct fid_mr *mr = expose(reg, MIB, 0xBEEF);
        barrier(); /* the initiator is done (the barrier progresses us) */
        CHECK(bad(reg, MIB, 161) < 0, "the write after the read: target memory");
        if (mr)
            CHECK_RC(fi_close(&mr->fid), "fi_close mr");
        drop(reg);
        return;
    }
    CHECK(xrecv(&rem, sizeof(rem), TMO), "no key from the target");
    fill(reg, MIB, 161);
    uint8_t *got = xmalloc(MIB);
    struct fi_context ctx[2];
    POST(fi_read(g.ep, got, MIB, NULL, g.peer, rem.addr, rem.key, &ctx[0]));
    POST(fi_write(g.ep, reg, MIB, NULL, g.peer, rem.addr, rem.key, &ctx[1]));
    for (int n = 0; n < 2 && !g.failed; n++) {
        struct comp c;
        if (!get(g.tx, &c, TMO)) {
            CHECK(0, "%d of 2 RMA completions", n);
            break;
        }
        CHECK(!c.err, "RMA %d: err %d", (int)((struct fi_context *)c.ctx - ctx), c.err);
    }
    long b = bad(got, MIB, 160);
    CHECK(b < 0, "the read before the write returned the write's data from byte %ld", b);
    barrier();
    drop(got), drop(reg);
}

/* CQ formats CONTEXT, MSG, DATA: their fields, entries exactly their size. */
static void t_cq_formats(void)
{
    static const size_t esz[NFMT] = {sizeof(struct fi_cq_entry), sizeof(struct fi_cq_msg_entry),
                                     sizeof(struct fi_cq_data_entry)};
    for (int f = 0; f < NFMT; f++) {
        uint8_t b[2][32], out[4 * sizeof(struct fi_cq_data_entry)];
        struct fi_cq_data_entry e[2];
        struct fi_context ctx[2];
        if (g.parent)
            barrier();
        for (int i = 0; i < 2; i++) {
            if (g.parent)
                POST(fi_senddata(g.fmt[f], b[i], 10 + 10 * (size_t)i, NULL, 0xF0 + (uint64_t)f,
                                 g.peer_fmt[f], &ctx[i]));
            else
                POST(fi_recv(g.fmt[f], b[i], 32, NULL, FI_ADDR_UNSPEC, &ctx[i]));
        }
        if (!g.parent)
            barrier();
        int got = 0; /* each read writes exactly its entries */
        for (uint64_t end = now_ms() + TMO; got < 2 && now_ms() < end;) {
            memset(out, 0xA5, sizeof(out));
            ssize_t n = fi_cq_read(g.fmt_cq[f], out, 4);
            if (n == -FI_EAGAIN)
                continue;
            CHECK(n > 0 && n <= 2 - got && out[(size_t)n * esz[f]] == 0xA5,
                  "format %d: fi_cq_read %zd, or more written", f, n);
            for (ssize_t i = 0; i < n && !g.failed; i++)
                memcpy(&e[got++], out + (size_t)i * esz[f], esz[f]);
            if (g.failed)
                break;
        }
        CHECK(got == 2, "format %d: %d of 2 completions", f, got);
        for (int i = 0; i < got && !g.failed; i++) {
            int j = e[i].op_context == &ctx[0] ? 0 : e[i].op_context == &ctx[1] ? 1 : -1;
            uint64_t want = (g.parent ? FI_SEND : FI_RECV) | FI_MSG;
            CHECK(j >= 0, "format %d: op_context %p", f, e[i].op_context);
            CHECK(f == 0 || (e[i].flags & want) == want, "format %d: flags %#llx", f,
                  ULL(e[i].flags));
            CHECK(f == 0 || g.parent || e[i].len == 10 + 10 * (size_t)j, "format %d: len %zu", f,
                  e[i].len);
            CHECK(f < 2 || g.parent || ((e[i].flags & FI_REMOTE_CQ_DATA) && e[i].data == 0xF2),
                  "format DATA: data %#llx", ULL(e[i].data));
        }
    }
}

/* fi_av_remove: the fi_addr is gone (fi_av(3): -FI_EINVAL from lookup and
 * a second remove); a send to it fails rather than crash. */
static void t_av_remove(void)
{
    fi_addr_t a = g.peer_fmt[0];
    CHECK_RC(fi_av_remove(g.av_map, &a, 1, 0), "fi_av_remove");
    uint8_t out[FI_NAME_MAX];
    size_t len = sizeof(out);
    int rc = fi_av_lookup(g.av_map, a, out, &len);
    CHECK(rc == -FI_EINVAL, "fi_av_lookup of a removed fi_addr: %d, want -FI_EINVAL", rc);
    rc = fi_av_remove(g.av_map, &a, 1, 0);
    CHECK(rc == -FI_EINVAL, "fi_av_remove twice: %d, want -FI_EINVAL", rc);
    CHECK(lookup_is(g.av_map, g.peer_fmt[1], g.pname[3]), "the other names changed");
    if (!g.parent)
        return;
    uint8_t b[8] = {0};
    struct fi_context ctx;
    ssize_t r = fi_send(g.fmt[0], b, sizeof(b), NULL, a, &ctx);
    if (r == 0) { /* accepted: then it fails in the CQ */
        struct fi_cq_entry e;
        struct fi_cq_err_entry ee;
        memset(&ee, 0, sizeof(ee));
        for (uint64_t end = now_ms() + TMO; now_ms() < end;)
            if ((r = fi_cq_read(g.fmt_cq[0], &e, 1)) != -FI_EAGAIN)
                break;
        if (r == -FI_EAVAIL)
            fi_cq_readerr(g.fmt_cq[0], &ee, 0);
        CHECK(r == -FI_EAVAIL && ee.op_context == &ctx, "a send to a removed fi_addr: %zd", r);
    }
}

/* The child dies with a directed receive and rendezvous sends towards it
 * pending: they end in errors, soon; later sends fail too. */
static void t_lost_peer(void)
{
    if (!g.parent) {
        char b;
        uint8_t *big = xmalloc(MIB); /* rendezvous whose data never comes */
        struct fi_context bc[2];
        POST(fi_tsend(g.ep, big, MIB, NULL, g.peer, 0x950, &bc[0]));
        POST(fi_tsend(g.ep, big, MIB, NULL, g.peer, 0x951, &bc[1]));
        if (xrecv(&b, 1, 3 * TMO))
            raise(SIGKILL);
        _exit(1);
    }
    size_t len[5] = {64, MIB, MIB, MIB, 10};
    struct msg *m = msgs(5, len, 0x900, 170);
    POST(fi_trecv(g.ep, m[0].buf, 64, NULL, g.peer, 0x900, 0, &m[0].ctx));
    msgs_send(g.ep, g.peer, m + 1, 4);
    /* The child's second rendezvous is held with FI_CLAIM before it dies. */
    struct fi_context claim;
    peek_found(0x951, FI_CLAIM, &claim, MIB);
    xsend("k", 1);
    uint64_t t0 = now_ms();
    struct comp c;
    bool got = get(g.rx, &c, 3 * TMO);
    CHECK(got && c.ctx == &m[0].ctx && c.err, "the directed receive: %s, err %d",
          got ? "completed" : "no completion", got ? c.err : 0);
    /* The child's RTS came before its loss, unexpected; its data never
     * will. A receive for it must not take it (it waited for ever, beyond
     * fi_cancel's reach): it stays posted until cancelled. */
    uint8_t *late = xmalloc(MIB);
    struct fi_context lc;
    POST(fi_trecv(g.ep, late, MIB, NULL, FI_ADDR_UNSPEC, 0x950, 0, &lc));
    CHECK(!get(g.rx, &c, 300), "a receive for a lost peer's RTS completed (err %d)", c.err);
    CHECK(fi_cancel(&g.ep->fid, &lc) == 0, "the receive is no longer posted");
    get_ctx(g.rx, &lc, FI_ECANCELED, NULL, "the cancelled receive");
    /* A receive directed at the peer after its loss fails at once, as one
     * posted before it did. */
    POST(fi_trecv(g.ep, late, 64, NULL, g.peer, 0x960, 0, &lc));
    got = get(g.rx, &c, TMO);
    CHECK(got && c.ctx == &lc && c.err, "a receive directed at a lost peer: %s, err %d",
          got ? "completed" : "no completion", got ? c.err : 0);
    /* So does the receive that claims the held rendezvous (it waited). */
    struct msg held = {.buf = late, .len = MIB};
    got = peek(0x951, FI_CLAIM, &claim, &held, &c);
    CHECK(got && c.err, "claiming a lost peer's rendezvous: %s, err %d",
          got ? "completed" : "no completion", got ? c.err : 0);
    drop(late);
    for (int n = 0; n < 4 && get(g.tx, &c, 3 * TMO); n++) {
        int i = 1;
        while (i < 5 && c.ctx != &m[i].ctx)
            i++;
        CHECK(i < 5, "a completion for %p, none of this case's (err %d)", c.ctx, c.err);
        CHECK(i >= 4 || c.err, "rendezvous send %d to the dead peer completed fine", i);
        if (i < 5)
            m[i].c = c;
    }
    for (int i = 1; i < 4; i++)
        CHECK(m[i].c.ctx == &m[i].ctx, "rendezvous send %d to the dead peer: no completion", i);
    CHECK(now_ms() - t0 < 2000, "the errors took %llu ms", ULL(now_ms() - t0));
    ssize_t rc = fi_tsend(g.ep, m[4].buf, 10, NULL, g.peer, 0x902, &m[4].ctx);
    if (rc == 0 && get(g.tx, &c, TMO))
        CHECK(c.ctx == &m[4].ctx && c.err, "a send after the loss: ctx %p err %d", c.ctx, c.err);
    else
        CHECK(rc < 0, "a send after the loss: no completion");
    msgs_free(m, 5);
}

/* ---- main -------------------------------------------------------------------------- */

static void teardown(void)
{
    struct fid *f[] = {&g.ep->fid,     &g.sel->fid,       &g.fmt[0]->fid,    &g.fmt[1]->fid,
                       &g.fmt[2]->fid, &g.tx->fid,        &g.rx->fid,        &g.sel_tx->fid,
                       &g.sel_rx->fid, &g.fmt_cq[0]->fid, &g.fmt_cq[1]->fid, &g.fmt_cq[2]->fid,
                       &g.av->fid,     &g.av_map->fid,    &g.scntr->fid,     &g.rcntr->fid,
                       &g.dom->fid,    &g.fab->fid};
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        CHECK_RC(fi_close(f[i]), "fi_close");
    fi_freeinfo(g.info);
    for (size_t i = 0; i < ngrave; i++)
        free(graveyard[i]);
    free(graveyard);
}

int main(void)
{
    /* clang-format off */
#define CASES                                                                                      \
    X(getinfo) X(av) X(msg_sizes) X(tagged_sizes) X(iov) X(inject) X(cq_data) X(directed_recv)     \
    X(tag_ignore) X(ordering) X(unexpected) X(backpressure) X(truncation) X(peek_claim_discard)    \
    X(cancel) X(multi_recv) X(multi_recv_late) X(selective_completion) X(counters) X(cq_sread)     \
    X(rma) X(rma_war) X(delivery_complete) X(cq_formats) X(av_remove)
    /* clang-format on */
#define X(c) {#c, t_##c},
    static const struct {
        const char *name;
        void (*fn)(void);
    } cases[] = {CASES};
#undef X
    setvbuf(stdout, NULL, _IOLBF, 0);
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) {
        perror("socketpair");
        return 1;
    }
    signal(SIGALRM, on_alarm);
    signal(SIGPIPE, SIG_IGN);
    alarm(30);
    if ((g.child = fork()) < 0) {
        perror("fork");
        return 1;
    }
    g.parent = g.child > 0;
    g.sock = sv[g.parent ? 0 : 1];
    close(sv[g.parent ? 1 : 0]);
    setup();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run(cases[i].name, cases[i].fn);
    /* The last case kills the child: only the parent reports it. */
    g.case_name = "lost_peer";
    g.failed = false;
    barrier();
    t_lost_peer();
    int st = 0;
    waitpid(g.child, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "the child ended with status %#x", st);
    printf("%s: lost_peer%s%s\n", g.failed ? "FAIL" : "ok", g.failed ? ": " : "",
           g.failed ? g.err : "");
    g.nfail += g.failed;
    g.case_name = "teardown";
    g.failed = false;
    teardown();
    if (g.failed)
        printf("FAIL: teardown: %s\n", g.err);
    g.nfail += g.failed;
    printf("%s: %d failure(s)\n", g.nfail ? "FAIL" : "PASS", g.nfail);
    return g.nfail ? 1 : 0;
}
