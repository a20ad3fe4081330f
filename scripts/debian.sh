# Sourced by scripts/setup.sh, scripts/package.sh and prov_test/debian/trixie.sh: Debian's
# registry, reached through the Debian mirror apt is configured with on this machine
# (debian_mirror; RSCNTR_DEBIAN_MIRROR overrides it), and Debian 13 (trixie) and Debian 12
# (bookworm) from it.
TRIXIE_SUITE=trixie
BOOKWORM_SUITE=bookworm
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg   # bookworm's carries trixie's keys

debian_mirror() {
    if [ -n "${RSCNTR_DEBIAN_MIRROR:-}" ]; then echo "${RSCNTR_DEBIAN_MIRROR%/}"; return; fi
    local u
    u=$( (grep -hE '^[[:space:]]*URIs:' /etc/apt/sources.list.d/*.sources 2>/dev/null || true) \
          | awk '{print $2}' | grep -E '/debian/?$' | head -n1)
    [ -n "$u" ] || u=$( (grep -hE '^[[:space:]]*deb[[:space:]]' /etc/apt/sources.list \
          /etc/apt/sources.list.d/*.list 2>/dev/null || true) | awk '{print $2}' | grep -E '/debian/?$' | head -n1)
    [ -n "$u" ] || { echo "no Debian mirror found in apt's sources; set RSCNTR_DEBIAN_MIRROR" >&2; return 1; }
    echo "${u%/}"
}

# Whether the mirror answers for trixie (or <suite>: its signed release file), within 30 s.
trixie_reachable() { # [suite]
    local m
    m=$(debian_mirror) || return 1
    timeout 60 curl -fsS --max-time 30 -o /dev/null "$m/dists/${1:-$TRIXIE_SUITE}/InRelease"
}

# apt-get with a private configuration for trixie/amd64 (suite_apt: another suite) under <dir>: its own sources, lists,
# cache and an empty dpkg status, so that nothing of this machine's apt state is read or changed.
# The archive's signature is checked against Debian's keyring, each .deb against the signed index.
# Under a timeout (TRIXIE_APT_TIMEOUT, 600 s).
trixie_apt() { # <dir> <apt-get arguments...>
    suite_apt "$TRIXIE_SUITE" "$@"
}
# The same for <suite> (bookworm: its own private configuration, never this machine's apt state).
suite_apt() { # <suite> <dir> <apt-get arguments...>
    local suite=$1 dir=$2 m; shift 2
    m=$(debian_mirror) || return 1
    mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$dir/etc/sources.list.d" \
             "$dir/etc/preferences.d"
    [ -f "$dir/status" ] || : > "$dir/status"
    echo "deb [signed-by=$DEBIAN_KEYRING] $m $suite main" > "$dir/etc/sources.list"
    timeout "${TRIXIE_APT_TIMEOUT:-600}" apt-get -q -o Dir::Etc::SourceList="$dir/etc/sources.list" \
        -o Dir::Etc::SourceParts="$dir/etc/sources.list.d" \
        -o Dir::Etc::PreferencesParts="$dir/etc/preferences.d" \
        -o Dir::State::Lists="$dir/lists" -o Dir::State::status="$dir/status" \
        -o Dir::Cache="$dir/cache" -o APT::Architecture=amd64 -o APT::Architectures::=amd64 \
        -o APT::Sandbox::User=root "$@"
}
