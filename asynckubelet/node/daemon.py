"""How a ``serve`` daemon makes itself known in its state dir, and how others find it.

There is one truth about a node: its daemon's. The daemon listens on a unix socket in
its state dir (``api.sock``, mode 0600: only its own user may talk to it) and writes its
effective configuration beside it (``node.json``, 0600): the node name, the Pod Security
level, the network backend it actually chose, the cluster DNS. A client command finds
both through the state dir alone, so ``--state-dir`` (or ``ASYNCKUBELET_STATE_DIR``) is
all it needs to reach the right node; the node name or level it would otherwise guess
never come into play.

A daemon killed with SIGKILL leaves its socket behind. The next one tells a live socket
(it answers) from a stale one (connection refused) and replaces only the stale one, so
two daemons never serve one state dir.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import stat
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asynckubelet import errors, hostfs
from asynckubelet.node.locate import (
    API_GROUP,
    SOCKET_NAME,
    default_state_dir,
    socket_answers,
    socket_path,
)

if TYPE_CHECKING:
    from asynckubelet.node.status_manager import StatusManager

NODE_FILE = "node.json"
NODE_FILE_MODE = 0o600
SOCKET_MODE = 0o600


MALLOC_ARENAS = 2
"""The malloc arenas a daemon's threads share (:func:`limit_malloc_arenas`)."""
_M_ARENA_MAX = -8
"""glibc's ``mallopt`` parameter for the most arenas (``malloc.h``)."""


def limit_malloc_arenas(count: int = MALLOC_ARENAS) -> bool:
    """Have the C allocator keep at most ``count`` arenas for this process's threads, as
    ``MALLOC_ARENA_MAX`` does; True when it took the setting. glibc gives every thread
    that allocates an arena of its own, up to eight per core, and the memory a burst of
    pods used in one (Docker's answers, files written, netlink messages: the daemon's
    worker threads do that work) stays the process's while anything lives in it. Two
    arenas keep it in fewer places; the threads run Python one at a time, so they seldom
    wait for an arena. Before the first worker thread starts: a thread keeps the arena it
    was given. Left as it is when the environment sets ``MALLOC_ARENA_MAX`` (the user's
    choice), and on a C library without ``mallopt``."""
    import ctypes

    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_ARENA_MAX, count))


SWITCH_INTERVAL = 0.001
"""Seconds a daemon's thread may hold the interpreter while another waits for it
(:func:`quicken_thread_switches`); Python's default is 0.005."""


def quicken_thread_switches(interval: float = SWITCH_INTERVAL) -> None:
    """Have a thread that holds the interpreter's lock give it up after ``interval`` when
    another waits for it. The node's event loop shares the lock with the daemon's worker
    threads: the netlink thread decodes pyroute2's answers in Python for every pod it
    plugs in or out, and file work runs in anyio's workers. With Python's 5 ms, the loop
    waits up to that long for the lock after each system call it makes while one of them
    runs, so in a burst of pods a task's step is mostly waiting for the lock; a shorter
    interval shortens the loop's lag and ``/healthz``'s answers and leaves the burst as
    fast (figures in docs/benchmarks.md). For the daemon's process only: a library leaves
    its host's interpreter alone."""
    import sys

    sys.setswitchinterval(interval)


def settle_heap() -> None:
    """Collect what the daemon's start left behind and set every object alive now (the
    modules, classes and models imported, the node's own set-up: most of the heap) aside
    from the cyclic garbage collector, which then walks only what the node makes while it
    runs. Without it a full collection during a burst of pods walks all of them and holds
    the event loop (docs/benchmarks.md). For the daemon's process only: a library leaves
    its host's collector alone."""
    gc.collect()
    gc.freeze()


QUIET = 5.0
"""Seconds without a pod status change after which a daemon that was busy gives back the
memory it no longer uses (:func:`give_back_memory_when_quiet`)."""


def give_back_memory() -> bool:
    """Collect the cyclic garbage, then have the C allocator hand its free pages back to
    the system (``malloc_trim(0)``); True when the allocator could be asked. A burst of
    pods leaves the daemon's heap larger than what lives in it: what the burst's requests,
    answers and tasks used is free again, but glibc keeps free memory in the middle of
    its heap until asked (docs/benchmarks.md)."""
    import ctypes

    gc.collect()
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return False
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    trim(0)
    return True


async def give_back_memory_when_quiet(
    status: StatusManager,
    *,
    quiet: float = QUIET,
    give_back: Callable[[], object] = give_back_memory,
    sleep: Callable[[float], Awaitable[None]] | None = None,
) -> None:
    """Once per busy spell, :func:`give_back_memory` when it ends: after a change of a
    pod's status, once ``quiet`` seconds have passed without another (looked at every
    ``quiet`` seconds while they change). A node at rest costs nothing here: this waits
    for the next change. Until cancelled."""
    import anyio

    sleep = sleep or anyio.sleep
    while True:
        await status.changed()
        seen = status.version
        while True:
            await sleep(quiet)
            if status.version == seen:
                break
            seen = status.version
        give_back()


AUTOGROUP = "/proc/self/autogroup"


def set_priority(nice: int) -> list[str]:
    """Run the daemon at CPU priority ``nice`` (-20 to 19, as ``nice(1)`` counts): every
    thread it has (Linux sets a priority per thread; the threads it starts later inherit the
    caller's) and, with the kernel's autogroup scheduling, its session's group, which
    otherwise gets no more CPU than each container's (every containerd shim starts a session
    of its own). Under a burst of pods on a small machine the event loop waits for a CPU
    much of the time, while the node needs a small share of the CPU then
    (docs/benchmarks.md), so a higher priority costs the containers little. Call it after
    any engine the daemon starts is running: a child inherits the priority. A process whose
    session has no group of its own (one started by init without ``setsid``: it shares the
    root group, whose priority the kernel refuses to change) keeps the threads' priority
    only, which is then what counts. Returns what could not be done, one line each (a lower
    value needs ``CAP_SYS_NICE``)."""
    problems: list[str] = []
    try:
        threads = [int(t) for t in os.listdir("/proc/self/task")]
    except OSError:
        threads = [0]
    for tid in threads:
        try:
            os.setpriority(os.PRIO_PROCESS, tid, nice)
        except ProcessLookupError:
            continue
        except OSError as e:
            problems.append(f"cannot set the CPU priority to nice {nice} ({e.strerror})")
            break
    if session_priority() is None:
        return problems
    try:
        with open(AUTOGROUP, "w") as f:
            f.write(str(nice))
    except OSError as e:
        problems.append(f"cannot set the session's CPU priority to nice {nice} ({e.strerror})")
    return problems


def session_priority() -> int | None:
    """The priority of this process's session under the kernel's autogroup scheduling
    (None: no autogroup scheduling, or a session in the root group, whose file is empty)."""
    try:
        with open(AUTOGROUP) as f:
            return int(f.read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None


@contextlib.contextmanager
def cpu_priority(nice: int) -> Iterator[list[str]]:
    """:func:`set_priority` while the block runs (what could not be done yielded); at its
    end the session gets back the priority it had: the session is often the terminal the
    daemon was started from, and the commands run from it later are not the node's."""
    before = session_priority()
    problems = set_priority(nice)
    try:
        yield problems
    finally:
        if before is not None and before != session_priority():
            with contextlib.suppress(OSError), open(AUTOGROUP, "w") as f:
                f.write(str(before))


def node_file(state: Path) -> Path:
    return state / NODE_FILE


@dataclass(frozen=True, kw_only=True)
class DaemonInfo:
    """A running daemon's effective configuration, as it publishes it."""

    node_name: str
    pod_security: str
    allow_namespace_policy: bool = False
    seccomp_default: bool = True
    network: str = ""
    """The network backend in use (``auto`` resolved)."""
    network_state_dir: str = ""
    """Where the pod network's address records are (a ``run`` beside the daemon must
    allocate from the same ones)."""
    pod_cidr: str = ""
    pod_cidr_v6: str = ""
    bridge: str = ""
    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = ""
    listen: str = ""
    """``http://HOST:PORT`` of the read-only endpoints."""
    docker_host: str = ""
    """The engine the daemon drives (clients that exec share it)."""
    socket: str = ""
    pid: int = field(default_factory=os.getpid)
    version: str = ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["cluster_dns"] = list(self.cluster_dns)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> DaemonInfo:
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        values["cluster_dns"] = tuple(str(s) for s in values.get("cluster_dns") or ())
        return cls(**values)


def write_node_info(state: Path, info: DaemonInfo) -> Path:
    text = json.dumps(info.to_json(), indent=2) + "\n"
    hostfs.write_file(state, NODE_FILE, text.encode(), mode=NODE_FILE_MODE)
    return node_file(state)


def read_node_info(state: Path) -> DaemonInfo | None:
    """The configuration a daemon published in ``state``; None when there is none (or it
    cannot be read: it may be another user's)."""
    try:
        data = json.loads(hostfs.read_file(state, NODE_FILE, limit=1 << 16))
        return DaemonInfo.from_json(data) if isinstance(data, dict) else None
    except (OSError, ValueError, TypeError):
        return None


def remove_node_info(state: Path) -> None:
    hostfs.remove_file(state, NODE_FILE)


def claim_socket(state: Path) -> Path:
    """The socket path for a new daemon of ``state``, a stale socket there removed.
    Raises :class:`~asynckubelet.errors.DaemonError` when a live daemon answers on it, or
    when something other than a socket is in its place."""
    path = socket_path(state)
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return path
    if not stat.S_ISSOCK(mode):
        raise errors.DaemonError(f"{path} exists and is not a socket; remove it to serve here")
    if socket_answers(path):
        raise errors.DaemonError(
            f"another `asynckubelet serve` answers on {path}; one daemon per state dir"
        )
    hostfs.remove_file(state, SOCKET_NAME)
    return path


def release_socket(state: Path, *, inode: int | None) -> None:
    """Remove this daemon's socket (only the one it made: ``inode``)."""
    path = socket_path(state)
    try:
        if inode is None or os.lstat(path).st_ino == inode:
            hostfs.remove_file(state, SOCKET_NAME)
    except OSError:
        pass


__all__ = [
    "API_GROUP",
    "NODE_FILE",
    "SOCKET_NAME",
    "DaemonInfo",
    "claim_socket",
    "default_state_dir",
    "give_back_memory",
    "give_back_memory_when_quiet",
    "node_file",
    "read_node_info",
    "release_socket",
    "remove_node_info",
    "settle_heap",
    "socket_answers",
    "socket_path",
    "write_node_info",
]
