"""A pod's events through ``describe pod`` across a restart of ``serve``, and a pod deleted
and re-created under its name (and so its uid) showing its own events only."""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from integration.harness import Engine
from integration.serve_helpers import LONG, Daemon, manifest, serve_daemon, wait_running


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Daemon]:
    yield from serve_daemon(tmp_path, docker_engine, node_name)


def described_events(node: Daemon, name: str) -> list[tuple[str, str, str]]:
    """(type, reason, age) of each event ``describe pod`` shows."""
    proc = node.cli("describe", "pod", name)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("Events:"))
    if lines[start].split() == ["Events:", "<none>"]:
        return []
    rows = []
    for line in lines[start + 3 :]:
        fields = line.split(None, 3)
        rows.append((fields[0], fields[1], fields[2]))
    return rows


def wait_events(node: Daemon, name: str, *reasons: str) -> list[tuple[str, str, str]]:
    deadline = time.monotonic() + 30
    found: list[tuple[str, str, str]] = []
    while time.monotonic() < deadline:
        found = described_events(node, name)
        if set(reasons) <= {reason for _, reason, _ in found}:
            return found
        time.sleep(0.3)
    raise AssertionError(f"no {reasons} events for {name}: {found}")


def test_describe_shows_a_pods_events_after_serve_restarts_and_not_a_deleted_ones(
    node: Daemon, tmp_path: Path
) -> None:
    path = manifest(tmp_path, "twin.yaml", LONG.replace("NAME", "twin"))
    assert node.cli("apply", "-f", path).returncode == 0
    wait_running(node, "twin")
    before = wait_events(node, "twin", "Created", "Started")

    node.stop(signal.SIGINT)
    node.start()
    after = described_events(node, "twin")
    assert {reason for _, reason, _ in before} <= {reason for _, reason, _ in after}, after

    proc = node.cli("delete", "pod", "twin")
    assert proc.returncode == 0, proc.stderr
    time.sleep(1.1)
    assert node.cli("apply", "-f", path).returncode == 0
    wait_running(node, "twin")
    again = wait_events(node, "twin", "Created", "Started")
    assert "Killing" not in {reason for _, reason, _ in again}, again
    assert not any("(x" in line for line in node.cli("describe", "pod", "twin").stdout.splitlines())

    node.stop(signal.SIGINT)
    node.start()
    restarted = described_events(node, "twin")
    assert "Killing" not in {reason for _, reason, _ in restarted}, restarted
    assert {"Created", "Started"} <= {reason for _, reason, _ in restarted}, restarted
