"""How long ``asynckubelet get pods`` takes, the whole CLI process included, while pods
start under ``serve``, and how late the daemon's event loop runs meanwhile.

Starts ``asynckubelet serve`` (a private state dir and node name, a free loopback port) on
the engine given (``--docker-host``, else ``DOCKER_HOST`` or the default socket), applies
``--pods`` pods at once (pause + two busybox containers each), and runs ``get pods`` as a
user would, one process after another, from the apply until every pod is Ready; then
prints the wall time's p50, p90, p99 and maximum over that burst, and the same at rest beforehand.

The event loop's lag is read from the daemon's ``asynckubelet_event_loop_lag_seconds``
histogram when its ``/metrics`` has one (the buckets' counts over the burst); otherwise it
is measured here by a probe loop: ``GET /healthz`` on one kept-alive connection every
20 ms, whose answer time is the loop's delay plus a request's own cost (the at-rest
figure shows that cost). ``--tree PATH`` times another checkout's code (e.g. the
file-based ``get`` of an earlier revision) with the same script. Everything made is
removed at the end. Run: ``python bench/cli_latency.py [--pods 20] [--tree PATH]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: lat-{i}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: {image}
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
  - name: b
    image: {image}
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
"""
LAG_METRIC = "asynckubelet_event_loop_lag_seconds"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_get(port: int, path: str) -> str:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def ready_pods(port: int) -> int:
    items = json.loads(http_get(port, "/pods"))["items"]
    return sum(
        1
        for p in items
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in (p.get("status") or {}).get("conditions") or []
        )
    )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[index]


def lag_buckets(port: int) -> dict[float, float] | None:
    """``le`` -> cumulative count of the daemon's lag histogram; None without one."""
    found: dict[float, float] = {}
    pattern = re.compile(rf'^{LAG_METRIC}_bucket\{{.*le="([^"]+)".*\}} (\S+)$')
    for line in http_get(port, "/metrics").splitlines():
        match = pattern.match(line)
        if match:
            found[float(match.group(1))] = float(match.group(2))
    return found or None


def histogram_p99(before: dict[float, float], after: dict[float, float]) -> float:
    """The upper bound of the bucket holding the 99th percentile of what was observed
    between the two readings."""
    bounds = sorted(after)
    counts = [after[b] - before.get(b, 0.0) for b in bounds]
    total = counts[-1] if counts else 0.0
    for bound, count in zip(bounds, counts, strict=True):
        if total and count >= 0.99 * total:
            return bound
    return float("nan")


class Probe(threading.Thread):
    """``GET /healthz`` every 20 ms on one connection; each answer's time in seconds."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        while not self.stop.is_set():
            started = time.monotonic()
            conn.request("GET", "/healthz")
            conn.getresponse().read()
            self.samples.append(time.monotonic() - started)
            self.stop.wait(0.02)
        conn.close()


class TableProbe(threading.Thread):
    """The request ``get pods`` makes of a daemon's local API (the printed pod table),
    every 50 ms, without a process around it: what the daemon's answer costs."""

    def __init__(self, socket_path: Path) -> None:
        super().__init__(daemon=True)
        self.socket_path = socket_path
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            started = time.monotonic()
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(str(self.socket_path))
                s.sendall(
                    b"GET /api/v1/namespaces/default/pods HTTP/1.0\r\nHost: localhost\r\n"
                    b"Accept: application/json;as=Table;v=v1;g=meta.k8s.io\r\n\r\n"
                )
                while s.recv(65536):
                    pass
            self.samples.append(time.monotonic() - started)
            self.stop.wait(0.05)


def get_times(cli: list[str], env: dict[str, str], *, until: threading.Event) -> list[float]:
    """Wall times of ``get pods`` processes, one after another, until ``until`` is set."""
    times: list[float] = []
    while not until.is_set():
        started = time.monotonic()
        subprocess.run([*cli, "get", "pods"], env=env, capture_output=True, check=False)
        times.append(time.monotonic() - started)
    return times


def wait_until_serving(port: int, serve: subprocess.Popen[bytes]) -> None:
    """Return once serve answers on ``port``; raise if it exits or 60 s pass first."""
    deadline = time.monotonic() + 60
    while True:
        try:
            ready_pods(port)
            return
        except OSError:
            if time.monotonic() > deadline or serve.poll() is not None:
                raise
            time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=20)
    parser.add_argument("--tree", type=Path, default=REPO, help="the asynckubelet code to time")
    parser.add_argument("--image", default="asynckubelet.local/busybox:1.35")
    parser.add_argument("--pause", default="asynckubelet.local/pause:3.10")
    parser.add_argument("--docker-host", default=None)
    parser.add_argument("--rest", type=int, default=15, help="get pods runs at rest first")
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="akl-latency-"))
    node = f"akl-latency-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ASYNCKUBELET_")},
        "PYTHONPATH": str(args.tree.resolve()),
        "ASYNCKUBELET_STATE_DIR": str(root / "state"),
        "ASYNCKUBELET_NODE_NAME": node,
        "ASYNCKUBELET_PAUSE_IMAGE": args.pause,
    }
    if args.docker_host:
        env["ASYNCKUBELET_DOCKER_HOST"] = args.docker_host
    cli = [sys.executable, "-m", "asynckubelet"]
    # Every process runs in the temporary directory: ``python -m`` puts the working
    # directory first on the path, which would shadow --tree with a checkout there.
    os.chdir(root)
    serve = subprocess.Popen(
        [*cli, "serve", "--listen", f"127.0.0.1:{port}", "--stop-pods-on-exit"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_serving(port, serve)
        time.sleep(1.0)
        rest_probe = Probe(port)
        rest_probe.start()
        rest: list[float] = []
        for _ in range(args.rest):
            started = time.monotonic()
            subprocess.run([*cli, "get", "pods"], env=env, capture_output=True, check=False)
            rest.append(time.monotonic() - started)
        rest_probe.stop.set()
        rest_probe.join()

        files = root / "pods"
        files.mkdir()
        for i in range(args.pods):
            (files / f"lat-{i}.yaml").write_text(POD.format(i=i, image=args.image))
        lag_before = lag_buckets(port)
        probe = Probe(port)
        probe.start()
        api = root / "state" / "api.sock"
        table_probe = TableProbe(api) if api.exists() else None
        if table_probe is not None:
            table_probe.start()
        done = threading.Event()
        sampled: list[float] = []
        getter = threading.Thread(
            target=lambda: sampled.extend(get_times(cli, env, until=done)), daemon=True
        )
        started = time.monotonic()
        subprocess.run([*cli, "apply", "-f", str(files)], env=env, check=True, capture_output=True)
        getter.start()
        while ready_pods(port) < args.pods:
            time.sleep(0.05)
        burst = time.monotonic() - started
        done.set()
        getter.join()
        probe.stop.set()
        probe.join()
        if table_probe is not None:
            table_probe.stop.set()
            table_probe.join()
        lag_after = lag_buckets(port)

        tree = "this tree" if args.tree.resolve() == REPO else str(args.tree)
        code = subprocess.run(
            [sys.executable, "-c", "import asynckubelet; print(asynckubelet.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(f"code: {tree} ({code}); {args.pods} pods applied -> all Ready in {burst:.2f} s")
        print(
            f"get pods at rest ({len(rest)} runs): p50 {statistics.median(rest):.3f} s, "
            f"p99 {percentile(rest, 99):.3f} s"
        )
        print(
            f"get pods during the burst ({len(sampled)} runs): "
            f"p50 {statistics.median(sampled):.3f} s, p90 {percentile(sampled, 90):.3f} s, "
            f"p99 {percentile(sampled, 99):.3f} s, max {max(sampled):.3f} s"
        )
        if lag_before is not None and lag_after is not None:
            print(
                f"event-loop lag p99 during the burst ({LAG_METRIC}): "
                f"<= {histogram_p99(lag_before, lag_after):.3f} s"
            )
        at_rest, during = rest_probe.samples, probe.samples
        print(
            f"/healthz probe every 20 ms, at rest: p50 {statistics.median(at_rest) * 1e3:.1f} ms, "
            f"p99 {percentile(at_rest, 99) * 1e3:.1f} ms; during the burst ({len(during)} "
            f"probes): p50 {statistics.median(during) * 1e3:.1f} ms, "
            f"p99 {percentile(during, 99) * 1e3:.1f} ms"
        )
        if table_probe is not None:
            asked = table_probe.samples
            print(
                f"the pod table from the local API alone, during the burst ({len(asked)} "
                f"requests): p50 {statistics.median(asked) * 1e3:.1f} ms, "
                f"p90 {percentile(asked, 90) * 1e3:.1f} ms, "
                f"p99 {percentile(asked, 99) * 1e3:.1f} ms"
            )
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=120)
        except subprocess.TimeoutExpired:
            serve.kill()
        docker = ["docker", *(["-H", args.docker_host] if args.docker_host else [])]
        left = subprocess.run(
            [*docker, "ps", "-aq", "--filter", f"label=io.asynckubelet.node={node}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if left:
            subprocess.run([*docker, "rm", "-f", *left], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
