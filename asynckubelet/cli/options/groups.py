"""Options that travel together, as frozen dataclasses of the declared aliases, the checks
of their values, and :func:`expand`, which puts a group's options on a command (see
:mod:`asynckubelet.cli.options`)."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import typer

if TYPE_CHECKING:
    from asynckubelet.docker import DockerAPI
    from asynckubelet.manifests import Level
    from asynckubelet.network import NetworkPlugin
    from asynckubelet.node.admission import NodeInfo
    from asynckubelet.runtime.manager import RuntimeConfig
    from asynckubelet.runtime.poddns import DNSSettings
from asynckubelet.cli.options.commands import (
    AUTHORIZATION_MODES,
    DEFAULT_KUBELET_PORT,
    DEFAULT_POD_CIDR_WAIT,
    AuthorizationModeOpt,
    ClientCAFileOpt,
    ContextOpt,
    KubeconfigOpt,
    KubeletPortOpt,
    NodeIPOpt,
    PodCIDRWaitOpt,
    RegisterWithTaintsOpt,
    TLSCertFileOpt,
    TLSKeyFileOpt,
)
from asynckubelet.cli.options.common import (
    DEFAULT_BRIDGE,
    DEFAULT_CLUSTER_DOMAIN,
    DEFAULT_CONTAINER_LOG_MAX_FILES,
    DEFAULT_CONTAINER_LOG_MAX_SIZE,
    DEFAULT_FIREWALL,
    DEFAULT_NETWORK,
    DEFAULT_NETWORK_STATE_DIR,
    DEFAULT_POD_CIDR,
    DEFAULT_POD_CIDR_V6,
    DEFAULT_POD_SECURITY,
    DEFAULT_SERVICE_ACCOUNT_ISSUER,
    FIREWALLS,
    NETWORK_BACKENDS,
    POD_SECURITY_LEVELS,
    AllowNamespacePolicyOpt,
    BridgeOpt,
    CapacityOpt,
    ClusterDNSOpt,
    ClusterDomainOpt,
    ContainerLogMaxFilesOpt,
    ContainerLogMaxSizeOpt,
    DockerHostOpt,
    DualStackOpt,
    FirewallOpt,
    InstanceOpt,
    LogFormatOpt,
    LogLevelOpt,
    MasqueradeOpt,
    MaxParallelStartsOpt,
    MaxPodsOpt,
    NetworkOpt,
    NetworkStateDirOpt,
    NodeLabelsOpt,
    NodeNameOpt,
    PauseImageOpt,
    PodCIDROpt,
    PodCIDRv6Opt,
    PodSecurityOpt,
    SeccompDefaultOpt,
    ServiceAccountIssuerOpt,
    StateDirOpt,
    VerboseOpt,
)

# -- checks ----------------------------------------------------------------------------------


class UsageError(typer.TyperException):
    """A bad option or argument: ``error: <message>``, exit 2."""

    exit_code = 2


def check_pod_security(value: str, *, code: int = 2) -> Level:
    """The ``--pod-security`` level, or an error naming the levels."""
    if value not in POD_SECURITY_LEVELS:
        raise _option_error(
            f"--pod-security must be one of {', '.join(POD_SECURITY_LEVELS)}, not {value!r}",
            code=code,
        )
    return cast("Level", value)


def check_max_restarts(value: int) -> int:
    """``--max-restarts``, refused below 0."""
    if value < 0:
        raise UsageError(f"--max-restarts must be 0 or more, not {value}")
    return value


def check_network(value: str) -> str:
    """Refuse an unknown ``--network``, naming the backends (exit 1, as it always was)."""
    if value not in NETWORK_BACKENDS:
        raise _option_error(
            f"--network must be one of {', '.join(NETWORK_BACKENDS)}, not {value!r}", code=1
        )
    return value


def check_firewall(value: str) -> str:
    """Refuse an unknown ``--firewall``, and ``nftables`` without ``nft`` on PATH."""
    import shutil

    if value not in FIREWALLS:
        raise UsageError(f"--firewall must be iptables or nftables, not {value!r}")
    if value == "nftables" and shutil.which("nft") is None:
        raise UsageError(
            "--firewall nftables needs the nft binary (Debian package nftables), not found "
            "on PATH; install it or use --firewall iptables"
        )
    return value


def check_issuer(value: str) -> str:
    """The issuer, checked as the API server checks its own ``--service-account-issuer``."""
    from asynckubelet.node.tokens import validate_issuer

    try:
        return validate_issuer(value)
    except ValueError as e:
        raise UsageError(str(e)) from None


def _hostname() -> str:
    import socket

    return socket.gethostname()


def ipv6_pod_cidr(*, dual_stack: bool, pod_cidr_v6: str | None, instance: str = "") -> str | None:
    """The IPv6 pod CIDR ``--dual-stack``/``--pod-cidr-v6`` ask for (an ``--instance``'s
    own unless given); None: IPv4 only."""
    if pod_cidr_v6:
        return pod_cidr_v6
    if not dual_stack:
        return None
    if instance:
        from asynckubelet.cli.instance import pod_cidr_v6 as instance_v6

        return instance_v6(instance)
    return DEFAULT_POD_CIDR_V6


def _option_error(message: str, *, code: int) -> typer.TyperException:
    """A usage error (exit 2), or with ``code`` 1 a plain failure."""
    return UsageError(message) if code == 2 else typer.TyperException(message)


# -- option groups ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True, kw_only=True)
class LogOptions:
    """``-v``, ``--log-level`` and ``--log-format`` given after the command."""

    verbose: VerboseOpt = 0
    log_level: LogLevelOpt = None
    log_format: LogFormatOpt = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeRef:
    """Which node a client command talks to: its state dir, its name and its engine."""

    state_dir: StateDirOpt = None
    node_name: NodeNameOpt = None
    docker_host: DockerHostOpt = None

    @property
    def state(self) -> Path:
        from asynckubelet.node.daemon import default_state_dir

        return self.state_dir if self.state_dir is not None else default_state_dir()

    @property
    def name(self) -> str:
        import socket

        return self.node_name or socket.gethostname()


@dataclasses.dataclass(frozen=True, kw_only=True)
class NodeOptions:
    """What a node runs with: its name, engine, pause image, pod security, seccomp default,
    pod network (and where its records are kept) and cluster DNS. ``run`` and ``serve`` take
    the same options, so a pod runs alike under both; ``reset`` takes them to find the
    network it removes. ``instance`` is the ``--instance`` every command takes: what it
    derives reaches the other fields as their defaults."""

    instance: InstanceOpt = ""
    node_name: NodeNameOpt = None
    docker_host: DockerHostOpt = None
    pause_image: PauseImageOpt = None
    pod_security: PodSecurityOpt = DEFAULT_POD_SECURITY
    allow_namespace_policy: AllowNamespacePolicyOpt = False
    seccomp_default: SeccompDefaultOpt = True
    service_account_issuer: ServiceAccountIssuerOpt = DEFAULT_SERVICE_ACCOUNT_ISSUER
    network: NetworkOpt = DEFAULT_NETWORK
    bridge: BridgeOpt = DEFAULT_BRIDGE
    pod_cidr: PodCIDROpt = DEFAULT_POD_CIDR
    dual_stack: DualStackOpt = False
    pod_cidr_v6: PodCIDRv6Opt = None
    firewall: FirewallOpt = DEFAULT_FIREWALL
    masquerade: MasqueradeOpt = True
    network_state_dir: NetworkStateDirOpt = DEFAULT_NETWORK_STATE_DIR
    cluster_dns: ClusterDNSOpt = None
    cluster_domain: ClusterDomainOpt = DEFAULT_CLUSTER_DOMAIN
    capacity: CapacityOpt = None
    max_pods: MaxPodsOpt = None
    node_labels: NodeLabelsOpt = None
    max_parallel_starts: MaxParallelStartsOpt = None
    container_log_max_size: ContainerLogMaxSizeOpt = DEFAULT_CONTAINER_LOG_MAX_SIZE
    container_log_max_files: ContainerLogMaxFilesOpt = DEFAULT_CONTAINER_LOG_MAX_FILES

    def check(self, *, pod_security_code: int = 2) -> None:
        """Refuse values no node can run with, before anything is started."""
        check_issuer(self.service_account_issuer)
        check_pod_security(self.pod_security, code=pod_security_code)
        check_network(self.network)
        check_firewall(self.firewall)
        starts = self.max_parallel_starts
        if starts is not None and starts < 0:
            raise UsageError(f"--max-parallel-starts must be 0 (no limit) or more, not {starts}")
        from asynckubelet.runtime.logrotation import check_max_files, parse_max_size

        try:
            parse_max_size(self.container_log_max_size)
            check_max_files(self.container_log_max_files)
        except ValueError as e:
            raise UsageError(str(e)) from None
        self.node_info()

    def node_info(self) -> NodeInfo:
        """The node as admission sees it: this host's resources with ``--capacity`` and
        ``--max-pods`` over them, and ``--node-labels`` (None when not given)."""
        import dataclasses as dc

        from asynckubelet.node.admission import (
            NodeInfo,
            host_resources,
            parse_labels,
            parse_node_resources,
        )

        try:
            resources = parse_node_resources(self.capacity or "", base=host_resources())
        except ValueError as e:
            raise UsageError(f"--capacity: {e}") from None
        try:
            labels = parse_labels(self.node_labels) if self.node_labels is not None else None
        except ValueError as e:
            raise UsageError(f"--node-labels: {e}") from None
        if self.max_pods is not None:
            if self.max_pods < 1:
                raise UsageError(f"--max-pods must be at least 1, not {self.max_pods}")
            resources = dc.replace(resources, pods=self.max_pods)
        name = self.node_name or _hostname()
        if labels is not None:
            # The kubelet's own labels (hostname, os, arch) are the node's too, under the
            # given ones, as on a registered Node: a nodeSelector on kubernetes.io/os
            # matches.
            from asynckubelet.cluster.host import go_arch
            from asynckubelet.cluster.nodestatus import default_labels

            labels = {**default_labels(name, arch=go_arch()), **labels}
        return NodeInfo(name=name, allocatable=resources, labels=labels)

    @property
    def level(self) -> Level:
        return check_pod_security(self.pod_security)

    def dns(self) -> DNSSettings:
        from asynckubelet.runtime.poddns import DNSSettings

        return DNSSettings(
            cluster_dns=tuple(self.cluster_dns or ()), cluster_domain=self.cluster_domain
        )

    def runtime_config(self) -> RuntimeConfig:
        """The runtime's configuration (the node name defaults to the hostname)."""
        from asynckubelet.runtime.manager import RuntimeConfig

        config = RuntimeConfig(
            pause_image=self.pause_image,
            docker_url=self.docker_host,
            dns=self.dns(),
            container_log_max_size=self.container_log_max_size,
            container_log_max_files=self.container_log_max_files,
            seccomp_default=self.seccomp_default,
        )
        if self.max_parallel_starts is not None:
            config = dataclasses.replace(config, max_parallel_starts=self.max_parallel_starts)
        return dataclasses.replace(config, node_name=self.node_name) if self.node_name else config

    def ipv6_pod_cidr(self) -> str | None:
        return ipv6_pod_cidr(
            dual_stack=self.dual_stack, pod_cidr_v6=self.pod_cidr_v6, instance=self.instance
        )

    def network_plugin(self, docker: DockerAPI, *, node_name: str) -> NetworkPlugin:
        """The pod network backend these options choose, on ``docker``'s engine."""
        from asynckubelet.network import factory

        return factory.make_network_plugin(
            self.network,
            docker=docker,
            state_dir=self.network_state_dir,
            bridge=self.bridge,
            pod_cidr=self.pod_cidr,
            pod_cidr_v6=self.ipv6_pod_cidr(),
            firewall=self.firewall,
            masquerade=self.masquerade,
            node_name=node_name,
        )


@dataclasses.dataclass(frozen=True, kw_only=True)
class ClusterOptions:
    """``serve --kubeconfig``: joining a cluster as a node, and the kubelet API."""

    kubeconfig: KubeconfigOpt = None
    context: ContextOpt = None
    register_with_taints: RegisterWithTaintsOpt = None
    node_ip: NodeIPOpt = None
    kubelet_port: KubeletPortOpt = DEFAULT_KUBELET_PORT
    tls_cert_file: TLSCertFileOpt = None
    tls_private_key_file: TLSKeyFileOpt = None
    client_ca_file: ClientCAFileOpt = None
    authorization_mode: AuthorizationModeOpt = "Webhook"
    pod_cidr_wait: PodCIDRWaitOpt = DEFAULT_POD_CIDR_WAIT

    def check(self) -> None:
        """Refuse values that cannot work, before anything starts."""
        if self.kubeconfig is None:
            given = [
                name
                for name, value in (
                    ("--context", self.context),
                    ("--register-with-taints", self.register_with_taints),
                    ("--tls-cert-file", self.tls_cert_file),
                    ("--client-ca-file", self.client_ca_file),
                )
                if value
            ]
            if given:
                raise UsageError(f"{', '.join(given)} need --kubeconfig (cluster node mode)")
            return
        if self.authorization_mode not in AUTHORIZATION_MODES:
            raise UsageError(
                f"--authorization-mode must be one of {', '.join(AUTHORIZATION_MODES)}, "
                f"not {self.authorization_mode!r}"
            )
        if (self.tls_cert_file is None) != (self.tls_private_key_file is None):
            raise UsageError("--tls-cert-file and --tls-private-key-file go together")
        if not 0 < self.kubelet_port <= 65535:
            raise UsageError(f"--kubelet-port must be a port number, not {self.kubelet_port}")
        if self.pod_cidr_wait < 0:
            raise UsageError(f"--pod-cidr-wait must be 0 or more, not {self.pod_cidr_wait}")


OPTION_GROUPS: tuple[type, ...] = (LogOptions, NodeRef, NodeOptions, ClusterOptions)

R = TypeVar("R")
INSTANCE = "instance"


def expand(command: Callable[..., R]) -> Callable[..., R]:
    """``command`` with each parameter typed as an option group (:data:`OPTION_GROUPS`)
    replaced by the group's options, and called with the group built from their values;
    every command takes ``--instance`` (once, whichever groups or parameters name it).

    Typer reads a command's options from its signature, so the signature is rewritten; every
    parameter becomes keyword-only (Typer passes them all by name).
    """
    signature = inspect.signature(command, eval_str=True)
    groups: dict[str, type] = {}
    parameters: list[inspect.Parameter] = [
        inspect.Parameter(
            INSTANCE, inspect.Parameter.KEYWORD_ONLY, default="", annotation=InstanceOpt
        )
    ]
    for parameter in signature.parameters.values():
        group = parameter.annotation
        if group not in OPTION_GROUPS:
            if parameter.name != INSTANCE:
                parameters.append(parameter.replace(kind=inspect.Parameter.KEYWORD_ONLY))
            continue
        groups[parameter.name] = group
        hints = typing.get_type_hints(group, include_extras=True)
        parameters.extend(
            inspect.Parameter(
                field.name,
                inspect.Parameter.KEYWORD_ONLY,
                default=field.default,
                annotation=hints[field.name],
            )
            for field in dataclasses.fields(group)
            if field.name != INSTANCE
        )
    takes_instance = INSTANCE in signature.parameters

    @functools.wraps(command)
    def expanded(**values: Any) -> R:
        instance = values.pop(INSTANCE, "")
        for name, group in groups.items():
            given = {
                field.name: instance if field.name == INSTANCE else values.pop(field.name)
                for field in dataclasses.fields(group)
            }
            values[name] = group(**given)
        if takes_instance:
            values[INSTANCE] = instance
        return command(**values)

    new_signature = signature.replace(parameters=parameters)
    expanded.__signature__ = new_signature  # type: ignore[attr-defined]
    expanded.__annotations__ = {p.name: p.annotation for p in parameters}
    return expanded
