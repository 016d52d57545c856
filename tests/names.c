/*
 * Two programs that no launcher joined find each other by name: a server
 * writes its endpoint's name to a file, clients read it, insert it and talk.
 * Run by tests/names_test.sh on one host and between network namespaces.
 *
 *   names serve FILE NCLIENTS   answers NCLIENTS clients, one after another
 *   names client FILE ID        sends a stream, gets it back, says done (under
 *                               a launcher, rank r is client ID + r)
 *   names lost FILE             sends until the server is killed: expects
 *                               FM_EPEERLOST, never a hang
 *   names invalid -             bad names and bad calls get FM_EINVAL
 *
 * Exit status: 0 when every check held; a client that got FM_EPEERLOST
 * where it expected data exits 3, so the wrong-key case can tell it apart.
 */
#include "testing/fmtest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CH 5
#define STREAM (300 * 1000 + 17)
#define DONE 0xD0
#define MIN_SIZE(a, b) ((a) < (b) ? (a) : (b))

static fm_ctx *ctx;
static fm_ep *ep;

static void write_name(const char *path)
{
    unsigned char name[FM_NAME_MAX];
    size_t len = sizeof(name);
    CHECK_RC(fm_ep_name(ep, name, &len), 0);
    CHECK(len <= FM_NAME_MAX);
    char tmp[512];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    CHECK(f != NULL);
    CHECK_EQ(fwrite(name, 1, len, f), len);
    CHECK(fclose(f) == 0);
    CHECK(rename(tmp, path) == 0); /* readers see all of it or nothing */
}

static size_t read_name(const char *path, unsigned char name[FM_NAME_MAX])
{
    for (int tries = 0; tries < 3000; tries++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t n = fread(name, 1, FM_NAME_MAX, f);
            fclose(f);
            return n;
        }
        usleep(10000);
    }
    fmt_fail(__FILE__, __LINE__, "no name appeared in %s", path);
}

/* Sends `len` bytes of pattern `seed` to dst as messages of varied sizes. */
static void send_stream(fm_addr dst, uint64_t seed, size_t len)
{
    unsigned char *buf = malloc(len);
    for (size_t i = 0; i < len; i++)
        buf[i] = fmt_pattern(seed, i);
    for (size_t off = 0, k = 0; off < len; k++) {
        size_t part = MIN_SIZE(len - off, 1 + (k * 7919) % 9000);
        long rc = fmt_send_all(ep, dst, buf + off, part);
        if (rc == FM_EPEERLOST)
            exit(3);
        CHECK(rc > 0);
        off += part;
    }
    free(buf);
}

/* Receives `len` bytes of pattern `seed`, all from one source: returns it. */
static fm_addr recv_stream(uint64_t seed, size_t len)
{
    unsigned char buf[65536];
    fm_addr from = FM_ADDR_NONE, src;
    for (size_t got = 0; got < len;) {
        long n = fmt_recv_copy(ep, buf, sizeof(buf), &src);
        if (n == FM_EPEERLOST)
            exit(3);
        CHECK(n > 0);
        if (from == FM_ADDR_NONE)
            from = src;
        CHECK_EQ(src, from);
        for (long i = 0; i < n; i++)
            if (buf[i] != fmt_pattern(seed, got + (size_t)i))
                fmt_fail(__FILE__, __LINE__, "byte %zu of the stream differs", got + (size_t)i);
        got += (size_t)n;
    }
    return from;
}

static void serve(const char *path, int nclients)
{
    write_name(path);
    for (int c = 0; c < nclients; c++) {
        /* The client's id comes first; its address is one this process
         * never inserted. */
        uint32_t id;
        fm_addr client;
        CHECK_EQ(fmt_recv_copy(ep, &id, sizeof(id), &client), sizeof(id));
        CHECK(client != FM_ADDR_NONE);
        CHECK_EQ(fm_addr_rank(ctx, client), -1); /* not a rank of this job */
        unsigned char name[FM_NAME_MAX];
        size_t len = sizeof(name);
        CHECK_RC(fm_addr_name(ctx, client, name, &len), 0);
        fm_addr again;
        CHECK_RC(fm_addr_insert(ctx, name, len, &again), 0);
        CHECK_EQ(again, client); /* its name gives back its address */
        CHECK_EQ(recv_stream(100 + id, STREAM), client);
        send_stream(client, 200 + id, STREAM);
        unsigned char done;
        CHECK_EQ(fmt_recv_copy(ep, &done, 1, NULL), 1);
        CHECK_EQ(done, DONE);
        fprintf(stderr, "names: served client %u\n", id);
    }
}

static void client(const char *path, uint32_t id)
{
    unsigned char name[FM_NAME_MAX];
    size_t len = read_name(path, name);
    fm_addr server;
    CHECK_RC(fm_addr_insert(ctx, name, len, &server), 0);
    fm_addr same;
    CHECK_RC(fm_addr_insert(ctx, name, len, &same), 0);
    CHECK_EQ(same, server);
    long rc = fmt_send_all(ep, server, &id, sizeof(id));
    if (rc == FM_EPEERLOST)
        exit(3);
    CHECK_EQ(rc, 1);
    send_stream(server, 100 + id, STREAM);
    CHECK_EQ(recv_stream(200 + id, STREAM), server);
    unsigned char done = DONE;
    CHECK_EQ(fmt_send_all(ep, server, &done, 1), 1);
}

/* Sends to the server until it is killed: the loss must show. */
static void lost(const char *path)
{
    unsigned char name[FM_NAME_MAX];
    size_t len = read_name(path, name);
    fm_addr server;
    CHECK_RC(fm_addr_insert(ctx, name, len, &server), 0);
    uint32_t id = 99;
    CHECK_EQ(fmt_send_all(ep, server, &id, sizeof(id)), 1);
    unsigned char buf[1000] = {0};
    for (;;) {
        long rc = fmt_send_all(ep, server, buf, sizeof(buf));
        if (rc == FM_EPEERLOST)
            break;
        CHECK(rc > 0);
        usleep(1000);
    }
    struct iovec seg[FM_SEGS_MAX];
    int nseg;
    fm_addr src;
    ssize_t n;
    while ((n = fm_recv(ep, seg, &nseg, &src)) >= 0)
        fm_recv_done(ep);
    CHECK_EQ(n, FM_EPEERLOST); /* reported once on the endpoint, with its address */
    CHECK_EQ(src, server);
}

/* Whatever is not a name is refused with FM_EINVAL, and nothing breaks. */
static void invalid(void)
{
    unsigned char name[FM_NAME_MAX + 8];
    size_t len = 3;
    CHECK_RC(fm_ep_name(ep, name, &len), FM_EMSGSIZE);
    len = sizeof(name);
    CHECK_RC(fm_ep_name(ep, name, &len), 0);
    fm_addr self, a;
    CHECK_RC(fm_addr_insert(ctx, name, len, &self), 0);
    CHECK_EQ(self, fm_ep_addr(ep)); /* our own name is our own address */
    for (size_t l = 0; l < len; l++)
        CHECK_RC(fm_addr_insert(ctx, name, l, &a), FM_EINVAL);
    name[len / 2] ^= 0x40;
    CHECK_RC(fm_addr_insert(ctx, name, len, &a), FM_EINVAL);
    memset(name, 0x66, sizeof(name));
    CHECK_RC(fm_addr_insert(ctx, name, sizeof(name), &a), FM_EINVAL);
    CHECK_RC(fm_addr_insert(ctx, NULL, 10, &a), FM_EINVAL);
    CHECK_RC(fm_addr_insert(NULL, name, len, &a), FM_EINVAL);
    CHECK_RC(fm_addr_remove(ctx, self), FM_EINVAL); /* a rank's address stays */
    CHECK_RC(fm_addr_remove(ctx, FM_ADDR_NONE), FM_EINVAL);
    CHECK_RC(fm_addr_remove(ctx, (fm_addr)77 << 32), FM_EINVAL);
    len = sizeof(name);
    CHECK_RC(fm_addr_name(ctx, (fm_addr)77 << 32, name, &len), FM_EINVAL);
    CHECK_RC(fm_addr_name(ctx, self, name, &len), 0);
    char b = 1;
    struct iovec v = {&b, 1};
    CHECK_RC(fm_send(ep, (fm_addr)77 << 32, &v, 1), FM_EINVAL);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: %s serve FILE NCLIENTS | client FILE ID | lost FILE\n",
                argv[0]);
        return 2;
    }
    ctx = fmt_init();
    CHECK_RC(fm_ep_open(ctx, CH, &ep), 0);
    if (strcmp(argv[1], "serve") == 0 && argc == 4) {
        CHECK_EQ(fm_size(ctx), 1); /* no launcher */
        serve(argv[2], atoi(argv[3]));
    } else if (strcmp(argv[1], "client") == 0 && argc == 4) {
        /* Ranks of a launcher job are clients too, each with its own id, one
         * after another (the server answers one client at a time): a token
         * goes from rank to rank on a second endpoint. */
        int rank = fm_rank(ctx), size = fm_size(ctx);
        fm_ep *turn;
        char token = 1;
        CHECK_RC(fm_ep_open(ctx, CH + 1, &turn), 0);
        if (rank > 0)
            CHECK_EQ(fmt_recv_copy(turn, &token, 1, NULL), 1);
        client(argv[2], (uint32_t)(atoi(argv[3]) + rank));
        if (rank + 1 < size)
            CHECK_EQ(fmt_send_all(turn, fm_addr_of(ctx, rank + 1, CH + 1), &token, 1), 1);
    }
    else if (strcmp(argv[1], "lost") == 0)
        lost(argv[2]);
    else if (strcmp(argv[1], "invalid") == 0)
        invalid();
    else
        return 2;
    CHECK_RC(fm_finalize(ctx), 0);
    return 0;
}
