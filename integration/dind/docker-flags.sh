#!/usr/bin/env bash
# Print, one per line, the `docker run` flags a Docker-in-Docker container of IMAGE needs on
# this host. Where a --privileged container can start, that is all it takes. Some hosts
# withhold CAP_SYS_RESOURCE from every process, so runc refuses any container that asks for
# it ("unable to apply caps"); there the equivalent set is every other capability, no
# seccomp or AppArmor profile, unmasked /proc and /sys paths and access to all devices.
# /var/lib/docker is a tmpfs in both cases: overlay2 cannot stack on the overlay root.
set -euo pipefail
image="$1"
if docker run --rm --privileged --network none --entrypoint /bin/true "$image" >/dev/null 2>&1; then
    printf '%s\n' --privileged
else
    printf '%s\n' --cap-add=ALL --cap-drop=SYS_RESOURCE \
        --security-opt=seccomp=unconfined --security-opt=apparmor=unconfined \
        --security-opt=systempaths=unconfined '--device-cgroup-rule=a *:* rwm'
fi
printf '%s\n' --tmpfs=/var/lib/docker:exec --tmpfs=/run:exec --tmpfs=/tmp:exec
# Docker turns IPv6 off in containers; the dual-stack tests need it, as on a CI runner.
printf '%s\n' --sysctl=net.ipv6.conf.all.disable_ipv6=0 --sysctl=net.ipv6.conf.default.disable_ipv6=0
