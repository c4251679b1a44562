#!/bin/sh
# Entrypoint of the Docker-in-Docker image: make the cgroup hierarchies writable, start
# dockerd, wait until it answers, then run the given command (its exit code is the
# container's) or, with no command, keep serving until stopped.
#
# Environment:
#   DOCKER_TLS_CERTDIR  as for the docker:dind image: with server/ca.pem, server/cert.pem
#                     and server/key.pem in it, dockerd also listens on tcp://0.0.0.0:2376
#                     with --tlsverify (clients need a certificate signed by that CA; the
#                     client side's folder is client/, with ca.pem, cert.pem, key.pem). The
#                     files may appear after the start (a server certificate names the
#                     container's address, known only once it runs); they are waited for,
#                     up to two minutes. Unlike docker:dind, nothing is generated here.
#   DIND_DOCKERD_ARGS extra dockerd arguments (default: --bridge=none)
set -eu

prepare_cgroups() {
    if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        # cgroup v2: a non-root cgroup with processes in it cannot delegate controllers,
        # so move every process of ours into a leaf first, then enable them all below.
        mkdir -p /sys/fs/cgroup/dind-init
        xargs -rn1 </sys/fs/cgroup/cgroup.procs >/sys/fs/cgroup/dind-init/cgroup.procs 2>/dev/null || :
        sed -e 's/ / +/g' -e 's/^/+/' </sys/fs/cgroup/cgroup.controllers \
            >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || :
        return
    fi
    # cgroup v1: without --privileged each hierarchy is a read-only bind mount.
    mount -o remount,rw /sys/fs/cgroup 2>/dev/null || :
    awk '$9 == "cgroup" { print $5 }' /proc/self/mountinfo | while read -r hierarchy; do
        mount -o remount,rw,bind "$hierarchy" 2>/dev/null \
            || mount -o remount,rw "$hierarchy" 2>/dev/null \
            || echo "dind-entrypoint: cannot make $hierarchy writable" >&2
    done
}

prepare_cgroups

listen="--host=unix:///var/run/docker.sock"
if [ -n "${DOCKER_TLS_CERTDIR:-}" ]; then
    server="$DOCKER_TLS_CERTDIR/server"
    waited=0
    until [ -s "$server/ca.pem" ] && [ -s "$server/cert.pem" ] && [ -s "$server/key.pem" ]; do
        waited=$((waited + 1))
        if [ "$waited" -gt 1200 ]; then
            echo "dind-entrypoint: no TLS material in $server after 120s" >&2
            exit 1
        fi
        sleep 0.1
    done
    listen="$listen --host=tcp://0.0.0.0:2376 --tlsverify \
        --tlscacert=$server/ca.pem --tlscert=$server/cert.pem --tlskey=$server/key.pem"
fi
# shellcheck disable=SC2086
dockerd $listen ${DIND_DOCKERD_ARGS:---bridge=none} >/var/log/dockerd.log 2>&1 &
dockerd_pid=$!

stop_dockerd() {
    kill -TERM "$dockerd_pid" 2>/dev/null || :
    wait "$dockerd_pid" 2>/dev/null || :
}
trap 'stop_dockerd; exit 143' TERM INT

tries=0
until docker version >/dev/null 2>&1; do
    if ! kill -0 "$dockerd_pid" 2>/dev/null; then
        echo "dind-entrypoint: dockerd exited at start:" >&2
        tail -n 40 /var/log/dockerd.log >&2
        exit 1
    fi
    tries=$((tries + 1))
    if [ "$tries" -gt 600 ]; then
        echo "dind-entrypoint: dockerd did not answer in 60s:" >&2
        tail -n 40 /var/log/dockerd.log >&2
        exit 1
    fi
    sleep 0.1
done
echo "dind-entrypoint: dockerd ready" >&2

if [ "$#" -eq 0 ]; then
    wait "$dockerd_pid"
    exit $?
fi
status=0
"$@" || status=$?
stop_dockerd
exit "$status"
