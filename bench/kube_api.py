"""What the Kubernetes API costs ``serve``, and how fast real kubectl reads through it.

Starts ``asynckubelet serve`` twice on a private state dir, node name, bridge and pod
range: once with the API off (``--api-listen off``), once on (a free loopback port).
Each time it applies ``--pods`` pods (pause + one busybox container each), waits until
they are Ready, lets the daemon settle, and reads its resident memory (VmRSS). With the
API on it then runs real kubectl (``--kubectl``, default the one on PATH) ``get pods``
``--runs`` times, one process after another, with the node's kubeconfig and a discovery
cache of its own (the first run fills it, as a user's first command does; it is left out
of the figures), and prints the wall time's p50, p99 and maximum, beside kubectl's own
start (``kubectl version --client``, no request) and ``asynckubelet get pods`` through
the local socket for comparison.

With ``--api-server`` it also starts the test control plane (``integration/cluster/up.sh``:
etcd, kube-apiserver, controller manager and scheduler, from ``build.sh``'s cache) on the
same machine, creates the same pods there (Pending: no node joins it, so the list holds the
same number of objects), and times ``kubectl get pods`` against the two side by side, one
run against each in turn so that both see the same load. Everything made is removed at the
end.
Run: ``python bench/kube_api.py [--pods 10] [--runs 50] [--kubectl PATH] [--api-server]``.
"""

from __future__ import annotations

import argparse
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
from pathlib import Path

from nodeapi import ready_pods
from nodenet import free_cidr, private_bridge, remove_node_network

CLUSTER = Path(__file__).resolve().parent.parent / "integration" / "cluster"

POD = """\
apiVersion: v1
kind: Pod
metadata: {{name: kapi-{i}}}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: a
    image: {image}
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 1; done"]
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def timed(command: list[str], env: dict[str, str], runs: int) -> list[float]:
    took = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(command, env=env, check=True, capture_output=True)
        took.append(time.perf_counter() - started)
    return took


def summary(name: str, took: list[float]) -> str:
    ms = sorted(t * 1000 for t in took)
    p99 = ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]
    return (
        f"{name}: p50 {statistics.median(ms):.0f} ms, p99 {p99:.0f} ms, "
        f"max {ms[-1]:.0f} ms ({len(ms)} runs)"
    )


def alternated(commands: list[tuple[list[str], dict[str, str]]], runs: int) -> list[list[float]]:
    """Each command's wall times, ``runs`` each, the commands taking turns."""
    took: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for i, (command, env) in enumerate(commands):
            took[i].extend(timed(command, env, 1))
    return took


class ControlPlane:
    """The test control plane of ``integration/cluster``, up for the length of a ``with``."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "cluster"
        self.kubeconfig = self.dir / "admin.kubeconfig"

    def __enter__(self) -> ControlPlane:
        checked = subprocess.run(
            [str(CLUSTER / "build.sh"), "--check"], capture_output=True, text=True, check=False
        )
        if checked.returncode != 0:
            raise SystemExit(
                "--api-server needs the built control plane: run integration/cluster/build.sh"
            )
        subprocess.run(
            [str(CLUSTER / "up.sh"), str(self.dir)],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self

    def __exit__(self, *_: object) -> None:
        subprocess.run([str(CLUSTER / "down.sh"), str(self.dir)], check=False, capture_output=True)


def pending_pods(kubectl: str, env: dict[str, str], files: Path) -> None:
    """The pods of ``files`` created on the API server, once the controller manager has
    made the ``default`` service account their admission asks for."""
    deadline = time.monotonic() + 60
    probe = [kubectl, "get", "serviceaccount", "default"]
    while subprocess.run(probe, env=env, check=False, capture_output=True).returncode != 0:
        if time.monotonic() > deadline:
            raise SystemExit("the control plane made no default service account in 60 s")
        time.sleep(0.5)
    subprocess.run([kubectl, "create", "-f", str(files)], env=env, check=True, capture_output=True)


def run_node(args: argparse.Namespace, *, api: bool) -> None:
    root = Path(tempfile.mkdtemp(prefix="akl-kapi-"))
    node = f"akl-kapi-{uuid.uuid4().hex[:8]}"
    state = root / "state"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ASYNCKUBELET_")},
        "ASYNCKUBELET_STATE_DIR": str(state),
        "ASYNCKUBELET_NODE_NAME": node,
        "ASYNCKUBELET_PAUSE_IMAGE": args.pause,
        "ASYNCKUBELET_BRIDGE": private_bridge(),
        "ASYNCKUBELET_POD_CIDR": free_cidr(),
    }
    cli = [sys.executable, "-m", "asynckubelet"]
    api_listen = f"127.0.0.1:{free_port()}" if api else "off"
    serve = subprocess.Popen(
        [
            *cli,
            "serve",
            "--listen",
            f"127.0.0.1:{free_port()}",
            "--api-listen",
            api_listen,
            "--stop-pods-on-exit",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not (state / "node.json").exists():
            if time.monotonic() > deadline or serve.poll() is not None:
                raise SystemExit("serve did not start")
            time.sleep(0.05)
        files = root / "in"
        files.mkdir()
        for i in range(args.pods):
            (files / f"kapi-{i}.yaml").write_text(POD.format(i=i, image=args.image))
        subprocess.run([*cli, "apply", "-f", str(files)], env=env, check=True, capture_output=True)
        while ready_pods(state) < args.pods:
            time.sleep(0.05)
        time.sleep(3)
        label = "on" if api else "off"
        print(f"serve RSS with the API {label}, {args.pods} pods Ready: {rss_mb(serve.pid):.1f} MB")
        if not api:
            return
        kube_env = {
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(root / "home"),
            "KUBECONFIG": str(state / "kubeconfig"),
        }
        kubectl = [args.kubectl, "get", "pods"]
        timed(kubectl, kube_env, 1)
        if args.api_server:
            with ControlPlane(root) as plane:
                server_env = {**kube_env, "KUBECONFIG": str(plane.kubeconfig)}
                server_env["HOME"] = str(root / "home-api-server")
                pending_pods(args.kubectl, server_env, files)
                timed(kubectl, server_env, 1)
                ours, theirs = alternated([(kubectl, kube_env), (kubectl, server_env)], args.runs)
            print(summary(f"kubectl get pods against serve ({args.kubectl})", ours))
            print(summary("kubectl get pods against the control plane's API server", theirs))
        else:
            took = timed(kubectl, kube_env, args.runs)
            print(summary(f"kubectl get pods ({args.kubectl})", took))
        floor = [args.kubectl, "version", "--client"]
        print(summary("kubectl version --client (no request)", timed(floor, kube_env, args.runs)))
        print(summary("asynckubelet get pods", timed([*cli, "get", "pods"], env, args.runs)))
        print(f"serve RSS after the runs: {rss_mb(serve.pid):.1f} MB")
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=120)
        shutil.rmtree(root, ignore_errors=True)
        remove_node_network(env["ASYNCKUBELET_BRIDGE"], env["ASYNCKUBELET_POD_CIDR"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=10)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--kubectl", default=shutil.which("kubectl") or "kubectl")
    parser.add_argument("--image", default="asynckubelet.local/busybox:1.35")
    parser.add_argument("--pause", default="asynckubelet.local/pause:3.10")
    parser.add_argument(
        "--api-server",
        action="store_true",
        help="also time kubectl get pods against the test control plane's API server",
    )
    args = parser.parse_args()
    run_node(args, api=False)
    run_node(args, api=True)


if __name__ == "__main__":
    main()
