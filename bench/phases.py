"""Where the time of a burst goes: per phase of a pod's start, the node's pods beside the
raw path's, and the burst's time split between the event loop, worker threads and the
engine.

The node's daemon writes its marks (``asynckubelet._trace``, turned on by
``ASYNCKUBELET_TRACE``) and its engine calls to a file, each on the monotonic clock that
this process shares; the raw path keeps its marks in memory, on the same clock. A phase's
``step`` is a pod's time from the phase before it (the one before it that the pod marked),
``at`` its time from the burst's start (the manifests written, the raw path begun); the
phases of a pod's containers count when its last container reaches them. The split:
the CPU of the daemon's main thread (its event loop) and of its other threads (the
worker threads) over the burst, from ``/proc``; the engine calls begun in the burst,
their summed time and the wall time during which at least one was under way.
"""

from __future__ import annotations

import json
import math
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

PHASES = (
    "seen",
    "admitted",
    "sync",
    "sandbox slot",
    "sandbox created",
    "sandbox started",
    "network",
    "pod files",
    "container slot",
    "container created",
    "container started",
    "running",
    "written",
)
"""A node's pod, in order: its manifest loaded, admitted (a worker), its first sync begun,
a start slot for its sandbox held, the sandbox created and started, its network set up,
its resolv.conf and hosts written, a slot for each container, each created and started,
its status Running reported to the status manager, and that status written to its file
(what the bench waits for)."""
START = "start"
"""The burst's start, marked by the bench for each pod (not a phase of the table)."""
LAST = frozenset({"container slot", "container created", "container started"})

Times = dict[str, dict[str, int]]
"""pod -> phase -> monotonic ns."""


@dataclass(frozen=True)
class Call:
    began: int
    end: int
    pod: str
    what: str

    @property
    def kind(self) -> str:
        """The call without its object: ``create container``, ``list containers``,
        ``image`` (an image's inspection)."""
        words = []
        for word in self.what.split():
            if not word.isalpha():
                break
            words.append(word)
        return " ".join(words)


@dataclass
class Trace:
    """A burst's marks and engine calls."""

    times: Times = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)

    def mark(self, pod: str, phase: str, t: int) -> None:
        """The first mark of a phase counts, the last for a container's phases."""
        phases = self.times.setdefault(pod, {})
        if phase in LAST or phase not in phases:
            phases[phase] = t


def read_trace(path: Path, *, since: int, until: int, prefix: str = "") -> Trace:
    """The marks and calls of ``path`` from ``since`` to ``until`` (ns); pods keyed
    ``prefix`` + their uid (to pool bursts)."""
    trace = Trace()
    if not path.exists():
        return trace
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        t = int(record["t"])
        if not since <= t <= until:
            continue
        if "engine" in record:
            trace.calls.append(Call(t, int(record["end"]), str(record["pod"]), record["engine"]))
        else:
            trace.mark(prefix + str(record["pod"]), str(record["phase"]), t)
    return trace


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (``q`` in 0..1) of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


@dataclass(frozen=True)
class Row:
    phase: str
    pods: int
    step: tuple[float, float] | None
    """p50, p99 (s) of the time from the pod's phase before; None: no pod marked it."""
    at: tuple[float, float] | None
    raw_at: tuple[float, float] | None = None


def _quantiles(values: list[float]) -> tuple[float, float] | None:
    return (percentile(values, 0.5), percentile(values, 0.99)) if values else None


def phase_rows(node: Times, raw: Times | None = None) -> list[Row]:
    """One row per phase; a pod's ``at`` counts from its ``start`` mark."""
    rows = []
    for i, phase in enumerate(PHASES):
        steps, ats = [], []
        for phases in node.values():
            if phase not in phases:
                continue
            t = phases[phase]
            before = next((phases[p] for p in reversed(PHASES[:i]) if p in phases), None)
            if before is not None:
                steps.append((t - before) / 1e9)
            if START in phases:
                ats.append((t - phases[START]) / 1e9)
        raw_ats = [
            (phases[phase] - phases[START]) / 1e9
            for phases in (raw or {}).values()
            if phase in phases and START in phases
        ]
        rows.append(Row(phase, len(ats), _quantiles(steps), _quantiles(ats), _quantiles(raw_ats)))
    return rows


@dataclass(frozen=True)
class Split:
    """One burst's time: wall, CPU of the loop's thread and of the others, the engine."""

    wall: float
    loop_cpu: float
    thread_cpu: float
    calls: int
    engine_sum: float
    engine_busy: float
    kinds: Mapping[str, tuple[int, float]]
    """Kind of call -> how many, their summed seconds."""


def busy(intervals: Iterable[tuple[int, int]]) -> int:
    """The length of the union of ``intervals``."""
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def _by_kind(calls: Iterable[Call]) -> dict[str, tuple[int, float]]:
    counts: Counter[str] = Counter()
    seconds: dict[str, float] = {}
    for c in calls:
        counts[c.kind] += 1
        seconds[c.kind] = seconds.get(c.kind, 0.0) + (c.end - c.began) / 1e9
    return {k: (counts[k], seconds[k]) for k in counts}


def split(calls: Sequence[Call], *, wall: float, loop_cpu: float, thread_cpu: float) -> Split:
    return Split(
        wall=wall,
        loop_cpu=loop_cpu,
        thread_cpu=thread_cpu,
        calls=len(calls),
        engine_sum=sum(c.end - c.began for c in calls) / 1e9,
        engine_busy=busy((c.began, c.end) for c in calls) / 1e9,
        kinds=_by_kind(calls),
    )


def thread_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds of process ``pid``'s main thread, and of all its threads (those ended
    included)."""

    def seconds(stat: str) -> float:
        fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    return seconds(f"/proc/{pid}/task/{pid}/stat"), seconds(f"/proc/{pid}/stat")


def _pair(q: tuple[float, float] | None) -> str:
    return f"{q[0] * 1000:8.0f} {q[1] * 1000:8.0f}" if q is not None else f"{'':>8} {'':>8}"


def format_table(rows: Sequence[Row], splits: Sequence[Split], *, title: str) -> str:
    """The per-phase table (ms) and a line per burst of the split."""
    lines = [
        title,
        f"{'phase':<18} {'pods':>4} {'step p50':>8} {'step p99':>8} {'at p50':>8} "
        f"{'at p99':>8} {'raw p50':>8} {'raw p99':>8}",
    ]
    for row in rows:
        lines.append(
            f"{row.phase:<18} {row.pods:4d} {_pair(row.step)} {_pair(row.at)} {_pair(row.raw_at)}"
        )
    for i, s in enumerate(splits):
        kinds = ", ".join(
            f"{k} {n} ({t:.2f} s)"
            for k, (n, t) in sorted(s.kinds.items(), key=lambda kv: -kv[1][1])
        )
        lines.append(
            f"burst {i + 1}: wall {s.wall:.2f} s; loop CPU {s.loop_cpu:.2f} s "
            f"({s.loop_cpu / s.wall:.0%} of wall), other threads {s.thread_cpu:.2f} s; "
            f"engine: {s.calls} calls, {s.engine_sum:.2f} s summed, under way "
            f"{s.engine_busy:.2f} s ({s.engine_busy / s.wall:.0%} of wall)"
        )
        lines.append(f"  calls: {kinds}")
    return "\n".join(lines)
