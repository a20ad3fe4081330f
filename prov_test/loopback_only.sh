#!/bin/sh
# Runs a command in network and mount namespaces of its own, with only loopback up and a
# private /dev/shm: MPI jobs pick the first interface their provider lists, which must not be a
# real one, and shm's files stay out of the machine's /dev/shm.
#   prov_test/loopback_only.sh <command...>
exec unshare --net --mount --fork sh -c 'ip link set lo up &&
    mount -t tmpfs -o size=1g rscntr-loopback-shm /dev/shm && exec "$@"' sh "$@"
