/*
 * Two fmperf programs joined by name instead of by a launcher, so that a
 * send to an inserted address can be measured against a send to a rank:
 *
 *   fmperf latency --name-file /tmp/fm.name --side 0 &
 *   fmperf latency --name-file /tmp/fm.name --side 1
 *
 * Side 0 writes the name of its control endpoint to the file, side 1 reads
 * it and sends the name of its own as its first message. Both then insert
 * the name of each endpoint the other side sends to, so every send of a
 * pattern goes to an inserted address.
 */
#include "xport.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define JOIN_WAIT_S 60 /* how long one side waits for the other to start */

/* A name as one control message of fixed size. */
struct card {
    uint32_t len;
    unsigned char name[FM_NAME_MAX];
};

static void die(const char *what, int rc)
{
    fprintf(stderr, "fmperf: %s: %s\n", what, fm_strerror(rc));
    exit(1);
}

static struct card card_of(const fm_ep *ep)
{
    struct card c = {0};
    size_t len = sizeof(c.name);
    int rc = fm_ep_name(ep, c.name, &len);
    if (rc)
        die("fm_ep_name (is FM_KEY or $HOME set?)", rc);
    c.len = (uint32_t)len;
    return c;
}

static fm_addr insert(struct job *j, const struct card *c)
{
    fm_addr a;
    int rc = fm_addr_insert(j->ctx, c->name, c->len, &a);
    if (rc)
        die("fm_addr_insert", rc);
    return a;
}

/* Written aside and renamed, so that side 1 reads all of it or nothing. */
static void write_card(const char *path, const struct card *c)
{
    char tmp[4096];
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f || fwrite(c->name, 1, c->len, f) != c->len || fclose(f) != 0 ||
        rename(tmp, path) != 0) {
        fprintf(stderr, "fmperf: cannot write the name file %s\n", path);
        exit(1);
    }
}

static struct card read_card(const char *path)
{
    struct card c = {0};
    for (int tries = 0; tries < JOIN_WAIT_S * 100; tries++) {
        FILE *f = fopen(path, "rb");
        if (f) {
            c.len = (uint32_t)fread(c.name, 1, sizeof(c.name), f);
            fclose(f);
            return c;
        }
        usleep(10000);
    }
    fprintf(stderr, "fmperf: no name file %s after %d s: is side 0 running?\n", path,
            JOIN_WAIT_S);
    exit(1);
}

void job_join_by_name(struct job *j, const char *path, int side)
{
    j->rank = side;
    j->size = 2;
    j->named = 1;
    struct card mine = card_of(j->ctl), theirs;
    if (side == 0) {
        write_card(path, &mine);
        int rc = fm_wait(j->ctl, JOIN_WAIT_S * 1000);
        if (rc == FM_ETIMEDOUT) {
            fprintf(stderr, "fmperf: no side 1 joined through %s within %d s\n", path,
                    JOIN_WAIT_S);
            exit(1);
        }
        if (rc < 0)
            die("fm_wait", rc);
        job_ctl_recv(j, 1, &theirs, sizeof(theirs));
        unlink(path); /* joined: a later side 1 must not find this process */
        j->peer[1] = insert(j, &theirs);
    } else {
        theirs = read_card(path);
        j->peer[1] = insert(j, &theirs);
        job_ctl_send(j, 0, &mine, sizeof(mine));
    }
}

void job_introduce(struct job *j, uint32_t channel, fm_ep *ep)
{
    if (!j->named)
        return;
    struct card mine = card_of(ep), theirs;
    job_ctl_send(j, 1 - j->rank, &mine, sizeof(mine));
    job_ctl_recv(j, 1 - j->rank, &theirs, sizeof(theirs));
    j->peer[channel] = insert(j, &theirs);
}
