"""The options many commands share: logging, the node, its engine and pod network, and
the manifests and pods a command names (see :mod:`asynckubelet.cli.options`)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from asynckubelet.cli.commands import get_args

if TYPE_CHECKING:
    pass

BOOL = "BOOL"
"""The metavar of an option that takes a boolean as kubectl's flags do: ``--wait``
alone is ``--wait=true``, and ``--wait=false`` turns it off (:func:`bare_booleans`)."""
_BOOL_WORDS = frozenset({"true", "True", "TRUE", "false", "False", "FALSE"})


def bare_booleans(args: Sequence[str], flags: Collection[str]) -> list[str]:
    """``args`` with each of ``flags`` given without a value made ``FLAG=true``, as kubectl
    reads a boolean flag given alone. A ``true`` or ``false`` right after the flag is its
    value (``--wait false``); any other word there stays an argument of its own, as it is
    to kubectl (``delete --wait pod web``). Nothing after ``--`` is changed."""
    out: list[str] = []
    for i, arg in enumerate(args):
        if arg == "--":
            out.extend(args[i:])
            break
        valued = i + 1 < len(args) and args[i + 1] in _BOOL_WORDS
        out.append(f"{arg}=true" if arg in flags and not valued else arg)
    return out


DEFAULT_NETWORK = "auto"
NETWORK_BACKENDS = ("auto", "bridge", "cni", "docker", "loopback")
DEFAULT_BRIDGE = "akl0"
DEFAULT_POD_CIDR = "10.137.0.0/16"
DEFAULT_POD_CIDR_V6 = "fd00:ac1::/64"
FIREWALLS = ("iptables", "nftables")
DEFAULT_FIREWALL = "iptables"
DEFAULT_NETWORK_STATE_DIR = Path("/var/lib/asynckubelet/network")
DEFAULT_CLUSTER_DOMAIN = "cluster.local"
DEFAULT_SERVICE_ACCOUNT_ISSUER = "https://asynckubelet.local"
DEFAULT_POD_SECURITY = "baseline"
DEFAULT_CONTAINER_LOG_MAX_SIZE = "10Mi"
DEFAULT_CONTAINER_LOG_MAX_FILES = 5
POD_SECURITY_LEVELS = ("privileged", "baseline", "restricted")
LOG_LEVELS = ("TRACE", "DEBUG", "INFO", "SUCCESS", "WARNING", "ERROR", "CRITICAL")
LOG_FORMATS = ("text", "json")
POD_KINDS = ("pod", "pods", "po")
RESOURCES = get_args.RESOURCES
"""kubectl's names (and short names) of the resources the node keeps -> the plural."""
KIND_OF = get_args.KINDS

NODE_PANEL = "Node and engine"
NETWORK_PANEL = "Pod network"
LOG_PANEL = "Logging"


def _option(flag: get_args.Flag, *, panel: str | None = None) -> Any:
    """The option of ``flag``, one of those ``get`` reads before Typer loads (declared in
    :mod:`asynckubelet.cli.commands.get_args`)."""
    return typer.Option(
        *flag.names, metavar=flag.metavar, envvar=flag.envvar, help=flag.help, rich_help_panel=panel
    )


# -- logging (every command; also before the command, see app.py) -------------------------

LOG_LEVEL_HELP = "DEBUG, INFO, WARNING or ERROR (default: WARNING; serve: INFO)."
LOG_FORMAT_HELP = "text, or json: one JSON object per line (time, level, message, pod context)."
LogLevelOpt = Annotated[
    str | None,
    typer.Option(
        "--log-level",
        metavar="LEVEL",
        help=f"{LOG_LEVEL_HELP} Before the command too. \\[env var: ASYNCKUBELET_LOG_LEVEL]",
        rich_help_panel=LOG_PANEL,
    ),
]
LogFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--log-format",
        metavar="FORMAT",
        help=f"{LOG_FORMAT_HELP} \\[env var: ASYNCKUBELET_LOG_FORMAT]",
        rich_help_panel=LOG_PANEL,
    ),
]
VerboseOpt = Annotated[
    int,
    typer.Option(
        "--verbose",
        "-v",
        metavar="",
        count=True,
        help="More logging (-vv: debug).",
        rich_help_panel=LOG_PANEL,
    ),
]
GlobalLogLevelOpt = Annotated[
    str | None,
    typer.Option(
        "--log-level", metavar="LEVEL", envvar="ASYNCKUBELET_LOG_LEVEL", help=LOG_LEVEL_HELP
    ),
]
GlobalLogFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--log-format", metavar="FORMAT", envvar="ASYNCKUBELET_LOG_FORMAT", help=LOG_FORMAT_HELP
    ),
]

# -- the node, its engine and its pod network ------------------------------------------------

DockerHostOpt = Annotated[str | None, _option(get_args.DOCKER_HOST, panel=NODE_PANEL)]
NodeNameOpt = Annotated[str | None, _option(get_args.NODE_NAME, panel=NODE_PANEL)]
StateDirOpt = Annotated[Path | None, _option(get_args.STATE_DIR, panel=NODE_PANEL)]


def use_instance(ctx: typer.Context, value: str | None) -> str:
    """``--instance``'s callback, run before the command's other options are read (it is
    eager): the instance's derived values become their defaults (Click's ``default_map``,
    below the command line and the environment)."""
    from asynckubelet.cli import instance

    try:
        name = instance.check_name(value or "")
    except instance.InstanceError as e:
        raise _usage_error(e, ctx) from None
    if name and not ctx.resilient_parsing:
        derived = instance.Instance(
            name=name,
            root=instance.instances_root(),
            claim=ctx.info_name in instance.CLAIMING_COMMANDS,
        )
        defaults = {
            key: _usage_errors(value, ctx) if callable(value) else value
            for key, value in derived.defaults().items()
        }
        ctx.default_map = {**(ctx.default_map or {}), **defaults}
    return name


def _usage_error(error: Exception, ctx: typer.Context) -> Exception:
    from typer._click import exceptions as click_errors

    return click_errors.UsageError(str(error), ctx=ctx)


def _usage_errors(derive: Callable[[], object], ctx: typer.Context) -> Callable[[], object]:
    """``derive``, its :class:`~asynckubelet.cli.instance.InstanceError` a usage error."""

    def derived() -> object:
        from asynckubelet.cli.instance import InstanceError

        try:
            return derive()
        except InstanceError as e:
            raise _usage_error(e, ctx) from None

    return derived


INSTANCE = get_args.INSTANCE
InstanceOpt = Annotated[
    str,
    typer.Option(
        *INSTANCE.names,
        metavar=INSTANCE.metavar,
        envvar=INSTANCE.envvar,
        help=INSTANCE.help,
        rich_help_panel=NODE_PANEL,
        is_eager=True,
        callback=use_instance,
    ),
]
PauseImageOpt = Annotated[
    str | None,
    typer.Option(
        "--pause-image",
        metavar="IMAGE",
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
        metavar="LEVEL",
        envvar="ASYNCKUBELET_POD_SECURITY",
        help=POD_SECURITY_HELP,
        rich_help_panel=NODE_PANEL,
    ),
]
ValidatePodSecurityOpt = Annotated[
    str,
    typer.Option(
        "--pod-security", metavar="LEVEL", help=POD_SECURITY_HELP, rich_help_panel=NODE_PANEL
    ),
]
AllowNamespacePolicyOpt = Annotated[
    bool,
    typer.Option(
        "--allow-namespace-policy",
        metavar="",
        envvar="ASYNCKUBELET_ALLOW_NAMESPACE_POLICY",
        help="Let a Namespace document's pod-security.kubernetes.io/enforce label relax the "
        "level for its pods (without it, such a label can only make the level stricter).",
        rich_help_panel=NODE_PANEL,
    ),
]
SeccompDefaultOpt = Annotated[
    bool,
    typer.Option(
        "--seccomp-default/--no-seccomp-default",
        metavar="",
        envvar="ASYNCKUBELET_SECCOMP_DEFAULT",
        help="Give containers that set no seccomp profile RuntimeDefault, the engine's "
        "default profile, as a plain docker run (the kubelet's --seccomp-default); "
        "--no-seccomp-default leaves them Unconfined.",
        rich_help_panel=NODE_PANEL,
    ),
]
ServiceAccountIssuerOpt = Annotated[
    str,
    typer.Option(
        "--service-account-issuer",
        metavar="URL",
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
        metavar="BACKEND",
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
        metavar="NAME",
        envvar="ASYNCKUBELET_BRIDGE",
        help="Node bridge of the bridge network.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
PodCIDROpt = Annotated[
    str,
    typer.Option(
        "--pod-cidr",
        metavar="CIDR",
        envvar="ASYNCKUBELET_POD_CIDR",
        help="Pod addresses of the bridge network.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
DualStackOpt = Annotated[
    bool,
    typer.Option(
        "--dual-stack",
        metavar="",
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
        metavar="CIDR",
        envvar="ASYNCKUBELET_POD_CIDR_V6",
        help="IPv6 pod addresses of the bridge network; turns dual stack on.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
FirewallOpt = Annotated[
    str,
    typer.Option(
        "--firewall",
        metavar="FIREWALL",
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
        metavar="",
        envvar="ASYNCKUBELET_MASQUERADE",
        help="Masquerade pod egress leaving the node on the bridge network.",
        rich_help_panel=NETWORK_PANEL,
    ),
]
NetworkStateDirOpt = Annotated[
    Path,
    typer.Option(
        "--network-state-dir",
        metavar="DIR",
        envvar="ASYNCKUBELET_NETWORK_STATE_DIR",
        help="IPAM and pod network records of the bridge and cni networks (kept private: "
        "0700 directories, 0600 files).",
        rich_help_panel=NETWORK_PANEL,
    ),
]
ClusterDNSOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--cluster-dns",
        metavar="IP",
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
        metavar="NAME=QUANTITY,...",
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
        metavar="N",
        envvar="ASYNCKUBELET_MAX_PODS",
        help="Pods the node runs at once (default 110, as the kubelet's).",
        rich_help_panel=NODE_PANEL,
    ),
]
MaxParallelStartsOpt = Annotated[
    int | None,
    typer.Option(
        "--max-parallel-starts",
        metavar="N",
        envvar="ASYNCKUBELET_MAX_PARALLEL_STARTS",
        help=(
            "Containers the engine creates and starts at once; the others wait their turn,"
            " a pod's own containers before new pods' sandboxes (default: 4 per CPU, at"
            " least 8; 0: no limit)."
        ),
        rich_help_panel=NODE_PANEL,
    ),
]
ContainerLogMaxSizeOpt = Annotated[
    str,
    typer.Option(
        "--container-log-max-size",
        metavar="QUANTITY",
        envvar="ASYNCKUBELET_CONTAINER_LOG_MAX_SIZE",
        help=(
            "A container's log file is rotated past this size, a quantity such as 10Mi (as"
            " the kubelet's; through the engine's json-file or local log driver; negative:"
            " no rotation)."
        ),
        rich_help_panel=NODE_PANEL,
    ),
]
ContainerLogMaxFilesOpt = Annotated[
    int,
    typer.Option(
        "--container-log-max-files",
        metavar="N",
        envvar="ASYNCKUBELET_CONTAINER_LOG_MAX_FILES",
        help="Log files kept per container, the one written included (at least 2).",
        rich_help_panel=NODE_PANEL,
    ),
]
NodeLabelsOpt = Annotated[
    str | None,
    typer.Option(
        "--node-labels",
        metavar="KEY=VALUE,...",
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
        metavar="DOMAIN",
        envvar="ASYNCKUBELET_CLUSTER_DOMAIN",
        help="Cluster domain of the pods' DNS search.",
        rich_help_panel=NETWORK_PANEL,
    ),
]

# -- manifests and pods ----------------------------------------------------------------------

FilesArg = Annotated[
    list[str], typer.Argument(metavar="FILE...", help="Manifest files or directories; - for stdin.")
]
FilenamesOpt = Annotated[
    list[str],
    typer.Option(
        "--filename",
        "-f",
        metavar="FILENAME",
        help="Manifest file or folder (repeatable); - for stdin.",
    ),
]
DeleteFilenamesOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--filename",
        "-f",
        metavar="FILENAME",
        help="Manifest file or folder (repeatable): delete every object it holds.",
    ),
]
RecursiveOpt = Annotated[
    bool,
    typer.Option(
        "--recursive",
        "-R",
        metavar="",
        help="Read the folders named by -f recursively: the manifest files of their "
        "sub-folders too (.yaml, .yml, .json).",
    ),
]
LenientOpt = Annotated[
    bool, typer.Option("--lenient", metavar="", help="Unknown fields warn instead of failing.")
]
NamespaceOpt = Annotated[str, _option(get_args.NAMESPACE)]
AllNamespacesOpt = Annotated[bool, _option(get_args.ALL_NAMESPACES)]
KindArg = Annotated[
    str,
    typer.Argument(
        metavar="TYPE[/NAME]",
        help="The resource type: pods (po), configmaps (cm), secrets, services (svc), "
        "endpoints (ep), deployments (deploy), replicasets (rs), statefulsets (sts), jobs, "
        "daemonsets (ds), cronjobs (cj), events (ev), namespaces (ns), or all.",
    ),
]
DescribeKindArg = Annotated[
    str,
    typer.Argument(
        metavar="TYPE[/NAME]",
        help="pods (pod, po), services (service, svc), cronjobs (cronjob, cj), "
        "daemonsets (daemonset, ds), deployments (deploy), jobs (job), replicasets (rs) or "
        "statefulsets (statefulset, sts); TYPE/NAME names one.",
    ),
]
DeleteKindArg = Annotated[
    str | None,
    typer.Argument(
        metavar="TYPE[/NAME]",
        help="`pod`, `configmap`, `secret`, `deployment`, `replicaset`, `statefulset`, `job`, "
        "`daemonset`, `cronjob` or `namespace`, followed by the name (or `pod/NAME`...).",
    ),
]
PodNameArg = Annotated[str, typer.Argument(metavar="POD", help="The pod's name.")]
PodRefArg = Annotated[
    str,
    typer.Argument(
        metavar="POD | TYPE/NAME",
        help="The pod's name, or TYPE/NAME: pod/NAME, or a deployment, replicaset, "
        "statefulset, job or service, for the most active of its pods.",
    ),
]
OptionalPodNameArg = Annotated[str | None, typer.Argument(metavar="POD", help="One pod's name.")]
OptionalNameArg = Annotated[str | None, typer.Argument(metavar="NAME", help="One object's name.")]
NamesArg = Annotated[list[str] | None, typer.Argument(metavar="NAME", help="The objects' names.")]
AllOpt = Annotated[
    bool,
    typer.Option("--all", metavar="", help="Every object of the type in the namespace."),
]
ContainerOpt = Annotated[
    str | None,
    typer.Option(
        "--container",
        "-c",
        metavar="CONTAINER",
        help="The container (default: the pod's default container).",
    ),
]
ReportFormatOpt = Annotated[
    str, typer.Option("--output", "-o", metavar="FORMAT", help="Output format: text or json.")
]
WatchOpt = Annotated[bool, _option(get_args.WATCH)]
NoHeadersOpt = Annotated[bool, _option(get_args.NO_HEADERS)]
TopContainersOpt = Annotated[
    bool,
    typer.Option(
        "--containers", metavar="", help="Each container of the pods, a row each (POD, NAME)."
    ),
]
TopSortByOpt = Annotated[
    str | None,
    typer.Option("--sort-by", metavar="FIELD", help="Sort the rows by FIELD: cpu or memory."),
]
LabelSelectorOpt = Annotated[str | None, _option(get_args.SELECTOR)]
ShowLabelsOpt = Annotated[bool, _option(get_args.SHOW_LABELS)]
PodFormatOpt = Annotated[str | None, _option(get_args.OUTPUT)]
AllowMissingTemplateKeysOpt = Annotated[str, _option(get_args.ALLOW_MISSING_TEMPLATE_KEYS)]
