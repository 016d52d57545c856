#!/bin/sh
# An ssh stand-in for launchers in tests: "netns_exec_ssh.sh [options] HOST
# COMMAND..." runs COMMAND through a shell in the network namespace HOST,
# as ssh would run it on that host. Options are ignored.
while [ $# -gt 0 ]; do
  case $1 in
    -o | -p | -i | -l | -F) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host=$1
shift
exec ip netns exec "$host" sh -c "$*"
