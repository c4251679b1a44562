#!/usr/bin/env bash
# Build a Kubernetes control plane and the upstream node e2e programs from Debian's
# `kubernetes` source package, offline apart from apt, once per source version, and print
# the cache directory that holds them on the last line of stdout (progress goes to stderr).
#
# The cache directory, $AKL_CLUSTER_CACHE/<source version>, holds only the results:
#   kube-apiserver kube-controller-manager kube-scheduler   (make WHAT=cmd/...)
#   e2e.test                                                 (make WHAT=test/e2e/e2e.test)
#   agnhost nonewprivs                                       (static, CGO_ENABLED=0)
#   kubectl                                                  (Debian's kubernetes-client .deb,
#                                                             unpacked; /usr/bin/kubectl is
#                                                             left alone)
#   nodeconformance-specs.txt  the [NodeConformance] specs of e2e.test (ginkgo dry run)
#   build-times.txt            seconds each program took to build
# etcd is Debian's etcd-server, installed system-wide. When every file is present nothing
# else happens; otherwise the missing ones are built from a fresh source tree in a scratch
# directory that is removed afterwards (the tree and its _output take about 4 GB).
#
# Debian's Go (1.19) is newer than the one Kubernetes 1.20 was written for: the vendored
# github.com/modern-go/reflect2 does not build with it and is replaced by Debian's 1.0.2
# copy (golang-github-modern-go-reflect2-dev). Release 1.20 builds in GOPATH mode through
# its Makefile (which also runs the code generators); `go build` in module mode does not.
#
# Environment: AKL_CLUSTER_CACHE (default /var/cache/asynckubelet/cluster),
# AKL_KUBERNETES_VERSION (the Debian source version; default: the version of the
# kubernetes-client package apt would install), AKL_CLUSTER_SCRATCH (where the source tree
# is unpacked; default /var/tmp).
#
# build.sh --check only looks: it prints the cache directory when everything up.sh runs is
# there (the wanted programs, etcd, openssl, curl), and otherwise exits 1 with one line
# naming what is missing. It never runs apt-get or make, so a test run can call it (and
# a container that mounts the cache read-only, given AKL_KUBERNETES_VERSION).
set -euo pipefail

log() { echo "build.sh: $*" >&2; }
die() { log "$*"; exit 1; }

check_only=""
case "$#:${1:-}" in
    0:) ;;
    1:--check) check_only=1 ;;
    *) echo "usage: build.sh [--check]" >&2; exit 2 ;;
esac

cache_root="${AKL_CLUSTER_CACHE:-/var/cache/asynckubelet/cluster}"
programs=(kube-apiserver kube-controller-manager kube-scheduler e2e.test agnhost nonewprivs kubectl)
# ASYNCKUBELET_CLUSTER_PROGRAMS=control-plane builds only what the cluster node tests run
# (the control plane and kubectl), not the node e2e programs (about 9 minutes less cold).
# ASYNCKUBELET_CLUSTER_PROGRAMS=kubelet builds only the upstream kubelet (with dockershim),
# which bench/vs_kubelet.py runs beside the agent; see kubelet_machine_patch below.
case "${ASYNCKUBELET_CLUSTER_PROGRAMS:-all}" in
    all) ;;
    control-plane) programs=(kube-apiserver kube-controller-manager kube-scheduler kubectl) ;;
    kubelet) programs=(kubelet) ;;
    *) echo "build.sh: ASYNCKUBELET_CLUSTER_PROGRAMS must be all, control-plane or kubelet" >&2; exit 2 ;;
esac
wanted() {
    local p
    for p in "${programs[@]}"; do [ "$p" = "$1" ] && return 0; done
    return 1
}

as_root() {
    if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

apt_updated=""
apt_update() {
    if [ -z "$apt_updated" ]; then
        log "apt-get update"
        as_root apt-get update -q >&2
        apt_updated=1
    fi
}

installed() {
    [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

# Debian's etcd-server, openssl and curl are what up.sh runs; they are wanted even when the
# built programs are cached.
runtime_packages=(etcd-server openssl curl)
build_packages=(dpkg-dev golang-go golang-github-modern-go-reflect2-dev make gcc libc6-dev rsync)

ensure_packages() {
    local missing=() p
    for p in "$@"; do installed "$p" || missing+=("$p"); done
    [ "${#missing[@]}" = 0 ] && return 0
    log "installing ${missing[*]}"
    if ! as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
        "${missing[@]}" >&2; then
        apt_update
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            "${missing[@]}" >&2
    fi
}

# The source version of the kubernetes-client package apt would install (the binary
# packages' lists are enough; no deb-src entry is needed to know it).
source_version() {
    local out
    out="$(apt-cache show --no-all-versions kubernetes-client 2>/dev/null || true)"
    if [ -z "$out" ] && [ -z "$check_only" ]; then
        apt_update
        out="$(apt-cache show --no-all-versions kubernetes-client 2>/dev/null || true)"
    fi
    [ -n "$out" ] || die "apt knows no kubernetes-client package; set AKL_KUBERNETES_VERSION"
    awk '
        /^Version:/ { v = $2 }
        /^Source:/ && $3 != "" { s = $3; gsub(/[()]/, "", s) }
        END { print (s != "" ? s : v) }
    ' <<<"$out"
}

[ -n "$check_only" ] || ensure_packages "${runtime_packages[@]}"

version="${AKL_KUBERNETES_VERSION:-$(source_version)}"
case "$version" in
    ''|*/*|.*) die "bad Kubernetes source version '$version'" ;;
esac
cache="$cache_root/$version"

all_present() {
    local p
    for p in "${programs[@]}"; do [ -x "$cache/$p" ] || return 1; done
    ! wanted e2e.test || [ -s "$cache/nodeconformance-specs.txt" ]
}

if [ -n "$check_only" ]; then
    missing=()
    for p in "${programs[@]}"; do [ -x "$cache/$p" ] || missing+=("$p"); done
    if wanted e2e.test && [ ! -s "$cache/nodeconformance-specs.txt" ]; then
        missing+=(nodeconformance-specs.txt)
    fi
    absent=()
    etcd="${AKL_ETCD:-$(command -v etcd || true)}"
    [ -n "$etcd" ] && [ -x "$etcd" ] || absent+=("etcd (etcd-server)")
    for p in openssl curl; do command -v "$p" >/dev/null || absent+=("$p"); done
    if [ "${#missing[@]}" != 0 ] || [ "${#absent[@]}" != 0 ]; then
        what=""
        [ "${#missing[@]}" = 0 ] || what="${missing[*]} missing from $cache"
        [ "${#absent[@]}" = 0 ] || what="${what:+$what; }${absent[*]} not installed"
        die "$what"
    fi
    echo "$cache"
    exit 0
fi

if all_present; then
    echo "$cache"
    exit 0
fi

mkdir -p "$cache"
exec 9>"$cache_root/.lock"
flock 9
if all_present; then
    echo "$cache"
    exit 0
fi

scratch_parent="${AKL_CLUSTER_SCRATCH:-/var/tmp}"
work="$(mktemp -d "$scratch_parent/akl-cluster-build.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# kubectl comes from the binary package, not from the tree.
if wanted kubectl && [ ! -x "$cache/kubectl" ]; then
    log "kubectl from kubernetes-client $version"
    (cd "$work" && apt-get download -q "kubernetes-client=$version" >&2) || {
        apt_update
        (cd "$work" && apt-get download -q "kubernetes-client=$version" >&2)
    }
    dpkg-deb -x "$work"/kubernetes-client_*.deb "$work/kubectl-deb"
    install -m 0755 "$work/kubectl-deb/usr/bin/kubectl" "$cache/.kubectl.tmp"
    mv "$cache/.kubectl.tmp" "$cache/kubectl"
    rm -rf "$work/kubectl-deb" "$work"/kubernetes-client_*.deb
fi

# The kubelet's dockershim gives every sandbox OomScoreAdj -998, and a kernel (or a container)
# that withholds CAP_SYS_RESOURCE refuses any negative oom_score_adj, so no pod would start.
# On such a machine the sandbox's value becomes 0; elsewhere the tree is built as it is. The
# change made (a unified diff, empty when none) goes to the cache as kubelet.patch.
kubelet_machine_patch() {
    local tree="$1" rel=pkg/kubelet/dockershim/docker_sandbox.go
    if sh -c 'echo -998 >/proc/self/oom_score_adj' 2>/dev/null; then
        log "kubelet: this machine accepts a negative oom_score_adj; no patch"
        return 0
    fi
    log "kubelet: this machine refuses a negative oom_score_adj; sandboxes get 0 ($rel)"
    grep -q '^\s*defaultSandboxOOMAdj int = -998$' "$tree/$rel" \
        || die "$rel does not set defaultSandboxOOMAdj as expected"
    cp "$tree/$rel" "$work/docker_sandbox.go.orig"
    sed -i 's/^\(\s*defaultSandboxOOMAdj int = \)-998$/\10/' "$tree/$rel"
    (cd "$tree" && diff -u --label "a/$rel" --label "b/$rel" "$work/docker_sandbox.go.orig" "$rel") || true
}

need_tree=""
for p in "${programs[@]}"; do
    [ "$p" = kubectl ] && continue
    [ -x "$cache/$p" ] || need_tree=1
done

if [ -n "$need_tree" ]; then
    ensure_packages "${build_packages[@]}"

    # apt-get source needs a deb-src twin of the machine's deb entries.
    if ! apt-cache showsrc kubernetes 2>/dev/null | grep -q '^Package:'; then
        twin=/etc/apt/sources.list.d/asynckubelet-deb-src.sources
        if [ ! -e "$twin" ]; then
            log "adding deb-src entries ($twin)"
            shopt -s nullglob
            awk '
                BEGIN { RS = ""; ORS = "\n\n" }
                /(^|\n)Types:[^\n]*deb/ && !/(^|\n)Types:[^\n]*deb-src/ {
                    sub(/(^|\n)Types:[^\n]*/, "\nTypes: deb-src"); sub(/^\n/, ""); print
                }
            ' /etc/apt/sources.list.d/*.sources | as_root tee "$twin.tmp" >/dev/null
            if [ -f /etc/apt/sources.list ]; then
                sed -n 's/^deb\([[:space:]]\)/deb-src\1/p' /etc/apt/sources.list \
                    | as_root tee "${twin%.sources}.list.tmp" >/dev/null
                if [ -s "${twin%.sources}.list.tmp" ]; then
                    as_root mv "${twin%.sources}.list.tmp" "${twin%.sources}.list"
                else
                    as_root rm -f "${twin%.sources}.list.tmp"
                fi
            fi
            as_root mv "$twin.tmp" "$twin"
            shopt -u nullglob
        fi
        apt_updated=""
        apt_update
    fi

    log "apt-get source kubernetes=$version into $work"
    (cd "$work" && apt-get source -q "kubernetes=$version" >&2)
    tree="$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'kubernetes-*' | head -n 1)"
    [ -n "$tree" ] && [ -f "$tree/Makefile" ] || die "no source tree unpacked in $work"
    rm -f "$work"/*.dsc "$work"/*.tar.* "$work"/*.diff.*

    reflect2_src=/usr/share/gocode/src/github.com/modern-go/reflect2
    reflect2_dst="$tree/vendor/github.com/modern-go/reflect2"
    [ -d "$reflect2_dst" ] || die "the tree has no vendor/github.com/modern-go/reflect2"
    log "replacing vendored reflect2 with Debian's ($reflect2_src)"
    find "$reflect2_dst" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) -delete
    find "$reflect2_src" -maxdepth 1 -type f \( -name '*.go' -o -name '*.s' \) ! -name '*_test.go' \
        -exec cp -t "$reflect2_dst" {} +

    # The tree is a `git archive` export: hack/lib/version.sh carries its release and
    # commit, so the programs report v1.20.2 without a git repository.
    build_env=(GOPROXY=off GOFLAGS= GOTOOLCHAIN=local HOME="$work/home" GOCACHE="$work/gocache")
    mkdir -p "$work/home"

    build() {
        local name="$1" what="$2" start secs
        shift 2
        [ -x "$cache/$name" ] && return 0
        wanted "$name" || return 0
        log "make WHAT=$what $*"
        start="$(date +%s)"
        (cd "$tree" && env "${build_env[@]}" "$@" make WHAT="$what" >"$work/make-$name.log" 2>&1) || {
            tail -n 40 "$work/make-$name.log" >&2
            die "make WHAT=$what failed"
        }
        secs=$(( $(date +%s) - start ))
        log "$name built in ${secs}s"
        install -m 0755 "$tree/_output/bin/$name" "$cache/.$name.tmp"
        mv "$cache/.$name.tmp" "$cache/$name"
        printf '%s %s\n' "$name" "$secs" >>"$cache/build-times.txt"
    }
    build kube-apiserver cmd/kube-apiserver
    build kube-controller-manager cmd/kube-controller-manager
    build kube-scheduler cmd/kube-scheduler
    build e2e.test test/e2e/e2e.test
    build agnhost test/images/agnhost CGO_ENABLED=0
    build nonewprivs test/images/nonewprivs CGO_ENABLED=0
    if wanted kubelet && [ ! -x "$cache/kubelet" ]; then
        kubelet_machine_patch "$tree" >"$cache/.kubelet.patch.tmp"
        mv "$cache/.kubelet.patch.tmp" "$cache/kubelet.patch"
        build kubelet cmd/kubelet
    fi
fi

if wanted e2e.test && [ ! -s "$cache/nodeconformance-specs.txt" ]; then
    log "listing the [NodeConformance] specs of e2e.test"
    # A dry run walks the spec tree without a cluster; its verbose report names each spec.
    (cd "$work" && "$cache/e2e.test" --ginkgo.dryRun --ginkgo.noColor --ginkgo.v \
        --ginkgo.focus='\[NodeConformance\]' >"$work/dryrun.log" 2>&1) || {
        tail -n 40 "$work/dryrun.log" >&2
        die "the e2e.test dry run failed"
    }
    # Each spec the dry run walks is reported as {"msg":"PASSED <full name>",...}.
    sed -n 's/^.*{"msg":"PASSED \(.*\)","total":[0-9]*,.*$/\1/p' "$work/dryrun.log" \
        | sed 's/\\"/"/g; s/\\\\/\\/g' | sort >"$cache/.specs.tmp"
    count="$(sed -n 's/^Will run \([0-9]*\) of [0-9]* specs$/\1/p' "$work/dryrun.log")"
    [ -n "$count" ] && [ "$(wc -l <"$cache/.specs.tmp")" = "$count" ] \
        || die "the dry run reported ${count:-no} specs, but $(wc -l <"$cache/.specs.tmp") were read from it"
    mv "$cache/.specs.tmp" "$cache/nodeconformance-specs.txt"
fi

all_present || die "some programs are still missing from $cache"
echo "$version" >"$cache/VERSION"
log "done: $cache"
echo "$cache"
