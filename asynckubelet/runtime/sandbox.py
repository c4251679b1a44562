"""The pod sandbox's configuration, decided before anything is made.

The kubelet's ``generatePodSandboxConfig`` turns a pod into what its sandbox needs:
name and attempt, hostname, DNS, port mappings, labels, cgroup parent and log directory.
Here it is a pure function of the pod and the node's settings, so every rule is a row
in a table test; cri-dockerd's ``makeSandboxDockerConfig`` (:func:`sandbox_docker_config`)
then renders it as the pause container's Docker config, with what the network backend
adds. The sync step that creates the sandbox only gathers the inputs that need I/O (the
node's resolver file, the engine's cgroup driver) and carries the result out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lightkube.models.core_v1 import Pod

from asynckubelet.docker.types import ContainerConfig, HostConfig
from asynckubelet.network import (
    PodDNS,
    PodNetworkRequest,
    PortMapping,
    SandboxExtra,
    requested_ips,
)
from asynckubelet.runtime import naming, nodefiles, security
from asynckubelet.runtime.containers import pod_identity
from asynckubelet.runtime.poddns import (
    DNSSettings,
    ResolverConfig,
    engine_dns,
    pod_dns,
    pod_hostname_and_domain,
    sandbox_hostname,
)
from asynckubelet.runtime.qos import qos_class


@dataclass(frozen=True)
class PodSandboxConfig:
    """What the pod's sandbox of one attempt is made with."""

    name: str
    """The pause container's name (``<prefix>_POD_<pod>_<ns>_<uid>_<attempt>``)."""
    attempt: int
    host_network: bool
    hostname: str | None
    """The pod's hostname (its FQDN under ``setHostnameAsFQDN``); None under hostNetwork,
    where the pod has the node's."""
    labels: Mapping[str, str]
    """The pod's labels, its annotations as prefixed labels, and ours (owner, pod, type,
    attempt, hostNetwork)."""
    port_mappings: tuple[PortMapping, ...]
    """Every hostPort of the pod's containers, init containers included."""
    dns: ResolverConfig | None
    """The pod's resolver settings; None under hostNetwork, where the node's apply."""
    cgroup_parent: str | None
    """The pod cgroup every container of the pod runs under; None: the engine's default."""
    log_directory: Path | None
    """Where the links to the containers' log files go (the kubelet's
    ``/var/log/pods/<namespace>_<name>_<uid>``); None: no links."""


def port_mappings(pod: Pod) -> tuple[PortMapping, ...]:
    """The pod's hostPorts, in container order (init containers first)."""
    found: list[PortMapping] = []
    spec = pod.spec
    if spec is None:
        return ()
    for c in list(spec.initContainers or []) + list(spec.containers or []):
        for p in c.ports or []:
            if p.hostPort:
                found.append(
                    PortMapping(
                        container_port=p.containerPort,
                        host_port=p.hostPort,
                        protocol=p.protocol or "TCP",
                        host_ip=p.hostIP or "",
                    )
                )
    return tuple(found)


def sandbox_labels(pod: Pod, *, node: str, attempt: int, owner: str = "") -> dict[str, str]:
    name, ns, uid = pod_identity(pod)
    meta = pod.metadata
    return {
        **{str(k): str(v) for k, v in ((meta.labels if meta else None) or {}).items()},
        **{
            f"{naming.ANNOTATION_PREFIX}{k}": str(v)
            for k, v in ((meta.annotations if meta else None) or {}).items()
        },
        **naming.pod_labels(node=node, pod=name, namespace=ns, uid=uid, owner=owner),
        naming.LABEL_TYPE: naming.TYPE_SANDBOX,
        naming.LABEL_ATTEMPT: str(attempt),
        naming.LABEL_HOST_NETWORK: "true" if pod.spec and pod.spec.hostNetwork else "false",
    }


def generate_pod_sandbox_config(
    pod: Pod,
    *,
    node: str,
    attempt: int,
    dns: DNSSettings,
    node_resolver: ResolverConfig,
    cgroup_root: str | None = None,
    cgroup_driver: str = "cgroupfs",
    log_root: Path | None = None,
    owner: str = "",
) -> PodSandboxConfig:
    """The sandbox of ``attempt`` for ``pod``, on ``node`` (``owner``: see
    :data:`~asynckubelet.runtime.naming.LABEL_OWNER`).

    ``node_resolver`` is the node's parsed resolver file
    (:func:`~asynckubelet.runtime.dnsfiles.node_resolver`); ``cgroup_root`` (with the
    engine's ``cgroup_driver``) and ``log_root`` are None when pod cgroups or log links are
    off, or the engine is not local.

    Raises :class:`~asynckubelet.errors.SandboxError` for an FQDN hostname over 64
    characters.
    """
    name, ns, uid = pod_identity(pod)
    spec = pod.spec
    assert spec is not None  # noqa: S101  (type narrowing: an admitted pod has a spec)
    host_network = bool(spec.hostNetwork)
    fqdn = sandbox_hostname(pod, cluster_domain=dns.cluster_domain)
    short, _ = pod_hostname_and_domain(pod, cluster_domain=dns.cluster_domain)
    return PodSandboxConfig(
        name=naming.sandbox_name(pod=name, namespace=ns, uid=uid, attempt=attempt),
        attempt=attempt,
        host_network=host_network,
        hostname=None if host_network else (fqdn or short),
        labels=sandbox_labels(pod, node=node, attempt=attempt, owner=owner),
        port_mappings=port_mappings(pod),
        dns=None if host_network else pod_dns(pod, settings=dns, host=node_resolver)[0],
        cgroup_parent=(
            nodefiles.pod_cgroup_parent(
                root=cgroup_root, driver=cgroup_driver, qos=qos_class(pod), uid=uid
            )
            if cgroup_root is not None
            else None
        ),
        log_directory=(
            nodefiles.pod_log_dir(log_root, namespace=ns, name=name, uid=uid)
            if log_root is not None
            else None
        ),
    )


def sandbox_docker_config(
    pod: Pod,
    config: PodSandboxConfig,
    *,
    image: str,
    network_mode: str,
    extra: SandboxExtra | None = None,
    engine_dns_keys: bool = False,
    network_disabled: bool = False,
    log_config: dict[str, Any] | None = None,
) -> ContainerConfig:
    """The pause container's Docker config: IPC shareable (or the host's), no new
    privileges, the pod's sysctls and what the network backend adds (``extra``: a
    Docker-managed network publishes hostPorts on the sandbox). With
    ``engine_dns_keys``, the pod's resolver settings and hostAliases go to Docker as
    ``HostConfig`` keys, for an engine whose files this process cannot write.

    ``network_disabled`` (with ``network_mode`` ``none``: the network backend sets the
    namespace up) has Docker leave the sandbox's network namespace alone
    (``NetworkDisabled``): the runtime makes it (with its loopback interface up) and Docker
    neither builds a network sandbox of its own for it nor runs its ``libnetwork-setkey``
    hook, half of a pause container's start; it writes no resolv.conf or hosts file either,
    and the node provides the pod's (see
    :meth:`~asynckubelet.runtime.volumes.VolumeProvider.write_network_files`).

    ``log_config`` is the log rotation every container of the node gets: the pause
    container prints nothing, but a ``pause_image`` of the user's might."""
    spec = pod.spec
    assert spec is not None  # noqa: S101  (type narrowing: an admitted pod has a spec)
    host: HostConfig = {
        "NetworkMode": network_mode,
        "IpcMode": "host" if spec.hostIPC else "shareable",
        "SecurityOpt": ["no-new-privileges", *security.sandbox_security_options(pod)],
    }
    if spec.hostPID:
        host["PidMode"] = "host"
    if spec.securityContext is not None and spec.securityContext.sysctls:
        host["Sysctls"] = {s.name: s.value for s in spec.securityContext.sysctls}
    if extra is not None:
        host.update(extra.host_config)
    if config.cgroup_parent is not None:
        host["CgroupParent"] = config.cgroup_parent
    if engine_dns_keys and config.dns is not None:
        host.update(engine_dns(pod, resolver=config.dns))
    if log_config is not None:
        host["LogConfig"] = log_config
    docker: ContainerConfig = {"Image": image, "Labels": dict(config.labels), "HostConfig": host}
    if extra is not None and extra.exposed_ports:
        docker["ExposedPorts"] = {k: dict(v) for k, v in extra.exposed_ports.items()}
    if network_mode != "host" and config.hostname is not None:
        docker["Hostname"] = config.hostname
    if network_disabled and network_mode == "none":
        docker["NetworkDisabled"] = True
    return docker


def pod_network_request(
    pod: Pod, config: PodSandboxConfig, *, sandbox_id: str, pid: int
) -> PodNetworkRequest:
    """What the network backend is asked to set up for the sandbox whose process is ``pid``
    (0: unknown). Raises :class:`~asynckubelet.errors.NetworkError` for a bad request of
    fixed addresses."""
    name, ns, uid = pod_identity(pod)
    resolver = config.dns or ResolverConfig()
    return PodNetworkRequest(
        sandbox_id=sandbox_id,
        pod_name=name,
        namespace=ns,
        uid=uid,
        netns_path=f"/proc/{pid}/ns/net" if pid else "",
        port_mappings=config.port_mappings,
        dns=PodDNS(
            servers=resolver.nameservers,
            searches=resolver.searches,
            options=resolver.options,
        ),
        ips=requested_ips(pod.metadata.annotations if pod.metadata else None),
    )


__all__ = [
    "PodSandboxConfig",
    "generate_pod_sandbox_config",
    "pod_network_request",
    "port_mappings",
    "sandbox_docker_config",
    "sandbox_labels",
]
