"""The upstream kubelet and asynckubelet side by side, as nodes of one control plane.

Builds (once, into the cluster cache, ``integration/cluster/build.sh`` with
``ASYNCKUBELET_CLUSTER_PROGRAMS=kubelet``) the kubelet from the same Debian source as the test
control plane, v1.20.2 with dockershim, with the smallest patch the machine needs applied and
printed (on a kernel that refuses a negative ``oom_score_adj``: dockershim's sandboxes get 0
instead of -998). Then starts the test control plane and one private dockerd (its own
socket and directories, no default bridge) and runs, one after the other, each node alone
on that engine with a CNI-style bridge network of its own (the kubelet: the CNI bridge
plugin with host-local addresses from Debian's ``/usr/lib/cni``; asynckubelet: its bridge
backend, the same shape: a bridge with the gateway, masquerade, a veth and an address per
pod):

1. N pods (default 30; a sandbox and 2 containers each, local images only, as
   ``bench/cluster_node.py``'s) applied at once, each timed from the start of
   ``kubectl apply`` to the first time a watch of the API server shows it Ready;
2. the node idle with them for a window (default 60 s, after 10 s to settle): the CPU of
   the node's process and of the engine (dockerd and its containerd), and the node's
   resident memory at its end;
3. all N pods deleted at once: ``kubectl delete`` until the API server holds none.

Then the node is stopped and its Node deleted. Prints the two side by side. Everything is
removed at the end: pods, nodes, the control plane, the engine with its containers and
data, the bridges, the kubelet's iptables chains and kernel tunables (``bench/kubelet_host.py``).
Only loopback and the pods' own addresses are reached.
Run as root: ``python bench/vs_kubelet.py [--pods 30] [--idle 60] [--kubelet-api-qps 5]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import anyio
from cluster_node import (
    BUSYBOX,
    PAUSE,
    POD,
    SCRIPTS,
    Cluster,
    cpu_seconds,
    free_cidr,
    free_port,
    node_is_ready,
    percentile,
    remove_network,
    rss_mb,
    wait,
    watch_pods,
)
from kubelet_host import HostTrace, cni_config, kubelet_command

from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import Dockerd, unmount_below
from asynckubelet.images import build as image_build

KUBELET = "kubelet"
AGENT = "asynckubelet"
SETTLE = 10.0


@dataclass(frozen=True)
class Figures:
    """One node's run."""

    node: str
    ready: list[float]
    node_cpu: float
    engine_cpu: float
    rss_mb: float
    delete: float


def at_least(least: int) -> Callable[[str], int]:
    def number(text: str) -> int:
        value = int(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
        return value

    return number


def above_zero(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="vs_kubelet.py", description=__doc__.split("\n\n")[0] if __doc__ else None
    )
    parser.add_argument("--pods", type=at_least(1), default=30, help="pods applied at once")
    parser.add_argument("--idle", type=above_zero, default=60.0, help="seconds of the idle window")
    parser.add_argument(
        "--kubelet-api-qps",
        type=at_least(1),
        default=5,
        help="the kubelet's --kube-api-qps (burst twice it); 5 is upstream's default",
    )
    parser.add_argument(
        "--nodes",
        default=f"{KUBELET},{AGENT}",
        type=node_order,
        help="which nodes run, in this order (kubelet, asynckubelet or both)",
    )
    parser.add_argument("--image", default=BUSYBOX)
    parser.add_argument("--pause", default=PAUSE)
    return parser.parse_args(argv)


def node_order(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in (KUBELET, AGENT)]
    if unknown or not names or len(set(names)) != len(names):
        raise argparse.ArgumentTypeError(
            f"must name {KUBELET} and/or {AGENT}, each once, not {text!r}"
        )
    return names


def table(pods: int, results: Sequence[Figures], *, labels: dict[str, str]) -> str:
    """The runs side by side: one column per node, one row per figure."""
    rows: list[tuple[str, list[str]]] = [
        ("apply -> Ready, p50 (s)", [f"{percentile(r.ready, 50):.2f}" for r in results]),
        ("apply -> Ready, p99 (s)", [f"{percentile(r.ready, 99):.2f}" for r in results]),
        ("idle CPU, node (% of a core)", [f"{r.node_cpu:.2f}" for r in results]),
        ("idle CPU, engine (% of a core)", [f"{r.engine_cpu:.2f}" for r in results]),
        ("node memory, RSS (MB)", [f"{r.rss_mb:.1f}" for r in results]),
        (f"delete {pods} pods (s)", [f"{r.delete:.2f}" for r in results]),
    ]
    heads = [labels.get(r.node, r.node) for r in results]
    first = max(len("figure"), *(len(label) for label, _ in rows))
    widths = [max(len(h), *(len(v[i]) for _, v in rows)) for i, h in enumerate(heads)]
    lines = [
        "  ".join(
            ["figure".ljust(first), *(h.rjust(w) for h, w in zip(heads, widths, strict=True))]
        ),
        "  ".join(["-" * first, *("-" * w for w in widths)]),
    ]
    for label, values in rows:
        lines.append(
            "  ".join(
                [label.ljust(first), *(v.rjust(w) for v, w in zip(values, widths, strict=True))]
            )
        )
    return "\n".join(lines)


def build_kubelet() -> tuple[Path, str]:
    """The cached kubelet (built when missing) and the patch it was built with."""
    env = {**os.environ, "ASYNCKUBELET_CLUSTER_PROGRAMS": "kubelet"}
    done = subprocess.run(
        [str(SCRIPTS / "build.sh")], env=env, stdout=subprocess.PIPE, text=True, check=True
    )
    cache = Path(done.stdout.strip().splitlines()[-1])
    patch = cache / "kubelet.patch"
    return cache / "kubelet", patch.read_text() if patch.exists() else ""


def engine_pids(daemon: Dockerd) -> list[int]:
    """dockerd and the containerd it started."""
    pid = daemon.pid()
    assert pid is not None, "the bench's dockerd is not running"
    pids = [pid]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            pids.append(int(stat.parent.name))
    return pids


def engine_seconds(pids: list[int]) -> float:
    total = 0.0
    for pid in pids:
        try:
            total += cpu_seconds(pid)
        except OSError:
            continue
    return total


async def _images(url: str, image: str, pause: str) -> None:
    async with DockerClient(url=url) as client:
        await image_build.build_busybox_image(client, tag=image)
        await image_build.build_pause_image(client, tag=pause)


async def _remove_kubelet_containers(url: str) -> int:
    """Containers dockershim made (its ``io.kubernetes.docker.type`` label) still on the
    engine once the kubelet has stopped."""
    async with DockerClient(url=url) as client:
        found = await client.list_containers(labels={"io.kubernetes.docker.type": None})
        for container in found:
            await client.remove_container(container["Id"], force=True)
        return len(found)


class Run:
    """The control plane and the engine, shared by the nodes that run one after the other."""

    def __init__(self, args: argparse.Namespace, root: Path, suffix: str) -> None:
        self.args = args
        self.root = root
        self.suffix = suffix
        self.cluster: Cluster | None = None
        self.daemon = Dockerd(root=root / "dockerd", name=f"akl-vsk-{suffix}")

    def kubectl(self, *args: str, input: str | None = None) -> str:
        assert self.cluster is not None
        return self.cluster.kubectl(*args, input=input)

    def node_ready(self, node: str, process: subprocess.Popen[bytes], log: Path) -> None:
        def ready() -> bool:
            if process.poll() is not None:
                raise SystemExit(f"node {node} exited:\n{log.read_text()[-3000:]}")
            assert self.cluster is not None
            return node_is_ready(self.cluster, node)

        wait(f"node {node} Ready", ready, timeout=240)

    def measure(
        self, which: str, node: str, process: subprocess.Popen[bytes], log: Path
    ) -> Figures:
        """Steps 1-3 of the module's docstring on a node that is up."""
        assert self.cluster is not None
        self.node_ready(node, process, log)
        ns = f"vsk-{which}-{self.suffix}"
        self.kubectl("create", "namespace", ns)
        try:
            return self._measure(which, node, process, ns)
        finally:
            subprocess.run(
                [str(self.cluster.bin / "kubectl"), "--kubeconfig",
                 str(self.cluster.dir / "admin.kubeconfig"), "delete", "namespace", ns,
                 "--wait=false", "--ignore-not-found"],
                capture_output=True,
            )  # fmt: skip

    def _measure(self, which: str, node: str, process: subprocess.Popen[bytes], ns: str) -> Figures:
        assert self.cluster is not None
        pods = self.args.pods
        wait(
            "the default service account's token",
            lambda: bool(
                self.kubectl("get", "sa", "default", "-n", ns, "-o", "jsonpath={.secrets[0].name}")
            ),
        )
        manifest = "\n---\n".join(POD.format(i=i, image=self.args.image) for i in range(pods))
        running: dict[str, float] = {}
        ready_at: dict[str, float] = {}
        all_ready = threading.Event()
        watch = watch_pods(self.cluster, ns, pods, running, ready_at, all_ready)
        try:
            time.sleep(1.0)
            t0 = time.monotonic()
            self.kubectl("apply", "-n", ns, "-f", "-", input=manifest)
            if not all_ready.wait(timeout=600):
                raise SystemExit(f"{which}: only {len(ready_at)} of {pods} pods Ready after 600 s")
        finally:
            watch.terminate()
            watch.wait()
        ready = [t - t0 for t in ready_at.values()]
        print(f"{which}: {pods} pods Ready, last at {max(ready):.2f} s", file=sys.stderr)

        time.sleep(SETTLE)
        engine = engine_pids(self.daemon)
        node0, engine0, wall0 = cpu_seconds(process.pid), engine_seconds(engine), time.monotonic()
        time.sleep(self.args.idle)
        node1, engine1, wall1 = cpu_seconds(process.pid), engine_seconds(engine), time.monotonic()
        rss = rss_mb(process.pid)
        span = wall1 - wall0

        start = time.monotonic()
        self.kubectl("delete", "pods", "--all", "-n", ns, "--wait=true", "--timeout=900s")
        deleted = time.monotonic() - start
        print(f"{which}: {pods} pods deleted in {deleted:.2f} s", file=sys.stderr)
        return Figures(
            node=which,
            ready=ready,
            node_cpu=100 * (node1 - node0) / span,
            engine_cpu=100 * (engine1 - engine0) / span,
            rss_mb=rss,
            delete=deleted,
        )

    def stop(self, node: str, process: subprocess.Popen[bytes]) -> None:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        if self.cluster is not None:
            with_timeout = ["delete", "node", node, "--ignore-not-found", "--timeout=60s"]
            try:
                self.kubectl(*with_timeout)
            except subprocess.CalledProcessError as e:
                print(f"deleting node {node}: {e.stderr}", file=sys.stderr)

    def kubelet(self, binary: Path) -> Figures:
        assert self.cluster is not None
        node = f"vsk-kubelet-{self.suffix}"
        kubeconfig = subprocess.run(
            [str(SCRIPTS / "node-kubeconfig.sh"), str(self.cluster.dir), node],
            capture_output=True, text=True, check=True,
        ).stdout.strip().splitlines()[-1]  # fmt: skip
        root = self.root / "kubelet-node"
        (root / "cni").mkdir(parents=True)
        bridge = f"vskk{self.suffix}"
        (root / "cni" / "10-bench.conflist").write_text(
            cni_config(
                name=f"vsk-{self.suffix}",
                bridge=bridge,
                subnet=free_cidr().replace(".0.0/16", ".0.0/24"),
                ipam_dir=root / "ipam",
            )
        )
        command = kubelet_command(
            kubelet=binary, root=root, node=node, kubeconfig=Path(kubeconfig),
            docker_url=self.daemon.url, pause=self.args.pause, port=free_port(),
            api_qps=self.args.kubelet_api_qps,
        )  # fmt: skip
        log = self.root / "kubelet.log"
        host = HostTrace.take()
        ns = f"vsk-{KUBELET}-{self.suffix}"
        process: subprocess.Popen[bytes] | None = None
        try:
            with log.open("wb") as out:
                process = subprocess.Popen(
                    command, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            return self.measure(KUBELET, node, process, log)
        finally:
            if process is not None:
                self.stop(node, process)
            left = anyio.run(_remove_kubelet_containers, self.daemon.url)
            subprocess.run(["ip", "link", "delete", bridge], capture_output=True)
            undone = host.undo(namespace=ns)
            if left or undone:
                print(
                    f"after the kubelet: removed {left} containers; undid: "
                    + (", ".join(undone) or "nothing"),
                    file=sys.stderr,
                )

    def agent(self) -> Figures:
        assert self.cluster is not None
        node = f"vsk-agent-{self.suffix}"
        kubeconfig = subprocess.run(
            [str(SCRIPTS / "node-kubeconfig.sh"), str(self.cluster.dir), node],
            capture_output=True, text=True, check=True,
        ).stdout.strip().splitlines()[-1]  # fmt: skip
        root = self.root / "agent-node"
        (root / "manifests").mkdir(parents=True)
        bridge = f"vska{self.suffix}"
        command = [
            sys.executable, "-m", "asynckubelet", "serve",
            "--kubeconfig", kubeconfig,
            "--node-name", node,
            "--docker-host", self.daemon.url,
            "--state-dir", str(root / "state"),
            "--manifests", str(root / "manifests"),
            "--network", "bridge", "--bridge", bridge,
            "--pod-cidr", free_cidr(),
            "--network-state-dir", str(root / "net"),
            "--pause-image", self.args.pause,
            "--node-ip", "127.0.0.1",
            "--kubelet-port", str(free_port()),
            "--listen", "127.0.0.1:0",
            "--stop-pods-on-exit",
            "--log-level", "WARNING",
        ]  # fmt: skip
        log = self.root / "agent.log"
        process: subprocess.Popen[bytes] | None = None
        repo = Path(__file__).resolve().parent.parent
        try:
            with log.open("wb") as out:
                process = subprocess.Popen(
                    command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env={**os.environ, "PYTHONPATH": str(repo)},
                    start_new_session=True,
                )
            return self.measure(AGENT, node, process, log)
        finally:
            if process is not None:
                self.stop(node, process)
            remove_network(bridge, root / "net")


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if os.geteuid() != 0:
        raise SystemExit("vs_kubelet.py runs nodes and a dockerd: run it as root")
    kubelet = patch = None
    if KUBELET in args.nodes:
        kubelet, patch = build_kubelet()
    suffix = uuid.uuid4().hex[:6]
    root = Path(tempfile.mkdtemp(prefix="akl-bench-vsk-"))
    run = Run(args, root, suffix)
    results: list[Figures] = []
    try:
        run.daemon.start()
        anyio.run(_images, run.daemon.url, args.image, args.pause)
        # The control plane and kubectl are all the nodes need of the cluster cache.
        os.environ.setdefault("ASYNCKUBELET_CLUSTER_PROGRAMS", "control-plane")
        run.cluster = Cluster(root, f"vsk-unused-{suffix}")
        for which in args.nodes:
            if which == KUBELET:
                assert kubelet is not None
                results.append(run.kubelet(kubelet))
            else:
                results.append(run.agent())
    finally:
        if run.cluster is not None:
            run.cluster.down()
        run.daemon.stop(remove=True)
        unmount_below(root)
        shutil.rmtree(root, ignore_errors=True)
    labels = {KUBELET: "kubelet (dockershim)", AGENT: "asynckubelet"}
    if kubelet is not None:
        version = subprocess.run([str(kubelet), "--version"], capture_output=True, text=True)
        labels[KUBELET] = f"kubelet {version.stdout.split()[-1]} (dockershim)"
    print(
        f"{args.pods} pods at once (a sandbox and 2 containers each), {os.cpu_count()} CPUs, "
        f"one private dockerd, idle window {args.idle:.0f} s"
    )
    if KUBELET in args.nodes:
        print(f"kubelet: --kube-api-qps={args.kubelet_api_qps} "
              f"--kube-api-burst={2 * args.kubelet_api_qps}")  # fmt: skip
        print(
            "kubelet built with this machine's patch:\n" + patch
            if patch
            else "kubelet built as released (this machine needs no patch)"
        )
    print(table(args.pods, results, labels=labels))


if __name__ == "__main__":
    main()
