"""Named marks of a pod's way from its manifest to Running, and the engine's calls, for
finding where the time of a burst of pods goes (``bench/node_scale.py`` reads them).

Off unless the process turns it on: the command line's entry point does when
``ASYNCKUBELET_TRACE`` names a file (:func:`from_environment`), a test or a bench with
:func:`enable`. Off, a mark is a call and one ``None`` check, its arguments constants or
strings the caller holds already: nothing is allocated and nothing written, so the marks
can stay in the pod's path. On, each mark is one JSON line (the monotonic clock in ns,
which every process of the machine shares, the pod and the phase) appended with a single
``write``: a daemon that ends without the interpreter's teardown loses none, and the
lines of worker threads never interleave.

The pod of a mark is given, or is the one :func:`bind` set in the current context: a pod
worker binds its pod once, and the tasks and worker threads it starts inherit it.
"""

from __future__ import annotations

import contextvars
import json
import os
import time

ENV = "ASYNCKUBELET_TRACE"
"""The environment variable naming the file the marks of a command are appended to."""

_pod: contextvars.ContextVar[str] = contextvars.ContextVar("asynckubelet_trace_pod", default="")


class Recorder:
    """Appends one JSON line per record to an open file descriptor."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def write(self, record: dict[str, object]) -> None:
        os.write(self.fd, json.dumps(record, separators=(",", ":")).encode() + b"\n")

    def close(self) -> None:
        os.close(self.fd)


_recorder: Recorder | None = None


def enable(path: str | os.PathLike[str]) -> Recorder:
    """Append the marks to ``path`` (made 0600 when new) from now on."""
    global _recorder
    disable()
    _recorder = Recorder(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600))
    return _recorder


def disable() -> None:
    global _recorder
    recorder, _recorder = _recorder, None
    if recorder is not None:
        recorder.close()


def from_environment() -> None:
    """:func:`enable` when ``ASYNCKUBELET_TRACE`` names a file; nothing otherwise."""
    path = os.environ.get(ENV)
    if path:
        enable(path)


def enabled() -> bool:
    return _recorder is not None


def bind(pod: str) -> None:
    """Marks made in this context (and the tasks and threads it starts) are ``pod``'s."""
    if _recorder is not None:
        _pod.set(pod)


def mark(phase: str, pod: str = "") -> None:
    """``pod`` (default: the bound one) has reached ``phase`` now."""
    if _recorder is None:
        return
    _recorder.write({"t": time.monotonic_ns(), "pod": pod or _pod.get(), "phase": phase})


def clock() -> int:
    """The monotonic clock in ns, for :func:`engine`; 0 when off."""
    if _recorder is None:
        return 0
    return time.monotonic_ns()


def engine(what: str, began: int) -> None:
    """An engine call ``what`` made since ``began`` (:func:`clock`) has answered."""
    if _recorder is None or not began:
        return
    end = time.monotonic_ns()
    _recorder.write({"t": began, "end": end, "pod": _pod.get(), "engine": what})


__all__ = [
    "ENV",
    "Recorder",
    "bind",
    "clock",
    "disable",
    "enable",
    "enabled",
    "engine",
    "from_environment",
    "mark",
]
