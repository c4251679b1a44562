"""Finding a Docker engine, and starting one of our own when none runs.

Users and CI machines often have ``dockerd`` installed but not running (no systemd in a
container, a fresh VM). Rather than make every user learn the daemon's flags, the project
can start a dockerd of its own: its own socket, data root, exec root and pid file, and
``--bridge=none`` so it creates no network of its own. The test harness starts a
throw-away one per session; ``asynckubelet engine start`` a persistent one that later
commands find by themselves.

A remote engine (a CI job's ``docker:dind`` service) is reached over ``tcp://`` with TLS,
configured the way the Docker CLI reads it: ``DOCKER_TLS_VERIFY`` (verify the engine
against ``ca.pem``), ``DOCKER_TLS`` (encrypt without verifying) and ``DOCKER_CERT_PATH``
(``ca.pem``, ``cert.pem``, ``key.pem``; default ``~/.docker``). Only that CA is trusted, and
the engine's certificate must name the address it is reached at.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from asynckubelet import errors

DEFAULT_SOCKET = Path(os.environ.get("ASYNCKUBELET_DEFAULT_DOCKER_SOCKET", "/var/run/docker.sock"))
"""Docker's usual socket (overridable for unusual layouts)."""
OWN_ENGINE_ROOT = Path(os.environ.get("ASYNCKUBELET_ENGINE_ROOT", "/var/lib/asynckubelet/engine"))
OWN_ENGINE_SOCKET = Path(
    os.environ.get("ASYNCKUBELET_ENGINE_SOCKET", "/run/asynckubelet/docker.sock")
)


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


def api_answers(path: Path, *, timeout: float = 2.0) -> bool:
    """Whether a Docker API on the unix socket answers ``GET /_ping`` with 200 (a daemon
    accepts on its socket before it can serve, and may still fail to start)."""
    if not path.exists():
        return False
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        try:
            s.connect(str(path))
            s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
            head = s.recv(64)
        except OSError:
            return False
    return head.startswith(b"HTTP/1.") and head[9:12] == b"200"


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


def default_socket(candidates: Sequence[Path] | None = None) -> Path:
    """The socket to use when no engine answers: the first of ``candidates`` (Docker's usual
    socket, then the other places Docker puts it) that holds a socket, else the first."""
    paths = candidates or (
        DEFAULT_SOCKET,
        Path("/run/docker.sock"),
        Path.home() / ".docker/run/docker.sock",
    )
    for path in paths:
        with contextlib.suppress(OSError):
            if path.is_socket():
                return path
    return paths[0]


def is_local_daemon(url: str | None) -> bool:
    """Whether ``url`` is an engine on this machine (a unix socket, or None: the default)."""
    return url is None or url.startswith("unix://") or url.startswith("/")


@dataclass(frozen=True)
class EngineTLS:
    """TLS towards a ``tcp://`` engine: ``verify`` the engine against ``cert_path/ca.pem``,
    and present ``cert_path/cert.pem`` with ``key.pem`` when both exist."""

    verify: bool
    cert_path: Path

    @property
    def ca(self) -> Path:
        return self.cert_path / "ca.pem"

    @property
    def cert(self) -> Path:
        return self.cert_path / "cert.pem"

    @property
    def key(self) -> Path:
        return self.cert_path / "key.pem"


def tls_from_environment(environ: Mapping[str, str] | None = None) -> EngineTLS | None:
    """The Docker CLI's TLS settings: any non-empty ``DOCKER_TLS_VERIFY`` verifies, a
    non-empty ``DOCKER_TLS`` alone encrypts only; None when neither is set."""
    env = os.environ if environ is None else environ
    verify = bool(env.get("DOCKER_TLS_VERIFY"))
    if not verify and not env.get("DOCKER_TLS"):
        return None
    cert_path = Path(env.get("DOCKER_CERT_PATH") or Path.home() / ".docker")
    return EngineTLS(verify=verify, cert_path=cert_path)


def tls_context(settings: EngineTLS, *, address: str) -> ssl.SSLContext:
    """The client context for ``settings``; a missing or unreadable file raises
    RuntimeUnavailable naming the engine and the file."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    where = f"Docker engine at {address}"
    if settings.verify:
        try:
            context.load_verify_locations(cafile=settings.ca)
        except (OSError, ssl.SSLError) as e:
            raise errors.RuntimeUnavailable(
                f"{where}: DOCKER_TLS_VERIFY is set but the CA certificate {settings.ca} "
                f"cannot be used ({_reason(e)}); set DOCKER_CERT_PATH to the folder with "
                "ca.pem, cert.pem and key.pem"
            ) from e
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if settings.cert.exists() or settings.key.exists():
        try:
            context.load_cert_chain(certfile=settings.cert, keyfile=settings.key)
        except (OSError, ssl.SSLError) as e:
            raise errors.RuntimeUnavailable(
                f"{where}: the client certificate {settings.cert} with key {settings.key} "
                f"cannot be used ({_reason(e)})"
            ) from e
    return context


def _reason(exc: BaseException) -> str:
    if isinstance(exc, ssl.SSLError) and exc.reason:
        return str(exc.reason)
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc)


@dataclass(frozen=True)
class Endpoint:
    """Where and how to reach an engine: ``address`` as the user gave it (for messages),
    ``url`` for the HTTP client (``tcp://`` made ``http://`` or ``https://``), and the TLS
    context when the connection is encrypted."""

    address: str | None
    url: str | None
    tls: ssl.SSLContext | None
    tls_settings: EngineTLS | None = None


def engine_endpoint(url: str | None = None, *, tls: EngineTLS | None = None) -> Endpoint:
    """The endpoint for ``url`` (else ``DOCKER_HOST``, the default socket, our own engine)
    with ``tls`` (else the environment's settings, which apply to ``tcp://`` only)."""
    address = resolve_docker_url(url) or f"unix://{default_socket()}"
    if not address.startswith(("tcp://", "http://", "https://")):
        return Endpoint(address=address, url=address, tls=None)
    settings = tls if tls is not None else tls_from_environment()
    rest = address.split("://", 1)[1]
    if settings is None:
        plain = address if address.startswith("https://") else f"http://{rest}"
        return Endpoint(address=address, url=plain, tls=None)
    return Endpoint(
        address=address,
        url=f"https://{rest}",
        tls=tls_context(settings, address=address),
        tls_settings=settings,
    )


def tls_handshake_error(endpoint: Endpoint, *, timeout: float = 5.0) -> ssl.SSLError | None:
    """Shake hands once with the engine, capped at TLS 1.2, and return the TLS error, if any.

    Under TLS 1.3 an engine checks the client's certificate after the handshake, and its
    refusal often reaches the client as a bare connection reset; with TLS 1.2 the refusal
    is an alert inside the handshake, so this tells the two apart. Blocking; None when the
    handshake succeeds or the engine cannot be reached at all.
    """
    if endpoint.tls_settings is None or endpoint.address is None:
        return None
    hostport = endpoint.address.split("://", 1)[1].split("/", 1)[0]
    host, _, port = hostport.rpartition(":")
    host = host.strip("[]") or hostport
    context = tls_context(endpoint.tls_settings, address=endpoint.address)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    try:
        with (
            socket.create_connection((host, int(port or 2376)), timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=host) as wrapped,
        ):
            wrapped.getpeercert()
    except ssl.SSLError as e:
        return e
    except (OSError, ValueError):
        return None
    return None


_CONTAINERD_NAMESPACE = re.compile(r"^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$")


START_LOCK = Path("/run/asynckubelet/dockerd-start.lock")
"""Held while one of our dockerds starts, until it answers. Two dockerds starting at once on
one host race on the host's firewall chains (both run ``iptables -t nat -N DOCKER``), and
one exits with "Chain already exists": two nodes' engines, or two test sessions', start
one after the other."""


@contextlib.contextmanager
def start_lock(path: Path, *, timeout: float) -> Iterator[None]:
    """``path`` locked (``flock``) for this process, waiting up to ``timeout`` seconds for
    another holder; the lock goes with the process if it dies."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise errors.RuntimeUnavailable(
                        f"another Docker engine of ours has been starting for {timeout:g}s "
                        f"(lock {path})"
                    ) from None
                time.sleep(0.05)
        yield
    finally:
        os.close(fd)


class Dockerd:
    """A dockerd of our own, with its own socket and directories and no default bridge.

    ``name`` is its containerd namespace, kept apart from any other daemon's containers;
    containerd only takes letters and digits joined by single ``.``, ``_`` or ``-``, and
    refuses any other name only when the first container starts, so it is checked here.
    It starts while holding :data:`START_LOCK` (``lock``), so no two of ours start at once.
    """

    def __init__(
        self,
        *,
        root: Path,
        socket_path: Path | None = None,
        name: str = "akl",
        lock: Path = START_LOCK,
    ) -> None:
        if len(name) > 68 or not _CONTAINERD_NAMESPACE.match(name):
            raise ValueError(
                f"dockerd name {name!r} is not a valid containerd namespace: letters and "
                "digits joined by single '.', '_' or '-', at most 68 characters (its "
                "'-plugins' namespace must fit containerd's 76 too)"
            )
        self.root = root
        self.socket = socket_path or root / "docker.sock"
        self.url = f"unix://{self.socket}"
        self.log = root / "dockerd.log"
        self.pidfile = root / "dockerd.pid"
        self.name = name
        self.lock = lock
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
        with start_lock(self.lock, timeout=timeout):
            self._start(timeout)

    def _start(self, timeout: float) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(  # noqa: S603  (argv list, no shell: dockerd and our flags)
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
            if api_answers(self.socket):
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
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)  # noqa: S603, S607  (argv list, no shell; umount from the admin's PATH)


def own_engine() -> Dockerd:
    """The persistent engine of ``asynckubelet engine start``."""
    return Dockerd(root=OWN_ENGINE_ROOT, socket_path=OWN_ENGINE_SOCKET, name="asynckubelet")
