#!/usr/bin/env bash
# Shape A of Docker-in-Docker CI: run the integration tests inside a DinD container, the
# agent and its Docker daemon together in it (as on a GitHub-style runner whose job has its
# own dockerd). Builds the image and the dependency folder when missing, mounts the
# repository read-only, and removes the container, its volumes, its network and every temp
# folder at the end, whatever happens.
#
# The tests run on a snapshot of the working tree taken at the start (tracked and untracked
# files, not ignored ones), so edits made while they run change nothing half way.
#
# The host's cache of built Kubernetes programs (integration/cluster/build.sh, keyed by the
# Debian source version) is mounted read-only at the same path, so the cluster tests inside
# use it (and its kubectl); when the host has none they skip, saying how to build it.
# Nothing is built inside.
#
# Usage: run.sh [PYTEST ARGS...]   (default: the integration suite without the tests that
# start DinD containers themselves, `integration -m "not dind"`)
# Environment: PYTHON (pip for the dependency folder), AKL_DIND_KEEP_IMAGE (always kept),
# AKL_CLUSTER_CACHE and AKL_KUBERNETES_VERSION (as for integration/cluster/build.sh);
# ASYNCKUBELET_REQUIRE_CLUSTER is passed to the tests.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

t0=$SECONDS
image="$("$here/build.sh")"
t_build=$((SECONDS - t0))
deps="$("$here/deps.sh" "$image")"
site="/usr/local/lib/python$(cat "$deps/.python-version")/dist-packages"
mapfile -t flags < <("$here/docker-flags.sh" "$image")

if [ "$#" -eq 0 ]; then
    set -- integration -m "not dind"
fi

name="akl-dind-a-$(od -An -N4 -tx4 /dev/urandom | tr -d ' ')"
work="$(mktemp -d /tmp/akl-dind-run.XXXXXX)"
cleanup() {
    docker rm -f -v "$name" >/dev/null 2>&1 || true
    docker network rm "$name" >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mkdir "$work/src"
if git -C "$repo" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git -C "$repo" ls-files -z --cached --others --exclude-standard \
        | (cd "$repo" && tar --null --ignore-failed-read -T - -cf - 2>/dev/null) \
        | tar -C "$work/src" -xf -
else
    tar -C "$repo" --exclude=./.tox --exclude=./.git -cf - . | tar -C "$work/src" -xf -
fi
mounts=(-v "$work/src:/src:ro" -v "$deps:$site:ro" -v "$work:/work")
cluster_env=()
# The host's kubectl is the container's too (a static Go program): the Kubernetes API
# tests run the machine's kubectl, and `apply -k` runs `kubectl kustomize` when no
# kustomize is installed. Without one, the cluster cache's kubectl takes its place.
host_kubectl="$(command -v kubectl || true)"
if [ -n "$host_kubectl" ]; then
    mounts+=(-v "$(readlink -f "$host_kubectl"):/usr/local/bin/kubectl:ro")
fi
if cluster="$(ASYNCKUBELET_CLUSTER_PROGRAMS=control-plane \
    "$repo/integration/cluster/build.sh" --check 2>"$work/cluster-check")"; then
    mounts+=(-v "$cluster:$cluster:ro")
    [ -n "$host_kubectl" ] || mounts+=(-v "$cluster/kubectl:/usr/local/bin/kubectl:ro")
    cluster_env=(-e "AKL_CLUSTER_CACHE=$(dirname "$cluster")" -e "AKL_KUBERNETES_VERSION=$(basename "$cluster")")
    echo "run.sh: cluster programs from $cluster (read-only)" >&2
else
    echo "run.sh: no cluster programs on this host ($(tail -n 1 "$work/cluster-check")); the cluster tests skip" >&2
fi
[ -z "${ASYNCKUBELET_REQUIRE_CLUSTER:-}" ] \
    || cluster_env+=(-e "ASYNCKUBELET_REQUIRE_CLUSTER=$ASYNCKUBELET_REQUIRE_CLUSTER")

# A network of its own, as a CI job container has: an interface, addresses and default
# routes (the engine may have no default bridge). It is dual stack, with a random unique
# local IPv6 /64, so the dual-stack tests find the node's IPv6 address and route.
ula="fd$(od -An -N5 -tx1 /dev/urandom | tr -d ' \n' | sed 's/^\(..\)\(....\)\(....\)$/\1:\2:\3/')::/64"
docker network create --ipv6 --subnet "$ula" --label io.asynckubelet.dind=shape-a "$name" >/dev/null
echo "run.sh: image $image (ready in ${t_build}s), dependencies $deps" >&2
t1=$SECONDS
status=0
docker run --name "$name" --rm --network "$name" "${flags[@]}" \
    --label io.asynckubelet.dind=shape-a \
    "${mounts[@]}" \
    -e PYTHONPATH=/src -e PYTHONDONTWRITEBYTECODE=1 -e HYPOTHESIS_STORAGE_DIRECTORY=/work/hypothesis \
    -e ASYNCKUBELET_REQUIRE_DOCKER=1 -e TMPDIR=/work "${cluster_env[@]}" \
    -w /src "$image" \
    python3 -m pytest -p no:cacheprovider -v -n "${ASYNCKUBELET_TEST_WORKERS:-2}" --dist loadfile \
    --durations=20 --basetemp=/work/pytest "$@" || status=$?
echo "run.sh: tests inside DinD took $((SECONDS - t1))s, exit $status" >&2
exit "$status"
