"""Cluster node mode, measured from the API server's side.

Starts the test control plane (``integration/cluster``: the cached Kubernetes binaries, an
audit log of every request) and one ``asynckubelet serve --kubeconfig`` node on loopback,
then:

1. applies N pods at once (default 30; local images only, ``imagePullPolicy: Never``, so
   no pull is timed or attempted) and times, per pod, from the start of ``kubectl apply``
   to the first time a watch of the API server shows it ``Running``: p50 and p99, against
   the Kubernetes pod-startup SLO (p99 <= 5 s, image pulls excluded);
2. leaves the node idle with those pods for a window (default 60 s) and counts the API
   requests the node's user (``system:node:<name>``) made in it, from the audit log, by
   verb and resource; the kubelet's anchor: a Lease renewal every 10 s (0.1/s) and a GET
   of its Node every 10 s, status patched only on change;
3. reads the agent's resident memory and its CPU time in that window.

Everything is removed at the end (pods, node, control plane, bridge, directories).
Run as root: ``python bench/cluster_node.py [--pods 30] [--idle 60]``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "integration" / "cluster"
BUSYBOX = "asynckubelet.local/busybox:1.35"
PAUSE = "asynckubelet.local/pause:3.10"
SLO_P99 = 5.0

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: bench-{i}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: {image}
    imagePullPolicy: Never
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 5; done"]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_cidr() -> str:
    taken = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    for _ in range(100):
        second = random.randint(200, 250)  # noqa: S311  (a free test subnet, not a secret)
        if f"10.{second}." not in taken:
            return f"10.{second}.0.0/16"
    raise SystemExit("no free /16 for the pods")


def rss_mb(pid: int) -> float:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def remove_network(bridge: str, state: Path) -> None:
    """The node's bridge, firewall rules and IPAM records."""
    import anyio

    from asynckubelet.network.bridge import BridgeConfig, BridgePlugin

    plugin = BridgePlugin(BridgeConfig(bridge=bridge, state_dir=state))
    anyio.run(plugin.remove_node_network)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(p / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def audit_requests(log: Path, user: str, start: float, end: float) -> Counter[str]:
    """Requests of ``user`` received in [start, end), by verb and resource."""
    seen: dict[str, str] = {}
    with log.open() as f:
        for line in f:
            event = json.loads(line)
            if event.get("user", {}).get("username") != user:
                continue
            received = datetime.fromisoformat(
                event["requestReceivedTimestamp"].replace("Z", "+00:00")
            ).timestamp()
            if not start <= received < end:
                continue
            ref = event.get("objectRef") or {}
            what = ref.get("resource", event.get("requestURI", "?"))
            if ref.get("subresource"):
                what += "/" + ref["subresource"]
            seen[event["auditID"]] = f"{event['verb']} {what}"
    return Counter(seen.values())


class Cluster:
    def __init__(self, root: Path, node: str) -> None:
        built = subprocess.run(
            [str(SCRIPTS / "build.sh")], capture_output=True, text=True, check=True
        )
        self.bin = Path(built.stdout.strip().splitlines()[-1])
        self.dir = root / "cluster"
        env = {
            **os.environ,
            "AKL_CLUSTER_BIN": str(self.bin),
            "AKL_CLUSTER_CLUSTER_CIDR": free_cidr(),
            "AKL_CLUSTER_AUDIT": "1",
            "NODE_NAME": node,
        }
        subprocess.run(
            [str(SCRIPTS / "up.sh"), str(self.dir)], env=env, check=True, capture_output=True
        )

    def kubectl(self, *args: str, input: str | None = None) -> str:
        return subprocess.run(
            [str(self.bin / "kubectl"), "--kubeconfig", str(self.dir / "admin.kubeconfig"), *args],
            input=input,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    def down(self) -> None:
        subprocess.run([str(SCRIPTS / "down.sh"), str(self.dir)], capture_output=True)


def wait(what: str, check: object, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise SystemExit(f"timed out waiting for {what}")


def main(pods: int, idle: float) -> None:
    suffix = uuid.uuid4().hex[:6]
    node = f"akl-bench-{suffix}"
    bridge = f"aklb{suffix}"
    root = Path(tempfile.mkdtemp(prefix="akl-bench-cluster-"))
    cluster = Cluster(root, node)
    agent: subprocess.Popen[bytes] | None = None
    log = root / "agent.log"
    try:
        command = [
            sys.executable, "-m", "asynckubelet", "serve",
            "--kubeconfig", str(cluster.dir / "node.kubeconfig"),
            "--node-name", node,
            "--state-dir", str(root / "state"),
            "--manifests", str(root / "manifests"),
            "--network", "bridge", "--bridge", bridge,
            "--network-state-dir", str(root / "net"),
            "--pause-image", PAUSE,
            "--node-ip", "127.0.0.1",
            "--kubelet-port", str(free_port()),
            "--listen", "127.0.0.1:0",
            "--stop-pods-on-exit",
            "--log-level", "WARNING",
        ]  # fmt: skip
        (root / "manifests").mkdir()
        with log.open("wb") as out:
            agent = subprocess.Popen(
                command,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                start_new_session=True,
            )

        def ready() -> bool:
            if agent is not None and agent.poll() is not None:
                raise SystemExit(f"the agent exited:\n{log.read_text()[-2000:]}")
            try:
                out = cluster.kubectl(
                    "get", "node", node, "-o",
                    'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
                )  # fmt: skip
            except subprocess.CalledProcessError:
                return False
            return out == "True"

        wait(f"node {node} Ready", ready)
        ns = f"bench-{suffix}"
        cluster.kubectl("create", "namespace", ns)
        wait(
            "the default service account's token",
            lambda: bool(
                cluster.kubectl(
                    "get", "sa", "default", "-n", ns, "-o", "jsonpath={.secrets[0].name}"
                )
            ),
        )
        manifest = "\n---\n".join(POD.format(i=i, image=BUSYBOX) for i in range(pods))

        running: dict[str, float] = {}
        watch = subprocess.Popen(
            [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.dir / "admin.kubeconfig"),
             "get", "pods", "-n", ns, "--watch", "-o",
             'jsonpath={.metadata.name} {.status.phase}{"\\n"}'],
            stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        all_running = threading.Event()

        def follow() -> None:
            assert watch.stdout is not None
            for line in watch.stdout:
                name, _, phase = line.strip().partition(" ")
                if phase == "Running" and name not in running:
                    running[name] = time.monotonic()
                    if len(running) == pods:
                        all_running.set()

        threading.Thread(target=follow, daemon=True).start()
        time.sleep(1.0)
        t0 = time.monotonic()
        cluster.kubectl("apply", "-n", ns, "-f", "-", input=manifest)
        if not all_running.wait(timeout=300):
            raise SystemExit(f"only {len(running)} of {pods} pods Running after 300 s")
        watch.terminate()
        startup = [t - t0 for t in running.values()]

        time.sleep(10)
        assert agent is not None
        cpu0, wall0 = cpu_seconds(agent.pid), time.time()
        time.sleep(idle)
        cpu1, wall1 = cpu_seconds(agent.pid), time.time()
        rss = rss_mb(agent.pid)
        time.sleep(2)
        requests = audit_requests(
            cluster.dir / "logs" / "audit.log", f"system:node:{node}", wall0, wall1
        )
        total = sum(requests.values())

        p50, p99 = percentile(startup, 50), percentile(startup, 99)
        print(f"cluster node mode, {pods} pods, {os.cpu_count()} CPUs")
        print(f"{'figure':<44}{'value':>12}  anchor")
        print(f"{'apply -> Running, p50 (s)':<44}{p50:>12.2f}")
        verdict = "meets" if p99 <= SLO_P99 else "misses"
        print(f"{'apply -> Running, p99 (s)':<44}{p99:>12.2f}  SLO p99 <= 5 s: {verdict}")
        print(f"{'apply -> Running, last (s)':<44}{max(startup):>12.2f}")
        per_second = total / (wall1 - wall0)
        print(
            f"{f'idle API requests/s ({idle:.0f} s, {pods} pods)':<44}{per_second:>12.3f}"
            "  kubelet: lease 0.1/s + node GET 0.1/s"
        )
        for what, count in sorted(requests.items()):
            print(f"{'  ' + what:<44}{count / (wall1 - wall0):>12.3f}")
        print(f"{'agent CPU while idle (%)':<44}{100 * (cpu1 - cpu0) / (wall1 - wall0):>12.2f}")
        print(f"{'agent RSS (MB)':<44}{rss:>12.1f}")
    finally:
        if agent is not None and agent.poll() is None:
            agent.send_signal(signal.SIGTERM)
            try:
                agent.wait(timeout=120)
            except subprocess.TimeoutExpired:
                agent.kill()
        cluster.down()
        remove_network(bridge, root / "net")
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=30)
    parser.add_argument("--idle", type=float, default=60.0)
    args = parser.parse_args()
    main(args.pods, args.idle)
