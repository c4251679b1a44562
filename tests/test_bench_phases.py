"""The per-phase table of ``bench/node_scale.py``: steps between a pod's phases, times from
the burst's start, the raw path beside, and the burst's split between loop, threads and
engine."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"
MS = 1_000_000


@pytest.fixture(scope="module")
def phases() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("bench_phases", BENCH / "phases.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_a_step_counts_from_the_phase_before_that_the_pod_marked(phases: ModuleType) -> None:
    node = {
        "a": {"start": 0, "seen": 10 * MS, "admitted": 12 * MS, "sync": 20 * MS},
        # No admitted mark: its sync counts from seen.
        "b": {"start": 0, "seen": 30 * MS, "sync": 40 * MS},
    }
    rows = {row.phase: row for row in phases.phase_rows(node)}

    assert rows["seen"].step is None
    assert rows["seen"].at == (0.010, 0.030)
    assert rows["admitted"].step == (0.002, 0.002)
    assert rows["sync"].step == (0.008, 0.010)
    assert rows["sync"].pods == 2
    assert rows["network"].pods == 0
    assert rows["network"].at is None


def test_the_raw_path_stands_beside_the_phases_it_shares(phases: ModuleType) -> None:
    raw = {f"r{i}": {"start": 0, "container started": (i + 1) * 100 * MS} for i in range(4)}
    rows = {row.phase: row for row in phases.phase_rows({}, raw)}

    assert rows["container started"].raw_at == (0.2, 0.4)
    assert rows["sandbox created"].raw_at is None


def test_a_containers_phase_is_its_pods_last_container_and_other_phases_the_first(
    phases: ModuleType,
) -> None:
    trace = phases.Trace()
    for t, phase in [(1, "running"), (2, "container started"), (3, "container started")]:
        trace.mark("p", phase, t)
    trace.mark("p", "running", 9)

    assert trace.times == {"p": {"running": 1, "container started": 3}}


def test_reading_a_trace_keeps_the_burst_window_and_splits_marks_from_calls(
    phases: ModuleType, tmp_path: Path
) -> None:
    lines = [
        {"t": 5, "pod": "u", "phase": "seen"},
        {"t": 10, "pod": "u", "phase": "seen"},
        {"t": 11, "end": 15, "pod": "u", "engine": "create container akl_a_u_0"},
        {"t": 12, "end": 13, "pod": "u", "engine": "image registry.local/busybox:1.35"},
        {"t": 99, "pod": "u", "phase": "written"},
    ]
    path = tmp_path / "trace.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines) + "not json\n")

    trace = phases.read_trace(path, since=10, until=20, prefix="0-")

    assert trace.times == {"0-u": {"seen": 10}}
    assert [(c.kind, c.end - c.began) for c in trace.calls] == [
        ("create container", 4),
        ("image", 1),
    ]


def test_engine_time_under_way_counts_overlapping_calls_once(phases: ModuleType) -> None:
    assert phases.busy([(0, 10), (5, 15), (20, 25), (21, 22)]) == 20
    assert phases.busy([]) == 0


def test_the_table_has_a_row_per_phase_and_a_split_per_burst(phases: ModuleType) -> None:
    node = {"a": {"start": 0, "seen": 10 * MS, "written": 1500 * MS}}
    raw = {"r": {"start": 0, "container started": 1200 * MS}}
    calls = [
        phases.Call(0, 400 * MS, "a", "create container akl_a_p_ns_u_0"),
        phases.Call(100 * MS, 500 * MS, "a", "create container akl_b_p_ns_u_0"),
        phases.Call(0, 100 * MS, "a", "list containers"),
    ]
    split = phases.split(calls, wall=2.0, loop_cpu=0.5, thread_cpu=0.25)
    text = phases.format_table(phases.phase_rows(node, raw), [split], title="10 pods")
    lines = text.splitlines()

    assert lines[0] == "10 pods"
    assert lines[1].split() == [
        "phase", "pods", "step", "p50", "step", "p99", "at", "p50", "at", "p99",
        "raw", "p50", "raw", "p99",
    ]  # fmt: skip
    table = {line[:18].strip(): line[18:].split() for line in lines[2:-2]}
    assert list(table) == list(phases.PHASES)
    assert table["seen"] == ["1", "10", "10"]
    assert table["written"] == ["1", "1490", "1490", "1500", "1500"]
    assert table["container started"] == ["0", "1200", "1200"]
    assert lines[-2] == (
        "burst 1: wall 2.00 s; loop CPU 0.50 s (25% of wall), other threads 0.25 s; "
        "engine: 3 calls, 0.90 s summed, under way 0.50 s (25% of wall)"
    )
    assert lines[-1] == "  calls: create container 2 (0.80 s), list containers 1 (0.10 s)"
