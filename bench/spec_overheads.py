"""What volumes and probes cost per pod worker iteration, on this machine, without Docker.

- ``write_atomic``: the first write of a 10-key ConfigMap volume, and the unchanged check
  every sync does afterwards (the volume is refreshed on each sync so ConfigMap changes
  reach running pods);
- ``tcp_probe``: one TCP probe to a loopback listener, directly and through a network
  namespace (here the process's own, ``/proc/self/ns/net``: the same ``setns`` there and
  back that a probe into a pod without an IP pays; needs root).

Run: ``python bench/spec_overheads.py [--rounds N]``. Prints medians in microseconds.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from asynckubelet.node.volumes import write_atomic
from asynckubelet.runtime.hooks import tcp_probe


def _median_us(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=500)
    rounds = parser.parse_args().rounds
    payload = {f"key{i}": (f"value {i}\n".encode() * 20, 0o644) for i in range(10)}
    with tempfile.TemporaryDirectory() as tmp:
        counter = iter(range(10**9))
        first = _median_us(lambda: write_atomic(Path(tmp) / str(next(counter)), payload), rounds)
        target = Path(tmp) / "steady"
        write_atomic(target, payload)
        unchanged = _median_us(lambda: write_atomic(target, payload), rounds)
    print(f"write_atomic, 10 keys, first write: {first:.0f} us")
    print(f"write_atomic, 10 keys, unchanged:   {unchanged:.0f} us")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1024)
        port = server.getsockname()[1]

        def drain() -> None:
            server.setblocking(False)
            try:
                while True:
                    server.accept()[0].close()
            except BlockingIOError:
                pass

        direct = _median_us(
            lambda: (tcp_probe("127.0.0.1", port, timeout=1, netns=None), drain()), rounds
        )
        print(f"tcp_probe, direct:                  {direct:.0f} us")
        if os.geteuid() == 0:
            netns = _median_us(
                lambda: (
                    tcp_probe("127.0.0.1", port, timeout=1, netns="/proc/self/ns/net"),
                    drain(),
                ),
                rounds,
            )
            print(f"tcp_probe, through setns:           {netns:.0f} us")


if __name__ == "__main__":
    main()
