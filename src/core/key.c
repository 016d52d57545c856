#include "key.h"

#include "fastmsg.h"
#include "hex.h"
#include "siphash.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_HEX 32

/* FM_KEY's text, stretched to 16 bytes by two keyed hashes. */
static void key_from_text(const char *text, uint8_t key[16])
{
    static const uint8_t salt[2][16] = {"fastmsg domain 0", "fastmsg domain 1"};
    for (int half = 0; half < 2; half++) {
        uint64_t h = fm_siphash(salt[half], text, strlen(text));
        memcpy(key + 8 * half, &h, 8);
    }
}

static int key_path(char *path, size_t len)
{
    const char *home = getenv("HOME");
    if (!home || !*home)
        return -1;
    return snprintf(path, len, "%s/.fastmsg/key", home) < (int)len ? 0 : -1;
}

void fm_key_source(char *source, size_t srclen)
{
    char path[512];
    if (getenv("FM_KEY") && *getenv("FM_KEY"))
        snprintf(source, srclen, "FM_KEY");
    else if (key_path(path, sizeof(path)) == 0)
        snprintf(source, srclen, "%s%s", path,
                 access(path, R_OK) == 0 ? "" : " (made at first use)");
    else
        snprintf(source, srclen, "none: set FM_KEY or HOME");
}

/* Reads the key file, or makes it (and its directory) when there is none.
 * Two processes that start at once may both try: O_EXCL lets one win, and
 * the other reads what it wrote. */
static int key_file(const char *path, uint8_t key[16], char *err, size_t errlen)
{
    char hex[KEY_HEX + 2] = "";
    for (int attempt = 0; attempt < 50; attempt++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            struct stat st;
            ssize_t n = read(fd, hex, KEY_HEX + 1);
            int ok = fstat(fd, &st) == 0;
            close(fd);
            if (ok && (st.st_mode & 077)) {
                snprintf(err, errlen, "the key file %s may be read by others (mode %03o): "
                         "chmod 600 it", path, (unsigned)(st.st_mode & 0777));
                return FM_EINVAL;
            }
            if (n == 0) {
                usleep(2000); /* its maker wrote it whole, but not yet */
                continue;
            }
            if (n < KEY_HEX || fm_hex_decode(hex, key, 16) < 0) {
                snprintf(err, errlen, "the key file %s does not hold 32 hex digits: remove it "
                         "to make a new one (on every node that shares it)", path);
                return FM_EINVAL;
            }
            return 0;
        }
        char dir[512];
        snprintf(dir, sizeof(dir), "%s", path);
        *strrchr(dir, '/') = '\0';
        if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
            snprintf(err, errlen, "cannot make %s for the key file: %s", dir, strerror(errno));
            return FM_ESYS;
        }
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0) {
            if (errno == EEXIST)
                continue;
            snprintf(err, errlen, "cannot make the key file %s: %s", path, strerror(errno));
            return FM_ESYS;
        }
        uint8_t fresh[16];
        if (getrandom(fresh, sizeof(fresh), 0) != (ssize_t)sizeof(fresh)) {
            close(fd);
            unlink(path);
            snprintf(err, errlen, "no randomness for the key: %s", strerror(errno));
            return FM_ESYS;
        }
        fm_hex_encode(fresh, sizeof(fresh), hex);
        hex[KEY_HEX] = '\n';
        ssize_t w = write(fd, hex, KEY_HEX + 1);
        close(fd);
        if (w != KEY_HEX + 1) {
            unlink(path);
            snprintf(err, errlen, "cannot write the key file %s", path);
            return FM_ESYS;
        }
        memcpy(key, fresh, 16);
        return 0;
    }
    snprintf(err, errlen, "the key file %s stays empty: remove it", path);
    return FM_EINVAL;
}

int fm_key_load(uint8_t key[16], char *source, size_t srclen, char *err, size_t errlen)
{
    const char *text = getenv("FM_KEY");
    char path[512];
    if (text && *text) {
        key_from_text(text, key);
        snprintf(source, srclen, "FM_KEY");
        return 0;
    }
    if (key_path(path, sizeof(path)) < 0) {
        snprintf(err, errlen, "no domain key: set FM_KEY (the same text for every process "
                              "that is to talk by name), or HOME for a key file");
        return FM_EINVAL;
    }
    snprintf(source, srclen, "%s", path);
    return key_file(path, key, err, errlen);
}
