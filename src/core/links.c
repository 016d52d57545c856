/* The registry: the one place that names the transports. A route tries
 * them in this order, so the on-node link comes first. */
#include "link.h"

extern const struct fm_link fm_shm_link;
extern const struct fm_link fm_udp_link;

const struct fm_link *const fm_links[] = {&fm_shm_link, &fm_udp_link};
const int fm_nlinks = (int)(sizeof(fm_links) / sizeof(fm_links[0]));

int fm_link_index(const struct fm_link *link)
{
    for (int i = 0; i < fm_nlinks; i++)
        if (fm_links[i] == link)
            return i;
    return -1;
}

_Static_assert(sizeof(fm_links) / sizeof(fm_links[0]) <= FM_LINKS_MAX, "raise FM_LINKS_MAX");
