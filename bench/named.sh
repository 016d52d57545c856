#!/usr/bin/env bash
# Peers by name against ranks, on this host: fmperf latency (8 B, 1K, 64K), msgrate (8 B) and
# bw (64K, 1M) between two ranks under fmrun, then between two programs started by hand and
# joined by name (fmperf --name-file), each over UDP (FM_TRANSPORTS=udp) and with the default
# transports (shared memory for ranks), the four in turn in each round. Prints the median over
# the rounds of each and the ratio named / ranks over the same link.
#   bench/named.sh [--quick]       ROUNDS (default 3; --quick: 1, and few iterations)
# Named peers may not have shared memory yet: the ratio to shm ranks is printed only when the
# named pair's 1 MiB bandwidth with the default transports is nearer shm ranks' than UDP's.
set -u
cd "$(dirname "$0")/.."
FMRUN=build/release/tools/fmrun
FMPERF=build/release/tools/fmperf
log() { printf 'named.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }
[ -x "$FMRUN" ] && [ -x "$FMPERF" ] || die "build first: cmake --build build/release"
command -v python3 >/dev/null || die "python3 is needed for the table"

quick=0
[ "${1:-}" = "--quick" ] && quick=1
rounds=${ROUNDS:-$((quick ? 1 : 3))}
if [ $quick = 1 ]; then
  it_lat="--iters 1000" it_rate="--iters 100000 --reps 3" it_bw="--iters 640"
else
  it_lat= it_rate= it_bw= # fmperf's own counts, scaled by size
fi
limit=300 # seconds per run

tmp=$(mktemp -d) || die "cannot make a temporary directory"
side1=
trap '[ -n "$side1" ] && kill "$side1" 2>/dev/null; rm -rf "$tmp"' EXIT
export FM_KEY=${FM_KEY:-named-bench-$$-$RANDOM} # the domain key both sides share
results=$tmp/results.jsonl

# ranks LABEL TRANSPORTS TEST ARGS...: two ranks under fmrun.
ranks() {
  local label=$1 transports=$2
  shift 2
  FM_TRANSPORTS=$transports timeout $limit "$FMRUN" -n 2 "$FMPERF" "$@" --json \
    --label "$label" >>"$results" || die "failed: FM_TRANSPORTS=$transports fmrun fmperf $*"
}

# named LABEL TRANSPORTS TEST ARGS...: two programs started here, joined through a name
# file; side 0 prints.
named() {
  local label=$1 transports=$2 file=$tmp/name
  shift 2
  FM_TRANSPORTS=$transports timeout $limit "$FMPERF" "$@" --name-file "$file" --side 1 \
    >/dev/null &
  side1=$!
  FM_TRANSPORTS=$transports timeout $limit "$FMPERF" "$@" --name-file "$file" --side 0 \
    --json --label "$label" >>"$results" ||
    die "failed: FM_TRANSPORTS=$transports fmperf $* --name-file (side 0)"
  wait "$side1" || die "failed: FM_TRANSPORTS=$transports fmperf $* --name-file (side 1)"
  side1=
}

for r in $(seq 1 "$rounds"); do
  for t in "latency --sizes 8,1K,64K $it_lat" "msgrate --sizes 8 $it_rate" \
    "bw --sizes 64K,1M $it_bw"; do
    log "round $r of $rounds: fmperf $t"
    ranks fastmsg-ranks-udp udp $t
    named fastmsg-named-udp udp $t
    ranks fastmsg-ranks shm,udp $t
    named fastmsg-named shm,udp $t
  done
done

python3 - "$results" "$rounds" <<'EOF'
import json, math, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    runs.setdefault((r["test"], r["size"], r["unit"]), {}).setdefault(
        r["transport"], []).append(r["value"])
med = {k: {t: statistics.median(v) for t, v in by.items()} for k, by in runs.items()}
# Large messages tell the links apart best: UDP loopback is several times slower than shared
# memory there, and small messages' times also depend on how a waiting side wakes up.
bw = med[("bw", 1 << 20, "MB/s")]
named_shm = bw["fastmsg-named"] > math.sqrt(bw["fastmsg-ranks-udp"] * bw["fastmsg-ranks"])
print(f"# medians of {sys.argv[2]} round(s); ratio = named / ranks (latency: lower is better, "
      "msgrate and bw: higher)")
print(f"# named peers use {'shared memory' if named_shm else 'UDP'}: 1 MiB bw "
      f"{bw['fastmsg-named']:.0f} MB/s, ranks {bw['fastmsg-ranks-udp']:.0f} over UDP, "
      f"{bw['fastmsg-ranks']:.0f} over shm")
pairs = [("fastmsg-ranks-udp", "fastmsg-named-udp")]
head = f"{'test':8} {'size':>7} {'unit':6} {'ranks-udp':>10} {'named-udp':>10} {'ratio':>7}"
if named_shm:
    pairs.append(("fastmsg-ranks", "fastmsg-named"))
    head += f" {'ranks-shm':>10} {'named':>10} {'ratio':>7}"
print(head)
def human(s):
    return f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB" if s >= 1024 else f"{s} B"
for (test, size, unit), m in med.items():
    print(f"{test:8} {human(size):>7} {unit:6}" +
          "".join(f" {m[r]:10.3f} {m[n]:10.3f} {m[n] / m[r]:6.2f}x" for r, n in pairs))
EOF
