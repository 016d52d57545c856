#!/usr/bin/env bash
# A receive at an endpoint with many quiet network rings (bench/many_rings.c):
# 16 sending ranks on this host over UDP (loopback), each with 1 and then 63
# quiet endpoints, so rank 0's endpoint holds 17 and 1,009 rings. Prints
# many_rings' JSON lines; ROUNDS=N repeats the pair (default 3).
#   bash bench/many_rings.sh
set -u
cd "$(dirname "$0")/.."
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build build/release >/dev/null || exit 1
mkdir -p build/bench
prog=build/bench/many_rings
cc -O2 -std=c11 -D_GNU_SOURCE -Iinclude bench/many_rings.c -o "$prog" -Lbuild/release/src \
  -Wl,-rpath,"$PWD/build/release/src" -lfastmsg || exit 1
for _ in $(seq "${ROUNDS:-3}"); do
  for quiet in 1 63; do
    FM_EP_MAX=64 FM_TRANSPORTS=udp timeout 300 build/release/tools/fmrun -n 17 "$prog" "$quiet" || exit 1
  done
done
