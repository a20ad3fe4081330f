#!/bin/sh
# Runs a command in namespaces of its own, as scripts/test.sh runs each step that may run beside
# others: a network namespace with only loopback up (its ports meet no other step's), a mount
# namespace with a private /dev/shm (shm's files, named by pid, and rscntr's bell files meet no
# other step's), a pid namespace (runfabtests.sh's kill of every fi_* process, and a step's
# stray processes, reach no further; all end with the step) and an IPC namespace. With
# --host-net the machine's network stays (a step that fetches from Debian's registry).
#   scripts/isolated.sh [--host-net] <command...>
net=--net
[ "${1:-}" = --host-net ] && { net=; shift; }
exec unshare $net --mount --pid --ipc --fork --kill-child --mount-proc sh -c '{ [ -z "$0" ] || ip link set lo up; } &&
    mount -t tmpfs -o size=4g,mode=1777 rscntr-step-shm /dev/shm && exec "$@"' "$net" "$@"
