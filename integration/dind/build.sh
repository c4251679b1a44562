#!/usr/bin/env bash
# Build the Docker-in-Docker image from local material only, when it is missing, and print
# its reference. A minimal Debian root file system (debootstrap --variant=minbase) with the
# packages in packages.txt, the entrypoint copied in, imported into the engine with
# `docker import`. The tag is a hash of these inputs, so an unchanged image is never rebuilt
# and a changed input builds a new one. The mirror is the one this machine's apt already
# uses (read at run time, never stored here); no registry is involved.
#
# Environment: DOCKER_HOST as for the docker CLI; AKL_DIND_MIRROR overrides the mirror,
# AKL_DIND_SUITE the Debian suite (default: this machine's release codename).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo_name="asynckubelet-dind.local/dind"

suite="${AKL_DIND_SUITE:-$(. /etc/os-release && echo "${VERSION_CODENAME:-bookworm}")}"
arch="$(dpkg --print-architecture 2>/dev/null || uname -m)"
hash="$(cat "$here/build.sh" "$here/entrypoint.sh" "$here/packages.txt" <(echo "$suite $arch") \
    | sha256sum | cut -c1-16)"
image="$repo_name:$hash"

if docker image inspect "$image" >/dev/null 2>&1; then
    echo "$image"
    exit 0
fi

# The first URI of an apt source that carries the suite itself (not -security, -updates).
apt_mirror() {
    local f uri suites
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        uri="" suites=""
        while IFS= read -r line || [ -n "$line" ]; do
            case "$line" in
                URIs:*) uri="$(echo "${line#URIs:}" | awk '{print $1}')" ;;
                Suites:*) suites=" ${line#Suites:} " ;;
                "")
                    if [ -n "$uri" ] && [[ "$suites" == *" $suite "* ]]; then echo "$uri"; return 0; fi
                    uri="" suites="" ;;
            esac
        done < "$f"
        if [ -n "$uri" ] && [[ "$suites" == *" $suite "* ]]; then echo "$uri"; return 0; fi
    done
    for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
        [ -f "$f" ] || continue
        uri="$(awk -v s="$suite" '$1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
            if ($(i + 1) == s) { print $i; exit } }' "$f")"
        if [ -n "$uri" ]; then echo "$uri"; return 0; fi
    done
    return 1
}

mirror="${AKL_DIND_MIRROR:-$(apt_mirror || true)}"
if [ -z "$mirror" ]; then
    echo "build.sh: no apt source for suite $suite in /etc/apt; set AKL_DIND_MIRROR" >&2
    exit 1
fi
if ! command -v debootstrap >/dev/null; then
    echo "build.sh: debootstrap is missing; installing it" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >&2
fi

work="$(mktemp -d /var/tmp/akl-dind-build.XXXXXX)"
cleanup() {
    # debootstrap leaves proc/sys/dev mounts behind when it fails half way.
    grep -o " $work/[^ ]*" /proc/self/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

rootfs="$work/rootfs"
echo "build.sh: debootstrap $suite from $mirror into $rootfs" >&2
debootstrap --variant=minbase --include="$(paste -sd, "$here/packages.txt")" \
    "$suite" "$rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -n 30 "$work/debootstrap.log" >&2
    [ -f "$rootfs/debootstrap/debootstrap.log" ] && tail -n 30 "$rootfs/debootstrap/debootstrap.log" >&2
    exit 1
}
install -m 0755 "$here/entrypoint.sh" "$rootfs/usr/local/bin/dind-entrypoint"
rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/tmp/*

echo "build.sh: importing $image" >&2
tar -C "$rootfs" --numeric-owner -c . | docker import \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENTRYPOINT ["/usr/local/bin/dind-entrypoint"]' \
    --change 'LABEL io.asynckubelet.dind.inputs='"$hash" \
    - "$image" >/dev/null
# Images of earlier inputs are replaced, not kept beside it (one in use stays).
docker image ls --format '{{.Repository}}:{{.Tag}}' "$repo_name" | grep -vxF "$image" \
    | xargs -r docker rmi >/dev/null 2>&1 || true
echo "$image"
