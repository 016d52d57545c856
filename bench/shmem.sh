#!/usr/bin/env bash
# OpenSHMEM: fastmsg's libfmshmem next to Open MPI's oshmem (spml ucx), the
# same program (bench/shmem/shmem_perf.c, OpenSHMEM 1.4 calls only) built
# with each one's oshcc, runs alternating so each ratio compares neighbours;
# then fastmsg between two network-namespace hosts: latencies next to
# fastmsg's own 8 B round trip, with the target computing, and put
# bandwidth over rails shaped to 1 Gbit/s next to kernel TCP.
#   bench/shmem.sh [--quick]        (ROUNDS=N)
# Results: build/bench/shmem.jsonl, table: build/bench/shmem.md.
set -u
cd "$(dirname "$0")/.."
rounds=${ROUNDS:-3}
reps=20000
[ "${1:-}" = "--quick" ] && { rounds=1; reps=5000; }
bash scripts/deps.sh bench || exit 1
cmake -S . -B build/release -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null &&
  cmake --build build/release >/dev/null || exit 1
out=build/bench
mkdir -p "$out"
res=$out/shmem.jsonl
: >"$res"
FMRUN=$PWD/build/release/tools/fmrun
FMPERF=$PWD/build/release/tools/fmperf
build/release/tools/oshcc -O2 bench/shmem/shmem_perf.c -o "$out/shmem_perf_fm" || exit 1
om=0
if command -v oshcc >/dev/null && oshcc -O2 bench/shmem/shmem_perf.c -o "$out/shmem_perf_om"; then
  om=1
else
  echo "note: no Open MPI oshcc: the oshmem column is left out" >&2
fi
log() { printf 'shmem.sh: %s\n' "$*" >&2; }

# record IMPL WHERE ROUND: shmem_perf's lines "name value unit" as JSON lines.
record() {
  python3 -c '
import json, re, sys
impl, where, rnd = sys.argv[1], sys.argv[2], int(sys.argv[3])
for line in sys.stdin:
    m = re.match(r"^(\S.*?)\s+([0-9.]+) (us|MB/s)$", line.rstrip())
    if m:
        print(json.dumps({"impl": impl, "where": where, "round": rnd, "name": m.group(1),
                          "value": float(m.group(2)), "unit": m.group(3)}))' "$@" >>"$res"
}

# One node: 2 PEs (the operations), 4 PEs on 2 cores (the barrier).
for r in $(seq 1 "$rounds"); do
  for n in 2 4; do
    log "round $r: fastmsg, $n PEs"
    timeout 600 "$FMRUN" -n $n "$out/shmem_perf_fm" --reps $reps | record fastmsg "node$n" "$r"
    if [ $om -eq 1 ]; then
      log "round $r: oshmem, $n PEs"
      timeout 600 oshrun --allow-run-as-root --oversubscribe --mca osc ^rdma -np $n \
        "$out/shmem_perf_om" --reps $reps 2>/dev/null | record oshmem "node$n" "$r"
    fi
  done
done

# Two hosts. Open MPI's launcher cannot start ranks in namespaces here, so
# the references are fastmsg's own 8 B round trip and kernel TCP.
if [ "$(id -u)" -eq 0 ]; then
  source bench/rails_ns.sh
  trap rails_ns_down EXIT
  if rails_ns_up; then
    launch=(--hosts "$A,$B" --launcher "ip netns exec {host}" --pmi-addr "$MGMT.254" -n 2)
    net_reps=$((reps / 4))
    for r in $(seq 1 "$rounds"); do
      log "round $r: two hosts, unshaped rail"
      export FM_RAILS=$(rails_spec 0)
      timeout 600 "$FMRUN" "${launch[@]}" "$out/shmem_perf_fm" --reps $net_reps |
        record fastmsg hosts "$r"
      timeout 600 "$FMRUN" "${launch[@]}" "$out/shmem_perf_fm" --reps $net_reps --compute |
        sed 's/^get 8 B heap/get 8 B, heap, target computes/; s/^fetch-add heap/fetch-add, heap, target computes/' |
        record fastmsg hosts "$r"
      timeout 600 "$FMRUN" "${launch[@]}" "$FMPERF" latency --sizes 8 --json |
        python3 -c '
import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if j.get("transport") == "fastmsg":
        print("fastmsg round trip 8 B %.3f us" % (2 * j["value"]))' | record fastmsg hosts "$r"
    done
    for i in 0 1; do rails_shape $i 1gbit; done
    for r in $(seq 1 "$rounds"); do
      log "round $r: two hosts, rails shaped to 1 Gbit/s"
      FM_RAILS=$(rails_spec 0) timeout 600 "$FMRUN" "${launch[@]}" "$out/shmem_perf_fm" \
        --reps 2000 --rounds 3 | grep 'put 1 MiB' | record fastmsg rail1 "$r"
      FM_RAILS=$(rails_spec 0 1) timeout 600 "$FMRUN" "${launch[@]}" "$out/shmem_perf_fm" \
        --reps 2000 --rounds 3 | grep 'put 1 MiB' | record fastmsg rail2 "$r"
      FM_RAILS=$(rails_spec 0) timeout 600 "$FMRUN" "${launch[@]}" "$FMPERF" bw --sizes 1M \
        --peer tcp --json | python3 -c '
import json, sys
for l in sys.stdin:
    j = json.loads(l)
    if j.get("transport") == "tcp":
        print("kernel TCP 1 MiB %.1f MB/s" % j["value"])' | record tcp rail1 "$r"
    done
  else
    log "cannot create namespaces: the two-host rows are left out"
  fi
fi
python3 bench/shmem_report.py "$res" >"$out/shmem.md"
cat "$out/shmem.md"
