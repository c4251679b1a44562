"""A pod admitted under ``baseline`` cannot make the agent (root) touch the host outside
its own roots, on a real engine: not through ``items[].path``, its UID, a subPath through
a link a container planted, nor a swapped ``..data``; and no secret value reaches a log
line, an event, a status file or ``describe`` while pods with Secrets and bad pull
secrets run.

Each attack aims at a directory the test made beside the node's state (``host``), with a
file in it; the test passes when that directory is exactly as it was.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from dataclasses import replace
from pathlib import Path

import anyio
import builders
import pytest
from lightkube.models.core_v1 import KeyToPath, PodStatus

from asynckubelet import KubeletConfig, errors
from asynckubelet.cli.logsetup import add_sink
from asynckubelet.docker import DockerClient
from asynckubelet.kubectl.describe import describe_pod
from asynckubelet.kubectl.times import now_utc
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node import Kubelet
from asynckubelet.node.runner import pod_context
from asynckubelet.runtime import env as env_mod
from asynckubelet.runtime import sync as manager_mod
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE
from integration.spec_helpers import Events, make_manager, run_manifest

pytestmark = pytest.mark.anyio


@pytest.fixture
def host(tmp_path: Path) -> Path:
    """A directory of the host that no pod may touch."""
    path = tmp_path / "host"
    path.mkdir()
    (path / "passwd").write_text("root:x:0:0\n")
    return path


def _snapshot(path: Path) -> dict[str, tuple[str, int]]:
    return {
        str(p.relative_to(path)): (
            p.read_text() if p.is_file() else "<dir>",
            stat.S_IMODE(p.lstat().st_mode),
        )
        for p in sorted(path.rglob("*"))
    }


def _pod(name: str, body: str) -> str:
    return builders.pod_yaml(name, body, terminationGracePeriodSeconds=2)


def _waiting(status: PodStatus, container: str) -> str | None:
    for cs in [*(status.initContainerStatuses or []), *(status.containerStatuses or [])]:
        if cs.name == container and cs.state is not None and cs.state.waiting is not None:
            return cs.state.waiting.reason
    return None


# -- subPath through a planted link ------------------------------------------------------


async def test_a_sub_path_through_a_link_an_init_container_planted_is_refused(
    docker: DockerClient, node_name: str, tmp_path: Path, host: Path
) -> None:
    before = _snapshot(host)
    text = _pod(
        "plant",
        f"""
  restartPolicy: Never
  volumes: [{{name: work, emptyDir: {{}}}}]
  initContainers:
  - name: plant
    image: BUSYBOX
    command: [sh, -c, "ln -s {host} /work/link"]
    volumeMounts: [{{name: work, mountPath: /work}}]
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "echo owned > /target/file"]
    volumeMounts: [{{name: work, mountPath: /target, subPath: link/made}}]
""",
    )
    run = await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path / "state" / "pods",
        until=lambda s: _waiting(s, "app") == "CreateContainerConfigError",
    )
    assert _snapshot(host) == before
    message = 'failed to prepare subPath for volumeMount "work" of container "app"'
    assert ("Warning", "Failed", f"Error: {message}") in run.events


async def test_a_container_that_swaps_its_sub_path_for_a_link_is_not_restarted_into_the_host(
    docker: DockerClient, node_name: str, tmp_path: Path, host: Path
) -> None:
    """The CVE-2017-1002101 pattern: the container replaces the directory its subPath
    names with a link to the host, then exits; its restart must not follow the link."""
    before = _snapshot(host)
    text = _pod(
        "swapper",
        f"""
  restartPolicy: Always
  volumes: [{{name: work, emptyDir: {{}}}}]
  containers:
  - name: app
    image: BUSYBOX
    command:
    - sh
    - -c
    - "echo run >> /data/runs; mv /all/data /all/old; ln -s {host} /all/data; exit 1"
    volumeMounts:
    - {{name: work, mountPath: /data, subPath: data}}
    - {{name: work, mountPath: /all}}
""",
    )
    run = await run_manifest(
        docker,
        text,
        node=node_name,
        root=tmp_path / "state" / "pods",
        timeout=90,
        until=lambda s: _waiting(s, "app") == "CreateContainerConfigError",
    )
    assert "Failed" in run.reasons()
    assert _snapshot(host) == before


# -- the atomic writer -------------------------------------------------------------------

CONFIG = """
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: blue}
"""


async def test_a_swapped_data_link_is_not_followed_when_the_config_map_changes(
    docker: DockerClient, node_name: str, tmp_path: Path, host: Path
) -> None:
    """What a container that could write in the volume would do (the test does it on the
    node): point ``..data`` at a host directory; the next write must neither read nor
    remove it."""
    before = _snapshot(host)
    text = (
        _pod(
            "swap",
            """
  volumes: [{name: cfg, configMap: {name: settings}}]
  containers:
  - name: app
    image: BUSYBOX
    command: [sleep, "3600"]
    volumeMounts: [{name: cfg, mountPath: /cfg}]
""",
        )
        + CONFIG
    )
    manifests = load_manifests_text(text.replace("BUSYBOX", BUSYBOX_IMAGE), node_name=node_name)
    pod = manifests.pods[0]
    context = pod_context(manifests, pod, node_name=node_name)
    root = tmp_path / "state" / "pods"
    async with make_manager(docker, node_name, root) as rm:
        await rm.sync_pod(pod, context=context)
        runtime = await rm.get_status_of(pod)
        volume = root / runtime.uid / "volumes" / "kubernetes.io~configmap" / "cfg"
        (volume / "..data").unlink()
        (volume / "..data").symlink_to(host)
        changed = replace(context, configmaps={"settings": {"color": "red"}})
        await rm.sync_pod(pod, runtime, context=changed)
        seen = await docker.exec_run(runtime.containers[0].id, ["cat", "/cfg/color"])
        await rm.kill_pod(pod, grace_period=0)
        await rm.remove_pod(uid=runtime.uid)
    assert seen.output == "red"
    assert _snapshot(host) == before


async def test_items_paths_out_of_the_volume_and_setuid_modes_reach_nothing_on_the_host(
    docker: DockerClient, node_name: str, tmp_path: Path, host: Path
) -> None:
    """The manifest loader refuses such items; the writer refuses them too, should one
    reach it (a library caller's own Pod object, a gap in validation)."""
    before = _snapshot(host)
    text = (
        _pod(
            "items",
            """
  volumes: [{name: cfg, configMap: {name: settings}}]
  containers:
  - name: app
    image: BUSYBOX
    command: [sleep, "3600"]
    volumeMounts: [{name: cfg, mountPath: /cfg}]
""",
        )
        + CONFIG
    )
    manifests = load_manifests_text(text.replace("BUSYBOX", BUSYBOX_IMAGE), node_name=node_name)
    pod = manifests.pods[0]
    context = pod_context(manifests, pod, node_name=node_name)
    assert pod.spec is not None
    assert pod.spec.volumes is not None
    config_map = pod.spec.volumes[0].configMap
    assert config_map is not None
    escape = "../" * 16 + str(host / "owned").lstrip("/")
    config_map.items = [KeyToPath(key="color", path=escape, mode=0o4755)]
    events = Events()
    root = tmp_path / "state" / "pods"
    async with make_manager(docker, node_name, root, events) as rm:
        await rm.sync_pod(pod, context=context)
        config_map.items = [KeyToPath(key="color", path="tool", mode=0o4755)]
        await rm.sync_pod(pod, context=context)
        runtime = await rm.get_status_of(pod)
        volume = root / runtime.uid / "volumes" / "kubernetes.io~configmap" / "cfg"
        mode = stat.S_IMODE((volume / "tool").stat().st_mode)
        await rm.kill_pod(pod, grace_period=0)
        await rm.remove_pod(uid=runtime.uid)
    assert _snapshot(host) == before
    assert mode == 0o755
    failed = [m for _, reason, m in events.seen if reason == "FailedMount"]
    assert failed
    assert "invalid path: must not contain '..'" in failed[0]


# -- the pod UID -------------------------------------------------------------------------


async def test_a_pod_uid_that_climbs_out_of_the_pods_root_removes_nothing(
    docker: DockerClient, node_name: str, tmp_path: Path, host: Path
) -> None:
    before = _snapshot(host)
    text = _pod(
        "uid",
        """
  restartPolicy: Never
  volumes: [{name: work, emptyDir: {}}]
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "true"]
    volumeMounts: [{name: work, mountPath: /work}]
""",
    )
    manifests = load_manifests_text(text.replace("BUSYBOX", BUSYBOX_IMAGE), node_name=node_name)
    pod = manifests.pods[0]
    assert pod.metadata is not None
    pod.metadata.uid = "../../host"
    root = tmp_path / "state" / "pods"
    async with make_manager(docker, node_name, root) as rm:
        with anyio.fail_after(60):
            await rm.sync_pod(pod)
            await rm.kill_pod(pod, grace_period=0)
            with pytest.raises(errors.UnsafePath):
                await rm.remove_pod(uid="../../host")
    assert _snapshot(host) == before


# -- secrets in logs, events, status and describe -----------------------------------------

SECRET = "Sup3r-s3cret-value-7f3a"
PULL_PASSWORD = "pull-pa55word-c41e"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _secret_manifests() -> str:
    good_pull = json.dumps({"auths": {"127.0.0.1:9": {"auth": _b64(f"puller:{PULL_PASSWORD}")}}})
    bad_pull = json.dumps({"auths": {"127.0.0.1:9": {"auth": PULL_PASSWORD + "!not-base64"}}})
    return f"""
apiVersion: v1
kind: Secret
metadata: {{name: creds}}
stringData: {{password: {SECRET}}}
---
apiVersion: v1
kind: Secret
metadata: {{name: regcred}}
type: kubernetes.io/dockerconfigjson
stringData: {{.dockerconfigjson: '{good_pull}'}}
---
apiVersion: v1
kind: Secret
metadata: {{name: badcred}}
type: kubernetes.io/dockerconfigjson
stringData: {{.dockerconfigjson: '{bad_pull}'}}
---
apiVersion: v1
kind: Pod
metadata: {{name: app}}
spec:
  terminationGracePeriodSeconds: 2
  imagePullSecrets: [{{name: regcred}}, {{name: badcred}}]
  volumes:
  - {{name: s, secret: {{secretName: creds}}}}
  - name: token
    projected:
      sources: [{{serviceAccountToken: {{path: token, audience: vault}}}}]
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    command: [sh, -c, "trap 'exit 0' TERM; while true; do sleep 0.2; done"]
    env: [{{name: PASSWORD, valueFrom: {{secretKeyRef: {{name: creds, key: password}}}}}}]
    envFrom: [{{secretRef: {{name: creds}}}}]
    volumeMounts: [{{name: s, mountPath: /s}}, {{name: token, mountPath: /token}}]
---
apiVersion: v1
kind: Pod
metadata: {{name: pull}}
spec:
  terminationGracePeriodSeconds: 2
  imagePullSecrets: [{{name: regcred}}]
  containers:
  - {{name: app, image: "127.0.0.1:9/akl-absent:1", imagePullPolicy: Always}}
---
apiVersion: v1
kind: Pod
metadata: {{name: broken}}
spec:
  terminationGracePeriodSeconds: 2
  imagePullSecrets: [{{name: badcred}}]
  containers:
  - {{name: app, image: "127.0.0.1:9/akl-absent:1", imagePullPolicy: Always}}
---
apiVersion: v1
kind: Pod
metadata: {{name: crash}}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: app
    image: {BUSYBOX_IMAGE}
    command: [sleep, "3600"]
    env: [{{name: PASSWORD, valueFrom: {{secretKeyRef: {{name: creds, key: password}}}}}}]
"""


async def test_no_secret_value_reaches_logs_events_status_files_or_describe(
    docker: DockerClient,
    node_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = env_mod.make_environment

    def crashing(pod, container, context):  # type: ignore[no-untyped-def]
        environment = real(pod, container, context)
        if pod.metadata.name == "crash":
            raise RuntimeError(f"unexpected failure with {len(environment.env)} variables")
        return environment

    monkeypatch.setattr(manager_mod, "make_environment", crashing)
    lines: list[str] = []
    sink = add_sink(lines.append, level="DEBUG", serialize=True)
    from loguru import logger

    logger.enable("asynckubelet")
    state = tmp_path / "state"
    config = KubeletConfig(node_name=node_name, pause_image=PAUSE_IMAGE, state_dir=state)
    try:
        async with Kubelet(config) as node:
            await node.apply(load_manifests_text(_secret_manifests(), node_name=node_name))
            await node.wait("default", "app", "Ready", timeout=60)

            def pulled_failed(name: str) -> bool:
                pod = node.get("default", name)
                reason = _waiting(pod.status, "app") if pod and pod.status else None
                return reason in ("ErrImagePull", "ImagePullBackOff")

            with anyio.fail_after(60):
                while not (pulled_failed("pull") and pulled_failed("broken")):
                    await node.status.changed()
                while not any(e.reason == "FailedSync" for e in node.recorder.list()):
                    await node.status.changed()
            token_file = next((state / "volumes").rglob("..data/token"))
            token = token_file.read_text()
            pod_dir = state / "volumes" / token_file.relative_to(state / "volumes").parts[0]
            on_the_way = [state, state / "volumes", pod_dir, pod_dir / "volumes"]
            on_the_way.append(pod_dir / "volumes" / "kubernetes.io~projected")
            others = {str(p): stat.S_IMODE(p.stat().st_mode) & 0o007 for p in on_the_way}
            pods = {p.metadata.name: p for p in node.list() if p.metadata}
            described = "".join(
                describe_pod(
                    pods[name],
                    node.recorder.list(uid=pods[name].metadata.uid),  # type: ignore[union-attr]
                    node_name=node_name,
                    now=now_utc(),
                )
                for name in pods
            )
            broken = node.recorder.list(uid=pods["broken"].metadata.uid)  # type: ignore[union-attr]
    finally:
        logger.remove(sink)
    files = "".join(
        p.read_text() for p in [state / "events.jsonl", *sorted((state / "pods").glob("*.json"))]
    )
    logged = "".join(lines)
    assert any("invalid pull secret" in e.message for e in broken)
    assert "Traceback" in logged
    assert "unexpected failure" in logged
    assert "pulling image" in logged
    for value in (SECRET, _b64(SECRET), PULL_PASSWORD, _b64(f"puller:{PULL_PASSWORD}"), token):
        for where, text in (("log", logged), ("files", files), ("describe", described)):
            assert value not in text, f"a secret value is in the {where}"
    assert os.stat(state / "events.jsonl").st_mode & 0o077 == 0
    assert all(os.stat(p).st_mode & 0o077 == 0 for p in (state / "pods").glob("*.json"))
    assert others == dict.fromkeys(others, 0)
