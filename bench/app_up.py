"""A whole app up, side by side with docker-compose, and the cluster DNS's latency.

The app is ``examples/app/``: a web Deployment of 2 replicas behind a readiness probe, its
NodePort Service, a ConfigMap, a migration Job and a client pod that is ready once it has
fetched the page through the Service by name. Each tool brings it up from nothing, timed
from the first command's start until everything is ready:

- ``asynckubelet``: ``asynckubelet apply -f APP --wait`` to a running ``serve`` (its own
  bridge, pod CIDR and cluster DNS; ``--wait`` returns once the Deployment is rolled out,
  the Job complete, the Service has ready endpoints and the client pod is Ready).
- ``docker-compose``: the same app as a compose file (the web as a service of scale 2
  with a Docker healthcheck, the ConfigMap's files bind-mounted, the migration a one-shot
  service, the client reaching ``web`` through Docker's DNS), ``docker-compose up -d``
  then a readiness poll every 0.1 s (Debian's docker-compose 1.29 has no ``--wait``):
  every web and client container ``healthy`` and the migration exited 0.

Both use the same image, the same commands and probes of the same period (1 s). Between
rounds each tool's app is removed (``delete -f``, ``docker-compose down``), untimed. The
tools run in turn (A B A B ...) so the machine's noise hits them alike; the first round
warms up and is not counted.

Then the DNS latency: queries for ``web.default.svc.cluster.local`` (A) sent with
dnspython from inside the client pod's network namespace (``nsenter``) to the node's
resolver, and, for comparison, for ``web`` to Docker's embedded DNS (127.0.0.11) from
inside the compose client container's. Medians and 99th percentiles of single queries.

Nothing leaves the machine: images are local (``asynckubelet images build-*``), the
cluster DNS forwards other names to a loopback port where nothing listens. Needs root
(the bridge, nsenter) and a Docker engine: ``DOCKER_HOST``'s, else a private dockerd the
bench starts and removes (``--bridge=none``; compose makes its own project network).

Run: ``python bench/app_up.py [--rounds 5] [--queries 500]``. Prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
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
from collections.abc import Sequence
from pathlib import Path

from nodenet import free_cidr, private_bridge, remove_node_network

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "app"
BUSYBOX = "asynckubelet.local/busybox:1.35"
PAUSE = "asynckubelet.local/pause:3.10"
COMMAND_TIMEOUT = 300.0
COMPOSE = """\
version: "2.4"
services:
  web:
    image: {image}
    command: [httpd, -f, -p, "8080", -h, /www]
    scale: 2
    volumes: ["{www}:/www:ro"]
    ports: ["{port_first}-{port_last}:8080"]
    healthcheck:
      test:
      - CMD
      - sh
      - -c
      - printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 1 127.0.0.1 8080 | grep -q Hello
      interval: 1s
      timeout: 1s
      retries: 1
    stop_grace_period: 5s
  migrate:
    image: {image}
    command:
    - sh
    - -c
    - echo "migrating schema to version $$SCHEMA_VERSION"; test -n "$$SCHEMA_VERSION"
    environment: {{SCHEMA_VERSION: "2"}}
    restart: "no"
  client:
    image: {image}
    command:
    - sh
    - -c
    - |
      trap 'exit 0' TERM
      while true; do
        printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 web 8080 | grep Hello
        sleep 5
      done
    healthcheck:
      test:
      - CMD
      - sh
      - -c
      - printf 'GET / HTTP/1.0\\r\\n\\r\\n' | nc -w 2 web 8080 | grep -q Hello
      interval: 1s
      timeout: 2s
      retries: 1
    stop_grace_period: 1s
"""
DNS_PROBE = """
import statistics, sys, time
import dns.message, dns.query
server, name, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = []
for _ in range(count):
    q = dns.message.make_query(name, "A")
    t = time.perf_counter()
    r = dns.query.udp(q, server, timeout=2)
    times.append(time.perf_counter() - t)
    assert r.answer, r
times.sort()
print(statistics.median(times), times[int(0.99 * (len(times) - 1))])
"""


def run(
    command: Sequence[str], *, env: dict[str, str] | None = None, check: bool = True
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        command, capture_output=True, text=True, env=env, timeout=COMMAND_TIMEOUT, check=False
    )
    if check and result.returncode != 0:
        raise SystemExit(
            f"{' '.join(command)} exited {result.returncode}:\n{result.stdout}{result.stderr}"
        )
    return result


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def free_ports(count: int) -> int:
    """The first of ``count`` consecutive ports of the nodePort range free on every address."""
    first = 30000 + uuid.uuid4().int % 2000
    while first < 32700:
        held = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                held.append(s)
                s.bind(("0.0.0.0", port))  # noqa: S104  (a probe: is the port free everywhere)
        except OSError:
            first += count
            continue
        finally:
            for s in held:
                s.close()
        return first
    raise SystemExit("no free ports in 30000-32767")


def stop_node(process: subprocess.Popen[bytes] | None, bridge: str, cidr: str) -> None:
    """``serve`` stopped (SIGTERM, killed after 60 s) and its bridge and pod range
    removed."""
    if process is not None and process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    remove_node_network(bridge, cidr, firewall="nftables")


class Asynckubelet:
    name = "asynckubelet"

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work = work
        self.node = f"bench-app-{uuid.uuid4().hex[:6]}"
        self.bridge = private_bridge()
        self.cidr = free_cidr()
        self.env = {**env, "ASYNCKUBELET_STATE_DIR": str(work / "state")}
        self.cli = [sys.executable, "-m", "asynckubelet"]
        self.app = work / "app"
        self.app.mkdir()
        self.node_port = free_ports(1)
        for source in sorted(EXAMPLE.glob("*.yaml")):
            text = source.read_text().replace("nodePort: 30080", f"nodePort: {self.node_port}")
            (self.app / source.name).write_text(text)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        for ref, verb in ((BUSYBOX, "build-busybox"), (PAUSE, "build-pause")):
            if run(["docker", "image", "inspect", ref], env=self.env, check=False).returncode:
                run([*self.cli, "images", verb], env=self.env)
        log = (self.work / "serve.log").open("wb")
        self.process = subprocess.Popen(
            [
                *self.cli,
                "serve",
                "--node-name",
                self.node,
                "--pause-image",
                PAUSE,
                "--bridge",
                self.bridge,
                "--pod-cidr",
                self.cidr,
                "--firewall",
                "nftables",
                "--dns-upstream",
                f"127.0.0.1:{free_port()}",
                "--stop-pods-on-exit",
            ],
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        deadline = time.monotonic() + 60
        state = self.work / "state"
        while not ((state / "api.sock").exists() and (state / "node.json").exists()):
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("serve did not start:\n" + (self.work / "serve.log").read_text())
            time.sleep(0.2)

    def up(self) -> float:
        started = time.perf_counter()
        run([*self.cli, "apply", "-f", str(self.app), "--wait", "--timeout", "240"], env=self.env)
        return time.perf_counter() - started

    def down(self) -> None:
        run([*self.cli, "delete", "-f", str(self.app)], env=self.env)

    def client_pid(self) -> int:
        out = run(
            [
                "docker",
                "ps",
                "-q",
                "--filter",
                f"label=io.asynckubelet.node={self.node}",
                "--filter",
                "label=io.kubernetes.pod.name=client",
                "--filter",
                "label=io.kubernetes.container.name=client",
            ],
            env=self.env,
        ).stdout.split()
        return int(run(["docker", "inspect", "-f", "{{.State.Pid}}", out[0]], env=self.env).stdout)

    def resolver(self) -> str:
        return self.cidr.rsplit(".", 1)[0] + ".1"

    def stop(self) -> None:
        stop_node(self.process, self.bridge, self.cidr)


class Compose:
    name = "docker-compose"

    def __init__(self, work: Path, env: dict[str, str]) -> None:
        self.work = work
        self.env = env
        self.project = f"benchapp{uuid.uuid4().hex[:6]}"
        www = work / "www"
        www.mkdir()
        config = (EXAMPLE / "config.yaml").read_text()
        page = config.split("index.html: |\n", 1)[1].split("  schema-version")[0]
        (www / "index.html").write_text("\n".join(line[4:] for line in page.splitlines()) + "\n")
        first = free_ports(2)
        self.file = work / "docker-compose.yml"
        self.file.write_text(
            COMPOSE.format(image=BUSYBOX, www=www, port_first=first, port_last=first + 1)
        )
        self.base = ["docker-compose", "-p", self.project, "-f", str(self.file)]

    def _states(self) -> list[tuple[str, str, str, int]]:
        ids = run([*self.base, "ps", "-q"], env=self.env).stdout.split()
        if not ids:
            return []
        out = run(["docker", "inspect", *ids], env=self.env).stdout
        found = []
        for c in json.loads(out):
            service = c["Config"]["Labels"].get("com.docker.compose.service", "")
            health = (c["State"].get("Health") or {}).get("Status", "")
            found.append((service, c["State"]["Status"], health, int(c["State"]["ExitCode"])))
        return found

    def _ready(self) -> bool:
        states = self._states()
        web = [s for s in states if s[0] == "web"]
        client = [s for s in states if s[0] == "client"]
        migrate = [s for s in states if s[0] == "migrate"]
        return (
            len(web) == 2
            and all(s[2] == "healthy" for s in web + client)
            and len(client) == 1
            and len(migrate) == 1
            and migrate[0][1] == "exited"
            and migrate[0][3] == 0
        )

    def up(self) -> float:
        started = time.perf_counter()
        run([*self.base, "up", "-d"], env=self.env)
        deadline = time.monotonic() + 240
        while not self._ready():
            if time.monotonic() > deadline:
                raise SystemExit(f"docker-compose: not ready after 240 s: {self._states()}")
            time.sleep(0.1)
        return time.perf_counter() - started

    def down(self) -> None:
        run([*self.base, "down", "-t", "1"], env=self.env)

    def client_pid(self) -> int:
        ids = run([*self.base, "ps", "-q", "client"], env=self.env).stdout.split()
        return int(run(["docker", "inspect", "-f", "{{.State.Pid}}", ids[0]], env=self.env).stdout)

    def stop(self) -> None:
        run([*self.base, "down", "-t", "1"], env=self.env, check=False)


def dns_latency(pid: int, server: str, name: str, count: int) -> tuple[float, float]:
    """Median and 99th percentile seconds of one A query from the netns of ``pid``."""
    out = run(
        [
            "nsenter",
            f"--net=/proc/{pid}/ns/net",
            sys.executable,
            "-c",
            DNS_PROBE,
            server,
            name,
            str(count),
        ]
    ).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--serve-log", type=Path, help="keep serve's log (debug) in this file")
    args = parser.parse_args()
    for tool in ("docker", "docker-compose", "nsenter"):
        if shutil.which(tool) is None:
            raise SystemExit(f"{tool} is not installed")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ASYNCKUBELET_")}
    env["PYTHONPATH"] = str(REPO)
    with tempfile.TemporaryDirectory(prefix="bench-app-") as tmp:
        engine = None
        if not env.get("DOCKER_HOST"):
            from asynckubelet.docker.engine import Dockerd

            engine = Dockerd(root=Path(tmp) / "dockerd", name=f"aklapp-{uuid.uuid4().hex[:6]}")
            engine.start()
            env["DOCKER_HOST"] = engine.url
        try:
            measure(Path(tmp), env, args.rounds, args.queries)
        finally:
            if args.serve_log is not None and (Path(tmp) / "akl" / "serve.log").exists():
                shutil.copy(Path(tmp) / "akl" / "serve.log", args.serve_log)
            if engine is not None:
                engine.stop(remove=True)


def measure(work: Path, env: dict[str, str], rounds: int, queries: int) -> None:
    times: dict[str, list[float]] = {"asynckubelet": [], "docker-compose": []}
    (work / "akl").mkdir()
    (work / "compose").mkdir()
    akl = Asynckubelet(work / "akl", env)
    compose = Compose(work / "compose", env)
    try:
        akl.start()
        for i in range(rounds + 1):
            for tool in (akl, compose):
                took = tool.up()
                print(f"round {i} {tool.name}: {took:.2f} s", file=sys.stderr)
                if i > 0:
                    times[tool.name].append(took)
                if i < rounds:
                    tool.down()
        ours = dns_latency(
            akl.client_pid(), akl.resolver(), "web.default.svc.cluster.local", queries
        )
        docker = dns_latency(compose.client_pid(), "127.0.0.11", "web", queries)
    finally:
        compose.stop()
        akl.stop()
    base = statistics.median(times["asynckubelet"])
    print("| app up (apply to all ready) | median s | min-max s | ratio to asynckubelet |")
    print("|---|---|---|---|")
    for name, got in times.items():
        median = statistics.median(got)
        print(f"| {name} | {median:.2f} | {min(got):.2f}-{max(got):.2f} | {median / base:.2f} |")
    print()
    print("| DNS, one A query from a pod | median ms | p99 ms |")
    print("|---|---|---|")
    print(f"| asynckubelet cluster DNS | {ours[0] * 1000:.2f} | {ours[1] * 1000:.2f} |")
    print(f"| Docker embedded DNS (compose) | {docker[0] * 1000:.2f} | {docker[1] * 1000:.2f} |")


if __name__ == "__main__":
    main()
