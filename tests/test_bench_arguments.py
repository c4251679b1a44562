"""The benches refuse counts that would leave them nothing to measure, before starting
anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench"


@pytest.mark.parametrize(
    ("argument", "said"),
    [
        (["--rounds", "0"], "argument --rounds: must be at least 1, not 0"),
        (["--pods", "0"], "argument --pods: must be at least 1, not 0"),
        (["--paced-rounds", "-1"], "argument --paced-rounds: must be at least 0, not -1"),
    ],
)
def test_cli_latency_refuses_a_count_that_measures_nothing(argument: list[str], said: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "cli_latency.py"), *argument],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"cli_latency.py: error: {said}"


@pytest.mark.parametrize(
    ("argument", "said"),
    [
        (["--clients", "0"], "argument --clients: must be at least 1, not 0"),
        (["--give-up", "0"], "argument --give-up: must be above 0, not 0"),
    ],
)
def test_slow_clients_refuses_a_count_that_measures_nothing(argument: list[str], said: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "slow_clients.py"), *argument],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"slow_clients.py: error: {said}"


@pytest.mark.parametrize(
    ("argument", "said"),
    [
        (["--pods", "0"], "argument --pods: must be at least 1, not 0"),
        (["--idle", "0"], "argument --idle: must be above 0, not 0"),
        (["--kubelet-api-qps", "0"], "argument --kubelet-api-qps: must be at least 1, not 0"),
        (
            ["--nodes", "kubelet,kubelet"],
            "argument --nodes: must name kubelet and/or asynckubelet, each once, "
            "not 'kubelet,kubelet'",
        ),
        (
            ["--nodes", "cri-o"],
            "argument --nodes: must name kubelet and/or asynckubelet, each once, not 'cri-o'",
        ),
    ],
)
def test_vs_kubelet_refuses_arguments_that_measure_nothing(argument: list[str], said: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "vs_kubelet.py"), *argument],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines()[-1] == f"vs_kubelet.py: error: {said}"
