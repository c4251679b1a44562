#!/usr/bin/env bash
# Stop the control plane up.sh started in DIR and remove what up.sh made there (the
# directory itself too when up.sh created it). Each process named by a pid file in DIR/run
# and still running for DIR gets SIGTERM, and SIGKILL when it has not exited after
# AKL_CLUSTER_STOP_TIMEOUT seconds (default 10). A directory without up.sh's mark is left
# untouched, so running this twice is harmless.
#
# Usage: down.sh DIR
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=lib.sh
. "$here/lib.sh"

log() { echo "down.sh: $*" >&2; }

[ $# = 1 ] && [ -n "$1" ] || { log "usage: down.sh DIR"; exit 2; }
stop_timeout="${AKL_CLUSTER_STOP_TIMEOUT:-10}"
[[ "$stop_timeout" =~ ^[0-9]+$ ]] || { log "AKL_CLUSTER_STOP_TIMEOUT '$stop_timeout' is not a number of seconds"; exit 2; }
if [ ! -d "$1" ] || [ ! -f "$1/.akl-cluster" ]; then
    log "no cluster made by up.sh in $1; nothing to do"
    exit 0
fi
dir="$(cd "$1" && pwd -P)"

# One at a time, components first and etcd last, so none of them loses its store while it runs.
stopped=0
stuck=""
for name in kube-scheduler kube-controller-manager kube-apiserver etcd; do
    pid="$(cluster_pid "$dir" "$name")" || continue
    kill -TERM "$pid" 2>/dev/null || true
    stopped=$((stopped + 1))
    deadline=$(($(date +%s) + stop_timeout))
    while cluster_pid "$dir" "$name" >/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
        sleep 0.1
    done
    if cluster_pid "$dir" "$name" >/dev/null; then
        log "$name ($pid) did not stop within ${stop_timeout}s; killing it"
        kill -KILL "$pid" 2>/dev/null || true
        for _ in $(seq 100); do
            cluster_pid "$dir" "$name" >/dev/null || break
            sleep 0.1
        done
        if cluster_pid "$dir" "$name" >/dev/null; then
            log "$name ($pid) is still there after SIGKILL"
            stuck=1
        fi
    fi
done
if [ -n "$stuck" ]; then
    log "leaving $dir in place while a process of it runs"
    exit 1
fi

created="$(sed -n 's/^created_dir=//p' "$dir/.akl-cluster")"
for f in "${cluster_made[@]}"; do
    [ "$f" = .akl-cluster ] && continue
    rm -rf "${dir:?}/$f"
done
rm -f "$dir/.akl-cluster"
if [ "$created" = 1 ]; then
    rmdir "$dir" 2>/dev/null || log "kept $dir: it holds files up.sh did not make"
fi
log "stopped $stopped process(es); removed the cluster in $dir"
