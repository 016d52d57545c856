#!/usr/bin/env bash
# The shm link where the environment is tight: no /dev/shm at all, and a
# memory cgroup smaller than one ring. Needs root (mount namespaces,
# cgroups); says why and skips (status 77) where that is not possible.
#   limits_test.sh FMRUN CONFORMANCE
set -u
FMRUN=$1
CONF=$2
[ "$(id -u)" -eq 0 ] || { echo "SKIP: needs root for mount namespaces and cgroups"; exit 77; }
fails=0

# 1. /dev/shm unmounted in a private mount namespace: nothing changes.
if unshare --mount true 2>/dev/null; then
  unshare --mount --propagation private sh -c \
    "umount /dev/shm 2>/dev/null || mount -t tmpfs -o size=4k tmpfs /dev/shm; \
     $FMRUN -n 3 $CONF pingpong" || { echo "FAIL: job without /dev/shm" >&2; fails=1; }
else
  echo "note: unshare --mount not permitted here; /dev/shm check skipped"
fi

# 2. A memory cgroup below one ring: FM_ENOMEM with a message, no crash.
cg=""
for root in /sys/fs/cgroup/memory /sys/fs/cgroup; do
  if [ -e "$root/cgroup.procs" ] && { [ -e "$root/memory.limit_in_bytes" ] ||
                                      grep -qw memory "$root/cgroup.subtree_control" 2>/dev/null; }; then
    cg=$root/fastmsg-limits-$$
    break
  fi
done
if [ -n "$cg" ] && mkdir "$cg" 2>/dev/null; then
  if [ -e "$cg/memory.limit_in_bytes" ]; then
    echo $((48 << 20)) > "$cg/memory.limit_in_bytes"
  else
    echo $((48 << 20)) > "$cg/memory.max"
  fi
  err=$(mktemp)
  sh -c "echo \$\$ > $cg/cgroup.procs && FM_SHM_RING_SIZE=128M FM_SHM_MAX_MSG=1M \
         exec $FMRUN -n 1 $CONF nomem" 2>"$err"
  rc=$?
  cat "$err" >&2
  [ $rc -eq 0 ] || { echo "FAIL: nomem case (status $rc)" >&2; fails=1; }
  grep -q "FM_SHM_RING_SIZE" "$err" || { echo "FAIL: no hint to lower FM_SHM_RING_SIZE" >&2; fails=1; }
  rm -f "$err"
  rmdir "$cg" 2>/dev/null || sleep 0.5; rmdir "$cg" 2>/dev/null
else
  echo "note: no memory cgroup available; memory-limit check skipped"
fi
exit $fails
