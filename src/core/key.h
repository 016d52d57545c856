/*
 * The domain key: what authenticates sessions between processes that no
 * launcher joined, as TIPC's cluster key does. FM_KEY (any text; both sides
 * must give the same), else a per-user key file made on first use with mode
 * 0600 ($HOME/.fastmsg/key: a home directory shared between nodes gives
 * every node the same key). Ranks of a launcher job keep their job key for
 * each other and use this one towards processes outside the job.
 */
#ifndef FM_KEY_H
#define FM_KEY_H

#include <stddef.h>
#include <stdint.h>

/* Fills key and says where it came from in `source` (for fm_info and the
 * logs). 0, or an FM_E* code with err written. */
int fm_key_load(uint8_t key[16], char *source, size_t srclen, char *err, size_t errlen);

/* Where the key would come from, without creating anything (fm_info). */
void fm_key_source(char *source, size_t srclen);

#endif
