#!/usr/bin/env bash
# A/B of two builds of fastmsg between the two namespace hosts of
# bench/rails_ns.sh: `fmperf ARGS...` with this tree's release build and
# with OTHER's, ROUNDS times in turn (which goes first alternates), so that
# both see the same states of a noisy machine. Prints each run's figure lines, one line per run, then a
# summary (bench/ab_summary.py): per row, the median of the rounds' ratios.
# FM_* variables pass through to both (FM_FAULT, FM_NET_RING_SIZE, ...).
#   bench/ab.sh OTHER ROUNDS fmperf-args...
#   AB_RAILS="0 1"            rails to use (default "0": one unshaped rail)
#   AB_SHAPE="0:1gbit 1:300mbit"   tbf on those rails first
#   AB_LOSS="drop=0.01,on=send"    each run becomes three: loss-free, under
#                             FM_FAULT=AB_LOSS,seed=ROUND, loss-free; its
#                             figure is the second over the mean of the
#                             others (the FM_FAULT goal of bench/net.sh)
# OTHER is another checkout with build/release built, for instance
#   git worktree add /tmp/old HEAD~1 &&
#   cmake -S /tmp/old -B /tmp/old/build/release -G Ninja -DCMAKE_BUILD_TYPE=Release &&
#   cmake --build /tmp/old/build/release
set -u
[ $# -ge 3 ] || { echo "usage: bench/ab.sh OTHER ROUNDS fmperf-args..." >&2; exit 2; }
[ -d "$1" ] || { echo "ab.sh: $1 is not a directory (a checkout of fastmsg)" >&2; exit 2; }
case $2 in '' | *[!0-9]*) echo "ab.sh: ROUNDS must be a number, not '$2'" >&2; exit 2 ;; esac
[ -n "${AB_LOSS:-}" ] && [ -n "${FM_FAULT:-}" ] &&
  { echo "ab.sh: AB_LOSS runs loss-free rounds too: unset FM_FAULT" >&2; exit 2; }
other=$(cd "$1" && pwd) rounds=$2
shift 2
here=$(cd "$(dirname "$0")/.." && pwd)
for tree in "$here" "$other"; do
  [ -x "$tree/build/release/tools/fmperf" ] || { echo "ab.sh: build $tree/build/release first" >&2; exit 1; }
done
source "$here/bench/rails_ns.sh"
trap rails_ns_down EXIT
rails_ns_up >/dev/null || { echo "ab.sh: cannot create the namespaces (root?)" >&2; exit 1; }
for s in ${AB_SHAPE:-}; do rails_shape "${s%%:*}" "${s#*:}"; done
# shellcheck disable=SC2086
export FM_RAILS=$(rails_spec ${AB_RAILS:-0})
# One run of `fmperf ARGS` with the build of tree $1: its figure lines.
run() {
  local tree=$1
  shift
  timeout 600 "$tree/build/release/tools/fmrun" --hosts "$A,$B" \
    --launcher "ip netns exec {host}" --pmi-addr "$MGMT.254" -n 2 \
    "$tree/build/release/tools/fmperf" "$@" 2>/dev/null |
    grep -v '^#' | grep -E '[0-9]' | tr -s ' ' | paste -sd ';' -
}
lines=$(mktemp)
trap 'rails_ns_down; rm -f "$lines"' EXIT
# The build that runs first changes every round: in one run of 8 B latency
# the first build of each round was 3-8 % slower, in either order.
for r in $(seq "$rounds"); do
  order=("$here" "$other")
  [ $((r % 2)) = 0 ] && order=("$other" "$here")
  for tree in "${order[@]}"; do
    if [ -n "${AB_LOSS:-}" ]; then
      free1=$(run "$tree" "$@")
      fault=$(FM_FAULT="$AB_LOSS,seed=$r" run "$tree" "$@")
      free2=$(run "$tree" "$@")
      figures=
      [ -n "$fault" ] &&
        figures=$(python3 "$here/bench/ab_summary.py" ratio "$free1" "$fault" "$free2")
    else
      figures=$(run "$tree" "$@")
    fi
    echo "round $r $tree:${figures:- (failed)}" | tee -a "$lines"
  done
done
python3 "$here/bench/ab_summary.py" summary "$lines"
