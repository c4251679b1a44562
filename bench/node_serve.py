"""What the `serve` daemon costs and how fast it reacts, measured from outside.

Starts ``asynckubelet serve`` with a private state dir, node name, bridge and pod range,
then measures: the
time from ``apply -f`` (N pods in one directory) until the local API reports them all Ready;
the time until an edited env var has restarted the changed container; the daemon's
resident memory and its CPU use while idle with those pods running; and the time for
``delete`` of one pod. Everything it creates is removed at the end. Needs the busybox and
pause images built by ``asynckubelet images build-*``. Run:
``python bench/node_serve.py [pods] [busybox-image] [pause-image]``.
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

from nodeapi import ready_pods
from nodenet import free_cidr, private_bridge, remove_node_network

POD = """
apiVersion: v1
kind: Pod
metadata: {{name: bench-{i}}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: a
    image: {image}
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
    env: [{{name: V, value: "{value}"}}]
  - name: b
    image: {image}
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    pages = int(Path(f"/proc/{pid}/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 1e6


def main(pods: int, image: str, pause: str) -> None:
    root = Path(tempfile.mkdtemp(prefix="akl-bench-"))
    node = f"akl-bench-{uuid.uuid4().hex[:8]}"
    port = free_port()
    env = {
        **os.environ,
        "ASYNCKUBELET_STATE_DIR": str(root / "state"),
        "ASYNCKUBELET_NODE_NAME": node,
        "ASYNCKUBELET_PAUSE_IMAGE": pause,
        "ASYNCKUBELET_BRIDGE": private_bridge(),
        "ASYNCKUBELET_POD_CIDR": free_cidr(),
    }
    cli = [sys.executable, "-m", "asynckubelet"]
    serve = subprocess.Popen(
        [*cli, "serve", "--listen", f"127.0.0.1:{port}", "--stop-pods-on-exit"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                ready_pods(root / "state")
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        files = root / "in"
        files.mkdir()
        paths = []
        for i in range(pods):
            path = files / f"bench-{i}.yaml"
            path.write_text(POD.format(i=i, image=image, value="one"))
            paths.append(str(path))
        args = [a for p in paths for a in ("-f", p)]
        started = time.monotonic()
        subprocess.run([*cli, "apply", *args], env=env, check=True, capture_output=True)
        while ready_pods(root / "state") < pods:
            time.sleep(0.02)
        print(f"apply -> {pods} pods Ready: {time.monotonic() - started:.2f} s")

        Path(paths[0]).write_text(POD.format(i=0, image=image, value="two"))
        started = time.monotonic()
        subprocess.run(
            [*cli, "apply", "-f", paths[0], "--wait"], env=env, check=True, capture_output=True
        )
        print(f"edit one env var -> restarted and Ready: {time.monotonic() - started:.2f} s")

        time.sleep(2)
        before = cpu_seconds(serve.pid)
        time.sleep(10)
        idle = (cpu_seconds(serve.pid) - before) / 10 * 100
        print(
            f"serve idle with {pods} pods: {idle:.1f} % of one core, RSS {rss_mb(serve.pid):.0f} MB"
        )

        started = time.monotonic()
        subprocess.run([*cli, "delete", "pod", "bench-0"], env=env, check=True, capture_output=True)
        print(f"delete pod (grace 2 s, TERM trapped): {time.monotonic() - started:.2f} s")
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
        shutil.rmtree(root, ignore_errors=True)
        remove_node_network(env["ASYNCKUBELET_BRIDGE"], env["ASYNCKUBELET_POD_CIDR"])


if __name__ == "__main__":
    main(
        int(sys.argv[1]) if len(sys.argv) > 1 else 10,
        sys.argv[2] if len(sys.argv) > 2 else "asynckubelet.local/busybox:1.35",
        sys.argv[3] if len(sys.argv) > 3 else "asynckubelet.local/pause:3.10",
    )
