#!/usr/bin/env bash
# What SOS's start-up over rscntr shows: one SOS test (unit/put1: puts completed through the put
# counter, shmem_quiet in fi_cntr_wait) with SHMEM_DEBUG=1 and FI_LOG_LEVEL=info, in its own
# namespaces as prov_test/sos/run.sh runs every test.
#
#   prov_test/sos/startup.sh <variant> <core> [LIBDIR]
#
# Demands: the test passes; SOS's own start-up line names rscntr as its provider; rscntr
# says it serves over <core>; SOS's put (FI_WRITE) and get (FI_READ) counters are rscntr
# counters bound to <core> endpoints; in the default build also its target counter, bound to
# the heap and data MRs with FI_REMOTE_WRITE (the hard-polling build has none, and must bind
# none); over sockets, rscntr's repeat of FI_ENABLE after SOS binds its shared transmit context
# (src/layer/bind.rs). Exit 2 when the SOS tarball is absent.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
. "$ROOT/scripts/env.sh"
variant=${1:?usage: startup.sh <variant> <core> [LIBDIR]}
core=${2:?usage: startup.sh <variant> <core> [LIBDIR]}
LIBDIR=${3:-$LF_PREFIX/lib}
SOS=$DEPS/sos-$variant
bash "$ROOT/prov_test/sos/build.sh" "$variant"
rc=$?
[ $rc -eq 0 ] || exit $rc

bin=$SOS/build/modules/tests-sos/test/unit/.libs/put1
out=$(env -u SHMEM_OFI_DISABLE_SINGLE_EP LD_LIBRARY_PATH="$LIBDIR" SHMEM_OFI_PROVIDER=rscntr \
      FI_RSCNTR_CORE="$core" FI_PROVIDER_PATH="$PROV_DIR" SHMEM_DEBUG=1 FI_LOG_LEVEL=info \
      timeout -k 10 120 unshare --net --mount --pid --fork --kill-child --mount-proc \
      sh -c 'ip link set lo up && mount -t tmpfs -o size=1g rscntr-sos-shm /dev/shm &&
             exec "$0" -n 2 "$1"' "$SOS/bin/oshrun" "$bin" 2>&1)
rc=$?
echo "SOS ($variant build) unit/put1 over rscntr($core), libfabric from $LIBDIR: exit $rc"
grep -aE 'OFI provider:|rscntr:(core:getinfo_over|fabric|ep_ctrl)|ERROR' <<<"$out" | sed 's/^libfabric:[0-9]*:[0-9]*::/  /' | sort | uniq -c
status=0
need() { # <what> <extended regex>
    grep -aqE "$2" <<<"$out" || { echo "FAIL: no $1 (a line matching: $2)"; status=1; }
}
[ $rc -eq 0 ] || { echo "FAIL: the test exited $rc"; status=1; }
need "SOS start-up line naming rscntr" 'OFI provider: rscntr, fabric: '
need "rscntr serving over $core" "rscntr:core:getinfo_over\(\).*serving over core $core\$"
c=$(sed 's/[;]/[;]/g' <<<"$core")
need "put counter (FI_WRITE) bound to a $core endpoint" "bound an rscntr counter to core $c fid class 3 with flags 0x200 \(FI_WRITE\)"
need "get counter (FI_READ) bound to a $core endpoint" "bound an rscntr counter to core $c fid class 3 with flags 0x100 \(FI_READ\)"
if [ "$variant" = default ]; then
    need "target counter bound to an MR with FI_REMOTE_WRITE" "bound an rscntr counter to core $c fid class 12 with flags 0x2000 \(FI_REMOTE_WRITE\)"
elif grep -aq 'FI_REMOTE_WRITE)' <<<"$out"; then
    echo "FAIL: the hard-polling build bound a target counter"; status=1
fi
if [ "$core" = sockets ]; then
    need "rscntr's repeat of FI_ENABLE" 'enabled the sockets endpoint again after a shared transmit context was bound'
fi
[ $status -eq 0 ] && echo "ok: SOS shows rscntr serving over $core with its counters bound"
exit $status
