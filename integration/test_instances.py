"""Two node instances side by side on one host and one engine (``--instance``): each
``serve`` derives its own state dir, node name, bridge, pod and Service ranges and port;
a pod on each gets an address of its own instance's range and answers from the host;
each instance's kubeconfig (its own API port, its context ``asynckubelet-NAME``) shows
kubectl that instance's pod only; ``doctor`` lists both; ``reset`` of one leaves the
other's pod running; a nodePort one publishes the other refuses and avoids until the first
stops."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import pytest
import yaml

from asynckubelet.cli import instance
from asynckubelet.docker import DockerClient
from asynckubelet.node import neighbours
from integration.harness import (
    BUSYBOX_IMAGE,
    PAUSE_IMAGE,
    Engine,
    remove_instance,
    remove_owned,
)
from integration.kubectl_helpers import SYSTEM_KUBECTL
from integration.network_helpers import fetch, server_pod

REPO = Path(__file__).resolve().parent.parent
KUBECTL = SYSTEM_KUBECTL

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the bridge network needs root")


@dataclass
class Instance:
    """``serve --instance NAME`` as a subprocess, nothing else given."""

    name: str
    tmp: Path
    process: subprocess.Popen[str] | None = None
    logs: list[Path] = field(default_factory=list)

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asynckubelet", *args, "--instance", self.name],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=_env(),
        )

    @property
    def allocation(self) -> instance.Allocation:
        made = instance.read_record(instance.state_dir(self.name) / instance.RECORD)
        assert made is not None, f"no record of instance {self.name}"
        return made

    def start(self, *flags: str) -> None:
        log = self.tmp / f"serve-{self.name}.log"
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "asynckubelet", "serve", "--instance", self.name, *flags],
                env=_env(),
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                break
            with contextlib.suppress(OSError, AssertionError):
                if fetch(f"http://{self.allocation.listen}/healthz") == "ok":
                    return
            time.sleep(0.2)
        raise AssertionError(f"serve --instance {self.name} did not answer: {log.read_text()}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=30)
        self.process = None

    def until_gone(self, pod: str) -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.cli("get", "pod", pod).returncode != 0:
                return
            time.sleep(0.5)
        raise AssertionError(f"pod {pod} of instance {self.name} still there")

    def pod_ip(self, pod: str) -> str:
        shown = self.cli("get", "pod", pod, "-o", "json")
        assert shown.returncode == 0, shown.stderr
        return str(json.loads(shown.stdout)["status"]["podIP"])

    def kubectl_pods(self) -> list[tuple[str, str]]:
        """The pods the machine's kubectl lists through this instance's kubeconfig: name
        and pod IP of each."""
        printed = self.cli("kubeconfig")
        assert printed.returncode == 0, printed.stderr
        path = printed.stdout.strip()
        assert path == str(instance.state_dir(self.name) / "kubeconfig")
        config = yaml.safe_load(Path(path).read_text())
        context = f"asynckubelet-{self.name}"
        assert config["current-context"] == context
        assert [c["name"] for c in config["clusters"]] == [context]
        server = config["clusters"][0]["cluster"]["server"]
        assert server == f"https://127.0.0.1:{self.allocation.api_port}"
        listed = subprocess.run(
            [KUBECTL, "--kubeconfig", path, "get", "pods", "-o", "json"],
            capture_output=True,
            text=True,
            timeout=60,
            env={k: v for k, v in _env().items() if k != "KUBECONFIG"},
        )
        assert listed.returncode == 0, listed.stderr
        items = json.loads(listed.stdout)["items"]
        return [(p["metadata"]["name"], p["status"].get("podIP", "")) for p in items]


def _env() -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("ASYNCKUBELET_")},
        "PYTHONPATH": str(REPO),
        "ASYNCKUBELET_PAUSE_IMAGE": PAUSE_IMAGE,
    }


@pytest.fixture
def two(
    docker_engine: Engine, test_images: dict[str, str], tmp_path: Path
) -> Iterator[tuple[Instance, Instance]]:
    suffix = secrets.token_hex(3)
    a, b = Instance(f"a{suffix}", tmp_path), Instance(f"b{suffix}", tmp_path)
    try:
        yield a, b
    finally:
        for one in (a, b):
            one.stop()

        async def clean() -> None:
            async with DockerClient(url=docker_engine.url) as client:
                for one in (a, b):
                    await remove_owned(client, instance.node_name(one.name))

        anyio.run(clean)
        for one in (a, b):
            remove_instance(one.name)


def _serve_a_pod(node: Instance, tmp_path: Path) -> str:
    manifest = tmp_path / f"{node.name}.yaml"
    manifest.write_text(server_pod("web").replace("BUSYBOX", BUSYBOX_IMAGE))
    applied = node.cli("apply", "-f", str(manifest), "--wait", "--timeout", "90")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    return node.pod_ip("web")


def test_two_instances_run_side_by_side_and_reset_of_one_leaves_the_other(
    two: tuple[Instance, Instance], tmp_path: Path
) -> None:
    a, b = two
    a.start()
    b.start()
    ip_a, ip_b = _serve_a_pod(a, tmp_path), _serve_a_pod(b, tmp_path)

    pods_a, services_a = map(
        ipaddress.ip_network, (a.allocation.pod_cidr, a.allocation.service_cluster_ip_range)
    )
    pods_b = ipaddress.ip_network(b.allocation.pod_cidr)
    assert ipaddress.ip_address(ip_a) in pods_a
    assert ipaddress.ip_address(ip_b) in pods_b
    assert not pods_a.overlaps(pods_b)
    assert not services_a.overlaps(ipaddress.ip_network(b.allocation.service_cluster_ip_range))
    bridges = {one.name: Path("/sys/class/net", instance.bridge_name(one.name)) for one in two}
    assert all(path.exists() for path in bridges.values())
    assert fetch(f"http://{ip_a}:8080/").strip() == "hi-from-web"
    assert fetch(f"http://{ip_b}:8080/").strip() == "hi-from-web"
    assert a.allocation.api_port != b.allocation.api_port
    assert a.kubectl_pods() == [("web", ip_a)]
    assert b.kubectl_pods() == [("web", ip_b)]

    doctor = subprocess.run(
        [sys.executable, "-m", "asynckubelet", "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env=_env(),
    )
    for one in two:
        assert (
            f"instance {one.name}: running, state dir {instance.state_dir(one.name)}, "
            f"bridge {instance.bridge_name(one.name)}, pod CIDR {one.allocation.pod_cidr}"
        ) in doctor.stdout
        assert f"API {one.allocation.api_listen}" in doctor.stdout

    deleted = a.cli("delete", "pod", "web")
    assert deleted.returncode == 0, deleted.stderr
    a.until_gone("web")
    a.stop()
    reset = a.cli("reset")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    assert f"removed bridge {instance.bridge_name(a.name)}" in reset.stdout

    assert not bridges[a.name].exists()
    assert bridges[b.name].exists()
    assert fetch(f"http://{ip_b}:8080/").strip() == "hi-from-web"
    assert b.pod_ip("web") == ip_b


NODE_PORT_SERVICE = """\
apiVersion: v1
kind: Service
metadata: {name: NAME}
spec:
  type: NodePort
  selector: {app: web}
  ports: [PORTS]
"""


def _apply_service(
    node: Instance, tmp_path: Path, name: str, ports: str
) -> subprocess.CompletedProcess[str]:
    manifest = tmp_path / f"{node.name}-{name}.yaml"
    manifest.write_text(NODE_PORT_SERVICE.replace("NAME", name).replace("PORTS", ports))
    return node.cli("apply", "-f", str(manifest))


def _until_published(node: Instance, port: int) -> None:
    """Until the node's record of its published ports holds ``port`` (its next sync)."""
    record = instance.state_dir(node.name) / neighbours.RECORD
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if port in [p["port"] for p in json.loads(record.read_text())["ports"]]:
                return
        time.sleep(0.2)
    raise AssertionError(f"instance {node.name} does not publish {port}: {record}")


def test_a_node_port_one_instance_publishes_the_other_refuses_and_avoids_until_it_stops(
    two: tuple[Instance, Instance], tmp_path: Path
) -> None:
    a, b = two
    port = 30000 + secrets.randbelow(2700)
    a.start()
    b.start("--service-node-port-range", f"{port}-{port + 1}")
    applied = _apply_service(a, tmp_path, "web", f"{{port: 80, nodePort: {port}}}")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    _until_published(a, port)

    refused = _apply_service(b, tmp_path, "web", f"{{port: 80, nodePort: {port}}}")
    assert refused.returncode != 0
    assert (
        f"spec.ports[0].nodePort: Invalid value: {port}: provided port is already allocated "
        f"by a Service of node {instance.node_name(a.name)}"
    ) in refused.stderr
    chosen = _apply_service(b, tmp_path, "auto", "{port: 80}")
    assert chosen.returncode == 0, chosen.stdout + chosen.stderr
    shown = b.cli("get", "service", "auto", "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["spec"]["ports"][0]["nodePort"] == port + 1

    a.stop()
    reset = a.cli("reset")
    assert reset.returncode == 0, reset.stdout + reset.stderr
    chains = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True)
    assert instance.bridge_name(a.name) not in chains.stdout
    taken = _apply_service(b, tmp_path, "web", f"{{port: 80, nodePort: {port}}}")
    assert taken.returncode == 0, taken.stdout + taken.stderr
    _until_published(b, port)


@pytest.mark.parametrize(
    "name", ["../x", "..", "a/../../etc", "x" * 33, "a\nb", "web\n", "akl0;id", "Web", "-rf"]
)
def test_a_hostile_instance_name_is_refused_before_anything_is_made(
    name: str, tmp_path: Path
) -> None:
    """Nothing is made where the name would lead, and the instances root holds only
    instances (another session's may come and go meanwhile)."""
    root = instance.instances_root()
    target = Path(os.path.normpath(root / name.replace("\0", "")))
    existed = target.exists()
    for command in (["serve"], ["run", str(tmp_path / "none.yaml")], ["reset"], ["get", "pods"]):
        refused = subprocess.run(
            [sys.executable, "-m", "asynckubelet", *command],
            capture_output=True,
            text=True,
            timeout=60,
            env={**_env(), "ASYNCKUBELET_INSTANCE": name},
        )
        assert refused.returncode == 2, refused.stderr
        assert "error: --instance " in refused.stderr
        assert "must be" in refused.stderr
    assert target.exists() == existed
    if root.exists():
        assert all(instance.check_name(entry) for entry in os.listdir(root) if entry != ".lock")


@pytest.mark.parametrize("flag", ["--listen", "--api-listen"])
def test_a_first_start_on_a_taken_port_fails_and_makes_no_network(
    docker_engine: Engine, tmp_path: Path, flag: str
) -> None:
    """A new instance whose port is held exits 1 naming the address, and no bridge,
    firewall chain or pod address of its network exists afterwards."""
    node = Instance(f"p{secrets.token_hex(3)}", tmp_path)
    bridge = Path("/sys/class/net", instance.bridge_name(node.name))
    try:
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            listen = f"127.0.0.1:{taken.getsockname()[1]}"
            refused = node.cli("serve", flag, listen)
        assert refused.returncode == 1, refused.stderr
        assert refused.stderr.splitlines()[-1].startswith(f"error: cannot listen on {listen}: ")
        assert not bridge.exists()
        chains = subprocess.run(["iptables-save"], capture_output=True, text=True, check=True)
        assert bridge.name not in chains.stdout
    finally:
        node.cli("reset")
        remove_instance(node.name)
