#!/usr/bin/env bash
# Runs one multi-process test command and checks that it leaves nothing
# behind in /dev/shm.
#   mp_test.sh [--expect-killed RANK] command args...
# --expect-killed: the job must end with exactly that rank killed by SIGKILL
# (fmrun's status 137) and no other rank failing.
set -u
killed=""
if [ "${1:-}" = "--expect-killed" ]; then
  killed=$2
  shift 2
fi
shm_before=$(ls -A /dev/shm 2>/dev/null | sort)
errlog=$(mktemp)
"$@" 2> >(tee "$errlog" >&2)
rc=$?
wait
if [ -n "$killed" ]; then
  others=$(grep '^fmrun: rank' "$errlog" | grep -v "^fmrun: rank $killed (pid [0-9]*) was killed by signal 9 (SIGKILL)")
  if [ "$rc" -eq 137 ] && grep -q "^fmrun: rank $killed (pid [0-9]*) was killed by signal 9" "$errlog" &&
     [ -z "$others" ]; then
    rc=0
  else
    echo "FAIL: expected only rank $killed to die by SIGKILL (fmrun status $rc)" >&2
    rc=1
  fi
fi
rm -f "$errlog"
shm_after=$(ls -A /dev/shm 2>/dev/null | sort)
new=$(comm -13 <(echo "$shm_before") <(echo "$shm_after"))
if [ -n "$new" ]; then
  echo "FAIL: left behind in /dev/shm: $new" >&2
  rc=1
fi
exit $rc
