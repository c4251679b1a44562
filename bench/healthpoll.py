"""``GET /healthz`` polled from a process of its own while a bench works a daemon, each
answer's time kept with the time the poller itself waited for a CPU meanwhile (on two
cores busy starting containers the checker waits too)."""

from __future__ import annotations

import json
import subprocess
import sys

HEALTH_POLLER = """
import json, sys, threading, time, urllib.request
port, stop, took = int(sys.argv[1]), threading.Event(), []


def waited():
    with open("/proc/thread-self/schedstat") as f:
        return int(f.read().split()[1]) / 1e9


threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
while not stop.is_set():
    began, wait = time.perf_counter(), waited()
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            r.read()
        took.append((time.perf_counter() - began, waited() - wait))
    except OSError:
        took.append((5.0, 0.0))
    stop.wait(0.05)
print(json.dumps(took))
"""


class HealthPoller:
    """``GET /healthz`` every 50 ms on a new connection, from a process of its own (not
    this one, whose main thread reads the status files meanwhile), as a health checker
    asks; keeps every answer's time."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.times: list[float] = []
        self.own_waits: list[float] = []
        """Per answer, the time the poller itself waited for a CPU meanwhile."""
        self._process: subprocess.Popen[str] | None = None

    @property
    def slowest(self) -> float:
        return max(self.times, default=0.0)

    @property
    def slowest_less_own_wait(self) -> float:
        """The slowest answer once the poller's own wait for a CPU is taken off: on a
        loaded machine the checker, not the daemon, is then often the one waiting."""
        return max((t - w for t, w in zip(self.times, self.own_waits, strict=True)), default=0.0)

    @property
    def p99(self) -> float:
        ordered = sorted(self.times)
        return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))] if ordered else 0.0

    def __enter__(self) -> HealthPoller:
        self._process = subprocess.Popen(
            [sys.executable, "-c", HEALTH_POLLER, str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._process is not None
        out, _ = self._process.communicate("", timeout=30)
        answers = json.loads(out)
        self.times = [t for t, _ in answers]
        self.own_waits = [w for _, w in answers]
