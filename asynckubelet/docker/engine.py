"""Finding a Docker engine, and starting one of our own when none runs.

Users and CI machines often have ``dockerd`` installed but not running (no systemd in a
container, a fresh VM). Rather than make every user learn the daemon's flags, the project
can start a dockerd of its own: its own socket, data root, exec root and pid file, and
``--bridge=none`` so it creates no network of its own. The test harness starts a
throw-away one per session; ``asynckubelet engine start`` a persistent one that later
commands find by themselves.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

from asynckubelet import errors

DEFAULT_SOCKET = Path("/var/run/docker.sock")
OWN_ENGINE_ROOT = Path("/var/lib/asynckubelet/engine")
OWN_ENGINE_SOCKET = Path("/run/asynckubelet/docker.sock")


def socket_answers(path: Path) -> bool:
    """Whether something accepts connections on the unix socket (no HTTP; sub-millisecond)."""
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect(str(path))
        except OSError:
            return False
    return True


def resolve_docker_url(url: str | None = None) -> str | None:
    """The engine to use: ``url``, else ``DOCKER_HOST``, else the default socket, else our
    own engine's socket when it answers; None lets the client library choose."""
    if url:
        return url
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    if socket_answers(DEFAULT_SOCKET):
        return f"unix://{DEFAULT_SOCKET}"
    if socket_answers(OWN_ENGINE_SOCKET):
        return f"unix://{OWN_ENGINE_SOCKET}"
    return None


class Dockerd:
    """A dockerd of our own, with its own socket and directories and no default bridge."""

    def __init__(self, *, root: Path, socket_path: Path | None = None, name: str = "akl") -> None:
        self.root = root
        self.socket = socket_path or root / "docker.sock"
        self.url = f"unix://{self.socket}"
        self.log = root / "dockerd.log"
        self.pidfile = root / "dockerd.pid"
        self.name = name
        self.process: subprocess.Popen[bytes] | None = None

    def args(self) -> list[str]:
        return [
            "dockerd",
            "--host", self.url,
            "--data-root", str(self.root / "data"),
            "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.pidfile),
            "--bridge=none",
            "--containerd-namespace", self.name,
            "--containerd-plugins-namespace", f"{self.name}-plugins",
        ]  # fmt: skip

    def start(self, *, timeout: float = 60.0) -> None:
        """Start the daemon in its own session and wait until its socket answers."""
        if shutil.which("dockerd") is None:
            raise errors.RuntimeUnavailable(
                "dockerd is not installed (Debian/Ubuntu: apt-get install docker.io)"
            )
        if os.geteuid() != 0:
            raise errors.RuntimeUnavailable("starting a Docker engine needs root")
        self.root.mkdir(parents=True, exist_ok=True)
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.args(),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise errors.RuntimeUnavailable(
                    f"dockerd exited at start (log {self.log}):\n{self._log_tail()}"
                )
            if socket_answers(self.socket):
                return
            time.sleep(0.1)
        self.stop(remove=False)
        raise errors.RuntimeUnavailable(f"dockerd did not answer in {timeout:g}s (log {self.log})")

    def _log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    def pid(self) -> int | None:
        if self.process is not None and self.process.poll() is None:
            return self.process.pid
        try:
            pid = int(self.pidfile.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except OSError:
            return None
        return pid

    def stop(self, *, remove: bool, timeout: float = 30.0) -> None:
        """Stop the daemon (SIGTERM, then SIGKILL); with ``remove`` delete its directories."""
        pid = self.pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline and _alive(pid, self.process):
                time.sleep(0.1)
            if _alive(pid, self.process):
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, signal.SIGKILL)
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=10)
            self.process = None
        if remove:
            unmount_below(self.root)
            shutil.rmtree(self.root, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.socket.unlink()


def _alive(pid: int, process: subprocess.Popen[bytes] | None) -> bool:
    if process is not None:
        return process.poll() is None
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def unmount_below(root: Path) -> None:
    """Lazily unmount whatever a stopped daemon left mounted under ``root``."""
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return
    prefix = str(root.resolve())
    mounts = [line.split()[4] for line in lines if line.split()[4].startswith(prefix)]
    for mount in sorted(mounts, key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)


def own_engine() -> Dockerd:
    """The persistent engine of ``asynckubelet engine start``."""
    return Dockerd(root=OWN_ENGINE_ROOT, socket_path=OWN_ENGINE_SOCKET, name="asynckubelet")
