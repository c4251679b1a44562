"""``start_process`` (integration/cluster/lib.sh) records a control-plane process once it
runs its own program, so ``cluster_pid``, which up.sh asks while it waits for each process,
never sees one still being exec'd by setsid (whose command line reads empty meanwhile)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIB = ROOT / "integration" / "cluster" / "lib.sh"
ROUNDS = 20
BASH = shutil.which("bash") or "/bin/bash"


def _start_and_ask(directory: Path, program: str) -> list[str]:
    """Start ``program -f DIR/watched`` and, at once, what /proc and cluster_pid say of it."""
    script = (
        f'. "{LIB}"; d="$1"; start_process "$d" watcher "$2" -f "$d/watched"; '
        'pid="$(cat "$d/run/watcher.pid")"; '
        'echo "$pid"; readlink "/proc/$pid/exe"; cluster_pid "$d" watcher || echo none'
    )
    done = subprocess.run(
        [BASH, "-c", script, "start", str(directory), program],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    return done.stdout.split()


def test_a_started_process_is_recorded_once_it_runs_its_program(tmp_path: Path) -> None:
    tail = shutil.which("tail")
    assert tail is not None
    program = os.path.realpath(tail)
    for round_ in range(ROUNDS):
        directory = tmp_path / f"cluster-{round_}"
        (directory / "logs").mkdir(parents=True)
        (directory / "run").mkdir()
        (directory / "watched").touch()
        pid, exe, found = _start_and_ask(directory, tail)
        try:
            assert exe == program, f"round {round_}: pid {pid} recorded while it ran {exe}"
            assert found == pid, f"round {round_}: cluster_pid said {found} of pid {pid}"
        finally:
            os.kill(int(pid), signal.SIGKILL)


def test_a_program_that_exits_at_once_is_recorded_and_not_found(tmp_path: Path) -> None:
    directory = tmp_path / "cluster"
    (directory / "logs").mkdir(parents=True)
    (directory / "run").mkdir()
    script = (
        f'. "{LIB}"; d="$1"; start_process "$d" gone /bin/false "$d/x"; sleep 0.2; '
        'cat "$d/run/gone.pid"; cluster_pid "$d" gone || echo none'
    )
    done = subprocess.run(
        [BASH, "-c", script, "start", str(directory)],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    )
    pid, found = done.stdout.split()
    assert pid.isdigit()
    assert found == "none"
