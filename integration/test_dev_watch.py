"""``--watch`` with watch rules on a real engine: a source synced into the running
container without a restart (and served), ``sync+restart`` restarting the same container,
a rule leading out of its build context refused naming it, and ``run --watch`` handing a
changed manifest to its node, syncing a source into its pod, and leaving nothing behind
on Ctrl-C."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest

from asynckubelet.docker import ContainerConfig, DockerClient
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, Engine
from integration.run_helpers import node_containers, run_command, run_env, run_pod
from integration.serve_helpers import Daemon, apply_watch, next_line, serve_daemon

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.usefixtures("built_images_removed")


@pytest.fixture
def node(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> Iterator[Daemon]:
    yield from serve_daemon(tmp_path, docker_engine, node_name)


def _exec(engine: Engine, container_id: str, *cmd: str) -> str:
    async def go() -> str:
        async with DockerClient(url=engine.url) as client:
            return (await client.exec_run(container_id, list(cmd), timeout=30)).output

    return anyio.run(go)


def _started_at(engine: Engine, container_id: str) -> str:
    async def go() -> str:
        async with DockerClient(url=engine.url) as client:
            return str((await client.inspect_container(container_id))["State"]["StartedAt"])

    return anyio.run(go)


def _restart_counts(node: Daemon) -> list[int]:
    listed = node.cli("get", "pods", "-o", "json")
    assert listed.returncode == 0, listed.stderr
    return [
        s["restartCount"]
        for pod in json.loads(listed.stdout)["items"]
        if not pod["metadata"].get("deletionTimestamp")
        for s in pod["status"].get("containerStatuses") or []
    ]


def _end(process: subprocess.Popen[str], seen: list[str]) -> None:
    process.send_signal(signal.SIGINT)
    rest, _ = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(seen) + rest


def test_a_sync_rule_copies_the_source_without_a_restart_and_it_is_served(
    node: Daemon, tmp_path: Path, docker_engine: Engine
) -> None:
    shutil.copytree(REPO / "examples" / "dev", tmp_path / "dev")
    page = tmp_path / "dev" / "web" / "www" / "index.html"
    process = apply_watch(node, tmp_path / "dev" / "web.yaml")
    seen: list[str] = []
    try:
        next_line(process, "deployment.apps/web created", seen)
        next_line(process, "watching for changes", seen)
        (before,) = node.containers()
        page.write_text(page.read_text().replace("version 1", "version 2"))
        assert next_line(process, "changed:", seen) == (
            "web/www/index.html changed: web: synced to 1 container\n"
        )
        (swap := tmp_path / "dev" / "web" / "www" / "index.html.swp").write_text("x")
        assert next_line(process, "changed:", seen) == (
            "web/www/index.html.swp changed: no rule syncs it\n"
        )
        assert list(node.containers()) == [before]
        assert "version 2" in _exec(docker_engine, before, "cat", "/www/index.html")
        served = _exec(docker_engine, before, "wget", "-qO-", "http://127.0.0.1:8080/")
        assert "<h1>Hello from web, version 2</h1>" in served
        assert "No such file" in _exec(docker_engine, before, "ls", "/www/index.html.swp")
        assert _restart_counts(node) == [0]
        assert swap.exists()
    finally:
        _end(process, seen)


SYNC_RESTART = """
apiVersion: apps/v1
kind: Deployment
metadata: {{name: conf}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: conf}}}}
  template:
    metadata:
      labels: {{app: conf}}
      annotations:
        watch.asynckubelet.dev/app: |
          - action: sync+restart
            path: conf
            target: /etc/app
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: app
        image: {image}
        command: [sh, -c, "cat /etc/app/setting; trap 'exit 0' TERM; while sleep 0.2; do :; done"]
"""


def _decoy(engine: Engine, image: str, *, node_name: str) -> str:
    """A running container of ``image`` labelled as the container ``app`` of a pod of the
    node ``node_name`` (another node on the same engine)."""
    labels = {
        naming.LABEL_NODE: node_name,
        naming.LABEL_TYPE: naming.TYPE_CONTAINER,
        naming.LABEL_POD_NAME: "conf",
        naming.LABEL_POD_NAMESPACE: "default",
        naming.LABEL_POD_UID: f"decoy-{node_name}",
        naming.LABEL_CONTAINER_NAME: "app",
    }
    command = ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    config: ContainerConfig = {"Image": image, "Cmd": command, "Labels": labels}

    async def go() -> str:
        async with DockerClient(url=engine.url) as client:
            cid = await client.create_container(config, name=f"{node_name}-decoy")
            await client.start_container(cid)
            return cid

    return anyio.run(go)


def _remove(engine: Engine, container_id: str) -> None:
    async def go() -> None:
        async with DockerClient(url=engine.url) as client:
            await client.remove_container(container_id, force=True)

    anyio.run(go)


def test_sync_restart_copies_then_the_node_restarts_the_same_container(
    node: Daemon, tmp_path: Path, docker_engine: Engine
) -> None:
    """The node restarts the container in place (none of its syncs sees it stopped, so no
    replacement is made); a container of another node on the same engine, of the same image
    and container name, is left alone."""
    name = f"{node.node_name}-conf"
    context = tmp_path / "app" / name
    (context / "conf").mkdir(parents=True)
    (context / "Dockerfile").write_text(f"FROM {BUSYBOX_IMAGE}\nCOPY conf /etc/app\n")
    (context / "conf" / "setting").write_text("one\n")
    manifest = tmp_path / "app" / "conf.yaml"
    image = f"localhost/{name}:dev"
    manifest.write_text(SYNC_RESTART.format(image=image))
    process = apply_watch(node, manifest)
    seen: list[str] = []
    decoy = ""
    try:
        next_line(process, "deployment.apps/conf created", seen)
        next_line(process, "watching for changes", seen)
        decoy = _decoy(docker_engine, image, node_name=f"{node.node_name}-other")
        (before,) = node.containers()
        started = _started_at(docker_engine, before)
        decoy_started = _started_at(docker_engine, decoy)
        for word in ("two", "three"):
            (context / "conf" / "setting").write_text(f"{word}\n")
            assert next_line(process, "changed:", seen) == (
                f"{name}/conf/setting changed: app: synced to and restarted 1 container\n"
            )
            assert _exec(docker_engine, before, "cat", "/etc/app/setting") == f"{word}\n"
            assert list(node.containers()) == [before]
        assert _started_at(docker_engine, before) != started
        assert _restart_counts(node) == [0]
        listed = json.loads(node.cli("get", "pods", "-o", "json").stdout)["items"]
        (pod,) = [p["metadata"]["name"] for p in listed]
        logs = node.cli("logs", pod)
        assert logs.returncode == 0, logs.stderr
        assert logs.stdout.splitlines()[-1] == "three"
        assert _exec(docker_engine, decoy, "cat", "/etc/app/setting") == "one\n"
        assert _started_at(docker_engine, decoy) == decoy_started
    finally:
        _end(process, seen)
        if decoy:
            _remove(docker_engine, decoy)


POD = """
apiVersion: v1
kind: Pod
metadata:
  name: watched
  annotations: {annotations}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {image}
    command: [sh, -c, "echo $WORD; trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    env: [{{name: WORD, value: {word}}}]
"""


def test_a_rule_leading_out_of_its_context_is_refused_naming_it(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    name = f"{node_name}-esc"
    (tmp_path / name).mkdir()
    (tmp_path / name / "Dockerfile").write_text(f"FROM {BUSYBOX_IMAGE}\n")
    (tmp_path / name / "secrets").symlink_to("/etc")
    for path, message in [
        ("../..", "path '../..' must not hold '..'"),
        ("secrets", "path 'secrets' leads outside the build context"),
    ]:
        rule = f"- {{action: sync, path: {path}, target: /x}}"
        annotations = json.dumps({"watch.asynckubelet.dev/app": rule})
        manifest = tmp_path / "pod.yaml"
        manifest.write_text(POD.format(annotations=annotations, image=f"{name}:dev", word="a"))
        done = run_pod(manifest, "--build", "--watch", node=node_name)
        assert done.returncode == 1
        assert f"error: annotation watch.asynckubelet.dev/app rule 1: {message}" in done.stderr
        assert "Step" not in done.stderr
        assert node_containers(docker_engine, node_name) == []


def test_run_watch_applies_a_changed_manifest_and_ctrl_c_leaves_nothing(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD.format(annotations="{}", image=BUSYBOX_IMAGE, word="first"))
    process = subprocess.Popen(
        run_command("pod.yaml", "--watch", node=node_name),
        cwd=tmp_path,
        env=run_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # As a shell's background job: SIGINT ignored until the watch takes it.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    seen: list[str] = []
    try:
        next_line(process, "watching for changes", seen)
        if "watched/app | first\n" not in seen:
            next_line(process, "watched/app | first", seen)
        manifest.write_text(textwrap.dedent(manifest.read_text()).replace("first", "second"))
        assert next_line(process, "changed:", seen) == "pod.yaml changed: applying\n"
        next_line(process, "watched/app | second", seen)
        manifest.write_text("kind: Pod\nspec: [\n")
        next_line(process, "error:", seen)
        next_line(process, "watching for changes", seen)
        assert process.poll() is None
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(seen) + rest
    assert node_containers(docker_engine, node_name) == []


def _run_build_watch(tmp_path: Path, node_name: str) -> subprocess.Popen[str]:
    """``run pod.yaml --build --watch`` in ``tmp_path``, its output merged and read."""
    return subprocess.Popen(
        run_command("pod.yaml", "--build", "--watch", node=node_name),
        cwd=tmp_path,
        env=run_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _running_apps(engine: Engine, node_name: str) -> list[str]:
    """The IDs of the node's running containers named ``app``."""
    return [
        c["Id"]
        for c in node_containers(engine, node_name)
        if c.get("State") == "running" and "_app_" in c["Names"][0]
    ]


def test_run_watch_syncs_a_source_into_its_running_pod(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    name = f"{node_name}-runsync"
    (tmp_path / name / "site").mkdir(parents=True)
    (tmp_path / name / "Dockerfile").write_text(f"FROM {BUSYBOX_IMAGE}\nCOPY site /site\n")
    (tmp_path / name / "site" / "page").write_text("one\n")
    rule = "- {action: sync, path: site, target: /site}"
    (tmp_path / "pod.yaml").write_text(
        POD.format(
            annotations=json.dumps({"watch.asynckubelet.dev/app": rule}),
            image=f"{name}:dev",
            word="started",
        )
    )
    process = _run_build_watch(tmp_path, node_name)
    seen: list[str] = []
    try:
        next_line(process, "watching for changes", seen)
        if "watched/app | started\n" not in seen:
            next_line(process, "watched/app | started", seen)
        (before,) = _running_apps(docker_engine, node_name)
        (tmp_path / name / "site" / "page").write_text("two\n")
        assert next_line(process, "changed:", seen) == (
            f"{name}/site/page changed: app: synced to 1 container\n"
        )
        assert _exec(docker_engine, before, "cat", "/site/page") == "two\n"
        assert "watched/app | started\n" in seen
        assert seen.count("watched/app | started\n") == 1
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(seen) + rest
    assert node_containers(docker_engine, node_name) == []


RUN_RESTART = """
apiVersion: v1
kind: Pod
metadata:
  name: conf
  annotations:
    watch.asynckubelet.dev/app: "- {{action: sync+restart, path: site, target: /site}}"
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: {image}
    command: [sh, -c, "cat /site/page; trap 'exit 0' TERM; while true; do sleep 0.2; done"]
"""


def test_run_watch_sync_restart_restarts_the_same_container_and_shows_its_new_output(
    tmp_path: Path, docker_engine: Engine, test_images: dict[str, str], node_name: str
) -> None:
    name = f"{node_name}-runrestart"
    (tmp_path / name / "site").mkdir(parents=True)
    (tmp_path / name / "Dockerfile").write_text(f"FROM {BUSYBOX_IMAGE}\nCOPY site /site\n")
    (tmp_path / name / "site" / "page").write_text("one\n")
    (tmp_path / "pod.yaml").write_text(RUN_RESTART.format(image=f"{name}:dev"))
    process = _run_build_watch(tmp_path, node_name)
    seen: list[str] = []
    try:
        next_line(process, "watching for changes", seen)
        if "conf/app | one\n" not in seen:
            next_line(process, "conf/app | one", seen)
        (before,) = _running_apps(docker_engine, node_name)
        (tmp_path / name / "site" / "page").write_text("two\n")
        assert next_line(process, "changed:", seen) == (
            f"{name}/site/page changed: app: synced to and restarted 1 container\n"
        )
        next_line(process, "conf/app | two", seen)
        assert _running_apps(docker_engine, node_name) == [before]
        assert seen.count("conf/app | one\n") == 1
    finally:
        process.send_signal(signal.SIGINT)
        rest, _ = process.communicate(timeout=60)
    assert process.returncode == 130, "".join(seen) + rest
    assert node_containers(docker_engine, node_name) == []
