#!/usr/bin/env bash
# The Debian package in a real Debian 12 (bookworm root made by mmdebstrap, as the trixie root
# is): prov_test/debian/trixie.sh bookworm.
exec "$(dirname "$0")/trixie.sh" bookworm
