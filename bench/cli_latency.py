"""How long ``asynckubelet get pods`` takes, the whole CLI process included, while pods
start under ``serve``, and how late the daemon's event loop runs meanwhile.

Starts ``asynckubelet serve`` (a private state dir and node name, a free loopback port) on
the engine given (``--docker-host``, else ``DOCKER_HOST`` or the default socket), applies
``--pods`` pods at once (pause + two busybox containers each), and runs ``get pods`` as a
user would, one process after another, from the apply until the table it prints shows
every pod Ready; ``--rounds`` bursts (3), the pods deleted between them; then prints the
wall time's p50, p90, p99 and maximum over the bursts' runs pooled, and the same at rest
beforehand (a p99 of one burst's 60-odd runs is its slowest run). Nothing else asks the
daemon during a burst: its end is read from what ``get`` printed.

The event loop's lag is read from the daemon's ``asynckubelet_event_loop_lag_seconds``
histogram (the buckets' counts over the bursts). ``--probes`` adds two probes during the
burst, for a daemon without that metric or to see what the answers alone cost:
``GET /healthz`` on one kept-alive connection every 20 ms (the loop's delay plus a
request's own cost; the at-rest figure shows that cost) and the pod table ``get`` asks
for, every 50 ms, without a process around it. They are 70 requests a second that the
daemon serves and this process makes on the same cores as the burst, so ``get``'s figures
are taken without them unless asked. ``--tree PATH`` times another checkout's code with
the same script. How long the daemon's loop thread ran and how long it waited on a run
queue for a CPU over the bursts (Linux's schedstat) says how much of the lag is the machine's
rather than the daemon's. ``--paced-rounds`` bursts (3) follow with ``get`` once a second,
as a user looks now and then: the loop's lag without back-to-back processes taking a core.
Everything made is removed at the end.
Run: ``python bench/cli_latency.py [--pods 20] [--rounds 3] [--paced-rounds 3] [--tree PATH]
[--probes]``.
"""

from __future__ import annotations

import argparse
import http.client
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
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from nodenet import free_cidr, private_bridge, remove_node_network

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


def ready_rows(table: str) -> int:
    """The rows of a ``get pods`` table whose READY column is n/n with n > 0."""
    count = 0
    for row in table.splitlines()[1:]:
        fields = row.split()
        if len(fields) > 1 and "/" in fields[1]:
            ready, _, total = fields[1].partition("/")
            count += ready == total != "0"
    return count


def get_times(
    cli: list[str], env: dict[str, str], *, pods: int, timeout: float, pause: float = 0.0
) -> tuple[list[float], float]:
    """Wall times of ``get pods`` processes, one after another (``pause`` seconds apart),
    until one shows ``pods`` pods Ready; and the time (monotonic) that one ended."""
    times: list[float] = []
    deadline = time.monotonic() + timeout
    while True:
        started = time.monotonic()
        proc = subprocess.run(
            [*cli, "get", "pods"], env=env, capture_output=True, text=True, check=False
        )
        ended = time.monotonic()
        times.append(ended - started)
        if ready_rows(proc.stdout) >= pods:
            return times, ended
        if ended > deadline:
            raise SystemExit(f"the pods were not all Ready after {timeout:g} s:\n{proc.stdout}")
        time.sleep(pause)


def wait_until_serving(port: int, serve: subprocess.Popen[bytes]) -> None:
    """Return once serve answers on ``port``; raise if it exits or 60 s pass first."""
    deadline = time.monotonic() + 60
    while True:
        try:
            http_get(port, "/healthz")
            return
        except OSError:
            if time.monotonic() > deadline or serve.poll() is not None:
                raise
            time.sleep(0.05)


def start_probes(*probes: Probe | TableProbe | None) -> None:
    for probe in probes:
        if probe is not None:
            probe.start()


def stop_probes(*probes: Probe | TableProbe | None) -> None:
    for probe in probes:
        if probe is not None:
            probe.stop.set()
            probe.join()


class Burst(NamedTuple):
    get_times: list[float]
    seconds: float
    """From the apply until a ``get`` showed every pod Ready."""
    lag: dict[float, float] | None
    """Counts per bucket (not cumulative) of the lag observed during the burst."""
    healthz: list[float]
    table: list[float]
    loop_thread: tuple[float, float]
    """Seconds the daemon's loop thread ran, and waited on a run queue for a CPU."""


def one_burst(
    cli: list[str],
    env: dict[str, str],
    files: Path,
    *,
    pods: int,
    port: int,
    api: Path,
    probes: bool,
    daemon: int,
    pause: float = 0.0,
) -> Burst:
    """Apply the pods and time ``get pods`` (``pause`` seconds apart) until it shows them
    all Ready."""
    lag_before = lag_buckets(port)
    sched_before = schedstat(daemon)
    probe = Probe(port) if probes else None
    table_probe = TableProbe(api) if probes and api.exists() else None
    start_probes(probe, table_probe)
    started = time.monotonic()
    subprocess.run([*cli, "apply", "-f", str(files)], env=env, check=True, capture_output=True)
    times, ended = get_times(cli, env, pods=pods, timeout=300, pause=pause)
    stop_probes(probe, table_probe)
    sched_after = schedstat(daemon)
    lag_after = lag_buckets(port)
    lag = None
    if lag_before is not None and lag_after is not None:
        bounds = sorted(lag_after)
        cumulative = [lag_after[b] - lag_before.get(b, 0.0) for b in bounds]
        lag = {
            b: c - (cumulative[i - 1] if i else 0.0)
            for i, (b, c) in enumerate(zip(bounds, cumulative, strict=True))
        }
    return Burst(
        times,
        ended - started,
        lag,
        probe.samples if probe is not None else [],
        table_probe.samples if table_probe is not None else [],
        (sched_after[0] - sched_before[0], sched_after[1] - sched_before[1]),
    )


def schedstat(pid: int) -> tuple[float, float]:
    """Seconds the main thread of ``pid`` has run and has waited for a CPU (Linux's
    ``/proc/PID/task/PID/schedstat``; zeros where there is none)."""
    try:
        fields = Path(f"/proc/{pid}/task/{pid}/schedstat").read_text().split()
    except OSError:
        return 0.0, 0.0
    return int(fields[0]) / 1e9, int(fields[1]) / 1e9


def pooled_lag(lags: list[dict[float, float] | None]) -> dict[float, float] | None:
    """The cumulative counts per bucket of several bursts' lag observations."""
    if not lags or any(lag is None for lag in lags):
        return None
    bounds = sorted({b for lag in lags if lag is not None for b in lag})
    total = 0.0
    pooled: dict[float, float] = {}
    for bound in bounds:
        total += sum(lag.get(bound, 0.0) for lag in lags if lag is not None)
        pooled[bound] = total
    return pooled


def late_samples(pooled: dict[float, float], bound: float) -> float:
    """How many of the pooled lag observations exceeded ``bound`` (a bucket's bound)."""
    return max(pooled.values(), default=0.0) - pooled.get(bound, 0.0)


def clear(cli: list[str], env: dict[str, str], files: Path) -> None:
    """Delete the pods and wait until ``get pods`` lists none."""
    subprocess.run(
        [*cli, "delete", "-f", str(files), "--now"], env=env, check=True, capture_output=True
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        shown = subprocess.run(
            [*cli, "get", "pods"], env=env, capture_output=True, text=True, check=False
        ).stdout
        if not shown.strip():
            time.sleep(1.0)
            return
        time.sleep(0.5)
    raise SystemExit("the pods of the last round were not gone after 120 s")


def print_lag(when: str, lag: dict[float, float] | None, bursts: list[Burst]) -> None:
    """The lag observed over ``bursts`` (pooled), and how long the loop thread waited."""
    if lag is not None:
        print(
            f"event-loop lag p99 {when} ({LAG_METRIC}, "
            f"{max(lag.values(), default=0):.0f} samples): "
            f"<= {histogram_p99({}, lag):.3f} s; "
            + ", ".join(
                f"{late_samples(lag, bound):.0f} over {bound * 1e3:g} ms"
                for bound in (0.025, 0.05, 0.1)
            )
        )
    ran = sum(b.loop_thread[0] for b in bursts)
    waited = sum(b.loop_thread[1] for b in bursts)
    print(
        f"the daemon's loop thread {when}, {sum(b.seconds for b in bursts):.1f} s: "
        f"ran {ran:.2f} s, waited {waited:.2f} s on a run queue for a CPU"
    )


def print_probes(rest_probe: Probe | None, healthz: list[float], table: list[float]) -> None:
    """What the --probes probes measured."""
    if rest_probe is not None and healthz:
        at_rest, during = rest_probe.samples, healthz
        print(
            f"/healthz probe every 20 ms, at rest: p50 "
            f"{statistics.median(at_rest) * 1e3:.1f} ms, "
            f"p99 {percentile(at_rest, 99) * 1e3:.1f} ms; during the burst ({len(during)} "
            f"probes): p50 {statistics.median(during) * 1e3:.1f} ms, "
            f"p99 {percentile(during, 99) * 1e3:.1f} ms"
        )
    if table:
        asked = table
        print(
            f"the pod table from the local API alone, during the burst ({len(asked)} "
            f"requests): p50 {statistics.median(asked) * 1e3:.1f} ms, "
            f"p90 {percentile(asked, 90) * 1e3:.1f} ms, "
            f"p99 {percentile(asked, 99) * 1e3:.1f} ms"
        )


def at_least(least: int) -> Callable[[str], int]:
    """An argparse type: a whole number not below ``least`` (the figures are the bursts'
    own, so none means nothing to print)."""

    def number(text: str) -> int:
        value = int(text)
        if value < least:
            raise argparse.ArgumentTypeError(f"must be at least {least}, not {value}")
        return value

    return number


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=at_least(1), default=20)
    parser.add_argument("--tree", type=Path, default=REPO, help="the asynckubelet code to time")
    parser.add_argument("--image", default="asynckubelet.local/busybox:1.35")
    parser.add_argument("--pause", default="asynckubelet.local/pause:3.10")
    parser.add_argument("--docker-host", default=None)
    parser.add_argument("--rest", type=int, default=15, help="get pods runs at rest first")
    parser.add_argument(
        "--probes",
        action="store_true",
        help="also probe /healthz every 20 ms and the pod table every 50 ms during the burst",
    )
    parser.add_argument(
        "--rounds",
        type=at_least(1),
        default=3,
        help="bursts, one after another (the pods deleted between them), pooled",
    )
    parser.add_argument(
        "--paced-rounds",
        type=at_least(0),
        default=3,
        help="bursts after those, with get once a second: the loop's lag without the "
        "back-to-back get processes taking a core",
    )
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
        "ASYNCKUBELET_BRIDGE": private_bridge(),
        "ASYNCKUBELET_POD_CIDR": free_cidr(),
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
        # A session of its own, as a daemon started from another terminal has: the
        # kernel's autogroup scheduling shares the CPU between sessions first.
        start_new_session=True,
    )
    try:
        wait_until_serving(port, serve)
        time.sleep(1.0)
        rest_probe = Probe(port) if args.probes else None
        start_probes(rest_probe)
        rest: list[float] = []
        for _ in range(args.rest):
            started = time.monotonic()
            subprocess.run([*cli, "get", "pods"], env=env, capture_output=True, check=False)
            rest.append(time.monotonic() - started)
        stop_probes(rest_probe)

        files = root / "pods"
        files.mkdir()
        for i in range(args.pods):
            (files / f"lat-{i}.yaml").write_text(POD.format(i=i, image=args.image))
        api = root / "state" / "api.sock"
        bursts: list[Burst] = []
        paced: list[Burst] = []
        # Back-to-back get with the probes asked for, then get once a second without them.
        for into, rounds, probes, pause in (
            (bursts, args.rounds, args.probes, 0.0),
            (paced, args.paced_rounds, False, 1.0),
        ):
            for _ in range(rounds):
                if bursts or paced:
                    clear(cli, env, files)
                into.append(
                    one_burst(
                        cli,
                        env,
                        files,
                        pods=args.pods,
                        port=port,
                        api=api,
                        probes=probes,
                        daemon=serve.pid,
                        pause=pause,
                    )
                )
        sampled = [t for b in bursts for t in b.get_times]
        lag = pooled_lag([b.lag for b in bursts])
        tree = "this tree" if args.tree.resolve() == REPO else str(args.tree)
        code = subprocess.run(
            [sys.executable, "-c", "import asynckubelet; print(asynckubelet.__file__)"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        print(
            f"code: {tree} ({code}); {args.pods} pods applied -> all Ready in "
            + ", ".join(f"{b.seconds:.2f}" for b in bursts)
            + f" s ({args.rounds} rounds, probes {'on' if args.probes else 'off'})"
        )
        print(
            f"get pods at rest ({len(rest)} runs): p50 {statistics.median(rest):.3f} s, "
            f"p99 {percentile(rest, 99):.3f} s"
        )
        print(
            f"get pods during the bursts ({len(sampled)} runs): "
            f"p50 {statistics.median(sampled):.3f} s, p90 {percentile(sampled, 90):.3f} s, "
            f"p99 {percentile(sampled, 99):.3f} s, max {max(sampled):.3f} s"
        )
        print_lag("during the bursts", lag, bursts)
        if paced:
            print_lag(
                f"in {len(paced)} more with get once a second",
                pooled_lag([b.lag for b in paced]),
                paced,
            )
        if lag is None and not args.probes:
            print(f"the daemon has no {LAG_METRIC}; --probes measures its lag from outside")
        print_probes(
            rest_probe, [t for b in bursts for t in b.healthz], [t for b in bursts for t in b.table]
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
        remove_node_network(env["ASYNCKUBELET_BRIDGE"], env["ASYNCKUBELET_POD_CIDR"])
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
