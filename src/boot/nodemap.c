#include "nodemap.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRIPLES_MAX 1024

static int parse_num(const char **p, long *out)
{
    char *end;
    long v = strtol(*p, &end, 10);
    if (end == *p || v < 0 || v > (1L << 30))
        return -1;
    *p = end;
    *out = v;
    return 0;
}

static int expect(const char **p, char c)
{
    while (**p == ' ')
        (*p)++;
    if (**p != c)
        return -1;
    (*p)++;
    while (**p == ' ')
        (*p)++;
    return 0;
}

int fm_nodemap_parse(const char *s, int size, int *node_of)
{
    long t[TRIPLES_MAX][3];
    int n = 0;
    const char *p = s;
    if (size <= 0 || expect(&p, '(') || strncmp(p, "vector", 6) != 0)
        return -1;
    p += 6;
    while (expect(&p, ',') == 0) {
        if (n == TRIPLES_MAX || expect(&p, '(') || parse_num(&p, &t[n][0]) ||
            expect(&p, ',') || parse_num(&p, &t[n][1]) || expect(&p, ',') ||
            parse_num(&p, &t[n][2]) || expect(&p, ')'))
            return -1;
        n++;
    }
    if (expect(&p, ')') || *p != '\0' || n == 0)
        return -1;
    long total_in_vector = 0;
    for (int i = 0; i < n; i++) {
        if (t[i][0] + t[i][1] > INT_MAX)
            return -1;
        total_in_vector += t[i][1] * t[i][2];
    }
    if (total_in_vector == 0)
        return -1;
    /* A triple with no nodes or no ranks per node assigns nothing; skipping
     * it keeps the work proportional to `size`, whatever its node count. */
    int assigned = 0;
    while (assigned < size) {
        for (int i = 0; i < n && assigned < size; i++) {
            if (t[i][1] == 0 || t[i][2] == 0)
                continue;
            for (long node = 0; node < t[i][1] && assigned < size; node++)
                for (long k = 0; k < t[i][2] && assigned < size; k++)
                    node_of[assigned++] = (int)(t[i][0] + node);
        }
    }
    return 0;
}

int fm_nodemap_format(char *buf, size_t len, int nodes, int per_node)
{
    int n = snprintf(buf, len, "(vector,(0,%d,%d))", nodes, per_node);
    return n < 0 || (size_t)n >= len ? -1 : n;
}
