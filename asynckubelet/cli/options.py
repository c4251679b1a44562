"""Every option of the command line, declared once.

An option that several commands take (``--network``, ``--pause-image``, ``--state-dir``...)
is one ``Annotated`` alias here, with one name, one environment variable, one help text
and one default wherever it appears. Options that travel together are frozen dataclasses
whose fields are such aliases: :class:`NodeOptions` (what a node runs with: engine, pod
network, DNS, pod security; ``run`` and ``serve``), :class:`NodeRef` (which node a client
command talks to; ``apply``, ``delete``, ``get``...) and :class:`LogOptions` (every
command). A command names one parameter of such a type; :func:`expand` puts the group's
options on the command line in its place and hands the command one object built from them.

Nothing heavy is imported here, since ``asynckubelet --help`` reads every command's
options. Defaults the library also holds (the bridge's, the issuer's) are repeated as
literals; a unit test keeps the two equal.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import typing
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import typer

from asynckubelet.cli import fast

if TYPE_CHECKING:
    from asynckubelet.docker import DockerAPI
    from asynckubelet.manifests import Level
    from asynckubelet.network import NetworkPlugin
    from asynckubelet.network.dns import DNSSettings
    from asynckubelet.node.admission import NodeInfo
    from asynckubelet.runtime.manager import RuntimeConfig

DEFAULT_NETWORK = "auto"
NETWORK_BACKENDS = ("auto", "bridge", "cni", "docker", "loopback")
DEFAULT_BRIDGE = "akl0"
DEFAULT_POD_CIDR = "10.137.0.0/16"
DEFAULT_POD_CIDR_V6 = "fd00:ac1::/64"
FIREWALLS = ("iptables", "nftables")
DEFAULT_FIREWALL = "iptables"
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
DEFAULT_SERVICE_ACCOUNT_ISSUER = "https://asynckubelet.local"
DEFAULT_POD_SECURITY = "baseline"
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
POD_KINDS = ("pod", "pods", "po")
RESOURCES = fast.RESOURCES
"""kubectl's names (and short names) of the resources the node keeps -> the plural."""
KIND_OF = fast.KINDS

NODE_PANEL = "Node and engine"
NETWORK_PANEL = "Pod network"
LOG_PANEL = "Logging"

# -- logging (every command; also before the command, see app.py) -------------------------

LOG_LEVEL_HELP = "DEBUG, INFO, WARNING or ERROR (default: WARNING; serve: INFO)."
LOG_FORMAT_HELP = "text, or json: one JSON object per line (time, level, message, pod context)."
LogLevelOpt = Annotated[
    str | None,
    typer.Option(
        "--log-level",
        help=f"{LOG_LEVEL_HELP} Before the command too. \\[env var: ASYNCKUBELET_LOG_LEVEL]",
        rich_help_panel=LOG_PANEL,
    ),
]
LogFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--log-format",
        help=f"{LOG_FORMAT_HELP} \\[env var: ASYNCKUBELET_LOG_FORMAT]",
        rich_help_panel=LOG_PANEL,
    ),
]
VerboseOpt = Annotated[
    int,
    typer.Option(
        "--verbose", "-v", count=True, help="More logging (-vv: debug).", rich_help_panel=LOG_PANEL
    ),
]
GlobalLogLevelOpt = Annotated[
    str | None,
    typer.Option("--log-level", envvar="ASYNCKUBELET_LOG_LEVEL", help=LOG_LEVEL_HELP),
]
GlobalLogFormatOpt = Annotated[
    str | None,
    typer.Option("--log-format", envvar="ASYNCKUBELET_LOG_FORMAT", help=LOG_FORMAT_HELP),
]

# -- the node, its engine and its pod network ------------------------------------------------

DockerHostOpt = Annotated[
    str | None,
    typer.Option(
        "--docker-host",
        "-H",
        envvar="ASYNCKUBELET_DOCKER_HOST",
        help="Docker daemon address (default: DOCKER_HOST or local socket).",
        rich_help_panel=NODE_PANEL,
    ),
]
NodeNameOpt = Annotated[
    str | None,
    typer.Option(
        "--node-name",
        envvar="ASYNCKUBELET_NODE_NAME",
        help="Node name (ownership label; pod UIDs derive from it); default: hostname.",
        rich_help_panel=NODE_PANEL,
    ),
]
StateDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--state-dir",
        envvar="ASYNCKUBELET_STATE_DIR",
        help="Node state (manifests, statuses, events); default /var/lib/asynckubelet as "
        "root, else ~/.local/state/asynckubelet.",
        rich_help_panel=NODE_PANEL,
    ),
]
PauseImageOpt = Annotated[
    str | None,
    typer.Option(
        "--pause-image",
        envvar="ASYNCKUBELET_PAUSE_IMAGE",
        help="Sandbox image, pulled when missing (default: the project's own "
        "asynckubelet.local/pause:3.10, built here when missing, never pulled).",
        rich_help_panel=NODE_PANEL,
    ),
]
POD_SECURITY_HELP = "Pod Security level to enforce: privileged, baseline, restricted."
PodSecurityOpt = Annotated[
    str,
    typer.Option(
        "--pod-security",
        envvar="ASYNCKUBELET_POD_SECURITY",
        help=POD_SECURITY_HELP,
        rich_help_panel=NODE_PANEL,
    ),
]
ValidatePodSecurityOpt = Annotated[
    str, typer.Option("--pod-security", help=POD_SECURITY_HELP, rich_help_panel=NODE_PANEL)
]
AllowNamespacePolicyOpt = Annotated[
    bool,
    typer.Option(
        "--allow-namespace-policy",
        envvar="ASYNCKUBELET_ALLOW_NAMESPACE_POLICY",
        help="Let a Namespace document's pod-security.kubernetes.io/enforce label relax the "
        "level for its pods (without it, such a label can only make the level stricter).",
        rich_help_panel=NODE_PANEL,
    ),
]
ServiceAccountIssuerOpt = Annotated[
    str,
    typer.Option(
        "--service-account-issuer",
        envvar="ASYNCKUBELET_SERVICE_ACCOUNT_ISSUER",
        help="`iss` of the service-account tokens the node issues for projected volumes "
        "(a URL, or a name without ':', as the API server's --service-account-issuer).",
        rich_help_panel=NODE_PANEL,
    ),
]
NetworkOpt = Annotated[
    str,
    typer.Option(
        "--network",
        envvar="ASYNCKUBELET_NETWORK",
        help="Pod network: auto (bridge for a local daemon as root, else docker), "
        "bridge, cni (plugins from /opt/cni/bin:/usr/lib/cni, config from /etc/cni/net.d "
        "else the project's cni/), docker (a Docker network of the node), loopback.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
BridgeOpt = Annotated[
    str,
    typer.Option(
        "--bridge",
        envvar="ASYNCKUBELET_BRIDGE",
        help="Node bridge of the bridge network.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
PodCIDROpt = Annotated[
    str,
    typer.Option(
        "--pod-cidr",
        envvar="ASYNCKUBELET_POD_CIDR",
        help="Pod addresses of the bridge network.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
DualStackOpt = Annotated[
    bool,
    typer.Option(
        "--dual-stack",
        envvar="ASYNCKUBELET_DUAL_STACK",
        help=f"IPv4/IPv6 dual stack on the bridge network (IPv6 pod CIDR {DEFAULT_POD_CIDR_V6} "
        "unless --pod-cidr-v6 names one).",
        rich_help_panel=NETWORK_PANEL,
    ),
]
PodCIDRv6Opt = Annotated[
    str | None,
    typer.Option(
        "--pod-cidr-v6",
        envvar="ASYNCKUBELET_POD_CIDR_V6",
        help="IPv6 pod addresses of the bridge network; turns dual stack on.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
FirewallOpt = Annotated[
    str,
    typer.Option(
        "--firewall",
        envvar="ASYNCKUBELET_FIREWALL",
        help="What masquerades pod egress and DNATs hostPorts on the bridge network: "
        "iptables, or nftables (a table of its own per bridge; needs nft).",
        rich_help_panel=NETWORK_PANEL,
    ),
]
MasqueradeOpt = Annotated[
    bool,
    typer.Option(
        "--masquerade/--no-masquerade",
        envvar="ASYNCKUBELET_MASQUERADE",
        help="Masquerade pod egress leaving the node on the bridge network.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
ClusterDNSOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--cluster-dns",
        envvar="ASYNCKUBELET_CLUSTER_DNS",
        help="Cluster DNS server for ClusterFirst pods (repeatable); none: they fall "
        "back to the node's resolver, with a MissingClusterDNS warning.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
CapacityOpt = Annotated[
    str | None,
    typer.Option(
        "--capacity",
        envvar="ASYNCKUBELET_CAPACITY",
        help="What the node offers pods, over what this host has: NAME=QUANTITY,... e.g. "
        "cpu=4,memory=8Gi,pods=50,example.com/dongle=2 (extended resources included). A pod "
        "asking for more is rejected (OutOfcpu...).",
        rich_help_panel=NODE_PANEL,
    ),
]
MaxPodsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-pods",
        envvar="ASYNCKUBELET_MAX_PODS",
        help="Pods the node runs at once (default 110, as the kubelet's).",
        rich_help_panel=NODE_PANEL,
    ),
]
NodeLabelsOpt = Annotated[
    str | None,
    typer.Option(
        "--node-labels",
        envvar="ASYNCKUBELET_NODE_LABELS",
        help="The node's labels, KEY=VALUE,...: pods' nodeSelector and node affinity are "
        "then checked against them (a pod that does not match is rejected).",
        rich_help_panel=NODE_PANEL,
    ),
]
ClusterDomainOpt = Annotated[
    str,
    typer.Option(
        "--cluster-domain",
        envvar="ASYNCKUBELET_CLUSTER_DOMAIN",
        help="Cluster domain of the pods' DNS search.",
        rich_help_panel=NETWORK_PANEL,
    ),
]

# -- manifests and pods ----------------------------------------------------------------------

FilesArg = Annotated[list[str], typer.Argument(help="Manifest files or directories; - for stdin.")]
FilenamesOpt = Annotated[
    list[str], typer.Option("--filename", "-f", help="Manifest file (repeatable); - for stdin.")
]
DeleteFilenamesOpt = Annotated[
    list[str] | None,
    typer.Option("--filename", "-f", help="Delete every object these files hold."),
]
LenientOpt = Annotated[
    bool, typer.Option("--lenient", help="Unknown fields warn instead of failing.")
]
NamespaceOpt = Annotated[str, typer.Option("--namespace", "-n", help="The namespace.")]
AllNamespacesOpt = Annotated[
    bool, typer.Option("--all-namespaces", "-A", help="Objects of every namespace.")
]
KindArg = Annotated[
    str,
    typer.Argument(
        help="The resource type: pods (po), configmaps (cm), secrets, services (svc) or "
        "endpoints (ep)."
    ),
]
PodKindArg = Annotated[str, typer.Argument(help="The resource type: pods (or pod, po).")]
DeleteKindArg = Annotated[
    str | None,
    typer.Argument(help="`pod`, `configmap` or `secret`, followed by the name (or `pod/NAME`...)."),
]
PodNameArg = Annotated[str, typer.Argument(help="The pod's name.")]
OptionalPodNameArg = Annotated[str | None, typer.Argument(help="One pod's name.")]
OptionalNameArg = Annotated[str | None, typer.Argument(help="One object's name.")]
ContainerOpt = Annotated[
    str | None,
    typer.Option("--container", "-c", help="The container (default: the pod's default container)."),
]
ReportFormatOpt = Annotated[
    str, typer.Option("--output", "-o", help="Output format: text or json.")
]
PodFormatOpt = Annotated[
    str | None, typer.Option("--output", "-o", help="wide, yaml, json or name.")
]

# -- run -------------------------------------------------------------------------------------

KeepOpt = Annotated[bool, typer.Option("--keep", help="Keep the pod's containers at exit.")]
GracePeriodOpt = Annotated[
    float | None,
    typer.Option(
        "--grace-period",
        envvar="ASYNCKUBELET_GRACE_PERIOD",
        help="Seconds to wait on stop before SIGKILL.",
    ),
]
ColorOpt = Annotated[bool, typer.Option("--color/--no-color", help="Colour the prefixes.")]
PullTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--pull-timeout",
        envvar="ASYNCKUBELET_PULL_TIMEOUT",
        help="Seconds a failing image pull (network, registry down) is retried, with the "
        "kubelet's back-off, before the run ends with its error. An image the registry "
        "says does not exist ends it at once.",
    ),
]
ConfigTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--config-timeout",
        envvar="ASYNCKUBELET_CONFIG_TIMEOUT",
        help="Seconds a container may wait in CreateContainerConfigError (a ConfigMap or "
        "Secret not found...) before the wait ends with that error.",
    ),
]

# -- serve -----------------------------------------------------------------------------------

ManifestDirOpt = Annotated[
    Path | None,
    typer.Option(
        "--manifests",
        envvar="ASYNCKUBELET_MANIFESTS",
        help="Static pod manifest directory, watched (default <state-dir>/manifests).",
    ),
]
ListenOpt = Annotated[
    str,
    typer.Option("--listen", envvar="ASYNCKUBELET_LISTEN", help="HOST:PORT of the HTTP endpoints."),
]
AllowRemoteOpt = Annotated[
    bool,
    typer.Option(
        "--allow-remote",
        envvar="ASYNCKUBELET_ALLOW_REMOTE",
        help="Allow --listen on a non-loopback address.",
    ),
]
SERVICES_PANEL = "Services and cluster DNS"
ServiceClusterIPRangeOpt = Annotated[
    str,
    typer.Option(
        "--service-cluster-ip-range",
        envvar="ASYNCKUBELET_SERVICE_CLUSTER_IP_RANGE",
        help="The node's own range of Service ClusterIPs (the API server's flag).",
        rich_help_panel=SERVICES_PANEL,
    ),
]
ServiceNodePortRangeOpt = Annotated[
    str,
    typer.Option(
        "--service-node-port-range",
        envvar="ASYNCKUBELET_SERVICE_NODE_PORT_RANGE",
        help="Ports of NodePort and LoadBalancer Services, FIRST-LAST (the API server's flag).",
        rich_help_panel=SERVICES_PANEL,
    ),
]
DNSServerOpt = Annotated[
    bool,
    typer.Option(
        "--dns-server/--no-dns-server",
        envvar="ASYNCKUBELET_DNS_SERVER",
        help="Answer the cluster's names (Services, pods) on the pod network's gateway, port "
        "53, and make it the ClusterFirst pods' nameserver when --cluster-dns is not given "
        "(bridge and cni networks).",
        rich_help_panel=SERVICES_PANEL,
    ),
]
DNSUpstreamOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--dns-upstream",
        envvar="ASYNCKUBELET_DNS_UPSTREAM",
        help="Where the cluster DNS forwards other names, IP or IP:PORT (repeatable); "
        "default: the nameservers of the node's /etc/resolv.conf.",
        rich_help_panel=SERVICES_PANEL,
    ),
]
StopPodsOpt = Annotated[
    bool,
    typer.Option(
        "--stop-pods-on-exit",
        envvar="ASYNCKUBELET_STOP_PODS_ON_EXIT",
        help="Stop and remove every pod on SIGINT/SIGTERM (default: leave them running "
        "for the next start to adopt, as the kubelet does).",
    ),
]

# -- serve: cluster node mode ----------------------------------------------------------------

CLUSTER_PANEL = "Cluster node mode"
DEFAULT_KUBELET_PORT = 10250
DEFAULT_POD_CIDR_WAIT = 60.0
DEFAULT_NETWORK_STATE_DIR = Path("/var/lib/asynckubelet/network")
AUTHORIZATION_MODES = ("AlwaysAllow", "Webhook")
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        envvar="ASYNCKUBELET_KUBECONFIG",
        help="Join the cluster of this kubeconfig as a node (its credentials: a client "
        "certificate for system:node:<name>, or a token) and run the pods bound to it, "
        "beside the static pods; without it, serve is a standalone node.",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
ContextOpt = Annotated[
    str | None,
    typer.Option(
        "--context", help="kubeconfig context (default: its current-context).",
        rich_help_panel=CLUSTER_PANEL,
    ),
]  # fmt: skip
RegisterWithTaintsOpt = Annotated[
    str | None,
    typer.Option(
        "--register-with-taints",
        envvar="ASYNCKUBELET_REGISTER_WITH_TAINTS",
        help="Taints of a newly registered Node: KEY[=VALUE]:EFFECT,...",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
NodeIPOpt = Annotated[
    str | None,
    typer.Option(
        "--node-ip",
        envvar="ASYNCKUBELET_NODE_IP",
        help="The Node's InternalIP, where the API server reaches the kubelet API "
        "(default: the address of the default route's interface).",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
KubeletPortOpt = Annotated[
    int,
    typer.Option(
        "--kubelet-port",
        envvar="ASYNCKUBELET_KUBELET_PORT",
        help="Port of the kubelet API (HTTPS, on the node IP): logs, exec, port-forward.",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
TLSCertFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-cert-file",
        help="The kubelet API's certificate (default: a self-signed one made under "
        "<state-dir>/pki).",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
TLSKeyFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-private-key-file", help="The key of --tls-cert-file.",
        rich_help_panel=CLUSTER_PANEL,
    ),
]  # fmt: skip
ClientCAFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--client-ca-file",
        help="CA that signs the certificates of the kubelet API's clients (the API "
        "server's kubelet client certificate); default: the kubeconfig's authority.",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
AuthorizationModeOpt = Annotated[
    str,
    typer.Option(
        "--authorization-mode",
        help="Who may use the kubelet API: AlwaysAllow (any client the CA signed) or "
        "Webhook (a SubjectAccessReview of nodes/proxy per client and request).",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
PodCIDRWaitOpt = Annotated[
    float,
    typer.Option(
        "--pod-cidr-wait",
        help="Seconds to wait for the Node's spec.podCIDR before using --pod-cidr.",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
NetworkStateDirOpt = Annotated[
    Path,
    typer.Option(
        "--network-state-dir",
        envvar="ASYNCKUBELET_NETWORK_STATE_DIR",
        help="IPAM and pod network records of the bridge and cni networks.",
        rich_help_panel=NETWORK_PANEL,
    ),
]

# -- apply and delete ------------------------------------------------------------------------

WaitOpt = Annotated[
    bool, typer.Option("--wait", help="Wait until every pod is Ready or Succeeded.")
]
WaitTimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds --wait waits.")]
DeleteGracePeriodOpt = Annotated[
    float | None, typer.Option("--grace-period", help="Seconds before SIGKILL.")
]
DeleteTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout",
        help="Seconds to wait until the pods are gone; exit 1 naming any still there.",
    ),
]

# -- logs and exec ---------------------------------------------------------------------------

FollowOpt = Annotated[bool, typer.Option("--follow", "-f", help="Keep streaming.")]
PreviousOpt = Annotated[
    bool, typer.Option("--previous", "-p", help="The previous (dead) instance's output.")
]
TailOpt = Annotated[int | None, typer.Option("--tail", help="Only the last N lines.")]
TimestampsOpt = Annotated[bool, typer.Option("--timestamps", help="Prefix each line.")]
SinceOpt = Annotated[str | None, typer.Option("--since", help="Only newer lines, e.g. 5s, 2m, 3h.")]
CommandArg = Annotated[list[str], typer.Argument(help="The command and its arguments, after --.")]
StdinOpt = Annotated[bool, typer.Option("--stdin", "-i", help="Pass stdin to the command.")]
TtyOpt = Annotated[bool, typer.Option("--tty", "-t", help="Allocate a terminal.")]

# -- images and engine -----------------------------------------------------------------------

ImageTagOpt = Annotated[str, typer.Option("--tag", "-t", help="Image reference to create.")]
ProbeTagOpt = Annotated[
    str | None,
    typer.Option("--tag", "-t", help="Image reference (default: the one the node uses)."),
]
BusyboxOpt = Annotated[
    Path, typer.Option("--busybox", help="A static busybox binary (Debian: busybox-static).")
]
PurgeOpt = Annotated[bool, typer.Option("--purge", help="Also delete its images and data.")]


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


def ipv6_pod_cidr(*, dual_stack: bool, pod_cidr_v6: str | None) -> str | None:
    """The IPv6 pod CIDR ``--dual-stack``/``--pod-cidr-v6`` ask for; None: IPv4 only."""
    if pod_cidr_v6:
        return pod_cidr_v6
    return DEFAULT_POD_CIDR_V6 if dual_stack else None


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
    """What a node runs with: its name, engine, pause image, pod security, pod network and
    cluster DNS. ``run`` and ``serve`` take the same options, so a pod runs alike under
    both."""

    node_name: NodeNameOpt = None
    docker_host: DockerHostOpt = None
    pause_image: PauseImageOpt = None
    pod_security: PodSecurityOpt = DEFAULT_POD_SECURITY
    allow_namespace_policy: AllowNamespacePolicyOpt = False
    service_account_issuer: ServiceAccountIssuerOpt = DEFAULT_SERVICE_ACCOUNT_ISSUER
    network: NetworkOpt = DEFAULT_NETWORK
    bridge: BridgeOpt = DEFAULT_BRIDGE
    pod_cidr: PodCIDROpt = DEFAULT_POD_CIDR
    dual_stack: DualStackOpt = False
    pod_cidr_v6: PodCIDRv6Opt = None
    firewall: FirewallOpt = DEFAULT_FIREWALL
    masquerade: MasqueradeOpt = True
    cluster_dns: ClusterDNSOpt = None
    cluster_domain: ClusterDomainOpt = DEFAULT_CLUSTER_DOMAIN
    capacity: CapacityOpt = None
    max_pods: MaxPodsOpt = None
    node_labels: NodeLabelsOpt = None

    def check(self, *, pod_security_code: int = 2) -> None:
        """Refuse values no node can run with, before anything is started."""
        check_issuer(self.service_account_issuer)
        check_pod_security(self.pod_security, code=pod_security_code)
        check_network(self.network)
        check_firewall(self.firewall)
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
        return NodeInfo(name=self.node_name or _hostname(), allocatable=resources, labels=labels)

    @property
    def level(self) -> Level:
        return check_pod_security(self.pod_security)

    def dns(self) -> DNSSettings:
        from asynckubelet.network.dns import DNSSettings

        return DNSSettings(
            cluster_dns=tuple(self.cluster_dns or ()), cluster_domain=self.cluster_domain
        )

    def runtime_config(self) -> RuntimeConfig:
        """The runtime's configuration (the node name defaults to the hostname)."""
        from asynckubelet.runtime.manager import RuntimeConfig

        config = RuntimeConfig(
            pause_image=self.pause_image, docker_url=self.docker_host, dns=self.dns()
        )
        return dataclasses.replace(config, node_name=self.node_name) if self.node_name else config

    def network_plugin(self, docker: DockerAPI, *, node_name: str) -> NetworkPlugin:
        """The pod network backend these options choose, on ``docker``'s engine."""
        from asynckubelet.network import factory

        return factory.make_network_plugin(
            self.network,
            docker=docker,
            bridge=self.bridge,
            pod_cidr=self.pod_cidr,
            pod_cidr_v6=ipv6_pod_cidr(dual_stack=self.dual_stack, pod_cidr_v6=self.pod_cidr_v6),
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
    authorization_mode: AuthorizationModeOpt = "AlwaysAllow"
    pod_cidr_wait: PodCIDRWaitOpt = DEFAULT_POD_CIDR_WAIT
    network_state_dir: NetworkStateDirOpt = DEFAULT_NETWORK_STATE_DIR

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


def expand(command: Callable[..., R]) -> Callable[..., R]:
    """``command`` with each parameter typed as an option group (:data:`OPTION_GROUPS`)
    replaced by the group's options, and called with the group built from their values.

    Typer reads a command's options from its signature, so the signature is rewritten; every
    parameter becomes keyword-only (Typer passes them all by name).
    """
    signature = inspect.signature(command, eval_str=True)
    groups: dict[str, type] = {}
    parameters: list[inspect.Parameter] = []
    for parameter in signature.parameters.values():
        group = parameter.annotation
        if group not in OPTION_GROUPS:
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
        )

    @functools.wraps(command)
    def expanded(**values: Any) -> R:
        for name, group in groups.items():
            fields = dataclasses.fields(group)
            values[name] = group(**{field.name: values.pop(field.name) for field in fields})
        return command(**values)

    new_signature = signature.replace(parameters=parameters)
    expanded.__signature__ = new_signature  # type: ignore[attr-defined]
    expanded.__annotations__ = {p.name: p.annotation for p in parameters}
    return expanded
