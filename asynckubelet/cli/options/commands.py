"""The options of one command each: ``run``, ``serve`` (and its cluster node mode),
``apply``/``delete``, ``logs``/``exec``, ``images``/``engine`` (see
:mod:`asynckubelet.cli.options`)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from asynckubelet.cli.options.common import BOOL

if TYPE_CHECKING:
    pass

# -- run -------------------------------------------------------------------------------------

KeepOpt = Annotated[
    bool, typer.Option("--keep", metavar="", help="Keep the pod's containers at exit.")
]
BuildOpt = Annotated[
    bool,
    typer.Option(
        "--build",
        metavar="",
        help="Build each image whose build context is known (a directory named after the "
        "image beside the manifests, or a build.asynckubelet.dev/CONTAINER annotation) "
        "and run the pods on the built image.",
    ),
]
BuildArgOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--build-arg",
        metavar="KEY=VALUE",
        help="With --build: a build argument for every image built (repeatable; KEY alone "
        "takes its value from the environment), over the annotation's arg.KEY.",
    ),
]
BuildTargetOpt = Annotated[
    str | None,
    typer.Option(
        "--target",
        metavar="STAGE",
        help="With --build: the Dockerfile stage to build, for every image built, over the "
        "annotation's target.",
    ),
]
DevWatchOpt = Annotated[
    bool,
    typer.Option(
        "--watch",
        metavar="",
        help="Apply again on each change of the files (and, with --build, sync or rebuild "
        "each change of a build context as its watch rules say), until Ctrl-C.",
    ),
]
GracePeriodOpt = Annotated[
    float | None,
    typer.Option(
        "--grace-period",
        metavar="SECONDS",
        envvar="ASYNCKUBELET_GRACE_PERIOD",
        help="Seconds to wait on stop before SIGKILL.",
    ),
]
ColorOpt = Annotated[
    bool, typer.Option("--color/--no-color", metavar="", help="Colour the prefixes.")
]
PullTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--pull-timeout",
        metavar="SECONDS",
        envvar="ASYNCKUBELET_PULL_TIMEOUT",
        help="Seconds a failing image pull (network, registry down) is retried, with the "
        "kubelet's back-off, before the run ends with its error. An image the registry "
        "says does not exist, or whose registry name does not resolve, ends it at once.",
    ),
]
MaxRestartsOpt = Annotated[
    int,
    typer.Option(
        "--max-restarts",
        metavar="N",
        envvar="ASYNCKUBELET_MAX_RESTARTS",
        help="Restarts of a crash-looping container (CrashLoopBackOff) after which the wait "
        "ends with its last exit code and log line (0: at its first crash).",
    ),
]
ConfigTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--config-timeout",
        metavar="SECONDS",
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
        metavar="DIR",
        envvar="ASYNCKUBELET_MANIFESTS",
        help="Static pod manifest directory, watched (default <state-dir>/manifests).",
    ),
]
ListenOpt = Annotated[
    str,
    typer.Option(
        "--listen",
        metavar="HOST:PORT",
        envvar="ASYNCKUBELET_LISTEN",
        help="HOST:PORT of the HTTP endpoints.",
    ),
]
APIListenOpt = Annotated[
    str | None,
    typer.Option(
        "--api-listen",
        metavar="HOST:PORT",
        envvar="ASYNCKUBELET_API_LISTEN",
        help="HOST:PORT of the Kubernetes API (TLS; kubectl reaches it through "
        "<state-dir>/kubeconfig); default 127.0.0.1:6443, or the next free port (an "
        "--instance's: its own port, 16443 and up); off: none.",
    ),
]
KubeconfigMergeOpt = Annotated[
    bool,
    typer.Option(
        "--merge",
        metavar="",
        help="Add the node's cluster, user and context (named asynckubelet, or "
        "asynckubelet-NAME for an --instance NAME) to "
        "~/.kube/config, keeping its other entries.",
    ),
]
AllowRemoteOpt = Annotated[
    bool,
    typer.Option(
        "--allow-remote",
        metavar="",
        envvar="ASYNCKUBELET_ALLOW_REMOTE",
        help="Allow --listen on a non-loopback address.",
    ),
]
StopPodsOpt = Annotated[
    bool,
    typer.Option(
        "--stop-pods-on-exit",
        metavar="",
        envvar="ASYNCKUBELET_STOP_PODS_ON_EXIT",
        help="Stop and remove every pod on SIGINT/SIGTERM (default: leave them running "
        "for the next start to adopt, as the kubelet does).",
    ),
]
DEFAULT_NICE = -10
NiceOpt = Annotated[
    int,
    typer.Option(
        "--nice",
        metavar="N",
        envvar="ASYNCKUBELET_NICE",
        help="The daemon's CPU priority, as nice(1) counts (-20 to 19): above the "
        "containers' so that the node keeps answering while they start. With the kernel's "
        "autogroup scheduling its session's (the terminal's) too, given back at exit. Needs "
        "CAP_SYS_NICE; without it the priority is left as it was, said in one line.",
    ),
]

# -- serve: cluster node mode ----------------------------------------------------------------

SERVICES_PANEL = "Services and cluster DNS"
ServiceClusterIPRangeOpt = Annotated[
    str,
    typer.Option(
        "--service-cluster-ip-range",
        metavar="CIDR",
        envvar="ASYNCKUBELET_SERVICE_CLUSTER_IP_RANGE",
        help="The node's own range of Service ClusterIPs (the API server's flag).",
        rich_help_panel=SERVICES_PANEL,
    ),
]
ServiceNodePortRangeOpt = Annotated[
    str,
    typer.Option(
        "--service-node-port-range",
        metavar="FIRST-LAST",
        envvar="ASYNCKUBELET_SERVICE_NODE_PORT_RANGE",
        help="Ports of NodePort and LoadBalancer Services, FIRST-LAST (the API server's flag).",
        rich_help_panel=SERVICES_PANEL,
    ),
]
DNSServerOpt = Annotated[
    bool,
    typer.Option(
        "--dns-server/--no-dns-server",
        metavar="",
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
        metavar="IP[:PORT]",
        envvar="ASYNCKUBELET_DNS_UPSTREAM",
        help="Where the cluster DNS forwards other names, IP or IP:PORT (repeatable); "
        "default: the nameservers of the node's /etc/resolv.conf.",
        rich_help_panel=SERVICES_PANEL,
    ),
]
CLUSTER_PANEL = "Cluster node mode"
DEFAULT_KUBELET_PORT = 10250
DEFAULT_POD_CIDR_WAIT = 60.0
AUTHORIZATION_MODES = ("Webhook", "AlwaysAllow")
KubeconfigOpt = Annotated[
    Path | None,
    typer.Option(
        "--kubeconfig",
        metavar="FILE",
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
        "--context", metavar="NAME", help="kubeconfig context (default: its current-context).",
        rich_help_panel=CLUSTER_PANEL,
    ),
]  # fmt: skip
RegisterWithTaintsOpt = Annotated[
    str | None,
    typer.Option(
        "--register-with-taints",
        metavar="TAINTS",
        envvar="ASYNCKUBELET_REGISTER_WITH_TAINTS",
        help="Taints of a newly registered Node: KEY[=VALUE]:EFFECT,...",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
NodeIPOpt = Annotated[
    str | None,
    typer.Option(
        "--node-ip",
        metavar="IP",
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
        metavar="PORT",
        envvar="ASYNCKUBELET_KUBELET_PORT",
        help="Port of the kubelet API (HTTPS, on the node IP): logs, exec, port-forward.",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
TLSCertFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-cert-file",
        metavar="FILE",
        help="The kubelet API's certificate (default: a self-signed one made under "
        "<state-dir>/pki).",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
TLSKeyFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--tls-private-key-file", metavar="FILE", help="The key of --tls-cert-file.",
        rich_help_panel=CLUSTER_PANEL,
    ),
]  # fmt: skip
ClientCAFileOpt = Annotated[
    Path | None,
    typer.Option(
        "--client-ca-file",
        metavar="FILE",
        help="CA that signs the certificates of the kubelet API's clients (the API "
        "server's kubelet client certificate); default: the kubeconfig's authority.",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
AuthorizationModeOpt = Annotated[
    str,
    typer.Option(
        "--authorization-mode",
        metavar="MODE",
        help="Who may use the kubelet API: Webhook (default; a SubjectAccessReview of "
        "nodes/proxy, nodes/log, ... per client and request, as the kubelet) or AlwaysAllow "
        "(any client the cluster's CA signed or the API server vouches for: every node and "
        "user could exec into every pod here).",
        rich_help_panel=CLUSTER_PANEL,
    ),
]
PodCIDRWaitOpt = Annotated[
    float,
    typer.Option(
        "--pod-cidr-wait",
        metavar="SECONDS",
        help="Seconds to wait for the Node's spec.podCIDR before using --pod-cidr.",
        rich_help_panel=CLUSTER_PANEL,
    ),
]

# -- apply and delete ------------------------------------------------------------------------

WaitOpt = Annotated[
    bool,
    typer.Option(
        "--wait",
        metavar="",
        help="Wait until pods are Ready or Succeeded, Deployments, StatefulSets and "
        "DaemonSets rolled out, Jobs complete.",
    ),
]
WaitTimeoutOpt = Annotated[
    float, typer.Option("--timeout", metavar="SECONDS", help="Seconds --wait waits.")
]
DeleteGracePeriodOpt = Annotated[
    float | None, typer.Option("--grace-period", metavar="SECONDS", help="Seconds before SIGKILL.")
]
IgnoreNotFoundOpt = Annotated[
    bool,
    typer.Option(
        "--ignore-not-found",
        metavar="",
        help="Treat an object that is not there as deleted: no NotFound error, exit 0.",
    ),
]
DeleteNowOpt = Annotated[
    bool,
    typer.Option("--now", metavar="", help="Signal the pods to stop at once (--grace-period 1)."),
]
DeleteWaitOpt = Annotated[
    str,
    typer.Option(
        "--wait",
        metavar=BOOL,
        help="--wait=false: return once the objects are deleted, not waiting until their "
        "pods are gone (the default, --wait or --wait=true, waits).",
    ),
]
DeleteTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--timeout",
        metavar="SECONDS",
        help="Seconds to wait until the pods are gone; exit 1 naming any still there.",
    ),
]

# -- logs and exec ---------------------------------------------------------------------------

FollowOpt = Annotated[
    bool,
    typer.Option(
        "--follow",
        "-f",
        metavar="",
        help="Keep streaming the output as it is written, across the container's restarts.",
    ),
]
PreviousOpt = Annotated[
    bool,
    typer.Option("--previous", "-p", metavar="", help="The previous (dead) instance's output."),
]
AllContainersOpt = Annotated[
    bool,
    typer.Option(
        "--all-containers",
        metavar="",
        help="Every container's output (init containers first); with -f, side by side.",
    ),
]
TailOpt = Annotated[
    int | None,
    typer.Option("--tail", metavar="LINES", help="Only the last LINES lines of the output."),
]
LimitBytesOpt = Annotated[
    int,
    typer.Option(
        "--limit-bytes",
        metavar="BYTES",
        help="At most BYTES bytes of the output, cut mid-line if need be (0: no limit).",
    ),
]
TimestampsOpt = Annotated[
    bool,
    typer.Option(
        "--timestamps",
        metavar="",
        help="Prefix each line with the time Docker recorded it (RFC 3339).",
    ),
]
SinceOpt = Annotated[
    str | None,
    typer.Option(
        "--since", metavar="DURATION", help="Only lines newer than DURATION, e.g. 5s, 2m, 3h."
    ),
]
CommandArg = Annotated[
    list[str], typer.Argument(metavar="COMMAND...", help="The command and its arguments, after --.")
]
StdinOpt = Annotated[
    bool,
    typer.Option("--stdin", "-i", metavar="", help="Pass this terminal's stdin to the command."),
]
TtyOpt = Annotated[
    bool,
    typer.Option(
        "--tty",
        "-t",
        metavar="",
        help="With -i, give the command a terminal (its window size follows this one's).",
    ),
]

# -- images and engine -----------------------------------------------------------------------

ImageTagOpt = Annotated[
    str, typer.Option("--tag", "-t", metavar="IMAGE", help="Image reference to create.")
]
ProbeTagOpt = Annotated[
    str | None,
    typer.Option(
        "--tag", "-t", metavar="IMAGE", help="Image reference (default: the one the node uses)."
    ),
]
BusyboxOpt = Annotated[
    Path,
    typer.Option(
        "--busybox", metavar="FILE", help="A static busybox binary (Debian: busybox-static)."
    ),
]
ImageArchiveArg = Annotated[
    str,
    typer.Argument(
        metavar="FILE",
        help="A `docker save` archive (a tar, or gzip, bzip2, xz or zstd compressed); - for stdin.",
        show_default=False,
    ),
]
PurgeOpt = Annotated[
    bool, typer.Option("--purge", metavar="", help="Also delete its images and data.")
]
