"""What a full node costs at rest and how it takes a burst, at 10, 50 and 110 pods.

For each size, a fresh ``asynckubelet serve`` (its own state dir and node name) on a
private dockerd, so other work on the machine's engine does not disturb the figures:

- ``rss0``: the daemon's resident memory with no pod;
- burst: the bare aiodocker critical path for the same containers (per pod: create and
  start the pause container, as the node makes it, ``NetworkDisabled`` since the node's
  backend makes the namespace, then create and start its two containers concurrently,
  every pod at once; each container with the host configuration the node gives it: its
  ``/etc/hosts``, ``/etc/resolv.conf`` and ``/dev/termination-log`` files bind-mounted,
  the engine's default seccomp profile as the node's ``--seccomp-default``, a BestEffort
  pod's CPU shares), then the node given the same pods at once (manifests renamed into its
  manifest directory) until its status files show every pod Running; the ratio of the
  two (beside it, the node against the raw path with at most ``--raw-limit`` creates and
  starts under way at once, timed just before, as the node itself limits them: the node's
  own cost with the engine worked alike), the event loop's lag p99 over the burst (from the daemon's
  ``asynckubelet_event_loop_lag_seconds`` histogram, as Prometheus'
  ``histogram_quantile`` computes it) and the p99 and slowest ``/healthz`` answers
  (polled every 50 ms throughout, from a process of its own), and the slowest less the
  time the poller itself waited for a CPU meanwhile (its ``/proc/thread-self/schedstat``:
  on two cores busy starting containers the checker waits too); beside them, the CPU the
  daemon used during the burst and the time its event loop's thread spent runnable but
  waiting for a CPU (``/proc/PID/schedstat``): lag that is the machine's, not the node's.
  The daemon runs in a session of its own, as one started from another terminal does
  (the kernel's autogroup scheduling shares the CPU between sessions first);
- idle: CPU (% of one core) and mean RSS over ``--idle-seconds`` with the pods running
  and nothing happening, and the RSS per pod above ``rss0``;
- probes: the pods replaced by the same pods each with a readiness probe every 10 s
  (``--probe``: exec, or none), CPU over ``--idle-seconds`` once all are Ready.

Beside each size's line, where the node's burst time goes (``phases.py``): per phase of
a pod's start (manifest seen, admitted, sync begun, start slot held, sandbox created and
started, network set up, pod files written, containers' slots, created, started, Running
reported, status file written) the p50 and p99 of its step from the phase before and of
its time from the burst's start, the raw path's created/started beside; and per burst the
CPU of the daemon's event loop thread and of its other threads, and the engine calls (how
many of each kind, their summed time, the wall time with one under way). The daemon
writes these marks with ``ASYNCKUBELET_TRACE`` (``asynckubelet._trace``); a ``--baseline``
tree without them prints no table.

One line per size, so growth is visible. Everything the run creates is removed at the end.
Needs root and ``dockerd`` for the private engine (or ``--docker-host`` to use a running
one); the busybox and pause images are built offline into it. ``--tree`` runs the daemon
from another checkout; ``--baseline PATH`` also runs it from PATH at each size, just before,
on the same engine, a line each (to compare a branch with main in one run). ``--bursts N``
repeats the burst N times per size (the pods removed in between), each the raw path then
the node; raw and node seconds are then medians, the ratio the median of the bursts'
ratios, the lag, ``/healthz`` figures the worst burst's, and each pair is printed. Run:
``python bench/node_scale.py [--sizes 10,50,110] [--idle-seconds 60] [--bursts 1]
[--raw-limit N] [--baseline PATH]``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiodocker
import anyio
from healthpoll import HealthPoller
from nodenet import free_cidr, private_bridge, remove_node_network
from phases import START, Split, Trace, format_table, phase_rows, read_trace, split, thread_cpu

from asynckubelet.cli import instance
from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import Dockerd
from asynckubelet.images import build as image_build
from asynckubelet.runtime.gate import default_parallel_starts

BUSYBOX = image_build.DEFAULT_BUSYBOX_TAG
PAUSE = image_build.DEFAULT_PAUSE_TAG
LOOP = "trap 'exit 0' TERM; while true; do sleep 1; done"
RAW_LABEL = "akl-bench-raw"
PROBES = {
    "exec": 'readinessProbe: {exec: {command: ["true"]}, periodSeconds: 10}',
    "none": "",
}
POD = """apiVersion: v1
kind: Pod
metadata: {{name: scale-{i}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: a
    image: {image}
    command: [sh, -c, "{command}"]
    {probe}
  - name: b
    image: {image}
    command: [sh, -c, "{loop}"]
"""
LAG = "asynckubelet_event_loop_lag_seconds_bucket"
CLI = (sys.executable, "-m", "asynckubelet")


@dataclass
class Figures:
    pods: int
    tree: str = ""
    rss0: float = 0.0
    idle_cpu: float = 0.0
    idle_rss: float = 0.0
    probes_cpu: float | None = None
    """None: the pods did not all become Ready within ``--ready-timeout``."""
    bursts: list[tuple[float, float]] = field(default_factory=list)
    """(raw s, node s) of each burst, the raw path just before the node."""
    limited: list[float] = field(default_factory=list)
    """Seconds of the raw path with the node's limit of parallel starts, each burst (just
    before the raw path; empty with ``--raw-limit 0``)."""
    lag_p99: float | None = None
    healthz_max: float = 0.0
    healthz_p99: float = 0.0
    healthz_max_net: float = 0.0
    burst_cpu: float = 0.0
    burst_wait: float = 0.0
    node_trace: Trace = field(default_factory=Trace)
    raw_trace: Trace = field(default_factory=Trace)
    splits: list[Split] = field(default_factory=list)

    @property
    def per_pod(self) -> float:
        return (self.idle_rss - self.rss0) / self.pods

    @property
    def raw(self) -> float:
        return statistics.median(r for r, _ in self.bursts)

    @property
    def node(self) -> float:
        return statistics.median(n for _, n in self.bursts)

    @property
    def ratio(self) -> float:
        """The median of the bursts' ratios, each of a pair measured side by side."""
        return statistics.median(n / r for r, n in self.bursts)

    @property
    def ratio_limited(self) -> float | None:
        """The median of the bursts' node / raw path with the node's limit."""
        if not self.limited:
            return None
        return statistics.median(
            n / lim for (_, n), lim in zip(self.bursts, self.limited, strict=True)
        )


# -- the daemon, seen from outside ------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_queue_wait(pid: int) -> float:
    """Seconds the process's main thread has spent runnable, waiting for a CPU."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


def rss_mb(pid: int) -> float:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def idle(pid: int, seconds: float) -> tuple[float, float]:
    """CPU (% of one core) and mean RSS (MB) over ``seconds``."""
    began, cpu = time.monotonic(), cpu_seconds(pid)
    samples = []
    while time.monotonic() - began < seconds:
        samples.append(rss_mb(pid))
        time.sleep(1.0)
    used = cpu_seconds(pid) - cpu
    return used / (time.monotonic() - began) * 100, sum(samples) / len(samples)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, path: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return bytes(r.read())


def lag_buckets(port: int) -> dict[float, float]:
    found = {}
    for line in get(port, "/metrics").decode().splitlines():
        m = re.match(rf'{LAG}{{le="([^"]+)"}} (\S+)', line)
        if m:
            found[float(m[1])] = float(m[2])
    return found


def quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float | None:
    """Prometheus' ``histogram_quantile`` over the observations between two scrapes."""
    counts = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    if not counts or counts[-1][1] <= 0:
        return None
    rank = q * counts[-1][1]
    lower, below = 0.0, 0.0
    for le, cumulative in counts:
        if cumulative >= rank:
            if le == float("inf"):
                return lower
            return lower + (le - lower) * (rank - below) / max(cumulative - below, 1e-12)
        lower, below = le, cumulative
    return lower


class StatusFiles:
    """The daemon's status files (``<state>/pods/<uid>.json``), read as they change."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._seen: dict[str, tuple[int, dict[str, object]]] = {}

    def pods(self) -> list[dict[str, object]]:
        found = {}
        with contextlib.suppress(FileNotFoundError), os.scandir(self.directory) as it:
            for entry in it:
                if not entry.name.endswith(".json"):
                    continue
                with contextlib.suppress(OSError, ValueError):
                    stamp = entry.stat().st_mtime_ns
                    old = self._seen.get(entry.name)
                    if old is None or old[0] != stamp:
                        old = (stamp, json.loads(Path(entry.path).read_bytes()))
                    found[entry.name] = old
        self._seen = found
        return [pod for _, pod in found.values()]

    def count(self, check: str) -> int:
        n = 0
        for pod in self.pods():
            status = pod.get("status") or {}
            assert isinstance(status, dict)
            running = status.get("phase") == "Running"
            ready = any(
                c.get("type") == "Ready" and c.get("status") == "True"
                for c in status.get("conditions") or []
            )
            if (check == "Running" and running) or (check == "Ready" and ready):
                n += 1
        return n

    def wait(self, check: str, n: int, *, timeout: float = 600) -> None:
        """Until ``n`` pods are ``check`` (``Running``, ``Ready``), or none is left (``Gone``)."""
        deadline = time.monotonic() + timeout
        while (len(self.pods()) if check == "Gone" else n - self.count(check)) != 0:
            if time.monotonic() > deadline:
                raise TimeoutError(f"pods not {check} after {timeout:g}s")
            time.sleep(0.05)


@contextlib.contextmanager
def serve(
    work: Path, *, docker_url: str, tree: Path, nice: int | None = None
) -> Iterator[tuple[int, int, Path]]:
    """A daemon with its own state; yields its pid, port and state dir."""
    state = work / "state"
    port = free_port()
    env = {
        **os.environ,
        "DOCKER_HOST": docker_url,
        "PYTHONPATH": str(tree),
        "ASYNCKUBELET_STATE_DIR": str(state),
        "ASYNCKUBELET_NODE_NAME": f"akl-scale-{secrets.token_hex(4)}",
        "ASYNCKUBELET_INSTANCE": f"scale-{secrets.token_hex(4)}",
        "ASYNCKUBELET_PAUSE_IMAGE": PAUSE,
        "ASYNCKUBELET_BRIDGE": private_bridge(),
        "ASYNCKUBELET_POD_CIDR": free_cidr(),
        "ASYNCKUBELET_TRACE": str(work / "trace.jsonl"),
        **({"ASYNCKUBELET_NICE": str(nice)} if nice is not None else {}),
    }
    log = (work / "serve.log").open("wb")
    # Run from the scratch directory: ``python -m`` puts the working directory first on
    # the path, and the daemon must come from ``tree``.
    process = subprocess.Popen(
        [*CLI, "serve", "--listen", f"127.0.0.1:{port}", "--stop-pods-on-exit"],
        env=env,
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
        # A session of its own, as a daemon started from another terminal has: the
        # kernel's autogroup scheduling shares the CPU between sessions first.
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                get(port, "/healthz", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    log.flush()
                    tail = (work / "serve.log").read_text(errors="replace").splitlines()[-20:]
                    raise RuntimeError(
                        "serve did not answer; its log ends:\n" + "\n".join(tail)
                    ) from None
                time.sleep(0.1)
        yield process.pid, port, state
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=300)
        log.close()
        remove_node_network(env["ASYNCKUBELET_BRIDGE"], env["ASYNCKUBELET_POD_CIDR"])
        shutil.rmtree(instance.state_dir(env["ASYNCKUBELET_INSTANCE"]), ignore_errors=True)


def write_pods(directory: Path, n: int, *, probe: str) -> None:
    """Every manifest renamed into place at once, as ``apply`` writes them."""
    for i in range(n):
        text = POD.format(i=i, image=BUSYBOX, command=LOOP, loop=LOOP, probe=PROBES[probe])
        (directory / f".scale-{i}.yaml").write_text(text)
    for i in range(n):
        (directory / f".scale-{i}.yaml").rename(directory / f"scale-{i}.yaml")


def remove_pods(directory: Path) -> None:
    for path in directory.glob("scale-*.yaml"):
        path.unlink()


# -- the raw critical path --------------------------------------------------------------


async def raw_burst(
    docker_url: str, n: int, scratch: Path, limit: int = 0, trace: Trace | None = None
) -> float:
    """Seconds until every pod's containers run; ``limit``: at most so many creates and
    starts under way at once, in the order asked (0: all at once); ``trace``: gets the
    phases of each pod, as the node's are named."""
    marks = trace if trace is not None else Trace()
    docker = aiodocker.Docker(url=docker_url)
    run = secrets.token_hex(4)
    labels = {RAW_LABEL: run}
    turns = anyio.Semaphore(limit) if limit else None

    @contextlib.asynccontextmanager
    async def turn() -> AsyncIterator[None]:
        if turns is None:
            yield
            return
        async with turns:
            yield

    try:

        async def pod(i: int) -> None:
            files = scratch / str(i)
            files.mkdir()
            for name in ("etc-hosts", "resolv.conf", "a", "b"):
                (files / name).write_text("")
            async with turn():
                pause = await docker.containers.create(
                    {
                        "Image": PAUSE,
                        "Labels": labels,
                        "NetworkDisabled": True,
                        "HostConfig": {"NetworkMode": "none", "IpcMode": "shareable"},
                    },
                    name=f"raw-{run}-{i}-pause",
                )
                marks.mark(f"{scratch.name}-{i}", "sandbox created", time.monotonic_ns())
                await pause.start()
                marks.mark(f"{scratch.name}-{i}", "sandbox started", time.monotonic_ns())
            joined = {"NetworkMode": f"container:{pause.id}", "IpcMode": f"container:{pause.id}"}

            async def app(name: str) -> None:
                mounts = [
                    {"Type": "bind", "Source": str(files / source), "Target": target}
                    for source, target in (
                        ("etc-hosts", "/etc/hosts"),
                        ("resolv.conf", "/etc/resolv.conf"),
                        (name, "/dev/termination-log"),
                    )
                ]
                async with turn():
                    c = await docker.containers.create(
                        {
                            "Image": BUSYBOX,
                            "Cmd": ["sh", "-c", LOOP],
                            "Labels": labels,
                            "HostConfig": {
                                **joined,
                                "Mounts": mounts,
                                "CpuShares": 2,
                            },
                        },
                        name=f"raw-{run}-{i}-{name}",
                    )
                    marks.mark(f"{scratch.name}-{i}", "container created", time.monotonic_ns())
                    await c.start()
                    marks.mark(f"{scratch.name}-{i}", "container started", time.monotonic_ns())

            async with anyio.create_task_group() as tg:
                tg.start_soon(app, "a")
                tg.start_soon(app, "b")

        began = time.perf_counter()
        for i in range(n):
            marks.mark(f"{scratch.name}-{i}", START, time.monotonic_ns())
        async with anyio.create_task_group() as tg:
            for i in range(n):
                tg.start_soon(pod, i)
        took = time.perf_counter() - began
    finally:
        rows = await docker.containers.list(all=True, filters={"label": [f"{RAW_LABEL}={run}"]})
        removals = anyio.Semaphore(16)

        async def remove(row: aiodocker.containers.DockerContainer) -> None:
            async with removals:
                await row.delete(force=True)

        async with anyio.create_task_group() as tg:
            for row in rows:
                tg.start_soon(remove, row)
        await docker.close()
    return took


async def build_images(docker_url: str) -> None:
    async with DockerClient(url=docker_url) as client:
        if not await client.image_exists(BUSYBOX):
            await image_build.build_busybox_image(client, tag=BUSYBOX)
        if not await client.image_exists(PAUSE):
            await image_build.build_pause_image(client, tag=PAUSE)


# -- one size ---------------------------------------------------------------------------


def measure(
    n: int,
    *,
    docker_url: str,
    tree: Path,
    idle_seconds: float,
    probe: str,
    nice: int | None,
    ready_timeout: float,
    bursts: int = 1,
    raw_limit: int = 0,
) -> Figures:
    figures = Figures(pods=n, tree=tree.name)
    with (
        tempfile.TemporaryDirectory(prefix="akl-scale-") as tmp,
        serve(Path(tmp), docker_url=docker_url, tree=tree, nice=nice) as (pid, port, state),
    ):
        manifests = state / "manifests"
        status = StatusFiles(state / "pods")
        time.sleep(3)
        figures.rss0 = rss_mb(pid)

        for burst in range(bursts):
            if burst:
                remove_pods(manifests)
                status.wait("Gone", 0)
                time.sleep(2)
            if raw_limit:
                limited_files = Path(tmp) / f"limited-{burst}"
                limited_files.mkdir()
                figures.limited.append(
                    anyio.run(raw_burst, docker_url, n, limited_files, raw_limit)
                )
                time.sleep(2)
            raw_files = Path(tmp) / f"raw-{burst}"
            raw_files.mkdir()
            raw = anyio.run(raw_burst, docker_url, n, raw_files, 0, figures.raw_trace)
            time.sleep(2)

            before = lag_buckets(port)
            cpu, wait = cpu_seconds(pid), run_queue_wait(pid)
            with HealthPoller(port) as health:
                loop_cpu, all_cpu = thread_cpu(pid)
                began, since = time.perf_counter(), time.monotonic_ns()
                write_pods(manifests, n, probe="none")
                status.wait("Running", n)
                node = time.perf_counter() - began
                until, (loop_end, all_end) = time.monotonic_ns(), thread_cpu(pid)
            figures.bursts.append((raw, node))
            # The last status file may be read before its writer's mark is made.
            traced = read_trace(Path(tmp) / "trace.jsonl", since=since, until=until + 10**9)
            calls = [c for c in traced.calls if c.began <= until]
            for pod, marks in traced.times.items():
                figures.node_trace.times[f"{burst}-{pod}"] = {**marks, START: since}
            loop = loop_end - loop_cpu
            figures.splits.append(
                split(calls, wall=node, loop_cpu=loop, thread_cpu=all_end - all_cpu - loop)
            )
            figures.burst_cpu += (cpu_seconds(pid) - cpu) / bursts
            figures.burst_wait += (run_queue_wait(pid) - wait) / bursts
            figures.healthz_max = max(figures.healthz_max, health.slowest)
            figures.healthz_p99 = max(figures.healthz_p99, health.p99)
            figures.healthz_max_net = max(figures.healthz_max_net, health.slowest_less_own_wait)
            lag = quantile(0.99, before, lag_buckets(port)) if before else None
            if lag is not None:
                figures.lag_p99 = max(figures.lag_p99 or 0.0, lag)

        time.sleep(10)
        figures.idle_cpu, figures.idle_rss = idle(pid, idle_seconds)

        if probe != "none":
            remove_pods(manifests)
            status.wait("Gone", 0)
            write_pods(manifests, n, probe=probe)
            try:
                status.wait("Ready", n, timeout=ready_timeout)
            except TimeoutError:
                print(f"{n} pods: not all Ready in {ready_timeout:g}s", file=sys.stderr)
            else:
                time.sleep(10)
                figures.probes_cpu, _ = idle(pid, idle_seconds)
        remove_pods(manifests)
        status.wait("Gone", 0)
    return figures


def header() -> None:
    print(
        f"{'tree':>12} {'pods':>5} {'idle CPU %':>10} {'RSS MB':>7} {'RSS0 MB':>7} {'MB/pod':>7} "
        f"{'probes CPU %':>12} {'raw s':>7} {'node s':>7} {'ratio':>6} "
        f"{'raw lim s':>9} {'ratio lim':>9} "
        f"{'lag p99 ms':>10} {'healthz p99 ms':>14} {'healthz max ms':>14} "
        f"{'less own wait':>13} {'burst CPU s':>11} {'CPU wait s':>10}",
        flush=True,
    )


def line(f: Figures) -> None:
    lag = f"{f.lag_p99 * 1000:10.1f}" if f.lag_p99 is not None else f"{'n/a':>10}"
    probes = f"{f.probes_cpu:12.2f}" if f.probes_cpu is not None else f"{'n/a':>12}"
    limited = (
        f"{statistics.median(f.limited):9.2f} {f.ratio_limited:9.3f}"
        if f.limited and f.ratio_limited is not None
        else f"{'n/a':>9} {'n/a':>9}"
    )
    print(
        f"{f.tree[-12:]:>12} {f.pods:5d} {f.idle_cpu:10.2f} {f.idle_rss:7.1f} "
        f"{f.rss0:7.1f} {f.per_pod:7.3f} "
        f"{probes} {f.raw:7.2f} {f.node:7.2f} {f.ratio:6.3f} {limited} {lag} "
        f"{f.healthz_p99 * 1000:14.1f} {f.healthz_max * 1000:14.1f} "
        f"{f.healthz_max_net * 1000:13.1f} {f.burst_cpu:11.2f} {f.burst_wait:10.2f}",
        flush=True,
    )


def summary(rows: list[Figures]) -> None:
    if len(rows) > 1:
        first, last = rows[0], rows[-1]
        slope = (last.idle_rss - first.idle_rss) / (last.pods - first.pods)
        print(
            f"{first.tree}: RSS growth per pod from {first.pods} to {last.pods} pods: "
            f"{slope:.3f} MB"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10,50,110")
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    parser.add_argument("--probe", choices=sorted(PROBES), default="exec")
    parser.add_argument(
        "--docker-host", default=None, help="use this engine (default: a private one)"
    )
    parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
    parser.add_argument(
        "--baseline", type=Path, default=None, help="also measure the daemon of this checkout"
    )
    parser.add_argument(
        "--nice",
        type=int,
        default=None,
        help="the daemon's CPU priority, its --nice (default: the daemon's own default)",
    )
    parser.add_argument(
        "--ready-timeout", type=float, default=600.0, help="seconds the probed pods get to be Ready"
    )
    parser.add_argument(
        "--raw-limit",
        type=int,
        default=default_parallel_starts(),
        help="also time the raw path with at most N creates and starts at once, the node's"
        " own limit (default: the node's default, 4 per CPU, at least 8; 0: not timed)",
    )
    parser.add_argument(
        "--bursts",
        type=int,
        default=1,
        help="bursts per size, each the raw path then the node (the ratio is their median)",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    daemon = None
    root = None
    url = args.docker_host
    if url is None:
        root = Path(tempfile.mkdtemp(prefix="akl-scale-dockerd-"))
        daemon = Dockerd(root=root, name=f"aklscale-{secrets.token_hex(4)}")
        daemon.start()
        url = daemon.url
    try:
        anyio.run(build_images, url)
        trees = [t.resolve() for t in (args.baseline, args.tree) if t is not None]
        rows: dict[Path, list[Figures]] = {t: [] for t in trees}
        header()
        for n in sizes:
            for tree in trees:
                figures = measure(
                    n,
                    docker_url=url,
                    tree=tree,
                    idle_seconds=args.idle_seconds,
                    probe=args.probe,
                    nice=args.nice,
                    ready_timeout=args.ready_timeout,
                    bursts=args.bursts,
                    raw_limit=args.raw_limit,
                )
                rows[tree].append(figures)
                line(figures)
                if figures.node_trace.times:
                    table = phase_rows(figures.node_trace.times, figures.raw_trace.times)
                    title = f"{tree.name}: {n} pods, ms per phase, all bursts' pods"
                    print(format_table(table, figures.splits, title=title), flush=True)
                if len(figures.bursts) > 1:
                    pairs = ", ".join(f"{r:.2f}/{t:.2f} ({t / r:.3f})" for r, t in figures.bursts)
                    print(f"{tree.name}: {n} pods, each burst's raw/node s (ratio): {pairs}")
                if figures.limited:
                    each = ", ".join(f"{s:.2f}" for s in figures.limited)
                    print(f"{tree.name}: {n} pods, raw path {args.raw_limit} at a time, s: {each}")
        for tree in trees:
            summary(rows[tree])
    finally:
        if daemon is not None:
            daemon.stop(remove=True)
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
