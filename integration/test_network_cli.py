"""``asynckubelet run --network``: the backend choice seen from the command line."""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

from asynckubelet.cli.commands.reset import DELETE_HINT
from asynckubelet.network.bridge import BridgeConfig, BridgePlugin
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine

REPO = Path(__file__).resolve().parent.parent

POD = """
apiVersion: v1
kind: Pod
metadata: {name: addr}
spec:
  restartPolicy: Never
  containers:
    - name: show
      image: BUSYBOX
      command: ["sh", "-c", "ip -4 -o addr show eth0 | awk '{print $4}'; ip route | head -1"]
"""


def _run(tmp_path: Path, node: str, *extra: str) -> subprocess.CompletedProcess[str]:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(textwrap.dedent(POD).replace("BUSYBOX", BUSYBOX_IMAGE))
    return subprocess.run(
        [
            *(sys.executable, "-m", "asynckubelet", "run", str(manifest)),
            *("--node-name", node, "--pause-image", PAUSE_IMAGE, "--no-color", *extra),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.skipif(os.geteuid() != 0, reason="the bridge backend needs root")
def test_run_with_the_bridge_network_gives_the_pod_an_address_of_the_pod_cidr(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    bridge = f"akc{node_name[-10:]}"
    cidr = f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24"
    prefix = cidr.rsplit(".", 1)[0]
    try:
        proc = _run(
            tmp_path, node_name, "--network", "bridge", "--bridge", bridge, "--pod-cidr", cidr
        )
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.splitlines()
        assert lines[0].startswith(f"addr/show | {prefix}.")
        assert lines[0].endswith("/24")
        assert lines[1] == f"addr/show | default via {prefix}.1 dev eth0 "
    finally:
        plugin = BridgePlugin(BridgeConfig(bridge=bridge, pod_cidr=cidr))
        anyio.run(plugin.remove_node_network)


@pytest.mark.skipif(os.geteuid() != 0, reason="the bridge backend needs root")
def test_a_bridge_that_cannot_start_ends_the_run_with_its_error_and_leaves_nothing(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    """The node network starts while the pod's sandbox is made: its failure still ends the
    run with the bridge's own message, and the sandbox made meanwhile is removed."""
    from integration.run_helpers import node_containers

    route = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True, check=True)
    host_net = next(line.split()[0] for line in route.stdout.splitlines() if "/" in line.split()[0])
    bridge = f"akc{node_name[-10:]}"
    proc = _run(
        tmp_path, node_name, "--network", "bridge", "--bridge", bridge, "--pod-cidr", host_net
    )
    assert proc.returncode == 1
    assert f"error: pod CIDR {host_net} overlaps the host route {host_net}" in proc.stderr
    assert node_containers(docker_engine, node_name) == []
    assert not Path("/sys/class/net", bridge).exists()


def test_run_with_the_loopback_network_gives_the_pod_no_interface_but_lo(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    proc = _run(tmp_path, node_name, "--network", "loopback")
    assert "addr/show | ip: can't find device 'eth0'" in proc.stderr.splitlines()
    assert proc.stdout == ""


def test_an_unknown_network_backend_is_refused_naming_the_choices(
    tmp_path: Path, docker_engine: Engine, node_name: str
) -> None:
    proc = _run(tmp_path, node_name, "--network", "weave")
    assert proc.returncode == 1
    assert (
        "--network must be one of auto, bridge, cni, docker, loopback, not 'weave'" in proc.stderr
    )


def test_run_with_a_cluster_dns_gives_cluster_first_pods_the_cluster_resolver(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = tmp_path / "dns.yaml"
    manifest.write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: Pod
            metadata: {name: dns}
            spec:
              restartPolicy: Never
              containers:
                - name: show
                  image: BUSYBOX
                  command: ["cat", "/etc/resolv.conf"]
            """
        ).replace("BUSYBOX", BUSYBOX_IMAGE)
    )
    proc = subprocess.run(
        [
            *(sys.executable, "-m", "asynckubelet", "run", str(manifest), "--no-color"),
            *("--node-name", node_name, "--pause-image", PAUSE_IMAGE, "--network", "loopback"),
            *("--cluster-dns", "10.96.0.10", "--cluster-domain", "example.internal"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0] == "dns/show | nameserver 10.96.0.10"
    assert lines[1].startswith(
        "dns/show | search default.svc.example.internal svc.example.internal example.internal"
    )
    assert lines[-1] == "dns/show | options ndots:5"


LONG_POD = """
apiVersion: v1
kind: Pod
metadata: {name: holder}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  containers:
    - name: wait
      image: BUSYBOX
      command: ["sh", "-c", "trap 'exit 0' TERM; sleep 300 & wait"]
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the bridge backend needs root")
def test_reset_refuses_while_a_pod_holds_an_address_then_removes_the_node_network(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    from integration.network_helpers import NodeNetwork

    network = NodeNetwork.of(node_name)
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("ASYNCKUBELET_")},
        **network.env,
        "PYTHONPATH": str(REPO),
        "DOCKER_HOST": docker_engine.url,
        "ASYNCKUBELET_STATE_DIR": str(tmp_path / "state"),
        "ASYNCKUBELET_PAUSE_IMAGE": PAUSE_IMAGE,
        "ASYNCKUBELET_NODE_NAME": node_name,
    }

    def reset() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "asynckubelet", "reset", "--network", "bridge"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    def firewall_lines() -> list[str]:
        save = shutil.which("iptables-save")
        assert save is not None
        saved = subprocess.run([save], capture_output=True, text=True, check=True)
        return [line for line in saved.stdout.splitlines() if network.bridge in line]

    manifest = tmp_path / "holder.yaml"
    manifest.write_text(textwrap.dedent(LONG_POD).replace("BUSYBOX", BUSYBOX_IMAGE))
    run = subprocess.Popen(
        [sys.executable, "-m", "asynckubelet", "run", str(manifest), "--network", "bridge"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        assert run.stderr is not None
        for line in run.stderr:
            if line.strip() == "pod/holder: Running":
                break
        else:
            pytest.fail(f"the run ended before its pod ran (exit {run.wait()})")
        refused = reset()
        assert refused.returncode == 1
        assert refused.stderr.strip() == (
            f"error: bridge {network.bridge} is in use by pods default/holder: delete them first"
            + DELETE_HINT
        )
        assert Path("/sys/class/net", network.bridge).exists()
        assert any(line.startswith("-A INPUT -j AKL-LNET-") for line in firewall_lines())

        run.terminate()
        run.communicate(timeout=60)
        assert run.returncode == 128 + 15
        done = reset()
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"removed bridge {network.bridge}, its firewall rules")
        assert not Path("/sys/class/net", network.bridge).exists()
        assert firewall_lines() == []
        again = reset()
        assert again.returncode == 0, again.stderr
        assert again.stdout.strip() == (
            f"no pod network of bridge {network.bridge} on this host: nothing to remove"
        )
    finally:
        if run.poll() is None:
            run.kill()
        run.communicate()
        network.remove()


def test_reset_removes_the_docker_backends_network_a_run_left(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    from asynckubelet import errors
    from asynckubelet.docker import DockerClient
    from asynckubelet.network.dockernet import network_name

    name = network_name(node_name)

    async def network_exists() -> bool:
        async with DockerClient(url=docker_engine.url) as docker:
            try:
                await docker.inspect_network(name)
            except errors.NotFound:
                return False
            return True

    def reset() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                *(sys.executable, "-m", "asynckubelet", "reset"),
                *("--network", "docker", "--node-name", node_name),
                *("--state-dir", str(tmp_path / "state")),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "PYTHONPATH": str(REPO), "DOCKER_HOST": docker_engine.url},
        )

    try:
        proc = _run(tmp_path, node_name, "--network", "docker")
        assert proc.returncode == 0, proc.stderr
        assert anyio.run(network_exists)
        done = reset()
        assert (done.returncode, done.stdout.strip()) == (0, f"removed Docker network {name}")
        assert not anyio.run(network_exists)
        again = reset()
        assert again.stdout.strip() == f"no Docker network {name} on the engine: nothing to remove"
    finally:

        async def remove() -> None:
            async with DockerClient(url=docker_engine.url) as docker:
                await docker.remove_network(name)

        anyio.run(remove)
