/* The PMI-1 line parser, on good and on broken lines. */
#include "boot/pmi_wire.h"
#include "testing/fmtest.h"

#include <stdio.h>
#include <string.h>

static int parse(const char *text, struct fm_pmi_msg *m, char *buf)
{
    strcpy(buf, text);
    return fm_pmi_parse(buf, m);
}

int main(void)
{
    struct fm_pmi_msg m;
    char buf[FM_PMI_LINE_MAX];

    CHECK_RC(parse("cmd=get_result rc=0 msg=success value=(vector,(0,1,2))", &m, buf), 0);
    CHECK_EQ(m.nargs, 4);
    CHECK(strcmp(fm_pmi_get(&m, "cmd"), "get_result") == 0);
    CHECK(strcmp(fm_pmi_get(&m, "value"), "(vector,(0,1,2))") == 0);
    CHECK(fm_pmi_get(&m, "nope") == NULL);

    CHECK_RC(parse("  cmd=barrier_out   ", &m, buf), 0);
    CHECK_EQ(m.nargs, 1);
    CHECK_RC(parse("cmd=put key=a value=", &m, buf), 0); /* empty value is allowed */
    CHECK(strcmp(fm_pmi_get(&m, "value"), "") == 0);
    CHECK_RC(parse("cmd=put key=a=b", &m, buf), 0); /* '=' after the first belongs to the value */
    CHECK(strcmp(fm_pmi_get(&m, "key"), "a=b") == 0);

    CHECK_RC(parse("", &m, buf), -1);
    CHECK_RC(parse("hello", &m, buf), -1);
    CHECK_RC(parse("=x", &m, buf), -1);
    CHECK_RC(parse("key=a cmd=put", &m, buf), -1);
    char many[FM_PMI_LINE_MAX] = "cmd=a";
    for (int i = 0; i < FM_PMI_ARGS_MAX; i++)
        sprintf(many + strlen(many), " k%d=%d", i, i);
    CHECK_RC(parse(many, &m, buf), -1);

    CHECK(fm_pmi_token_ok("fm3.shm"));

    /* PMI-2 payloads: ";;" is a ';' inside a value, and a frame ends with ';'. */
    strcpy(buf, "cmd=kvs-get-response;found=TRUE;value=a;;b;;;rc=0;");
    CHECK_RC(fm_pmi2_parse(buf, strlen(buf), &m), 0);
    CHECK_EQ(m.nargs, 4);
    CHECK(strcmp(fm_pmi_get(&m, "value"), "a;b;") == 0);
    CHECK(strcmp(fm_pmi_get(&m, "rc"), "0") == 0);
    strcpy(buf, "cmd=x;empty=;y=1;");
    CHECK_RC(fm_pmi2_parse(buf, strlen(buf), &m), 0);
    CHECK(strcmp(fm_pmi_get(&m, "empty"), "") == 0);
    const char *bad[] = {"", "cmd=x", "cmd=x;y", "cmd=x;=1;", "key=1;cmd=x;", ";", "cmd=x;;"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        strcpy(buf, bad[i]);
        CHECK_RC(fm_pmi2_parse(buf, strlen(buf), &m), -1);
    }

    /* Building a request escapes ';' and refuses what does not fit. */
    char req[32];
    size_t len = 0;
    CHECK_RC(fm_pmi2_append(req, sizeof(req), &len, "cmd", "kvs-put"), 0);
    CHECK_RC(fm_pmi2_append(req, sizeof(req), &len, "value", "a;b"), 0);
    CHECK(len == strlen("cmd=kvs-put;value=a;;b;") && memcmp(req, "cmd=kvs-put;value=a;;b;", len) == 0);
    CHECK_RC(fm_pmi2_append(req, sizeof(req), &len, "key", "too-long-for-the-rest"), -1);
    CHECK(len == strlen("cmd=kvs-put;value=a;;b;"));
    memcpy(buf, req, len);
    CHECK_RC(fm_pmi2_parse(buf, len, &m), 0);
    CHECK(strcmp(fm_pmi_get(&m, "value"), "a;b") == 0);

    CHECK(!fm_pmi_token_ok("two words"));
    CHECK(!fm_pmi_token_ok("a=b"));
    CHECK(!fm_pmi_token_ok("tab\there"));
    return 0;
}
