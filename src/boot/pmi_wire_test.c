/* The PMI-1 line parser, on good and on broken lines. */
#include "boot/pmi_wire.h"
#include "testing/fmtest.h"

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
    CHECK_RC(parse("cmd=a a=1 b=2 c=3 d=4 e=5 f=6 g=7 h=8 i=9 j=10 k=11 l=12 m=13 n=14 o=15 p=16",
                   &m, buf), -1);

    CHECK(fm_pmi_token_ok("fm3.shm"));
    CHECK(!fm_pmi_token_ok("two words"));
    CHECK(!fm_pmi_token_ok("a=b"));
    CHECK(!fm_pmi_token_ok("tab\there"));
    return 0;
}
