/* libFuzzer target: the launcher-facing parsers (PMI-1 lines, PMI-2 frames,
 * the process mapping, a peer's rails card, configuration values) on
 * arbitrary bytes. */
#include "boot/nodemap.h"
#include "boot/pmi_wire.h"
#include "core/config.h"
#include "net/rails.h"

#include <arpa/inet.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char line[FM_PMI_LINE_MAX + 1];
    size_t n = size < FM_PMI_LINE_MAX ? size : FM_PMI_LINE_MAX;
    memcpy(line, data, n);
    line[n] = '\0';

    char copy[FM_PMI_LINE_MAX + 1];
    memcpy(copy, line, n + 1);
    struct fm_pmi_msg msg;
    if (fm_pmi_parse(copy, &msg) == 0) {
        /* Every parsed word lies inside the line and has a key. */
        for (int i = 0; i < msg.nargs; i++) {
            if (!msg.arg[i].key[0] || msg.arg[i].key < copy || msg.arg[i].val > copy + n)
                abort();
        }
        (void)fm_pmi_get(&msg, "cmd");
    }
    (void)fm_pmi_token_ok(line);

    char frame[FM_PMI2_MSG_MAX + 1];
    size_t fn = size < FM_PMI2_MSG_MAX ? size : FM_PMI2_MSG_MAX;
    memcpy(frame, data, fn);
    if (fm_pmi2_parse(frame, fn, &msg) == 0)
        for (int i = 0; i < msg.nargs; i++)
            if (!msg.arg[i].key[0] || msg.arg[i].key < frame || msg.arg[i].val > frame + fn)
                abort();

    int node[64];
    if (fm_nodemap_parse(line, 64, node) == 0)
        for (int i = 0; i < 64; i++)
            if (node[i] < 0)
                abort();

    /* Two local rails, 10.1.0.1/24 and 10.2.0.1/16 (static: fm_udp is big). */
    static struct fm_udp rails[2];
    rails[0].addr.sin_addr.s_addr = htonl(0x0A010001);
    rails[0].netmask = htonl(0xFFFFFF00);
    rails[1].addr.sin_addr.s_addr = htonl(0x0A020001);
    rails[1].netmask = htonl(0xFFFF0000);
    struct sockaddr_in out[FM_RAILS_MAX];
    int m = fm_rails_match(rails, 2, line, out);
    if (m > 2)
        abort();
    for (int r = 0; m > 0 && r < 2; r++)
        if (out[r].sin_family && out[r].sin_port == 0)
            abort();

    char err[256];
    fm_cfg_str v; /* big enough for any kind */
    for (size_t i = 0; i < fm_cfg_count; i++)
        (void)fm_config_parse(&fm_cfg_table[i], line, v, err, sizeof(err));
    return 0;
}
