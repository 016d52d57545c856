#!/usr/bin/env bash
# Names (docs/names.md): lookup time by table size; publish-to-event latency
# on one host and between two namespace hosts; multicast to 1..8 members
# next to as many sends; seed 002's connection-per-message test (Tables 1
# and 2: 128 B to 4 KiB) by name, by rank and over TCP, within a host and
# between hosts; the protocol's simulation at 1,000 nodes. Variants of one
# figure alternate in each round; medians over the rounds are reported.
#   bench/names.sh [--quick]        ROUNDS (default 3; --quick: 1); NAMES_SIM=0 skips
#                                   the simulation (4 minutes and 13 GB at 1,000 hosts)
# Prints the markdown table and writes it to build/bench/names.md.
set -u -o pipefail
cd "$(dirname "$0")/.."
FMRUN=build/release/tools/fmrun
FMPERF=build/release/tools/fmperf
SIM=build/release/tests/names_sim
log() { printf 'names.sh: %s\n' "$*" >&2; }
[ -x "$FMRUN" ] && [ -x "$FMPERF" ] || { log "build first: cmake --build build/release"; exit 1; }
quick=0
[ "${1:-}" = "--quick" ] && quick=1
rounds=${ROUNDS:-$((quick ? 1 : 3))}
reps=100000 # seed 002's repetitions
pubs=1,1000,100000
[ $quick = 1 ] && reps=2000 pubs=1,1000
mkdir -p build/bench
results=build/bench/names.jsonl
: >"$results"
export FM_NAMES_LINGER_MS=500
limit=1800

# Two hosts: namespaces A and B on one rail (bench/rails_ns.sh).
. bench/rails_ns.sh
side1=
trap 'rails_ns_down; [ -n "$side1" ] && kill "$side1" 2>/dev/null' EXIT
rails_ns_up || { log "cannot create network namespaces (root needed)"; exit 1; }

tag() { sed "s/^{/{\"run\": \"$1\", /"; } # which run a JSON line came from
run() { # run LABEL COMMAND...: one fmperf run on this host
  local label=$1
  shift
  FM_KEY=names-bench-$$-$RANDOM timeout $limit "$@" --json | tag "$label" >>"$results" ||
    log "failed: $*"
}
hosts() { # hosts LABEL TEST ARGS...: side 1 on host B, side 0 on host A, joined by name
  local label=$1 file
  shift
  file=$(mktemp /tmp/names-bench.XXXXXX)
  rm -f "$file"
  local env=(env FM_KEY=names-bench-$$-$RANDOM FM_TRANSPORTS=udp FM_RAILS="$(rails_spec 0)")
  ip netns exec "$B" "${env[@]}" timeout $limit "$FMPERF" "$@" --name-file "$file" --side 1 \
    >/dev/null &
  side1=$!
  ip netns exec "$A" "${env[@]}" timeout $limit "$FMPERF" "$@" --name-file "$file" --side 0 \
    --json | tag "$label" >>"$results"
  # Side 1 waits for side 0 to the end of its time limit: not after a failure.
  report_exit "${PIPESTATUS[0]}" "$limit" "two hosts: $*" || kill "$side1" 2>/dev/null
  wait "$side1"
  side1=
  rm -f "$file"
}

log "lookup by table size ($pubs names)"
run lookup "$FMPERF" names-lookup --pubs "$pubs"
for r in $(seq 1 "$rounds"); do
  log "round $r of $rounds"
  run event-host "$FMRUN" -n 2 "$FMPERF" names-event --iters 1000
  hosts event-hosts names-event --iters 1000
  for n in 1 2 4 8; do run "mcast-$n" "$FMRUN" -n $((n + 1)) "$FMPERF" mcast --sizes 8,1K; done
  # Seed 002: a connection per message, 128 B to 4 KiB.
  run connect-host-name "$FMRUN" -n 2 "$FMPERF" connect --names --sizes 128,1K,4K --iters $reps
  run connect-host-rank "$FMRUN" -n 2 "$FMPERF" connect --sizes 128,1K,4K --iters $reps \
    --peer tcp
  hosts connect-hosts-name connect --names --sizes 128,1K,4K --iters $reps
  hosts connect-hosts-rank connect --sizes 128,1K,4K --iters $reps --peer tcp
done
sim=""
if [ -x "$SIM" ] && [ "${NAMES_SIM:-1}" != 0 ]; then
  log "the protocol's simulation"
  if [ $quick = 1 ]; then sim=$("$SIM" --quick 2>&1); else sim=$("$SIM" 2>&1); fi
fi

python3 - "$results" "$rounds" <<'EOF' >build/bench/names.md
import json, statistics, sys
from collections import defaultdict
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = defaultdict(list)
for r in rows:
    key = (r["run"], r["test"], r["transport"], r.get("op", ""), r.get("size", r.get("pubs")))
    by[key].append(r["value"])
m = {k: statistics.median(v) for k, v in by.items()}
def get(run, test, transport, op="", size=None):
    return m.get((run, test, transport, op, size))
print(f"Medians over {sys.argv[2]} rounds (variants alternate within a round).\n")
print("### Lookup (one process, node-scope names; no system call)\n")
print("| names in the table | lookup, hit | lookup, miss | lookup_all of one instance |")
print("|---|---|---|---|")
for (label, test, tr, op, size), v in sorted(m.items(), key=lambda kv: (kv[0][4] or 0)):
    if test == "names-lookup" and op == "lookup-hit":
        print(f"| {size:,} | {v:.0f} ns | {get(label, test, tr, 'lookup-miss', size):.0f} ns "
              f"| {get(label, test, tr, 'lookup-all', size):.0f} ns |")
print("\n### Publish and withdraw to the subscriber's event\n")
print("| where | published | withdrawn |")
print("|---|---|---|")
for label, where in (("event-host", "same host (2 ranks under fmrun)"),
                     ("event-hosts", "two namespace hosts, UDP")):
    p = [v for (l, t, tr, op, s), v in m.items() if l == label and op == "published"]
    w = [v for (l, t, tr, op, s), v in m.items() if l == label and op == "withdrawn"]
    if p and w:
        print(f"| {where} | {p[0]:.1f} us | {w[0]:.1f} us |")
print("\n### Multicast: the sender's time for one fm_name_mcast next to N fm_send\n")
print("| members | size | mcast | N sends | mcast / sends |")
print("|---|---|---|---|---|")
for n in (1, 2, 4, 8):
    for size in (8, 1024):
        a = get(f"mcast-{n}", "mcast", "fastmsg", "mcast", size)
        b = get(f"mcast-{n}", "mcast", "fastmsg", "sends", size)
        if a and b:
            print(f"| {n} | {size} B | {a:.3f} us | {b:.3f} us | {a / b:.2f}x |")
print("\n### Connection per message (seed 002, Tables 1 and 2), us per exchange\n")
print("| where | size | by name | by rank | TCP connect/send/recv/close | TCP / by name |")
print("|---|---|---|---|---|---|")
for where, name_l, rank_l in (("within a host", "connect-host-name", "connect-host-rank"),
                              ("between hosts", "connect-hosts-name", "connect-hosts-rank")):
    for size in (128, 1024, 4096):
        n = [v for (l, t, tr, op, s), v in m.items() if l == name_l and s == size and tr != "tcp"]
        r = [v for (l, t, tr, op, s), v in m.items() if l == rank_l and s == size and tr != "tcp"]
        t = [v for (l, t, tr, op, s), v in m.items() if l == rank_l and s == size and tr == "tcp"]
        if n and r and t:
            print(f"| {where} | {size} B | {n[0]:.1f} | {r[0]:.1f} | {t[0]:.1f} | {t[0] / n[0]:.2f}x |")
EOF
if [ -n "$sim" ]; then
  { echo; echo "### The protocol at scale (tests/names_sim)"; echo; echo '```'; echo "$sim"; echo '```'; } \
    >>build/bench/names.md
fi
cat build/bench/names.md
