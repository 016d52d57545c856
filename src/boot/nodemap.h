/*
 * PMI_process_mapping: which ranks share a node. The launcher writes
 * "(vector,(start,nodes,ranks_per_node),...)": each triple gives `nodes`
 * consecutive node ids from `start`, each taking `ranks_per_node` consecutive
 * ranks; the vector repeats until every rank has a node (MPICH's reading).
 */
#ifndef FM_NODEMAP_H
#define FM_NODEMAP_H

#include <stddef.h>

/* Fills node_of[0..size) from the mapping string; returns 0 or -1 if the
 * string is malformed or assigns no rank. */
int fm_nodemap_parse(const char *s, int size, int *node_of);

/* Writes the mapping of `nodes` nodes with blocks of `per_node` ranks
 * (the last node may have fewer). Returns the length or -1 if too long. */
int fm_nodemap_format(char *buf, size_t len, int nodes, int per_node);

#endif
