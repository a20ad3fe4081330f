#!/bin/sh
# Runs a command in namespaces of its own, as scripts/test.sh runs each step that may run beside
# others: a network namespace (its ports meet no other step's) with loopback and one veth pair
# holding the address 10.213.0.1/24, the namespace's own, reached by nothing outside it (Open
# MPI's tcp transport, and tcp's listen under its mtl, want an interface besides loopback); a
# mount namespace with a private /dev/shm (shm's files, named by pid, and rscntr's bell files
# meet no other step's); a pid namespace (runfabtests.sh's kill of every fi_* process, and a
# step's stray processes, reach no further; all end with the step) and an IPC namespace. With
# --host-net the machine's network stays (a step that fetches from Debian's registry).
#   scripts/isolated.sh [--host-net] <command...>
net=--net
[ "${1:-}" = --host-net ] && { net=; shift; }
exec unshare $net --mount --pid --ipc --fork --kill-child --mount-proc sh -c '
    if [ -n "$0" ]; then
        ip link set lo up && ip link add rstep0 type veth peer name rstep1 &&
        ip addr add 10.213.0.1/24 dev rstep0 && ip link set rstep0 up && ip link set rstep1 up || exit 1
    fi
    mount -t tmpfs -o size=4g,mode=1777 rscntr-step-shm /dev/shm && exec "$@"' "$net" "$@"
