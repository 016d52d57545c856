/*
 * Fuzz target for the name-table replication protocol (src/names/distr.c):
 * whatever bytes come in, as messages to an agent that already has four
 * members and their publications, must not crash it, must not make it send
 * more than ND_MSG_MAX bytes, and must leave its table in step with what
 * its callbacks reported. An input is split before every later occurrence
 * of the magic "FMND", so one input can be a sequence of messages (an item
 * and the next one of the same origin). The clock advances with every
 * message and the agent ticks, so timeouts, downs, pings and tomb expiry
 * are reached too. The agent is rebuilt every RESET_EVERY inputs, which
 * bounds the memory that inputs naming new nodes can make it hold.
 *
 * Seeds in corpus/names/ come from `names_sim --dump-corpus DIR`: real
 * messages to agent 0 of a small run with the node ids, cards and
 * publication ids used here, one by one and in sequences.
 */
#include "names/distr.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NAGENTS 5
#define OWN_PUBS 3
#define STEP_US 10000u /* the clock, per message */
#define RESET_EVERY 2000

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The same as names_sim's dump_corpus(); a card is the agent's index.
 * Agent 0 sits in the middle of the sorted view, so with a fanout of 2 it
 * forwards the items of agent 2. */
static const uint32_t ids[NAGENTS] = {0x0a000203, 0x0a000001, 0x0a000102, 0x0a000304, 0x0a000405};
static const uint32_t cards[NAGENTS] = {0, 1, 2, 3, 4};

struct agent {
    struct nd *d;
    long held; /* publications of others, by the callbacks */
};
static struct agent ag[NAGENTS];
static uint64_t now;
static unsigned inputs;
static int setting_up;

/* While setting up, messages wait here for delivery. */
struct msg {
    uint32_t to;
    size_t len;
    unsigned char *bytes;
};
static struct msg queue[4096];
static size_t nqueue;

static void on_send(void *arg, uint32_t to, const void *card, size_t cardlen, const void *msg,
                    size_t len)
{
    (void)arg, (void)to;
    if (len < 16 || len > ND_MSG_MAX || cardlen > ND_CARD_MAX)
        abort(); /* a message no transport carries */
    uint32_t idx;
    if (!setting_up || cardlen != 4 || nqueue == sizeof(queue) / sizeof(queue[0]))
        return;
    memcpy(&idx, card, 4);
    if (idx >= NAGENTS)
        return;
    unsigned char *copy = malloc(len);
    if (!copy)
        abort();
    memcpy(copy, msg, len);
    queue[nqueue++] = (struct msg){idx, len, copy};
}

static void on_added(void *arg, uint32_t origin, const struct nd_pub *p)
{
    struct agent *a = arg;
    (void)origin;
    if (p->namelen > ND_NAME_MAX || p->lower > p->upper)
        abort(); /* the parser let a bad publication through */
    a->held++;
}

static void on_removed(void *arg, uint32_t origin, const struct nd_pub *p, int lost)
{
    struct agent *a = arg;
    (void)origin, (void)p, (void)lost;
    if (--a->held < 0)
        abort(); /* removed more than was added */
}

static void publish(struct nd *d, uint64_t id, uint32_t type)
{
    struct nd_pub p;
    memset(&p, 0, sizeof(p));
    p.id = id;
    p.type = type;
    p.lower = (uint32_t)id * 10;
    p.upper = p.lower + 5;
    p.namelen = 8;
    memcpy(p.name, "svc-fuzz", 8);
    if (nd_publish(d, &p))
        abort();
}

static void deliver_all(void)
{
    for (size_t k = 0; k < nqueue; k++) {
        /* Messages delivered here may queue more; they are handled in order. */
        struct msg m = queue[k];
        nd_input(ag[m.to].d, m.bytes, m.len, now);
        nd_flush(ag[m.to].d);
        free(m.bytes);
    }
    nqueue = 0;
}

static void teardown(void)
{
    for (int i = 0; i < NAGENTS; i++) {
        nd_free(ag[i].d);
        ag[i].d = NULL;
    }
}

/* Five agents join (1 and 2 through 0, 3 and 4 through 1) and publish; then
 * only agent 0 hears anything. */
static void setup(void)
{
    struct nd_params prm;
    nd_params_default(&prm);
    prm.tomb_us = 5000000; /* expiry within one life of the agent */
    prm.fanout = 2;        /* trees deeper than five members would have */
    now = 1000000;
    setting_up = 1;
    for (int i = 0; i < NAGENTS; i++) {
        struct nd_ops ops = {&ag[i], on_send, on_added, on_removed};
        ag[i].held = 0;
        ag[i].d = nd_new(ids[i], 1, &cards[i], 4, &ops, &prm, now);
        if (!ag[i].d)
            abort();
        for (uint32_t k = 0; k < OWN_PUBS; k++) /* ids as in names_sim */
            publish(ag[i].d, OWN_PUBS * (uint64_t)i + k + 1, 64 + k);
        if (i)
            nd_contact(ag[i].d, &cards[i < 3 ? 0 : 1], 4, now);
        deliver_all();
    }
    for (int round = 0; round < 10; round++) {
        now += 50000;
        for (int i = 0; i < NAGENTS; i++) {
            nd_tick(ag[i].d, now);
            nd_flush(ag[i].d);
        }
        deliver_all();
    }
    setting_up = 0;
    if (nd_members(ag[0].d) != NAGENTS || ag[0].held != (NAGENTS - 1) * OWN_PUBS)
        abort(); /* the setup itself did not converge */
}

static void input(struct nd *d, const uint8_t *msg, size_t len)
{
    if (len > ND_MSG_MAX)
        len = ND_MSG_MAX; /* what a transport delivers at most */
    now += STEP_US;
    nd_input(d, msg, len, now);
    nd_flush(d);
    nd_tick(d, now);
    nd_flush(d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ag[0].d || inputs++ % RESET_EVERY == 0) {
        teardown();
        setup();
    }
    struct nd *d = ag[0].d;
    size_t start = 0;
    for (size_t i = 1; i + 4 <= size; i++)
        if (!memcmp(data + i, "FMND", 4)) {
            input(d, data + start, i - start);
            start = i;
        }
    input(d, data + start, size - start);
    /* Its own publications are never touched by input; the others' are
     * exactly what the callbacks said. */
    if (nd_pubs(d) != (size_t)ag[0].held + OWN_PUBS || !nd_has_member(d, ids[0]) ||
        nd_members(d) < 1)
        abort();
    return 0;
}
