/* PMI_process_mapping as hydra and fmrun write it. */
#include "boot/nodemap.h"
#include "testing/fmtest.h"

int main(void)
{
    int node[8];
    /* hydra, 4 ranks on one node, one rank per block: the vector repeats. */
    CHECK_RC(fm_nodemap_parse("(vector,(0,1,1))", 4, node), 0);
    for (int i = 0; i < 4; i++)
        CHECK_EQ(node[i], 0);
    /* Two nodes, blocks of two. */
    CHECK_RC(fm_nodemap_parse("(vector,(0,2,2))", 4, node), 0);
    CHECK_EQ(node[0], 0);
    CHECK_EQ(node[1], 0);
    CHECK_EQ(node[2], 1);
    CHECK_EQ(node[3], 1);
    /* Cyclic: one rank per node over 3 nodes, 7 ranks. */
    CHECK_RC(fm_nodemap_parse("(vector,(0,3,1))", 7, node), 0);
    CHECK_EQ(node[3], 0);
    CHECK_EQ(node[5], 2);
    CHECK_EQ(node[6], 0);
    /* Several triples. */
    CHECK_RC(fm_nodemap_parse("(vector, (0,1,3), (1,1,1))", 4, node), 0);
    CHECK_EQ(node[2], 0);
    CHECK_EQ(node[3], 1);

    char buf[64];
    CHECK(fm_nodemap_format(buf, sizeof(buf), 2, 3) > 0);
    CHECK_RC(fm_nodemap_parse(buf, 6, node), 0);
    CHECK_EQ(node[2], 0);
    CHECK_EQ(node[3], 1);

    CHECK_RC(fm_nodemap_parse("", 2, node), -1);
    CHECK_RC(fm_nodemap_parse("(vector)", 2, node), -1);
    CHECK_RC(fm_nodemap_parse("(vector,(0,0,0))", 2, node), -1);
    CHECK_RC(fm_nodemap_parse("(vector,(0,1,-2))", 2, node), -1);
    CHECK_RC(fm_nodemap_parse("(vector,(0,1,1)) junk", 2, node), -1);
    CHECK_RC(fm_nodemap_parse("(scalar,(0,1,1))", 2, node), -1);
    /* Node numbers past INT_MAX are refused. */
    CHECK_RC(fm_nodemap_parse("(vector,(1073741824,1073741824,1))", 2, node), -1);
    /* A triple of many nodes with no ranks costs nothing (found by fuzz_pmi:
     * it used to loop once per node). */
    CHECK_RC(fm_nodemap_parse("(vector,(0,552355552,0),(2,1,1))", 8, node), 0);
    CHECK_EQ(node[7], 2);
    return 0;
}
