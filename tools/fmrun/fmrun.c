/*
 * fmrun: starts N ranks of a program on this machine or on a list of hosts,
 * serves them PMI-1, forwards their output, and ends the job when a rank
 * fails. Ranks on this machine inherit their PMI socket; ranks started on
 * other hosts through a launcher (ssh) connect back over TCP (PMI_PORT).
 */
#include "pmi_listen.h"
#include "pmi_server.h"

#include "boot/nodemap.h"
#include "fastmsg.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* How long ranks get to exit after SIGTERM before SIGKILL. */
#define TERM_GRACE_MS 2000
/* After this long in the fence, ranks that never called fm_init are named. */
#define INIT_WARN_S 10
#define DEFAULT_LAUNCHER "ssh -x -o BatchMode=yes {host}"

struct rank {
    pid_t pid;
    int status;   /* from waitpid, valid once reaped */
    int reaped;   /* waitpid returned it */
    int exited;   /* and rank_exited handled it */
    int out_fd;   /* --tag-output: read ends of its stdout and stderr */
    int err_fd;
    char *out_part; /* an unfinished line of output */
    size_t out_len;
    char *err_part;
    size_t err_len;
};

#define HOSTS_MAX 1024

struct opts {
    int n;
    int tag_output;
    int bind_core;
    int keep_going;
    char *hosts[HOSTS_MAX]; /* --hosts: where the ranks run, in blocks */
    int nhosts;
    const char *launcher;   /* --launcher: command template with {host} */
    const char *pmi_addr;   /* --pmi-addr: where remote ranks reach fmrun */
    int init_timeout;       /* --init-timeout: seconds, 0 for none */
    char pmi_port[96];      /* PMI_PORT for remote ranks */
    char **argv;
};

static const char *prog_name = "fmrun";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s -n N [options] program [args...]\n"
            "Starts N ranks of program and serves them PMI-1.\n"
            "\n"
            "  -n, --np N          number of ranks (required)\n"
            "      --hosts A,B,..  run the ranks on these hosts, in equal blocks; they\n"
            "                      reach fmrun's PMI over TCP\n"
            "      --launcher CMD  how to start a rank on a host; {host} is replaced\n"
            "                      (default '" DEFAULT_LAUNCHER "';\n"
            "                      e.g. 'ip netns exec {host}')\n"
            "      --pmi-addr A    the address remote ranks reach fmrun by (default: the\n"
            "                      source of the route to the hosts; for names that are\n"
            "                      no address, as namespaces, this machine's address on\n"
            "                      their network, else its first but loopback)\n"
            "      --init-timeout S  end the job when ranks wait S seconds in fm_init\n"
            "                      for ranks that never call it (default: only say so\n"
            "                      after %d s)\n"
            "      --tag-output    prefix every output line with [rank]\n"
            "      --bind-to WHAT  core (default: rank i on CPU i mod CPUs) or none\n"
            "      --keep-going    when a rank fails, let the others run on\n"
            "  -h, --help          this text\n"
            "  -V, --version       the fastmsg version\n"
            "\n"
            "The exit status is that of the first rank that failed (128+signal when\n"
            "killed) or asked to end the job (fm_abort, shmem_global_exit), or 0.\n",
            prog_name, INIT_WARN_S);
}

static int die_usage(const char *fmt, const char *arg)
{
    fprintf(stderr, "%s: ", prog_name);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nTry '%s --help'.\n", prog_name);
    exit(2);
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option longopts[] = {
        {"np", required_argument, NULL, 'n'},
        {"tag-output", no_argument, NULL, 't'},
        {"bind-to", required_argument, NULL, 'b'},
        {"keep-going", no_argument, NULL, 'k'},
        {"hosts", required_argument, NULL, 'H'},
        {"launcher", required_argument, NULL, 'L'},
        {"pmi-addr", required_argument, NULL, 'P'},
        {"init-timeout", required_argument, NULL, 'T'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *o = (struct opts){.n = 0, .bind_core = 1};
    int c;
    /* '+': stop at the program name, its options are its own. */
    while ((c = getopt_long(argc, argv, "+n:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 1 || v > 1 << 20)
                die_usage("-n needs a number of ranks from 1 to 1048576, not '%s'", optarg);
            o->n = (int)v;
            break;
        }
        case 't': o->tag_output = 1; break;
        case 'b':
            if (strcmp(optarg, "core") == 0)
                o->bind_core = 1;
            else if (strcmp(optarg, "none") == 0)
                o->bind_core = 0;
            else
                die_usage("--bind-to takes core or none, not '%s'", optarg);
            break;
        case 'k': o->keep_going = 1; break;
        case 'H':
            for (char *save, *h = strtok_r(optarg, ",", &save); h; h = strtok_r(NULL, ",", &save)) {
                if (o->nhosts == HOSTS_MAX)
                    die_usage("%s", "too many hosts");
                o->hosts[o->nhosts++] = h;
            }
            if (o->nhosts == 0)
                die_usage("--hosts needs a comma-separated list of hosts, not '%s'", optarg);
            break;
        case 'L':
            if (!strstr(optarg, "{host}"))
                die_usage("--launcher needs {host} in its command, as in 'ip netns exec {host}': "
                          "'%s'", optarg);
            o->launcher = optarg;
            break;
        case 'P': o->pmi_addr = optarg; break;
        case 'T': {
            char *end;
            long v = strtol(optarg, &end, 10);
            if (*end || end == optarg || v < 1 || v > 86400)
                die_usage("--init-timeout needs seconds from 1 to 86400, not '%s'", optarg);
            o->init_timeout = (int)v;
            break;
        }
        case 'h': usage(stdout); exit(0);
        case 'V': printf("fmrun (fastmsg) %s\n", FM_VERSION_STRING); exit(0);
        default: die_usage("%s", "unknown option");
        }
    }
    if (o->n == 0)
        die_usage("%s", "the number of ranks is missing (-n N)");
    if (optind >= argc)
        die_usage("%s", "the program to run is missing");
    if (o->nhosts && !o->launcher)
        o->launcher = DEFAULT_LAUNCHER;
    if (o->launcher && !o->nhosts)
        die_usage("%s", "--launcher needs --hosts");
    if (o->pmi_addr && !o->nhosts)
        die_usage("%s", "--pmi-addr needs --hosts");
    o->argv = argv + optind;
    return 0;
}

/* Finds the program as execvp would; exits with a message if it cannot run. */
static void check_program(const char *prog)
{
    char path[PATH_MAX];
    const char *found = NULL;
    if (strchr(prog, '/')) {
        found = prog;
    } else {
        const char *p = getenv("PATH");
        for (p = p ? p : "/usr/bin:/bin"; *p;) {
            const char *end = strchr(p, ':');
            size_t len = end ? (size_t)(end - p) : strlen(p);
            snprintf(path, sizeof(path), "%.*s/%s", (int)len, len ? p : ".", prog);
            if (access(path, X_OK) == 0) {
                found = path;
                break;
            }
            p = end ? end + 1 : p + len;
        }
        if (!found) {
            fprintf(stderr, "%s: cannot run '%s': not found in PATH\n", prog_name, prog);
            exit(127);
        }
    }
    struct stat st;
    if (stat(found, &st) < 0) {
        fprintf(stderr, "%s: cannot run '%s': %s\n", prog_name, prog, strerror(errno));
        exit(127);
    }
    if (S_ISDIR(st.st_mode) || access(found, X_OK) < 0) {
        fprintf(stderr, "%s: cannot run '%s': %s\n", prog_name, prog,
                S_ISDIR(st.st_mode) ? "it is a directory" : strerror(errno));
        exit(126);
    }
}

/* CPUs fmrun may use, in order: rank i is bound to cpus[i % ncpus]. */
static int allowed_cpus(int *cpus, int max)
{
    cpu_set_t set;
    int n = 0;
    if (sched_getaffinity(0, sizeof(set), &set) < 0)
        return 0;
    for (int c = 0; c < CPU_SETSIZE && n < max; c++)
        if (CPU_ISSET(c, &set))
            cpus[n++] = c;
    return n;
}

static void set_env_int(const char *name, int v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%d", v);
    setenv(name, buf, 1);
}

/* A word for a remote shell: single-quoted, with ' written as '\''. */
static char *shell_quote(const char *w)
{
    size_t n = 3;
    for (const char *c = w; *c; c++)
        n += *c == '\'' ? 4 : 1;
    char *q = malloc(n), *o = q;
    if (!q)
        _exit(127);
    *o++ = '\'';
    for (const char *c = w; *c; c++) {
        if (*c == '\'') {
            memcpy(o, "'\\''", 4);
            o += 4;
        } else {
            *o++ = *c;
        }
    }
    *o++ = '\'';
    *o = '\0';
    return q;
}

/* Whether the launcher hands the command to a shell on the other side. */
static int launcher_uses_shell(const char *launcher)
{
    char word[256];
    if (sscanf(launcher, "%255s", word) != 1)
        return 0;
    const char *base = strrchr(word, '/') ? strrchr(word, '/') + 1 : word;
    return strcmp(base, "ssh") == 0 || strcmp(base, "rsh") == 0;
}

/*
 * What a rank on `host` executes: the launcher's words with {host}
 * replaced, then `env` with the PMI_PORT coordinates and every FM_*
 * variable (a remote shell does not inherit fmrun's environment), then the
 * program and its arguments. For ssh and rsh, which hand the command to a
 * shell, the words are quoted and preceded by a cd to fmrun's directory.
 */
static char **launch_argv(const struct opts *o, const char *host, int rank)
{
    extern char **environ;
    size_t cap = 8 + strlen(o->launcher), n = 0; /* no more words than characters */
    for (char **e = environ; *e; e++)
        cap++;
    for (char **a = o->argv; *a; a++)
        cap++;
    char **argv = malloc(sizeof(char *) * cap);
    if (!argv)
        _exit(127);
    for (const char *t = o->launcher; *t;) {
        while (*t == ' ')
            t++;
        if (!*t)
            break;
        size_t len = strcspn(t, " ");
        char *w = malloc(len + strlen(host) * 4 + 1), *out = w;
        if (!w)
            _exit(127);
        for (const char *end = t + len; t < end;) {
            if (strncmp(t, "{host}", 6) == 0) {
                out += sprintf(out, "%s", host);
                t += 6;
            } else {
                *out++ = *t++;
            }
        }
        *out = '\0';
        argv[n++] = w;
    }
    int shell = launcher_uses_shell(o->launcher);
    char cwd[PATH_MAX];
    if (shell && getcwd(cwd, sizeof(cwd))) {
        /* A remote shell starts in the home directory; ranks start where
         * fmrun was started, as with mpirun, so relative paths work. */
        argv[n++] = "cd";
        argv[n++] = shell_quote(cwd);
        argv[n++] = "&&";
    }
    size_t first_remote = n;
    char port[128], id[32];
    snprintf(port, sizeof(port), "PMI_PORT=%s", o->pmi_port);
    snprintf(id, sizeof(id), "PMI_ID=%d", rank);
    argv[n++] = "env";
    argv[n++] = strdup(port);
    argv[n++] = strdup(id);
    for (char **e = environ; *e; e++)
        if (strncmp(*e, "FM_", 3) == 0)
            argv[n++] = *e;
    for (char **a = o->argv; *a; a++)
        argv[n++] = *a;
    argv[n] = NULL;
    if (shell)
        for (size_t i = first_remote; i < n; i++)
            argv[i] = shell_quote(argv[i]);
    return argv;
}

/* In the child: becomes rank `rank` and execs the program (through the
 * launcher for a remote rank). Reports an exec failure through errpipe. */
static void child(const struct opts *o, int rank, const char *host, int pmi_fd, int out[2],
                  int err[2], int cpu, pid_t parent, int errpipe)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* fmrun killed: so are the ranks */
    if (getppid() != parent)
        _exit(127);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    signal(SIGPIPE, SIG_DFL);
    if (cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
    }
    if (out) {
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
    }
    char **argv = o->argv;
    if (host) {
        argv = launch_argv(o, host, rank);
    } else {
        /* The PMI socket is the only descriptor of fmrun's the rank inherits. */
        int fd = fcntl(pmi_fd, F_DUPFD, 3);
        fcntl(fd, F_SETFD, 0);
        set_env_int("PMI_FD", fd);
        set_env_int("PMI_RANK", rank);
        set_env_int("PMI_SIZE", o->n);
    }
    execvp(argv[0], argv);
    int e = errno;
    ssize_t w = write(errpipe, &e, sizeof(e));
    (void)w;
    _exit(127);
}

/* A network this machine or a host is on: an IPv4 address and its mask. */
struct net {
    struct in_addr addr, mask;
};

#define NETS_MAX 64

/* The networks of the interfaces that are up in this network namespace, but
 * loopback: those a rank elsewhere may reach it on. */
static int local_nets(struct net *nets, int max)
{
    struct ifaddrs *ifs;
    int n = 0;
    if (getifaddrs(&ifs) < 0)
        return 0;
    for (struct ifaddrs *i = ifs; i && n < max; i = i->ifa_next)
        if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET && i->ifa_netmask &&
            (i->ifa_flags & (IFF_UP | IFF_LOOPBACK)) == IFF_UP)
            nets[n++] = (struct net){((struct sockaddr_in *)i->ifa_addr)->sin_addr,
                                     ((struct sockaddr_in *)i->ifa_netmask)->sin_addr};
    freeifaddrs(ifs);
    return n;
}

/*
 * The networks of the network namespace `name` as 'ip netns' keeps it
 * (/run/netns/NAME), for launchers whose hosts are namespaces: a child
 * enters it and lists them. 0 when there is no such namespace or fmrun may
 * not enter it.
 */
static int netns_nets(const char *name, struct net *nets, int max)
{
    char path[PATH_MAX];
    int p[2];
    snprintf(path, sizeof(path), "/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    if (pipe2(p, O_CLOEXEC) < 0) {
        close(fd);
        return 0;
    }
    pid_t pid = fork();
    if (pid == 0) {
        if (setns(fd, CLONE_NEWNET) == 0) {
            ssize_t w = write(p[1], nets, sizeof(*nets) * (size_t)local_nets(nets, max));
            (void)w;
        }
        _exit(0);
    }
    close(fd);
    close(p[1]);
    size_t got = 0;
    ssize_t r;
    while (pid > 0 && (r = read(p[0], (char *)nets + got, sizeof(*nets) * (size_t)max - got)) > 0)
        got += (size_t)r;
    close(p[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return (int)(got / sizeof(*nets));
}

/* The source address of this machine's route to host; -1 when the name
 * does not resolve or no route leads there. */
static int route_source(const char *host, struct in_addr *src)
{
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_DGRAM}, *res;
    if (getaddrinfo(host, "9", &hints, &res) != 0)
        return -1;
    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in me;
    socklen_t sl = sizeof(me);
    int ok = fd >= 0 && connect(fd, res->ai_addr, res->ai_addrlen) == 0 &&
             getsockname(fd, (struct sockaddr *)&me, &sl) == 0;
    if (fd >= 0)
        close(fd);
    freeaddrinfo(res);
    if (!ok)
        return -1;
    *src = me.sin_addr;
    return 0;
}

/*
 * The address ranks on the hosts reach fmrun's PMI by, when --pmi-addr does
 * not say. A host name that resolves says where its ranks run: the address
 * is the source of the route to it, as hydra takes it, or loopback when ssh
 * (or rsh) is given a name of this machine. A name that does not resolve,
 * or resolves to loopback under another launcher (which need not use it as
 * an address: 'ip netns exec {host}'), says nothing, and loopback would
 * refuse the rank: then fmrun takes its address on a network of the host
 * when the host is a network namespace, or else its first address that is
 * not loopback. The first host other than this machine decides (one lookup
 * for most lists). Returns 0, or -1 with the reason in err.
 */
static int default_pmi_addr(const struct opts *o, char *buf, size_t len, char *err,
                            size_t errlen)
{
    struct net mine[NETS_MAX], theirs[NETS_MAX];
    int nmine = local_nets(mine, NETS_MAX);
    const char *unsettled = NULL; /* a host whose name said nothing */
    for (int h = 0; h < o->nhosts; h++) {
        struct in_addr src;
        int routed = route_source(o->hosts[h], &src) == 0;
        if (routed && ntohl(src.s_addr) >> 24 != 127) {
            inet_ntop(AF_INET, &src, buf, (socklen_t)len);
            return 0;
        }
        if (routed && launcher_uses_shell(o->launcher))
            continue; /* ssh to this machine: loopback reaches it */
        int n = netns_nets(o->hosts[h], theirs, NETS_MAX);
        for (int t = 0; t < n; t++)
            for (int m = 0; m < nmine; m++)
                if (((mine[m].addr.s_addr ^ theirs[t].addr.s_addr) & mine[m].mask.s_addr) == 0) {
                    inet_ntop(AF_INET, &mine[m].addr, buf, (socklen_t)len);
                    return 0;
                }
        unsettled = o->hosts[h];
        break;
    }
    if (unsettled && nmine == 0) {
        snprintf(err, errlen,
                 "'%s' resolves to no address of another host and this machine has no IPv4 "
                 "address but loopback: give the address its ranks reach fmrun by with "
                 "--pmi-addr", unsettled);
        return -1;
    }
    if (unsettled)
        inet_ntop(AF_INET, &mine[0].addr, buf, (socklen_t)len);
    else
        snprintf(buf, len, "127.0.0.1");
    return 0;
}

/* This machine's addresses but loopback, for a message: "a, b, c". */
static void list_addrs(char *buf, size_t len)
{
    struct net nets[NETS_MAX];
    int n = local_nets(nets, NETS_MAX);
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at + INET_ADDRSTRLEN + 2 < len; i++) {
        char ip[INET_ADDRSTRLEN];
        inet_ntop(AF_INET, &nets[i].addr, ip, sizeof(ip));
        at += (size_t)snprintf(buf + at, len - at, "%s%s", i ? ", " : "", ip);
    }
}

static void describe_status(char *buf, size_t len, int status)
{
    if (WIFSIGNALED(status))
        snprintf(buf, len, "was killed by signal %d (SIG%s)", WTERMSIG(status),
                 sigabbrev_np(WTERMSIG(status)) ? sigabbrev_np(WTERMSIG(status)) : "?");
    else
        snprintf(buf, len, "exited with status %d", WEXITSTATUS(status));
}

static int status_code(int status)
{
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : WEXITSTATUS(status);
}

/* Writes complete lines of a rank's output with its tag; keeps the rest. */
static void forward(int rank, int to, char **part, size_t *len, const char *data, size_t n,
                    int flush)
{
    char *buf = realloc(*part, *len + n + 1);
    if (!buf)
        return;
    memcpy(buf + *len, data, n);
    *len += n;
    *part = buf;
    size_t start = 0;
    for (size_t i = 0; i < *len; i++) {
        if (buf[i] != '\n' && !(flush && i == *len - 1))
            continue;
        char tag[32];
        int tl = snprintf(tag, sizeof(tag), "[%d] ", rank);
        struct iovec v[3] = {{tag, (size_t)tl}, {buf + start, i + 1 - start}, {"\n", 1}};
        ssize_t w = writev(to, v, buf[i] == '\n' ? 2 : 3);
        (void)w;
        start = i + 1;
    }
    memmove(buf, buf + start, *len - start);
    *len -= start;
}

static void kill_all(struct rank *r, int n, int sig)
{
    for (int i = 0; i < n; i++)
        if (r[i].pid > 0 && !r[i].exited)
            kill(r[i].pid, sig);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

/* The job as fmrun runs it. */
struct job {
    struct opts *o;
    struct rank *ranks;
    struct pmi_server *pmi;
    struct pmi_listen *listen; /* --hosts: remote ranks connect here */
    int *attached;             /* by rank: its PMI connection arrived */
    int running;
    int first_fail;
    int code;
    long long kill_at;         /* ms: SIGKILL after SIGTERM */
    long long waiting_since;   /* ms: ranks wait in a fence for absent ones */
    int warned;
};

static void end_job(struct job *j, long long now)
{
    kill_all(j->ranks, j->o->n, SIGTERM);
    if (!j->kill_at)
        j->kill_at = now + TERM_GRACE_MS;
}

/* Forks every rank; returns 0 or an exit status for fmrun. */
static int start_ranks(struct job *j)
{
    struct opts *o = j->o;
    int *cpus = malloc(sizeof(int) * CPU_SETSIZE);
    if (!cpus)
        return 1;
    int ncpus = o->bind_core && !o->nhosts ? allowed_cpus(cpus, CPU_SETSIZE) : 0;
    int nhosts = o->nhosts ? o->nhosts : 1;
    int per_host = (o->n + nhosts - 1) / nhosts;
    pid_t self = getpid();
    for (int i = 0; i < o->n; i++) {
        int sv[2] = {-1, -1}, out[2], err[2], ep[2];
        if ((!o->nhosts && socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0) ||
            pipe2(ep, O_CLOEXEC) < 0 ||
            (o->tag_output && (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0))) {
            fprintf(stderr, "%s: cannot start rank %d: %s\n", prog_name, i, strerror(errno));
            kill_all(j->ranks, i, SIGKILL);
            free(cpus);
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "%s: cannot fork rank %d: %s\n", prog_name, i, strerror(errno));
            kill_all(j->ranks, i, SIGKILL);
            free(cpus);
            return 1;
        }
        if (pid == 0)
            child(o, i, o->nhosts ? o->hosts[i / per_host] : NULL, sv[1],
                  o->tag_output ? out : NULL, err, ncpus ? cpus[i % ncpus] : -1, self, ep[1]);
        close(ep[1]);
        int e;
        if (read(ep[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
            fprintf(stderr, "%s: cannot execute '%s': %s\n", prog_name,
                    o->nhosts ? o->launcher : o->argv[0], strerror(e));
            kill_all(j->ranks, i, SIGKILL);
            free(cpus);
            return 126;
        }
        close(ep[0]);
        struct rank *r = &j->ranks[i];
        r->pid = pid;
        r->out_fd = r->err_fd = -1;
        if (o->tag_output) {
            close(out[1]);
            close(err[1]);
            r->out_fd = out[0];
            r->err_fd = err[0];
        }
        if (!o->nhosts) {
            close(sv[1]);
            pmi_server_attach(j->pmi, i, sv[0]);
            j->attached[i] = 1;
        }
    }
    free(cpus);
    return 0;
}

static void rank_exited(struct job *j, int i, int st, long long now)
{
    struct rank *r = &j->ranks[i];
    r->exited = 1;
    r->status = st;
    j->running--;
    pmi_server_rank_exited(j->pmi, i);
    if (st == 0 || j->kill_at)
        return; /* a success, or a rank fmrun itself is ending */
    char why[96];
    describe_status(why, sizeof(why), st);
    int joined = pmi_server_initialized(j->pmi, i);
    fprintf(stderr, "%s: rank %d (pid %d) %s%s\n", prog_name, i, (int)r->pid, why,
            joined ? "" : " before it joined the job (no PMI init)");
    /* ssh says 255 when it cannot reach the host or log in. */
    if (!joined && j->o->nhosts && WIFEXITED(st) && WEXITSTATUS(st) == 255) {
        fprintf(stderr, "%s: the launcher '%s' failed for rank %d: is its host reachable?\n",
                prog_name, j->o->launcher, i);
    } else if (!j->attached[i] && j->o->nhosts && j->first_fail < 0 && WIFEXITED(st) &&
               WEXITSTATUS(st) != 126 && WEXITSTATUS(st) != 127) {
        /* It ran (126 and 127 are the remote shell's "cannot run") and gave
         * up before its PMI connection arrived: most often refused or
         * unreachable, as PMI_PORT names no address its host can reach.
         * Said once: the other ranks of such a job fail alike. */
        char addrs[256];
        list_addrs(addrs, sizeof(addrs));
        fprintf(stderr, "%s: rank %d never connected to PMI_PORT=%s: if its host cannot reach "
                        "that address, give fmrun one it can with --pmi-addr A (this machine "
                        "has %s)\n", prog_name, i, j->o->pmi_port, addrs[0] ? addrs : "none");
    }
    if (j->first_fail >= 0)
        return;
    j->first_fail = i;
    j->code = status_code(st);
    if (!j->o->keep_going) {
        fprintf(stderr, "%s: ending the job (--keep-going lets the other ranks run on)\n",
                prog_name);
        end_job(j, now);
    }
}

/* A rank asked to end the job (fm_abort, shmem_global_exit, MPI_Abort): its
 * status, 0 included, becomes the job's unless a rank failed before, and
 * --keep-going does not apply. */
static void rank_aborted(struct job *j, int i, int code, long long now)
{
    fprintf(stderr, "%s: rank %d asked to end the job with status %d\n", prog_name, i, code);
    if (j->first_fail < 0) {
        j->first_fail = i;
        j->code = code;
    }
    if (!j->kill_at)
        end_job(j, now);
}

static void handle_signals(struct job *j, int sfd, long long now)
{
    struct signalfd_siginfo si;
    while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
        if (si.ssi_signo == SIGCHLD)
            continue;
        /* Ctrl-C or a kill of fmrun: pass it on, then insist. */
        kill_all(j->ranks, j->o->n, (int)si.ssi_signo);
        if (!j->kill_at)
            j->kill_at = now + TERM_GRACE_MS;
        if (j->first_fail < 0)
            j->code = 128 + (int)si.ssi_signo;
    }
    int st;
    pid_t pid;
    while ((pid = waitpid(-1, &st, WNOHANG)) > 0)
        for (int i = 0; i < j->o->n; i++)
            if (j->ranks[i].pid == pid) {
                j->ranks[i].status = st;
                j->ranks[i].reaped = 1;
                break;
            }
    /* Ranks killed by a signal first: when one dies and a survivor ends
     * over it before fmrun wakes, the dead one is the job's failure, and
     * the first failure is the one reported. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < j->o->n; i++) {
            struct rank *r = &j->ranks[i];
            if (r->reaped && !r->exited && (pass || WIFSIGNALED(r->status)))
                rank_exited(j, i, r->status, now);
        }
}

/*
 * Ranks wait in fm_init's fence for ranks that never came: after a while
 * say which, and with --init-timeout end the job.
 */
static void watch_init(struct job *j, long long now)
{
    char absent[256] = "";
    size_t len = 0;
    int n = 0;
    if (pmi_server_waiting(j->pmi) > 0)
        for (int i = 0; i < j->o->n; i++)
            if (!j->ranks[i].exited && !pmi_server_initialized(j->pmi, i)) {
                if (len < sizeof(absent) - 16)
                    len += (size_t)snprintf(absent + len, sizeof(absent) - len, "%s%d",
                                            n ? "," : "", i);
                n++;
            }
    if (n == 0) {
        j->waiting_since = 0;
        return;
    }
    if (!j->waiting_since)
        j->waiting_since = now;
    long long waited = (now - j->waiting_since) / 1000;
    if (j->o->init_timeout && waited >= j->o->init_timeout && !j->kill_at) {
        fprintf(stderr, "%s: rank(s) %s never called fm_init; the others waited %llds for "
                        "them (--init-timeout): ending the job\n", prog_name, absent, waited);
        if (j->first_fail < 0) {
            j->first_fail = j->o->n;
            j->code = 1;
        }
        end_job(j, now);
    } else if (!j->warned && waited >= INIT_WARN_S) {
        fprintf(stderr, "%s: rank(s) %s have not called fm_init after %ds; the other ranks "
                        "wait for them\n", prog_name, absent, INIT_WARN_S);
        j->warned = 1;
    }
}

/* Reads a rank's stdout (j == 1) or stderr (j == 2) and forwards it tagged. */
static void forward_output(struct rank *r, int rank, int which, int fd)
{
    char buf[65536];
    ssize_t n = read(fd, buf, sizeof(buf));
    int to = which == 1 ? STDOUT_FILENO : STDERR_FILENO;
    char **part = which == 1 ? &r->out_part : &r->err_part;
    size_t *len = which == 1 ? &r->out_len : &r->err_len;
    if (n > 0) {
        forward(rank, to, part, len, buf, (size_t)n, 0);
    } else if (n == 0 || errno != EINTR) {
        forward(rank, to, part, len, "", 0, 1);
        close(fd);
        if (which == 1)
            r->out_fd = -1;
        else
            r->err_fd = -1;
    }
}

/* Signals, PMI requests, new PMI connections and output, until every rank
 * has exited and its output is drained. */
static void event_loop(struct job *j, int sfd)
{
    int n = j->o->n;
    struct pollfd *pfd = calloc((size_t)(3 + 4 * n), sizeof(*pfd));
    if (!pfd) {
        kill_all(j->ranks, n, SIGKILL);
        j->code = 1;
        return;
    }
    for (;;) {
        int np = 0, open_out = 0;
        pfd[np++] = (struct pollfd){.fd = sfd, .events = POLLIN};
        int lbeg = np;
        if (j->listen)
            np += pmi_listen_pollfds(j->listen, pfd + np);
        int lend = np;
        for (int i = 0; i < n; i++) {
            pfd[np++] = (struct pollfd){.fd = pmi_server_fd(j->pmi, i), .events = POLLIN};
            pfd[np++] = (struct pollfd){.fd = j->ranks[i].out_fd, .events = POLLIN};
            pfd[np++] = (struct pollfd){.fd = j->ranks[i].err_fd, .events = POLLIN};
            open_out |= j->ranks[i].out_fd >= 0 || j->ranks[i].err_fd >= 0;
        }
        if (j->running == 0 && !open_out)
            break;
        long long now = now_ms();
        if (j->kill_at && now >= j->kill_at) {
            kill_all(j->ranks, n, SIGKILL);
            j->kill_at = 0;
        }
        /* Wake once a second while the fence watch may have news. */
        int timeout = pmi_server_waiting(j->pmi) > 0 ? 1000 : -1;
        if (j->kill_at && (timeout < 0 || j->kill_at - now < timeout))
            timeout = (int)(j->kill_at > now ? j->kill_at - now : 0);
        if (poll(pfd, (nfds_t)np, timeout) < 0 && errno != EINTR)
            break;
        now = now_ms();
        if (pfd[0].revents)
            handle_signals(j, sfd, now);
        for (int k = lbeg; k < lend; k++) {
            int conn, rank;
            if (pfd[k].revents &&
                (rank = pmi_listen_input(j->listen, pfd[k].fd, &conn, j->attached)) >= 0) {
                j->attached[rank] = 1;
                pmi_server_attach_by_port(j->pmi, rank, conn);
            }
        }
        for (int i = 0, k = lend; i < n; i++, k += 3) {
            int code;
            if (pfd[k].fd >= 0 && pfd[k].revents && pmi_server_input(j->pmi, i) < 0 &&
                pmi_server_aborted(j->pmi, i, &code))
                rank_aborted(j, i, code, now);
            for (int w = 1; w <= 2; w++)
                if (pfd[k + w].fd >= 0 && pfd[k + w].revents)
                    forward_output(&j->ranks[i], i, w, pfd[k + w].fd);
        }
        watch_init(j, now);
    }
    free(pfd);
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_opts(argc, argv, &o);
    if (o.launcher) {
        char word[256];
        sscanf(o.launcher, "%255s", word);
        check_program(word);
    } else {
        check_program(o.argv[0]);
    }
    signal(SIGPIPE, SIG_IGN);

    /* Signals arrive through a signalfd so the loop sees them in order. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

    char kvsname[96], mapping[64], err[512];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(kvsname, sizeof(kvsname), "fmrun-%d-%lx", (int)getpid(),
             (unsigned long)(ts.tv_nsec ^ ts.tv_sec));
    /* Ranks go to hosts in equal blocks; the mapping tells them who shares a
     * node, whatever the kernel's hostname says inside a namespace. */
    int nhosts = o.nhosts ? o.nhosts : 1;
    fm_nodemap_format(mapping, sizeof(mapping), nhosts, (o.n + nhosts - 1) / nhosts);
    struct job j = {.o = &o, .running = o.n, .first_fail = -1};
    j.pmi = pmi_server_new(o.n, kvsname, mapping);
    j.ranks = calloc((size_t)o.n, sizeof(*j.ranks));
    j.attached = calloc((size_t)o.n, sizeof(int));
    if (!j.pmi || !j.ranks || !j.attached || sfd < 0) {
        fprintf(stderr, "%s: out of resources for %d ranks\n", prog_name, o.n);
        return 1;
    }
    if (o.nhosts) {
        char addr[INET_ADDRSTRLEN];
        if (!o.pmi_addr) {
            if (default_pmi_addr(&o, addr, sizeof(addr), err, sizeof(err)) < 0) {
                fprintf(stderr, "%s: %s\n", prog_name, err);
                return 1;
            }
            o.pmi_addr = addr;
        }
        j.listen = pmi_listen_open(o.pmi_addr, o.n, o.pmi_port, sizeof(o.pmi_port), err,
                                   sizeof(err));
        if (!j.listen) {
            fprintf(stderr, "%s: %s (choose another with --pmi-addr)\n", prog_name, err);
            return 1;
        }
    }
    int rc = start_ranks(&j);
    if (rc)
        return rc;
    event_loop(&j, sfd);
    pmi_listen_close(j.listen);
    pmi_server_free(j.pmi);
    for (int i = 0; i < o.n; i++) {
        free(j.ranks[i].out_part);
        free(j.ranks[i].err_part);
    }
    free(j.ranks);
    free(j.attached);
    return j.code;
}
