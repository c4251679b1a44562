"""How long slow clients hold the `serve` daemon's HTTP servers, measured from outside.

Starts ``asynckubelet serve`` with its default limits, a private state dir, node name,
bridge and pod range, then, against its TCP endpoint (``--listen``) and then its local API
(``<state-dir>/api.sock``): opens N connections that each send half a request
(``GET /healthz HTTP/1.1\\r\\nHost: ...``) and nothing more, and meanwhile asks ``/healthz``
on a new connection every quarter second. Prints the descriptors the daemon holds for
them (its sockets beyond those it had before), how long each connection stayed open
before the daemon closed it, and how ``/healthz`` was answered meanwhile. A connection
still open after ``--give-up`` seconds is counted as held (the client closes it then).
Everything it creates is removed at the end. Run: ``python bench/slow_clients.py
[--clients 500] [--give-up 120]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from nodenet import free_cidr, private_bridge, remove_node_network

Opener = Callable[[], Awaitable[tuple[asyncio.StreamReader, asyncio.StreamWriter]]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def sockets_of(pid: int) -> int:
    """The sockets the process holds open."""
    count = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        with contextlib.suppress(OSError):
            count += os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:")
    return count


@dataclass
class Run:
    held: list[float] = field(default_factory=list)
    """Seconds each slow connection stayed open (``give_up`` for one still open then)."""
    most_sockets: int = 0
    healthz: list[float | None] = field(default_factory=list)
    """Each ``/healthz`` asked meanwhile: seconds to its answer, None when unanswered."""


async def slow_client(open_connection: Opener, host: str, give_up: float) -> float:
    started = time.monotonic()
    reader, writer = await open_connection()
    writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}".encode())
    with contextlib.suppress(TimeoutError, ConnectionError):
        await asyncio.wait_for(reader.read(), timeout=give_up)
    writer.close()
    return min(time.monotonic() - started, give_up)


async def healthz(open_connection: Opener, host: str) -> float | None:
    started = time.monotonic()
    try:
        reader, writer = await asyncio.wait_for(open_connection(), timeout=5)
        writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        answer = await asyncio.wait_for(reader.read(), timeout=5)
        writer.close()
    except (TimeoutError, OSError):
        return None
    return time.monotonic() - started if answer.startswith(b"HTTP/1.1 200") else None


async def attack(pid: int, open_connection: Opener, host: str, clients: int, give_up: float) -> Run:
    run = Run()
    before = sockets_of(pid)
    tasks = []
    for _ in range(clients):
        tasks.append(asyncio.create_task(slow_client(open_connection, host, give_up)))
        await asyncio.sleep(0)
    gathering = asyncio.gather(*tasks)
    while not gathering.done():
        run.most_sockets = max(run.most_sockets, sockets_of(pid) - before)
        run.healthz.append(await healthz(open_connection, host))
        await asyncio.sleep(0.25)
    run.held = list(await gathering)
    return run


def report(name: str, run: Run, clients: int, give_up: float) -> None:
    held = sorted(run.held)
    answered = [t for t in run.healthz if t is not None]
    still = sum(1 for t in held if t >= give_up)
    soon = sum(1 for t in held if t < 1.0)
    print(f"{name}: {clients} half-sent requests")
    print(f"  most sockets held for them at once: {run.most_sockets}")
    print(
        f"  held: min {held[0]:.2f} s, median {statistics.median(held):.2f} s, "
        f"max {held[-1]:.2f} s; still open after {give_up:g} s: {still}"
    )
    print(f"  closed within a second (taken over at the cap): {soon}")
    worst = f", slowest {max(answered) * 1000:.0f} ms" if answered else ""
    print(f"  /healthz meanwhile: {len(answered)} of {len(run.healthz)} answered{worst}")


def main(clients: int, give_up: float) -> None:
    root = Path(tempfile.mkdtemp(prefix="akl-bench-"))
    port = free_port()
    env = {
        **os.environ,
        "ASYNCKUBELET_STATE_DIR": str(root / "state"),
        "ASYNCKUBELET_NODE_NAME": f"akl-bench-{uuid.uuid4().hex[:8]}",
        "ASYNCKUBELET_BRIDGE": private_bridge(),
        "ASYNCKUBELET_POD_CIDR": free_cidr(),
    }
    serve = subprocess.Popen(
        [sys.executable, "-m", "asynckubelet", "serve", "--listen", f"127.0.0.1:{port}"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    api = root / "state" / "api.sock"
    targets: list[tuple[str, Opener, str]] = [
        (
            f"TCP endpoint 127.0.0.1:{port}",
            lambda: asyncio.open_connection("127.0.0.1", port),
            f"127.0.0.1:{port}",
        ),
        ("local API api.sock", lambda: asyncio.open_unix_connection(str(api)), "localhost"),
    ]
    try:
        deadline = time.monotonic() + 60
        while asyncio.run(healthz(targets[0][1], targets[0][2])) is None or not api.exists():
            if time.monotonic() > deadline or serve.poll() is not None:
                raise SystemExit("serve did not answer /healthz")
            time.sleep(0.1)
        for name, open_connection, host in targets:
            run = asyncio.run(attack(serve.pid, open_connection, host, clients, give_up))
            report(name, run, clients, give_up)
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
        shutil.rmtree(root, ignore_errors=True)
        remove_node_network(env["ASYNCKUBELET_BRIDGE"], env["ASYNCKUBELET_POD_CIDR"])


def positive(text: str) -> float:
    """An argparse type: a number of seconds above 0."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be above 0, not {text}")
    return value


def at_least_one(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=at_least_one, default=500)
    parser.add_argument("--give-up", type=positive, default=120.0)
    args = parser.parse_args()
    main(args.clients, args.give_up)
