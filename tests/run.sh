#!/usr/bin/env bash
# Builds fastmsg and runs every test: the release build with -Werror, the
# same suite under AddressSanitizer and UndefinedBehaviorSanitizer, the
# threaded cases under ThreadSanitizer, and the fuzz targets for a bounded time.
#   tests/run.sh            (FUZZ_SECONDS=N to fuzz longer, JOBS=N for ctest)
set -eu
cd "$(dirname "$0")/.."
bash scripts/deps.sh test
jobs=${JOBS:-2}
fuzz_seconds=${FUZZ_SECONDS:-20}

step() { printf '\n=== %s\n' "$*"; }

step "release build, -Wall -Wextra -Werror"
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release -DFM_WERROR=ON >/dev/null
cmake --build build/release
(cd build/release && ctest --output-on-failure -j "$jobs")

step "ASan + UBSan build"
cmake -S . -B build/sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFM_WERROR=ON \
      -DFM_SANITIZE=address,undefined >/dev/null
cmake --build build/sanitize
supp=$PWD/tests/lsan.supp
(cd build/sanitize && LSAN_OPTIONS=suppressions=$supp ctest --output-on-failure -j "$jobs")

step "ThreadSanitizer build, the cases where threads meet (ctest -L threaded)"
cmake -S . -B build/tsan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFM_SANITIZE=thread >/dev/null
cmake --build build/tsan
(cd build/tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -j "$jobs" -L threaded)

step "fuzz targets, ${fuzz_seconds}s each (clang, libFuzzer + ASan + UBSan)"
CC=clang-14 cmake -S . -B build/fuzz -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFM_FUZZ=ON \
      -DFM_SANITIZE=address,undefined -DFUZZ_SECONDS="$fuzz_seconds" >/dev/null
cmake --build build/fuzz
(cd build/fuzz && ctest --output-on-failure -L fuzz)

step "all tests passed"
