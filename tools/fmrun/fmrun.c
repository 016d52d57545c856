/*
 * fmrun: starts N ranks of a program on this machine, serves them PMI-1,
 * forwards their output, and ends the job when a rank fails.
 */
#include "pmi_server.h"

#include "boot/nodemap.h"
#include "fastmsg.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
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

struct rank {
    pid_t pid;
    int status;   /* from waitpid, valid once exited */
    int exited;
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
    char **argv;
};

static const char *prog_name = "fmrun";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s -n N [options] program [args...]\n"
            "Starts N ranks of program on this machine and serves them PMI-1.\n"
            "\n"
            "  -n, --np N          number of ranks (required)\n"
            "      --hosts A,B,..  run the ranks on these hosts, in equal blocks\n"
            "      --launcher CMD  how to start a rank on a host; {host} is replaced\n"
            "                      (e.g. 'ip netns exec {host}'); needed with --hosts\n"
            "      --tag-output    prefix every output line with [rank]\n"
            "      --bind-to WHAT  core (default: rank i on CPU i mod CPUs) or none\n"
            "      --keep-going    when a rank fails, let the others run on\n"
            "  -h, --help          this text\n"
            "  -V, --version       the fastmsg version\n"
            "\n"
            "The exit status is that of the first rank that failed (128+signal when\n"
            "killed), or 0.\n",
            prog_name);
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
        die_usage("%s", "--hosts needs --launcher (for example --launcher 'ip netns exec {host}')");
    if (o->launcher && !o->nhosts)
        die_usage("%s", "--launcher needs --hosts");
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

/* In the child: becomes rank `rank` and execs the program. Reports an exec
 * failure through errpipe. */
/* The launcher's words with {host} replaced, then the program and its
 * arguments: what a rank on `host` executes. */
static char **launch_argv(const struct opts *o, const char *host)
{
    static char buf[4096];
    char *argv[512];
    int n = 0;
    size_t len = 0;
    const char *t = o->launcher;
    while (*t && n < 256) {
        while (*t == ' ')
            t++;
        if (!*t)
            break;
        argv[n++] = buf + len;
        while (*t && *t != ' ' && len + 256 < sizeof(buf)) {
            if (strncmp(t, "{host}", 6) == 0) {
                len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s", host);
                t += 6;
            } else {
                buf[len++] = *t++;
            }
        }
        buf[len++] = '\0';
    }
    for (char **a = o->argv; *a && n < 510; a++)
        argv[n++] = *a;
    argv[n] = NULL;
    char **out = malloc(sizeof(char *) * (size_t)(n + 1));
    if (!out)
        _exit(127);
    memcpy(out, argv, sizeof(char *) * (size_t)(n + 1));
    return out;
}

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
    /* The PMI socket is the only descriptor of fmrun's the rank inherits. */
    int fd = fcntl(pmi_fd, F_DUPFD, 3);
    fcntl(fd, F_SETFD, 0);
    set_env_int("PMI_FD", fd);
    set_env_int("PMI_RANK", rank);
    set_env_int("PMI_SIZE", o->n);
    char **argv = o->argv;
    if (o->launcher)
        argv = launch_argv(o, host);
    execvp(argv[0], argv);
    int e = errno;
    ssize_t w = write(errpipe, &e, sizeof(e));
    (void)w;
    _exit(127);
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

    /* Signals arrive through a signalfd so the loop below sees them in order. */
    sigset_t mask;
    sigemptyset(&mask);
    sigaddset(&mask, SIGCHLD);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGHUP);
    sigprocmask(SIG_BLOCK, &mask, NULL);
    int sfd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);

    char kvsname[96], mapping[64];
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    snprintf(kvsname, sizeof(kvsname), "fmrun-%d-%lx", (int)getpid(),
             (unsigned long)(ts.tv_nsec ^ ts.tv_sec));
    /* Ranks go to hosts in equal blocks; the mapping tells them who shares a
     * node, whatever the kernel's hostname says inside a namespace. */
    int nhosts = o.nhosts ? o.nhosts : 1;
    int per_host = (o.n + nhosts - 1) / nhosts;
    fm_nodemap_format(mapping, sizeof(mapping), nhosts, per_host);
    struct pmi_server *pmi = pmi_server_new(o.n, kvsname, mapping);
    struct rank *ranks = calloc((size_t)o.n, sizeof(*ranks));
    int *cpus = malloc(sizeof(int) * CPU_SETSIZE);
    if (!pmi || !ranks || !cpus || sfd < 0) {
        fprintf(stderr, "%s: out of resources for %d ranks\n", prog_name, o.n);
        return 1;
    }
    int ncpus = o.bind_core ? allowed_cpus(cpus, CPU_SETSIZE) : 0;

    pid_t self = getpid();
    for (int i = 0; i < o.n; i++) {
        int sv[2], out[2], err[2], ep[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0 ||
            pipe2(ep, O_CLOEXEC) < 0 ||
            (o.tag_output && (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0))) {
            fprintf(stderr, "%s: cannot start rank %d: %s\n", prog_name, i, strerror(errno));
            kill_all(ranks, i, SIGKILL);
            return 1;
        }
        pid_t pid = fork();
        if (pid < 0) {
            fprintf(stderr, "%s: cannot fork rank %d: %s\n", prog_name, i, strerror(errno));
            kill_all(ranks, i, SIGKILL);
            return 1;
        }
        if (pid == 0)
            child(&o, i, o.nhosts ? o.hosts[i / per_host] : NULL, sv[1],
                  o.tag_output ? out : NULL, err, ncpus ? cpus[i % ncpus] : -1, self, ep[1]);
        close(sv[1]);
        close(ep[1]);
        int e;
        if (read(ep[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
            fprintf(stderr, "%s: cannot execute '%s': %s\n", prog_name, o.argv[0], strerror(e));
            kill_all(ranks, i, SIGKILL);
            return 126;
        }
        close(ep[0]);
        ranks[i].pid = pid;
        ranks[i].out_fd = ranks[i].err_fd = -1;
        if (o.tag_output) {
            close(out[1]);
            close(err[1]);
            ranks[i].out_fd = out[0];
            ranks[i].err_fd = err[0];
        }
        pmi_server_attach(pmi, i, sv[0]);
    }

    /* Event loop: signals, PMI requests, output. */
    struct pollfd *pfd = calloc((size_t)(1 + 3 * o.n), sizeof(*pfd));
    if (!pfd) {
        kill_all(ranks, o.n, SIGKILL);
        return 1;
    }
    int running = o.n, first_fail = -1, code = 0;
    long long kill_at = 0; /* ms timestamp for SIGKILL after SIGTERM */
    for (;;) {
        int np = 0;
        pfd[np++] = (struct pollfd){.fd = sfd, .events = POLLIN};
        int open_out = 0;
        for (int i = 0; i < o.n; i++) {
            pfd[np++] = (struct pollfd){.fd = pmi_server_fd(pmi, i), .events = POLLIN};
            pfd[np++] = (struct pollfd){.fd = ranks[i].out_fd, .events = POLLIN};
            pfd[np++] = (struct pollfd){.fd = ranks[i].err_fd, .events = POLLIN};
            open_out |= ranks[i].out_fd >= 0 || ranks[i].err_fd >= 0;
        }
        if (running == 0 && !open_out)
            break;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long long now = ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
        int timeout = kill_at ? (int)(kill_at > now ? kill_at - now : 0) : -1;
        if (kill_at && now >= kill_at) {
            kill_all(ranks, o.n, SIGKILL);
            kill_at = 0;
        }
        if (poll(pfd, (nfds_t)np, timeout) < 0 && errno != EINTR)
            break;
        if (pfd[0].revents) {
            struct signalfd_siginfo si;
            while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
                if (si.ssi_signo == SIGCHLD)
                    continue;
                /* Ctrl-C or a kill of fmrun: pass it on, then insist. */
                kill_all(ranks, o.n, (int)si.ssi_signo);
                if (!kill_at)
                    kill_at = now + TERM_GRACE_MS;
                if (first_fail < 0)
                    code = 128 + (int)si.ssi_signo;
            }
            int st;
            pid_t pid;
            while ((pid = waitpid(-1, &st, WNOHANG)) > 0) {
                for (int i = 0; i < o.n; i++) {
                    if (ranks[i].pid != pid)
                        continue;
                    ranks[i].exited = 1;
                    ranks[i].status = st;
                    running--;
                    pmi_server_rank_exited(pmi, i);
                    if (st == 0 || kill_at)
                        break; /* a success, or a rank fmrun itself is ending */
                    char why[96];
                    describe_status(why, sizeof(why), st);
                    fprintf(stderr, "%s: rank %d (pid %d) %s%s\n", prog_name, i, (int)pid, why,
                            !pmi_server_initialized(pmi, i) ? " before it joined the job (no PMI init)"
                                                            : "");
                    if (first_fail < 0) {
                        first_fail = i;
                        code = status_code(st);
                        if (!o.keep_going) {
                            fprintf(stderr, "%s: ending the job (--keep-going lets the "
                                            "other ranks run on)\n", prog_name);
                            kill_all(ranks, o.n, SIGTERM);
                            kill_at = now + TERM_GRACE_MS;
                        }
                    }
                    break;
                }
            }
        }
        for (int i = 0, k = 1; i < o.n; i++, k += 3) {
            if (pfd[k].fd >= 0 && pfd[k].revents)
                pmi_server_input(pmi, i);
            for (int j = 1; j <= 2; j++) {
                if (pfd[k + j].fd < 0 || !pfd[k + j].revents)
                    continue;
                char buf[65536];
                ssize_t n = read(pfd[k + j].fd, buf, sizeof(buf));
                struct rank *r = &ranks[i];
                int to = j == 1 ? STDOUT_FILENO : STDERR_FILENO;
                char **part = j == 1 ? &r->out_part : &r->err_part;
                size_t *len = j == 1 ? &r->out_len : &r->err_len;
                if (n > 0) {
                    forward(i, to, part, len, buf, (size_t)n, 0);
                } else if (n == 0 || errno != EINTR) {
                    forward(i, to, part, len, "", 0, 1);
                    close(pfd[k + j].fd);
                    if (j == 1)
                        r->out_fd = -1;
                    else
                        r->err_fd = -1;
                }
            }
        }
    }
    pmi_server_free(pmi);
    for (int i = 0; i < o.n; i++) {
        free(ranks[i].out_part);
        free(ranks[i].err_part);
    }
    free(ranks);
    free(cpus);
    free(pfd);
    return code;
}
