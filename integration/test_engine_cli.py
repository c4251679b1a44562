"""``asynckubelet engine``: starting our own dockerd when none answers, then using it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("dockerd") is None, reason="needs root and dockerd"
)
def test_engine_start_runs_our_own_daemon_that_later_commands_find() -> None:
    # Short: containerd's socket under the data root must fit a unix socket path.
    root = Path(tempfile.mkdtemp(prefix="akl-e-"))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DOCKER_HOST", "ASYNCKUBELET_PRIVATE_DOCKERD")
    }
    env |= {
        "PYTHONPATH": str(REPO),
        "ASYNCKUBELET_DEFAULT_DOCKER_SOCKET": str(root / "absent.sock"),
        "ASYNCKUBELET_ENGINE_ROOT": str(root / "engine"),
        "ASYNCKUBELET_ENGINE_SOCKET": str(root / "run" / "docker.sock"),
    }

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asynckubelet", *args],
            capture_output=True, text=True, env=env, timeout=120,
        )  # fmt: skip

    assert cli("engine", "status").returncode == 1
    try:
        started = cli("engine", "start")
        assert started.returncode == 0, started.stderr
        assert f"started Docker engine at unix://{root}/run/docker.sock" in started.stdout
        again = cli("engine", "start")
        assert f"answering at unix://{root}/run/docker.sock" in again.stdout
        built = cli("images", "build-busybox", "--tag", "akltest.local/engine-busybox:1")
        assert built.returncode == 0, built.stderr
        status = cli("engine", "status")
        assert status.returncode == 0
        assert "answering" in status.stdout
    finally:
        stopped = cli("engine", "stop", "--purge")
    assert stopped.returncode == 0, stopped.stderr
    assert not (root / "engine").exists()
    assert not (root / "run" / "docker.sock").exists()
    assert cli("engine", "status").returncode == 1
    shutil.rmtree(root, ignore_errors=True)
