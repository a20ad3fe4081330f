#!/usr/bin/env bash
# An ssh stand-in for MPI launchers (MPICH's hydra): runs a
# command on one of the hosts prov_test/net/hosts.sh made, the way ssh runs it on a cluster
# node. For hydra:
#
#   mpiexec -launcher ssh -launcher-exec prov_test/net/ns_launch.sh -hosts h1,h2 -ppn 2 ...
#
# run on one of the hosts (host_exec 1 mpiexec ...): hydra's proxies connect back to
# mpiexec's control port, named hI:port, which every host resolves through its /etc/hosts.
# (hydra starts the proxy for its own host itself, without the launcher.)
#
#   ns_launch.sh [ssh options] [user@]HOST COMMAND [ARG...]
#
# HOST is a host's name or address in $HOSTS_MAP (exported by hosts_up). ssh's options are
# accepted and ignored (hydra passes -x). As sshd does, the command words are joined with
# spaces and run by `sh -c` (hydra quotes the proxy's path for that shell), here in the host's
# network namespace, its /etc/hosts and a UTS namespace named after it, with a fresh
# environment (PATH, HOME, USER, LOGNAME, SHELL) as a non-interactive ssh session has: hydra
# hands the ranks mpiexec's environment itself. NS_LAUNCH_KEEP_ENV=1 passes the caller's
# environment through instead. Runs under `timeout` (NS_LAUNCH_TIMEOUT, 900 s).
set -uo pipefail

# ssh's options: those that take an argument skip it too
while [ $# -gt 0 ]; do
    case $1 in
        -[BbcDEeFIiJLlmOoPpQRSWw]) shift 2 ;;
        --) shift; break ;;
        -*) shift ;;
        *) break ;;
    esac
done
[ $# -ge 2 ] || { echo "usage: ns_launch.sh [ssh options] HOST COMMAND [ARG...]" >&2; exit 255; }
host=${1#*@}; shift
[ -r "${HOSTS_MAP:-}" ] || { echo "ns_launch: HOSTS_MAP is not set (hosts_up exports it)" >&2; exit 255; }
# the map: "name netns address" a line
read -r name ns _ < <(awk -v h="$host" '$1 == h || $3 == h { print; exit }' "$HOSTS_MAP")
[ -n "${ns:-}" ] || { echo "ns_launch: no host '$host' in $HOSTS_MAP" >&2; exit 255; }

envs=(env)
if [ "${NS_LAUNCH_KEEP_ENV:-0}" != 1 ]; then
    envs=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
          HOME="${HOME:-/root}" USER="${USER:-root}" LOGNAME="${LOGNAME:-root}" SHELL=/bin/sh)
fi
# ssh's exit code is the command's (255 for ssh's own failures)
exec "${envs[@]}" timeout -k 5 "${NS_LAUNCH_TIMEOUT:-900}" \
    ip netns exec "$ns" unshare --uts -- /bin/sh -c 'hostname "$0" && exec /bin/sh -c "$1"' "$name" "$*"
