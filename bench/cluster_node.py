"""Cluster node mode, measured from the API server's side.

Starts the test control plane (``integration/cluster``: the cached Kubernetes binaries, an
audit log of every request) and one ``asynckubelet serve --kubeconfig`` node on loopback,
its trace on (``ASYNCKUBELET_TRACE``), then:

1. applies N pods at once (default 30, each a sandbox and 2 containers as the raw burst's;
   local images only, ``imagePullPolicy: Never``, so no pull is timed or attempted) and
   times, per pod, from the start of ``kubectl apply`` to the first time a watch of the
   API server shows it ``Running``: p50 and p99, against the Kubernetes pod-startup SLO
   (p99 <= 5 s, image pulls excluded);
2. splits each pod's way to ``Ready`` (p50 and p99 over the pods): its creation and its
   binding from the audit log, the agent's marks (its pod source seeing the pod bound,
   containers running, the status saying Ready answered) and the watch showing it Ready;
   the agent's own part (seen to Ready patched) beside the same burst on the engine alone
   (``node_scale.raw_burst``, run after the idle window), and the agent's phases in the
   table ``bench/node_scale.py`` prints; and counts the agent's API requests per pod in
   the burst, by verb and resource, from the audit log;
3. leaves the node idle with those pods for a window (default 60 s) and counts the API
   requests the node's user (``system:node:<name>``) made in it, from the audit log, by
   verb and resource; the kubelet's anchor: a Lease renewal every 10 s (0.1/s) and a GET
   of its Node every 10 s, status patched only on change;
4. reads the agent's resident memory and its CPU time in that window.

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
from functools import partial
from pathlib import Path

import anyio
from node_scale import raw_burst
from phases import START, Times, Trace, format_table, phase_rows, read_trace

from asynckubelet._trace import ENV as TRACE_ENV

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "integration" / "cluster"
BUSYBOX = "asynckubelet.local/busybox:1.35"
PAUSE = "asynckubelet.local/pause:3.10"
SLO_P99 = 5.0
DOCKER = "unix:///var/run/docker.sock"

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: bench-{i}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: {image}
    imagePullPolicy: Never
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 5; done"]
  - name: b
    image: {image}
    imagePullPolicy: Never
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 5; done"]
"""
"""Two containers, as the raw burst's pods (``node_scale.raw_burst``)."""


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


def audit_times(log: Path, namespace: str) -> tuple[dict[str, float], dict[str, float]]:
    """Per pod of ``namespace``: when the API server answered its creation and its binding
    (the scheduler's ``create pods/binding``), wall clock seconds."""
    created: dict[str, float] = {}
    bound: dict[str, float] = {}
    with log.open() as f:
        for line in f:
            event = json.loads(line)
            ref = event.get("objectRef") or {}
            if event.get("stage") != "ResponseComplete" or event.get("verb") != "create":
                continue
            if ref.get("resource") != "pods" or ref.get("namespace") != namespace:
                continue
            if (event.get("responseStatus") or {}).get("code", 0) >= 300:
                continue
            when = datetime.fromisoformat(event["stageTimestamp"].replace("Z", "+00:00"))
            into = bound if ref.get("subresource") == "binding" else created
            if not ref.get("subresource") or ref.get("subresource") == "binding":
                into.setdefault(ref.get("name", ""), when.timestamp())
    return created, bound


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


def pod_split(
    *,
    t0: float,
    offset: float,
    audit: tuple[dict[str, float], dict[str, float]],
    trace: dict[str, dict[str, int]],
    uids: dict[str, str],
    ready: dict[str, float],
) -> list[tuple[str, list[float]]]:
    """Per pod, in seconds: creation to binding (the scheduler), binding to the agent's pod
    source seeing it (the watch), seen to containers running and running to the status
    that says Ready answered (the agent), that status to a watch of the API server
    showing it; the agent's own part (seen to Ready reported), and apply to Ready."""
    created, bound = audit
    rows: dict[str, list[float]] = {
        "apply -> created (kubectl)": [],
        "created -> bound (scheduler)": [],
        "bound -> seen by the agent (watch)": [],
        "seen -> containers running (agent)": [],
        "running -> Ready patched (agent)": [],
        "Ready patched -> shown by a watch": [],
        "agent's own part: seen -> Ready patched": [],
        "apply -> Ready on the API server": [],
    }
    for name, uid in uids.items():
        marks = {phase: t / 1e9 + offset for phase, t in trace.get(uid, {}).items()}
        shown = ready[name] + offset if name in ready else None
        at = {
            "created": created.get(name, t0 + offset),
            "bound": bound.get(name),
            "seen": marks.get("bound"),
            "running": marks.get("running"),
            "reported": marks.get("ready reported"),
            "shown": shown,
        }
        if name in created:
            rows["apply -> created (kubectl)"].append(created[name] - (t0 + offset))
        for label, a, b in (
            ("created -> bound (scheduler)", "created", "bound"),
            ("bound -> seen by the agent (watch)", "bound", "seen"),
            ("seen -> containers running (agent)", "seen", "running"),
            ("running -> Ready patched (agent)", "running", "reported"),
            ("Ready patched -> shown by a watch", "reported", "shown"),
            ("agent's own part: seen -> Ready patched", "seen", "reported"),
        ):
            first, then = at[a], at[b]
            if first is not None and then is not None:
                rows[label].append(then - first)
        if shown is not None:
            rows["apply -> Ready on the API server"].append(shown - (t0 + offset))
    return list(rows.items())


def raw(pods: int, scratch: Path) -> tuple[float, Trace]:
    """The same burst on the engine alone (``node_scale.raw_burst``): its seconds, and the
    marks of its pods."""
    trace = Trace()
    scratch.mkdir()
    url = os.environ.get("DOCKER_HOST", DOCKER)
    took = anyio.run(partial(raw_burst, url, pods, scratch, trace=trace))
    return took, trace


def print_split(
    pods: int,
    rows: list[tuple[str, list[float]]],
    agent: Times,
    raw_took: float,
    raw_trace: Trace,
    burst: Counter[str],
) -> None:
    raw_pods = [
        (max(t for p, t in marks.items() if p != START) - marks[START]) / 1e9
        for marks in raw_trace.times.values()
        if START in marks and len(marks) > 1
    ]
    print()
    print(f"per pod, {pods} pods at once, seconds (p50 / p99)")
    for label, values in rows:
        if values:
            print(f"{label:<44}{percentile(values, 50):>6.2f} / {percentile(values, 99):.2f}")
        else:
            print(f"{label:<44}{'-':>6}")
    print(
        f"{'raw burst (engine only): start -> containers':<44}"
        f"{percentile(raw_pods, 50):>6.2f} / {percentile(raw_pods, 99):.2f}"
        f"  (all {raw_took:.2f} s)"
    )
    print()
    print(f"{'agent API requests per pod (burst)':<44}{sum(burst.values()) / pods:>12.2f}")
    for what, count in sorted(burst.items()):
        print(f"{'  ' + what:<44}{count / pods:>12.2f}")
    print()
    seen = {uid: {**m, START: m["bound"]} for uid, m in agent.items() if "bound" in m}
    title = "the agent's phases from seeing its pod bound (ms), the raw burst's from its start"
    print(format_table(phase_rows(seen, raw_trace.times), [], title=title))


def follow(
    watch: subprocess.Popen[str],
    pods: int,
    running: dict[str, float],
    ready: dict[str, float],
    done: threading.Event,
) -> None:
    """Note when the watch first shows each pod Running and Ready; ``done`` when all are."""
    assert watch.stdout is not None
    for line in watch.stdout:
        name, phase, is_ready = [*line.split(), "", "", ""][:3]
        now = time.monotonic()
        if phase == "Running" and name not in running:
            running[name] = now
        if is_ready == "True" and name not in ready:
            ready[name] = now
            if len(ready) == pods:
                done.set()


def node_is_ready(cluster: Cluster, node: str) -> bool:
    """Whether ``node``'s ``Ready`` condition is ``True`` (False while kubectl fails)."""
    try:
        out = cluster.kubectl(
            "get", "node", node, "-o", 'jsonpath={.status.conditions[?(@.type=="Ready")].status}'
        )  # fmt: skip
    except subprocess.CalledProcessError:
        return False
    return out == "True"


def watch_pods(
    cluster: Cluster,
    ns: str,
    pods: int,
    running: dict[str, float],
    ready: dict[str, float],
    done: threading.Event,
) -> subprocess.Popen[str]:
    """``kubectl get pods --watch`` of ``ns``, followed (:func:`follow`) on a thread."""
    watch = subprocess.Popen(
        [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.dir / "admin.kubeconfig"),
         "get", "pods", "-n", ns, "--watch", "-o",
         'jsonpath={.metadata.name} {.status.phase} '
         '{.status.conditions[?(@.type=="Ready")].status}{"\\n"}'],
        stdout=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    threading.Thread(target=follow, args=(watch, pods, running, ready, done), daemon=True).start()
    return watch


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
    trace_file = root / "trace.jsonl"
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
                env={**os.environ, "PYTHONPATH": str(REPO), TRACE_ENV: str(trace_file)},
                start_new_session=True,
            )

        def ready() -> bool:
            if agent is not None and agent.poll() is not None:
                raise SystemExit(f"the agent exited:\n{log.read_text()[-2000:]}")
            return node_is_ready(cluster, node)

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
        ready_at: dict[str, float] = {}
        all_running = threading.Event()
        watch = watch_pods(cluster, ns, pods, running, ready_at, all_running)
        time.sleep(1.0)
        offset = time.time() - time.monotonic()
        t0 = time.monotonic()
        cluster.kubectl("apply", "-n", ns, "-f", "-", input=manifest)
        if not all_running.wait(timeout=300):
            raise SystemExit(f"only {len(ready_at)} of {pods} pods Ready after 300 s")
        watch.terminate()
        startup = [t - t0 for t in running.values()]
        time.sleep(3)
        audit = cluster.dir / "logs" / "audit.log"
        burst = audit_requests(
            audit, f"system:node:{node}", t0 + offset, max(ready_at.values()) + offset + 2
        )
        uids = dict(
            row.split()
            for row in cluster.kubectl(
                "get", "pods", "-n", ns, "-o",
                'jsonpath={range .items[*]}{.metadata.name} {.metadata.uid}{"\\n"}{end}',
            ).splitlines()
        )  # fmt: skip
        agent_times = read_trace(trace_file, since=0, until=time.monotonic_ns()).times
        split_rows = pod_split(
            t0=t0,
            offset=offset,
            audit=audit_times(audit, ns),
            trace=agent_times,
            uids=uids,
            ready=ready_at,
        )

        time.sleep(10)
        assert agent is not None
        cpu0, wall0 = cpu_seconds(agent.pid), time.time()
        time.sleep(idle)
        cpu1, wall1 = cpu_seconds(agent.pid), time.time()
        rss = rss_mb(agent.pid)
        time.sleep(2)
        requests = audit_requests(audit, f"system:node:{node}", wall0, wall1)
        total = sum(requests.values())
        raw_took, raw_trace = raw(pods, root / "raw")

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
        print_split(pods, split_rows, agent_times, raw_took, raw_trace, burst)
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
