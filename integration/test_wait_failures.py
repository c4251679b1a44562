"""Waits name what holds a workload back and give up on what waiting will not fix, on the
real engine: ``apply --wait`` of Deployments to a real ``serve``, ``run``, and the
library's ``Kubelet.wait``, each with an
image whose registry name does not resolve, a command that exits 1, and an image that is
absent under ``imagePullPolicy: Never``. No registry is reached: the name that does not
resolve is under ``.invalid``, which no resolver answers."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from asynckubelet import KubeletConfig, PodError
from asynckubelet.manifests import Manifests, load_manifests_text
from asynckubelet.node import Kubelet
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE, Engine
from integration.run_helpers import in_terminal, node_containers, run_pod, write_manifest
from integration.serve_helpers import Node, running_node

UNRESOLVABLE = "registry.invalid/akltest-busybx:1.35"

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: NAME}
spec:
  replicas: 2
  selector: {matchLabels: {app: NAME}}
  template:
    metadata: {labels: {app: NAME}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: web
        CONTAINER
"""

CRASHING = """image: BUSYBOX
        command: [sh, -c, "echo starting; echo cannot open /data/shop.db; exit 1"]
        readinessProbe: {exec: {command: ["false"]}, periodSeconds: 1}"""
"""A container that exits 1 at once, never Ready in the moment it runs (a look at its status
then would find the pod Ready, and the wait over)."""


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Node]:
    with running_node(tmp_path, docker_engine, node_name) as n:
        yield n


def deployment(tmp_path: Path, name: str, container: str) -> Path:
    text = DEPLOYMENT.replace("NAME", name).replace("CONTAINER", container)
    return write_manifest(tmp_path, text, name=f"{name}.yaml")


def error_line(stderr: str) -> str:
    errors = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert errors, stderr
    return errors[-1]


def test_apply_wait_of_a_pull_that_cannot_resolve_ends_naming_pod_container_and_reason(
    node: Node, tmp_path: Path
) -> None:
    path = deployment(tmp_path, "shop", f'image: "{UNRESOLVABLE}"')
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "240", timeout=300)
    assert proc.returncode == 1, proc.stderr
    line = error_line(proc.stderr)
    assert re.match(
        r"error: deployment\.apps/shop: pod/shop-[a-z0-9]+-[a-z0-9]+/web: ErrImagePull: ", line
    ), line
    assert "no such host" in line
    assert "timed out" not in proc.stderr


def test_apply_wait_of_a_crashing_command_gives_up_after_max_restarts(
    node: Node, tmp_path: Path
) -> None:
    path = deployment(tmp_path, "crashy", CRASHING)
    proc = node.cli(
        "apply", "-f", str(path), "--wait", "--timeout", "240", "--max-restarts", "1", timeout=300
    )
    assert proc.returncode == 1, proc.stderr
    line = error_line(proc.stderr)
    assert re.match(
        r"error: deployment\.apps/crashy: pod/crashy-[a-z0-9]+-[a-z0-9]+/web: CrashLoopBackOff: ",
        line,
    ), line
    assert "last exit code 1 (Error); gave up after 1 restart" in line
    assert line.endswith("; last log line: cannot open /data/shop.db")


def test_apply_wait_of_an_absent_never_pulled_image_ends_at_once(
    node: Node, tmp_path: Path
) -> None:
    image = "akltest.local/absent-never:1"
    path = deployment(tmp_path, "never", f"image: {image}\n        imagePullPolicy: Never")
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "240", timeout=300)
    assert proc.returncode == 1, proc.stderr
    line = error_line(proc.stderr)
    assert re.match(
        r"error: deployment\.apps/never: pod/never-[a-z0-9]+-[a-z0-9]+/web: ErrImageNeverPull: ",
        line,
    ), line
    assert line.endswith(f'Container image "{image}" is not present with pull policy of Never')


def test_apply_wait_of_a_deployment_whose_pods_the_node_rejects_ends_with_the_reason(
    node: Node, tmp_path: Path
) -> None:
    path = deployment(
        tmp_path, "greedy", "image: BUSYBOX\n        resources: {limits: {example.com/dongle: 1}}"
    )
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "240", timeout=300)
    assert proc.returncode == 1, proc.stderr
    line = error_line(proc.stderr)
    assert re.match(
        r"error: deployment\.apps/greedy: pod/greedy-[a-z0-9]+-[a-z0-9]+: "
        r"OutOfexample\.com/dongle: Pod was rejected: Node didn't have enough resource: "
        r"example\.com/dongle, ",
        line,
    ), line


def test_apply_wait_on_a_pipe_names_the_pod_holding_a_deployment_back_once_per_change(
    node: Node, tmp_path: Path
) -> None:
    path = deployment(tmp_path, "held", f'image: "{UNRESOLVABLE}"')
    proc = node.cli("apply", "-f", str(path), "--wait", "--timeout", "240", timeout=300)
    assert proc.returncode == 1, proc.stderr
    waits = [line for line in proc.stderr.splitlines() if line.startswith("deployment.apps/held: ")]
    assert len(waits) == len(set(waits)), proc.stderr
    assert not any("\r" in line or "\x1b" in line for line in proc.stderr.splitlines())


def test_run_of_a_pull_that_cannot_resolve_ends_at_once_saying_it_once(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        f"""
        apiVersion: v1
        kind: Pod
        metadata: {{name: typo}}
        spec:
          containers:
            - {{name: web, image: "{UNRESOLVABLE}"}}
        """,
    )
    proc = run_pod(manifest, node=node_name)
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("pod/typo/web: ErrImagePull: "), proc.stderr
    assert "no such host" in last
    said = [line for line in proc.stderr.splitlines() if "ErrImagePull" in line]
    assert said == [last], "the failure is printed once"
    assert node_containers(docker_engine, node_name) == []


def test_run_of_a_crashing_command_gives_up_after_max_restarts(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = write_manifest(
        tmp_path,
        """
        apiVersion: v1
        kind: Pod
        metadata: {name: crashy}
        spec:
          terminationGracePeriodSeconds: 1
          containers:
            - name: web
              image: BUSYBOX
              command: [sh, -c, "echo starting; echo cannot open /data/shop.db; exit 1"]
        """,
    )
    proc = run_pod(manifest, "--max-restarts", "1", node=node_name)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == (
        "pod/crashy/web: CrashLoopBackOff: last exit code 1 (Error); gave up after 1 restart; "
        "last log line: cannot open /data/shop.db"
    )
    assert node_containers(docker_engine, node_name) == []


LIBRARY_POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    CONTAINER
"""


def library_pod(name: str, container: str, *, node: str) -> Manifests:
    text = LIBRARY_POD.replace("NAME", name).replace("CONTAINER", container)
    return load_manifests_text(text.replace("BUSYBOX", BUSYBOX_IMAGE), node_name=node)


def library_config(node: str, tmp_path: Path) -> KubeletConfig:
    return KubeletConfig(node_name=node, pause_image=PAUSE_IMAGE, state_dir=tmp_path / "state")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("container", "expected"),
    [
        (
            f'image: "{UNRESOLVABLE}"',
            r"pod/lib/web: ErrImagePull: .*no such host",
        ),
        (
            "image: akltest.local/absent-never:1\n    imagePullPolicy: Never",
            r'pod/lib/web: ErrImageNeverPull: Container image "akltest\.local/absent-never:1" '
            r"is not present with pull policy of Never$",
        ),
        (
            CRASHING.replace("\n        ", "\n    "),
            r"pod/lib/web: CrashLoopBackOff: last exit code 1 \(Error\); gave up after 1 "
            r"restart; last log line: cannot open /data/shop\.db$",
        ),
    ],
    ids=["pull-cannot-resolve", "never-pull-absent", "crash-loop"],
)
async def test_the_librarys_wait_ends_early_on_what_waiting_will_not_fix(
    tmp_path: Path,
    test_images: dict[str, str],
    node_name: str,
    container: str,
    expected: str,
) -> None:
    async with Kubelet(library_config(node_name, tmp_path)) as node:
        await node.apply(library_pod("lib", container, node=node_name))
        with pytest.raises(PodError) as raised:
            await node.wait("default", "lib", "Ready", timeout=240, max_restarts=1)
        assert re.search(expected, str(raised.value)), str(raised.value)


def test_apply_wait_on_a_terminal_names_the_failure_once_and_leaves_no_table(
    node: Node, tmp_path: Path
) -> None:
    path = deployment(
        tmp_path, "termy", "image: akltest.local/absent-never:1\n        imagePullPolicy: Never"
    )
    code, output = in_terminal(
        [sys.executable, "-m", "asynckubelet", "apply", "-f", str(path), "--wait"], node.env
    )
    assert code == 1, output
    assert output.count("ErrImageNeverPull") == 1, output
    assert re.search(
        r"deployment\.apps/termy: pod/termy-[a-z0-9]+-[a-z0-9]+/web: ErrImageNeverPull", output
    )
