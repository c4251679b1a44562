"""A real control plane and real node agents for the cluster node mode's tests.

``cluster`` (session) finds the built control plane with ``integration/cluster/build.sh
--check`` and runs ``up.sh`` in a directory of its own, with a pod range no host route
covers, and ``down.sh`` at the end whatever happened. A test run never builds it (that takes
about 20 minutes, once per source version): when the cache is missing the tests skip with one
line saying how to build it, and when the control plane cannot start they skip saying why;
with ``ASYNCKUBELET_REQUIRE_CLUSTER=1`` either fails at once instead. Inside Docker-in-Docker
the runner mounts the host's cache read-only (``integration/dind/run.sh``).

``Agent`` runs ``asynckubelet serve --kubeconfig`` as a node of that cluster, with its own
node name, state directory, bridge and network state, its node IP on loopback (where the
API server dials its kubelet API, on a port of its own); ``agents`` (per test) stops every
agent the test started, removes its containers, bridge, firewall chains and state, and
deletes its Node and the pods bound to it, whether the test passed or not. Everything the
tests send goes to loopback (the API server) or to the pods they made.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import anyio
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin
from integration.harness import Engine, free_port, remove_owned

_T = TypeVar("_T")

REPO = Path(__file__).resolve().parent.parent
SCRIPTS = REPO / "integration" / "cluster"
REQUIRE_ENV = "ASYNCKUBELET_REQUIRE_CLUSTER"
GRACE = "20s"
"""The node monitor grace period of the test cluster (40 s by default, shortened so the
NotReady test takes less time)."""


def _free_cluster_cidr() -> str:
    taken = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    for _ in range(100):
        second = random.randint(200, 250)
        if f"10.{second}." not in taken:
            return f"10.{second}.0.0/16"
    raise AssertionError("no free /16 for the cluster's pods")


@dataclass
class Cluster:
    dir: Path
    env: dict[str, str]
    restarted: list[subprocess.Popen[bytes]] = field(default_factory=list)
    """API servers started again by a test: they run until down.sh stops the cluster."""

    @property
    def bin(self) -> Path:
        return Path(self.env["AKL_CLUSTER_BIN"])

    @property
    def admin(self) -> Path:
        return self.dir / "admin.kubeconfig"

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [str(self.bin / "kubectl"), "--kubeconfig", str(self.admin), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done

    def json(self, *args: str) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json").stdout)

    def node_kubeconfig(self, name: str) -> Path:
        out = subprocess.run(
            [str(SCRIPTS / "node-kubeconfig.sh"), str(self.dir), name],
            capture_output=True,
            text=True,
            check=True,
        )
        return Path(out.stdout.strip().splitlines()[-1])

    def restart_apiserver(self, *, down_for: float) -> None:
        """Kill the API server, wait ``down_for`` seconds, start it again as it was."""
        pid_file = self.dir / "run" / "kube-apiserver.pid"
        pid = int(pid_file.read_text().strip())
        args = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        cwd = os.readlink(f"/proc/{pid}/cwd")
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(down_for)
        with (self.dir / "logs" / "kube-apiserver.log").open("ab") as log:
            process = subprocess.Popen(
                [a.decode() for a in args],
                cwd=cwd,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.restarted.append(process)
        pid_file.write_text(f"{process.pid}\n")
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.kubectl("get", "--raw", "/readyz", check=False).returncode == 0:
                return
            time.sleep(0.5)
        raise AssertionError("the API server did not come back")


BUILD_HINT = "build it once with integration/cluster/build.sh (as root, about 20 minutes)"


def _built_control_plane(unavailable: Callable[[str], NoReturn]) -> str:
    """The cache directory of the built programs the cluster needs, never building them."""
    env = {**os.environ, "ASYNCKUBELET_CLUSTER_PROGRAMS": "control-plane"}
    found = subprocess.run(
        [str(SCRIPTS / "build.sh"), "--check"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    lines = found.stdout.strip().splitlines()
    if found.returncode != 0 or not lines:
        said = found.stderr.strip().splitlines()
        why = said[-1].removeprefix("build.sh: ") if said else f"exit {found.returncode}"
        unavailable(f"{why}; {BUILD_HINT}")
    return lines[-1]


def _why_up_failed(stderr: str) -> str:
    """The end of what up.sh said before it showed the logs (its reason, or the shell's
    error under ``set -e``), then the end of the logs it showed."""
    said, marker, logs = stderr.strip().partition("--- last lines of")
    own = said.strip().splitlines()[-6:]
    shown = (marker + logs).splitlines()[-40:]
    return "\n".join([*own, "...", *shown] if shown else own)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    required = os.environ.get(REQUIRE_ENV) == "1"

    def unavailable(why: str) -> NoReturn:
        if required:
            pytest.fail(f"{REQUIRE_ENV}=1 but no control plane: {why}", pytrace=False)
        pytest.skip(f"no Kubernetes control plane: {why}")

    if os.geteuid() != 0:
        unavailable("its scripts need root")
    bin_dir = _built_control_plane(unavailable)
    env = {
        **os.environ,
        "AKL_CLUSTER_BIN": bin_dir,
        "AKL_CLUSTER_CLUSTER_CIDR": _free_cluster_cidr(),
        "AKL_CLUSTER_NODE_MONITOR_GRACE_PERIOD": GRACE,
        "NODE_NAME": "akltest-node",
    }
    # A control plane that fails to start on a busy machine gets one more try; the first
    # failure is still reported (as a warning) when the second start succeeds.
    failures: list[str] = []
    running: Cluster | None = None
    directory = Path(tempfile.mkdtemp(prefix="akl-cluster-"))
    try:
        while True:
            up = subprocess.run(
                [str(SCRIPTS / "up.sh"), str(directory)],
                capture_output=True,
                text=True,
                env=env,
                timeout=600,
            )
            if up.returncode == 0:
                break
            failures.append(_why_up_failed(up.stderr))
            if len(failures) == 2:
                unavailable("up.sh failed twice: " + "\n--- then:\n".join(failures))
            shutil.rmtree(directory, ignore_errors=True)
            directory = Path(tempfile.mkdtemp(prefix="akl-cluster-"))
        if failures:
            with warnings.catch_warnings():
                # shown in the warnings summary rather than raised (filterwarnings = error)
                warnings.simplefilter("default")
                warnings.warn(f"up.sh failed once, then started: {failures[0]}", stacklevel=1)
        values = {}
        for line in (directory / "cluster.env").read_text().splitlines():
            key, sep, value = line.partition("=")
            if sep:
                values[key.strip()] = value.strip().strip("'\"")
        running = Cluster(dir=directory, env={**env, **values})
        yield running
    finally:
        subprocess.run([str(SCRIPTS / "down.sh"), str(directory)], capture_output=True)
        if running is not None:
            for process in running.restarted:
                process.wait(timeout=30)
        shutil.rmtree(directory, ignore_errors=True)


@dataclass
class Agent:
    """One node agent process of the cluster."""

    cluster: Cluster
    engine: Engine
    name: str
    root: Path
    pause_image: str
    bridge: str
    extra: tuple[str, ...] = ()
    kubelet_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log_paths: list[Path] = field(default_factory=list)

    @property
    def state_dir(self) -> Path:
        return self.root / "state"

    @property
    def network_dir(self) -> Path:
        return self.root / "net"

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    def command(self, kubeconfig: Path | None = None) -> list[str]:
        return [
            sys.executable,
            "-m",
            "asynckubelet",
            "serve",
            "--kubeconfig",
            str(kubeconfig or self.cluster.node_kubeconfig(self.name)),
            "--node-name",
            self.name,
            "--state-dir",
            str(self.state_dir),
            "--manifests",
            str(self.manifests),
            "--network",
            "bridge",
            "--bridge",
            self.bridge,
            "--network-state-dir",
            str(self.network_dir),
            "--pause-image",
            self.pause_image,
            "--docker-host",
            self.engine.url,
            "--pod-cidr-wait",
            "60",
            "--node-ip",
            "127.0.0.1",
            "--kubelet-port",
            str(self.kubelet_port),
            "--listen",
            "127.0.0.1:0",
            *self.extra,
        ]

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None
        self.starts += 1
        log = self.root / f"agent-{self.starts}.log"
        self.log_paths.append(log)
        self.manifests.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        with log.open("wb") as out:
            self.process = subprocess.Popen(
                self.command(),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
                start_new_session=True,
            )

    def log(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in self.log_paths if p.exists())

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process is not None else 0
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(timeout=30)

    def kill(self) -> None:
        self.stop(signal.SIGKILL)

    def wait_joined(self, timeout: float = 120) -> None:
        """Until the agent started last says it joined (its first list of pods is done)."""
        log = self.log_paths[-1]

        def joined() -> bool:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"agent {self.name} exited:\n{self.log()[-3000:]}")
            return log.exists() and f"node {self.name} joined" in log.read_text(errors="replace")

        wait_for(joined, timeout=timeout, what=f"agent {self.name} to join")

    def wait_ready(self, timeout: float = 120) -> dict[str, Any]:
        self.wait_joined(timeout)

        def ready() -> dict[str, Any] | None:
            if self.process is not None and self.process.poll() is not None:
                raise AssertionError(f"agent {self.name} exited:\n{self.log()[-3000:]}")
            done = self.cluster.kubectl("get", "node", self.name, "-o", "json", check=False)
            if done.returncode != 0:
                return None
            node: dict[str, Any] = json.loads(done.stdout)
            conditions = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
            return node if conditions.get("Ready") == "True" else None

        return wait_for(ready, timeout=timeout, what=f"node {self.name} Ready")

    def cleanup(self) -> None:
        self.kill()
        self.cluster.kubectl(
            "delete", "pods", "--all-namespaces", "--force", "--grace-period=0",
            "--field-selector", f"spec.nodeName={self.name}", "--wait=false", check=False,
        )  # fmt: skip
        self.cluster.kubectl("delete", "node", self.name, "--wait=false", check=False)
        self.cluster.kubectl(
            "delete", "lease", "-n", "kube-node-lease", self.name, "--wait=false", check=False
        )

        async def remove() -> None:
            async with DockerClient(url=self.engine.url) as docker:
                await remove_owned(docker, self.name)
            plugin = BridgePlugin(BridgeConfig(bridge=self.bridge, state_dir=self.network_dir))
            await plugin.remove_node_network()

        anyio.run(remove)
        unmount_under(self.root)
        shutil.rmtree(self.root, ignore_errors=True)


def unmount_under(root: Path) -> None:
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f]
    for mount in sorted((m for m in mounts if m.startswith(f"{root}/")), reverse=True):
        subprocess.run(["umount", "-l", mount], check=False, capture_output=True)


def wait_for(
    check: Callable[[], _T | None], *, timeout: float, what: str, every: float = 0.3
) -> _T:
    """Poll ``check`` until it returns something truthy; fail naming ``what``."""
    deadline = time.monotonic() + timeout
    last: _T | None = None
    while time.monotonic() < deadline:
        last = check()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


@pytest.fixture
def agents(
    cluster: Cluster, docker_engine: Engine, test_images: dict[str, str]
) -> Iterator[Callable[..., Agent]]:
    """Makes agents of the test's own; each is removed with everything it made."""
    made: list[Agent] = []

    def make(*, extra: tuple[str, ...] = ()) -> Agent:
        suffix = uuid.uuid4().hex[:8]
        agent = Agent(
            cluster=cluster,
            engine=docker_engine,
            name=f"akltest-{suffix}",
            root=Path(tempfile.mkdtemp(prefix=f"akl-agent-{suffix}-")),
            pause_image=test_images["pause"],
            bridge=f"aklc{suffix[:6]}",
            extra=extra,
        )
        made.append(agent)
        return agent

    try:
        yield make
    finally:
        for agent in made:
            with contextlib.suppress(Exception):
                agent.cleanup()


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace of the test's own, whose default service account can run pods."""
    name = f"akltest-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)

    def token_ready() -> bool:
        done = cluster.kubectl("get", "serviceaccount", "default", "-n", name, "-o", "json",
                               check=False)  # fmt: skip
        return done.returncode == 0 and bool(json.loads(done.stdout).get("secrets"))

    wait_for(token_ready, timeout=60, what=f"the default service account of {name}")
    try:
        yield name
    finally:
        cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)
