# What the benchmark scripts share (sourced; needs scripts/env.sh first and LIB, the libfabric
# directory to run against).

# The plotting venv, exactly scripts/versions.sh's BENCH_WHEELS (hashes checked); made anew
# when its matplotlib is not the pinned one.
bench_venv() { # <venv>
    local venv=$1 req=$DEPS/dl/bench-wheels.req w want
    want=$(printf '%s\n' "${BENCH_WHEELS[@]}" | awk '/^matplotlib==/ {sub(/^matplotlib==/, "", $1); print $1}')
    [ "$("$venv/bin/python" -c 'import matplotlib; print(matplotlib.__version__)' 2>/dev/null)" = "$want" ] && return 0
    rm -rf "$venv"
    printf '%s\n' "${BENCH_WHEELS[@]}" | awk '{print $1 " --hash=sha256:" $2}' > "$req"
    python3 -m venv "$venv" && "$venv/bin/pip" install -q --no-deps --require-hashes -r "$req"
}

# median of the numbers on stdin ("nan" for none)
median() { sort -g | awk '{a[NR]=$1} END {if (NR) print (NR % 2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); else print "nan"}'; }
# median of the numbers in the files named
med() { cat "$@" 2>/dev/null | median; }
# a / b with two decimals ("nan" when b is not positive)
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }'; }

# fi_rdm_pingpong (or <bin>: fi_rdm_cntr_pingpong), both sides in one loopback-only namespace
# of their own: usec/xfer at <size>
pp() { # <prov dir> <prov> <core or -> <size> [<bin>]
    local dir=$1 prov=$2 core=$3 size=$4 bin=${5:-fi_rdm_pingpong}
    local envs=(LD_LIBRARY_PATH=$LIB FI_PROVIDER_PATH=$dir)
    [ "$core" != - ] && envs+=(FI_RSCNTR_CORE=$core)
    env "${envs[@]}" timeout 120 "$ROOT/prov_test/loopback_only.sh" sh -c '
        "$3" -p "$1" -B 9871 -s 127.0.0.1 -S "$2" -I 5000 >/dev/null 2>&1 & sleep 0.3
        "$3" -p "$1" -P 9871 -S "$2" -I 5000 127.0.0.1; wait' sh "$prov" "$size" "$bin" 2>/dev/null |
        awk -v s="$size" '$1 == s || ($1 == (s / 1024) "k") {print $6}'
}

# rscntr built at revision <rev> (git archive, cargo build --release) into
# $DEPS/bench/ab-<short rev>/fi/librscntr-fi.so, once (kept for later runs); sets AB_DIR to
# that fi directory (a FI_PROVIDER_PATH)
build_rev() { # <rev>
    local rev ab
    rev=$(git -C "$ROOT" rev-parse --short "$1") || return 1
    ab=$DEPS/bench/ab-$rev
    if [ ! -f "$ab/fi/librscntr-fi.so" ]; then
        echo "[bench] building rscntr $rev into $ab"
        rm -rf "$ab/src" && mkdir -p "$ab/src" "$ab/fi"
        git -C "$ROOT" archive "$rev" | tar -x -C "$ab/src"
        (cd "$ab/src" && timeout 1200 cargo build --release --quiet --target-dir "$ab/target") || return 1
        cp "$ab/target/release/librscntr.so" "$ab/fi/librscntr-fi.so"
    fi
    AB_DIR=$ab/fi
}
