#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds the API guide's
# ping-pong example, the names example and the OpenSHMEM example the way a
# user would (pkg-config, oshcc) and runs them.
#   install_test.sh BUILD_DIR SOURCE_DIR [SANITIZERS]
# (a sanitized library needs its runtime linked into the program as well)
set -eu
build=$1
src=$2
san=${3:+-fsanitize=$3}
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
for f in include/fastmsg.h lib/libfastmsg.so lib/libfastmsg.a lib/pkgconfig/fastmsg.pc \
         bin/fmrun bin/fmperf bin/fm_info; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed" >&2; exit 1; }
done
# The guide shows the example file verbatim.
guide_code=$(awk '/^```c$/{on=1; next} /^```$/{if(on) exit} on' "$src/docs/API.md")
if [ "$guide_code" != "$(cat "$src/examples/pingpong.c")" ]; then
  echo "FAIL: docs/API.md and examples/pingpong.c differ" >&2
  exit 1
fi
[ "$(wc -l < "$src/examples/pingpong.c")" -lt 60 ] || { echo "FAIL: example too long" >&2; exit 1; }
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror $san "$src/examples/pingpong.c" $(pkg-config --cflags --libs fastmsg) \
   -o "$prefix/pingpong"
out=$("$prefix/bin/fmrun" -n 2 "$prefix/pingpong")
[ "$out" = "$(printf 'pong\npong\npong')" ] || { echo "FAIL: example printed: $out" >&2; exit 1; }
"$prefix/bin/fm_info" | grep -q "FM_SHM_RING_SIZE" || { echo "FAIL: fm_info" >&2; exit 1; }
# The libfabric provider, when built: installed where libfabric's loader is
# pointed (<prefix>/lib/libfabric), found by fm_info and listed by fi_info.
if [ -e "$build/src/libfastmsg-fi.so" ]; then
  fidir=$prefix/lib/libfabric
  [ -e "$fidir/libfastmsg-fi.so" ] || { echo "FAIL: libfastmsg-fi.so not installed" >&2; exit 1; }
  "$prefix/bin/fm_info" | grep -q "$fidir/libfastmsg-fi.so (installed" ||
    { echo "FAIL: fm_info does not find the installed provider" >&2; exit 1; }
  # (fi_info cannot load a sanitized provider: it lacks the runtime)
  if [ -z "$san" ] && command -v fi_info >/dev/null; then
    FI_PROVIDER_PATH=$fidir fi_info -p fastmsg | grep -q "provider: fastmsg" ||
      { echo "FAIL: fi_info -p fastmsg does not list the installed provider" >&2; exit 1; }
  fi
fi
# Names: the installed program finds the installed agent (libexec/fastmsg).
[ -x "$prefix/libexec/fastmsg/fmnamed" ] || { echo "FAIL: fmnamed not installed" >&2; exit 1; }
# shellcheck disable=SC2046
cc -Wall -Wextra -Werror $san "$src/examples/names_hello.c" $(pkg-config --cflags --libs fastmsg) \
   -o "$prefix/names_hello"
out=$(FM_KEY=install-test-$$ FM_NAMES_LINGER_MS=200 "$prefix/names_hello")
[ "$out" = "hello from {1000, 1}" ] || { echo "FAIL: names example printed: $out" >&2; exit 1; }
# OpenSHMEM: the example built with the installed oshcc and with pkg-config,
# run with oshrun.
for f in include/shmem.h include/shmemx.h include/mpp/shmem.h include/mpp/shmemx.h \
  lib/libfmshmem.so lib/pkgconfig/fastmsg-shmem.pc bin/oshcc bin/oshrun; do
  [ -e "$prefix/$f" ] || { echo "FAIL: $f not installed" >&2; exit 1; }
done
# CC=oshcc, as `configure CC=oshcc` exports it: oshcc must not run itself.
CC="$prefix/bin/oshcc" timeout 60 "$prefix/bin/oshcc" -Wall -Werror $san \
  "$src/examples/shmem_ring.c" -o "$prefix/ring" ||
  { echo "FAIL: oshcc with CC=oshcc (status $?)" >&2; exit 1; }
# The headers' older place and the extensions header, as older programs include them.
printf '#include <mpp/shmem.h>\n#include <mpp/shmemx.h>\nint main(void) { return _my_pe(); }\n' \
  >"$prefix/mpp.c"
"$prefix/bin/oshcc" -Wall -Werror -c "$prefix/mpp.c" -o "$prefix/mpp.o" ||
  { echo "FAIL: <mpp/shmem.h> and <mpp/shmemx.h>" >&2; exit 1; }
# shellcheck disable=SC2046
cc -Wall -Werror $san "$src/examples/shmem_ring.c" $(pkg-config --cflags --libs fastmsg-shmem) \
   -o "$prefix/ring_pc"
for prog in ring ring_pc; do
  out=$("$prefix/bin/oshrun" -np 3 "$prefix/$prog" | sort)
  want=$(printf 'PE 0 of 3: from PE 2\nPE 1 of 3: from PE 0\nPE 2 of 3: from PE 1\narrived: 3')
  [ "$out" = "$want" ] || { echo "FAIL: $prog printed: $out" >&2; exit 1; }
done
echo "install: ok"
