#!/usr/bin/env bash
# Installs what a build, the tests or the benchmark need, from Debian's
# packages, only when something is missing (so repeated runs are quick).
#   scripts/deps.sh build|test|bench
set -eu
build=(cmake ninja-build gcc make pkg-config libpmix-dev libfabric-dev)
test=("${build[@]}" mpich openmpi-bin libopenmpi-dev libfabric-bin python3-venv openssh-server openssh-client munge slurmctld slurmd
      slurm-client clang-14 libclang-rt-14-dev iproute2 procps util-linux)
bench=("${build[@]}" mpich libmpich-dev openmpi-bin libopenmpi-dev libfabric-bin python3-venv ucx-utils python3 munge
       slurmctld slurmd slurm-client util-linux procps iproute2 iperf3)
case "${1:-}" in
  build) want=("${build[@]}") ;;
  test) want=("${test[@]}") ;;
  bench) want=("${bench[@]}") ;;
  *) echo "usage: $0 build|test|bench" >&2; exit 2 ;;
esac
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "installing: ${missing[*]}" >&2
if [ "$(id -u)" -ne 0 ]; then
  echo "not root: install these packages, then run again: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq "${missing[@]}" >/dev/null
