"""What a hostile container's output costs the ``serve`` daemon: a line of 32 MB without a
newline, read through the daemon's local API with ``limitBytes=10`` and with
``tailLines=1``.

Starts ``asynckubelet serve`` with a private state dir, node name, bridge and pod range,
runs a pod that prints 32 MB of ``x`` without a newline and stays up, then makes each
request on the daemon's socket and reports the time until the answer ended, the bytes of
its body, and the daemon's resident memory before and after (and the growth of its peak,
``VmHWM``). Everything it creates is removed at the end. Needs the busybox and pause
images built by ``asynckubelet images build-*``. The commands run in a directory of their
own, so the tree on ``PYTHONPATH`` is the one measured; to compare two, run it with each:
``PYTHONPATH=TREE python bench/logs_hostile.py [busybox-image] [pause-image]``.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from nodenet import free_cidr, private_bridge, remove_node_network

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: wide}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: c
    image: {image}
    command:
    - sh
    - -c
    - >-
      head -c 33554432 /dev/zero | tr '\\0' x; touch /tmp/printed;
      trap 'exit 0' TERM; while true; do sleep 1; done
    readinessProbe:
      exec: {{command: [test, -f, /tmp/printed]}}
      periodSeconds: 1
"""
PATH = "/api/v1/namespaces/default/pods/wide/log"


def memory_mb(pid: int) -> tuple[float, float]:
    """The process's resident memory and its peak so far (``VmRSS``, ``VmHWM``), MB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def body_of(answer: bytes) -> bytes:
    """The body of an HTTP/1.1 answer, its chunks put together."""
    head, _, rest = answer.partition(b"\r\n\r\n")
    if b"transfer-encoding: chunked" not in head.lower():
        return rest
    body = bytearray()
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        body += rest[:size]
        rest = rest[size + 2 :]
    return bytes(body)


def ask(sock_path: Path, query: str) -> tuple[float, int]:
    """Seconds until the answer to ``GET PATH?query`` ended, and its body's bytes."""
    started = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(600)
        s.connect(str(sock_path))
        request = f"GET {PATH}?{query} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
        s.sendall(request.encode())
        answer = bytearray()
        while chunk := s.recv(1 << 20):
            answer += chunk
    return time.monotonic() - started, len(body_of(bytes(answer)))


def main(image: str, pause: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="akl-bench-"))
    node = f"akl-bench-{uuid.uuid4().hex[:8]}"
    state = root / "state"
    env = {
        **os.environ,
        "ASYNCKUBELET_STATE_DIR": str(state),
        "ASYNCKUBELET_NODE_NAME": node,
        "ASYNCKUBELET_PAUSE_IMAGE": pause,
        "ASYNCKUBELET_BRIDGE": private_bridge(),
        "ASYNCKUBELET_POD_CIDR": free_cidr(),
    }
    cli = [sys.executable, "-m", "asynckubelet"]
    serve = subprocess.Popen(
        [*cli, "serve", "--listen", "127.0.0.1:0", "--stop-pods-on-exit"],
        env=env,
        cwd=root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while not (state / "api.sock").exists():
            if time.monotonic() > deadline or serve.poll() is not None:
                raise SystemExit("serve did not start")
            time.sleep(0.05)
        (root / "wide.yaml").write_text(POD.format(image=image))
        subprocess.run(
            [*cli, "apply", "-f", str(root / "wide.yaml"), "--wait"],
            env=env,
            cwd=root,
            check=True,
            capture_output=True,
        )
        get = [*cli, "get", "pods", "wide"]
        while b"1/1" not in subprocess.run(get, env=env, cwd=root, capture_output=True).stdout:
            time.sleep(0.5)
        time.sleep(2)
        for query in ("limitBytes=10", "tailLines=1"):
            rss, peak = memory_mb(serve.pid)
            seconds, size = ask(state / "api.sock", query)
            after, after_peak = memory_mb(serve.pid)
            print(
                f"{query}: {seconds:.2f} s, {size} bytes; serve RSS {rss:.0f} -> {after:.0f} MB,"
                f" peak +{after_peak - peak:.0f} MB"
            )
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
        shutil.rmtree(root, ignore_errors=True)
        remove_node_network(env["ASYNCKUBELET_BRIDGE"], env["ASYNCKUBELET_POD_CIDR"])


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else "asynckubelet.local/busybox:1.35",
        sys.argv[2] if len(sys.argv) > 2 else "asynckubelet.local/pause:3.10",
    )
