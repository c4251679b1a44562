"""Pod volumes on real Docker: what the containers see, the events, and what is left after."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import anyio
import builders
import pytest

from asynckubelet.docker import DockerClient
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.runner import pod_context
from asynckubelet.node.status import generate
from asynckubelet.node.volumes import LABEL_CLAIM, claim_volume_name, default_root
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE, PAUSE_IMAGE
from integration.spec_helpers import Events, make_manager, run_manifest

pytestmark = pytest.mark.anyio


def _pod(name: str, body: str) -> str:
    return builders.pod_yaml(
        name, body, labels={"app": "demo", "tier": "web"}, restartPolicy="Never"
    )


async def test_an_empty_dir_is_shared_by_init_and_app_containers_and_removed_with_the_pod(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "shared",
        """
  volumes: [{name: work, emptyDir: {}}]
  initContainers:
  - name: write
    image: BUSYBOX
    command: [sh, -c, "echo from-init > /work/note"]
    volumeMounts: [{name: work, mountPath: /work}]
  containers:
  - name: read
    image: BUSYBOX
    command: [sh, -c, "cat /data/note"]
    volumeMounts: [{name: work, mountPath: /data}]
""",
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert run.outcome.phase == "Succeeded"
    assert "read: from-init" in run.lines
    assert os.listdir(tmp_path) == []


async def test_a_memory_empty_dir_is_a_tmpfs_of_the_size_limit(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "memory",
        """
  volumes: [{name: scratch, emptyDir: {medium: Memory, sizeLimit: 8Mi}}]
  containers:
  - name: show
    image: BUSYBOX
    command: [sh, -c, "grep ' /scratch ' /proc/mounts"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
""",
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    line = next(x for x in run.lines if "/scratch" in x)
    assert " tmpfs " in line
    assert "size=8192k" in line
    assert os.listdir(tmp_path) == []


async def test_a_host_path_directory_or_create_is_created_and_shared_with_the_node(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    host = tmp_path / "host" / "made"
    text = _pod(
        "hostpath",
        f"""
  volumes: [{{name: h, hostPath: {{path: {host}, type: DirectoryOrCreate}}}}]
  containers:
  - name: write
    image: BUSYBOX
    command: [sh, -c, "echo hi > /h/out"]
    volumeMounts: [{{name: h, mountPath: /h}}]
""",
    )
    run = await run_manifest(
        docker, text, node=node_name, root=tmp_path / "pods", pod_security="privileged"
    )
    assert run.outcome.phase == "Succeeded"
    assert (host / "out").read_text() == "hi\n"


async def test_a_host_path_of_the_wrong_type_fails_the_mount_and_keeps_the_container_creating(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    (tmp_path / "afile").write_text("x")
    text = _pod(
        "wrongtype",
        f"""
  volumes: [{{name: h, hostPath: {{path: {tmp_path / "afile"}, type: Directory}}}}]
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "true"]
    volumeMounts: [{{name: h, mountPath: /h}}]
""",
    ).replace("BUSYBOX", BUSYBOX_IMAGE)
    pod = load_manifests_text(text, node_name=node_name, pod_security="privileged").pods[0]
    events = Events()
    async with make_manager(docker, node_name, tmp_path / "pods", events) as rm:
        await rm.sync_pod(pod)
        runtime = await rm.get_status_of(pod)
    status = generate(pod, runtime, now=datetime.now(UTC))
    assert (
        "Warning",
        "FailedMount",
        f'MountVolume.SetUp failed for volume "h" : hostPath type check failed: '
        f"{tmp_path / 'afile'} is not a directory",
    ) in events.seen
    assert runtime.containers == ()
    assert runtime.sandboxes == ()
    assert status.containerStatuses is not None
    state = status.containerStatuses[0].state
    assert state is not None
    assert state.waiting is not None
    assert state.waiting.reason == "ContainerCreating"


CONFIG = """
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {color: blue, size: large}
---
apiVersion: v1
kind: Secret
metadata: {name: creds}
stringData: {password: s3cret}
"""


async def test_config_map_items_and_modes_become_files_behind_an_atomic_data_link(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = (
        _pod(
            "cm",
            """
  volumes:
  - name: cfg
    configMap:
      name: settings
      defaultMode: 0400
      items: [{key: color, path: ui/colour}, {key: size, path: size, mode: 0600}]
  containers:
  - name: show
    image: BUSYBOX
    command:
    - sh
    - -c
    - >-
      cat /cfg/ui/colour; echo; stat -L -c '%n %a' /cfg/ui/colour /cfg/size;
      readlink /cfg/..data | cut -c1-3; readlink /cfg/size
    volumeMounts: [{name: cfg, mountPath: /cfg}]
""",
        )
        + CONFIG
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert run.outcome.phase == "Succeeded", run.lines
    assert run.lines == [
        "show: blue",
        "show: /cfg/ui/colour 400",
        "show: /cfg/size 600",
        "show: ..2",
        "show: ..data/size",
    ]


async def test_a_secret_volume_is_on_tmpfs_and_read_only(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = (
        _pod(
            "sec",
            """
  volumes: [{name: s, secret: {secretName: creds}}]
  containers:
  - name: show
    image: BUSYBOX
    command:
    - sh
    - -c
    - >-
      cat /s/password; echo; grep -c ' /s tmpfs ro' /proc/mounts;
      touch /s/x 2>/dev/null || echo read-only
    volumeMounts: [{name: s, mountPath: /s}]
""",
        )
        + CONFIG
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert run.lines == ["show: s3cret", "show: 1", "show: read-only"]


async def test_a_missing_config_map_fails_the_mount_with_the_kubelets_message(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "nocm",
        """
  volumes: [{name: cfg, configMap: {name: absent}}]
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "true"]
    volumeMounts: [{name: cfg, mountPath: /cfg}]
""",
    ).replace("BUSYBOX", BUSYBOX_IMAGE)
    pod = load_manifests_text(text, node_name=node_name).pods[0]
    events = Events()
    async with make_manager(docker, node_name, tmp_path, events) as rm:
        await rm.sync_pod(pod)
        runtime = await rm.get_status_of(pod)
    assert events.seen == [
        (
            "Warning",
            "FailedMount",
            'MountVolume.SetUp failed for volume "cfg" : configmap "absent" not found',
        )
    ]
    assert runtime.containers == ()


async def test_an_optional_missing_secret_gives_an_empty_volume(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "optsec",
        """
  volumes: [{name: s, secret: {secretName: absent, optional: true}}]
  containers:
  - name: show
    image: BUSYBOX
    command: [sh, -c, "ls /s | wc -l"]
    volumeMounts: [{name: s, mountPath: /s}]
""",
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert run.outcome.phase == "Succeeded"
    assert run.lines == ["show: 0"]


async def test_downward_api_and_projected_volumes_hold_labels_names_and_limits(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = (
        _pod(
            "downward",
            """
  volumes:
  - name: info
    downwardAPI:
      items:
      - {path: labels, fieldRef: {fieldPath: metadata.labels}}
      - path: mem
        resourceFieldRef: {containerName: show, resource: limits.memory, divisor: 1Mi}
  - name: all
    projected:
      sources:
      - configMap: {name: settings, items: [{key: color, path: color}]}
      - secret: {name: creds}
      - downwardAPI: {items: [{path: name, fieldRef: {fieldPath: metadata.name}}]}
  containers:
  - name: show
    image: BUSYBOX
    resources: {limits: {memory: 64Mi}}
    command:
    - sh
    - -c
    - >-
      cat /info/labels; echo; cat /info/mem; echo;
      cat /all/color /all/password /all/name; echo
    volumeMounts: [{name: info, mountPath: /info}, {name: all, mountPath: /all}]
""",
        )
        + CONFIG
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert run.lines == [
        'show: app="demo"',
        'show: tier="web"',
        "show: 64",
        "show: blues3cretdownward",
    ]


async def test_sub_path_sub_path_expr_and_read_only_mounts(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "subpaths",
        """
  volumes: [{name: work, emptyDir: {}}]
  initContainers:
  - name: write
    image: BUSYBOX
    env: [{name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    command: [sh, -c, "echo one > /mine/f"]
    volumeMounts: [{name: work, mountPath: /mine, subPathExpr: "logs/$(POD)"}]
  containers:
  - name: read
    image: BUSYBOX
    command: [sh, -c, "cat /all/logs/subpaths/f; touch /all/x || echo read-only"]
    volumeMounts: [{name: work, mountPath: /all, readOnly: true}]
""",
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert "read: one" in run.lines
    assert "read: read-only" in run.lines


async def test_a_persistent_volume_claim_is_a_named_docker_volume_kept_after_the_pod(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    claim = f"data-{node_name}"
    body = f"""
  volumes: [{{name: d, persistentVolumeClaim: {{claimName: {claim}}}}}]
  containers:
  - name: app
    image: BUSYBOX
    command: [sh, -c, "cat /d/count 2>/dev/null || echo none; echo kept > /d/count"]
    volumeMounts: [{{name: d, mountPath: /d}}]
"""
    volume = claim_volume_name(namespace="default", claim=claim)
    try:
        first = await run_manifest(docker, _pod("pvc", body), node=node_name, root=tmp_path)
        second = await run_manifest(docker, _pod("pvc", body), node=node_name, root=tmp_path)
        info = await docker.inspect_volume(volume)
    finally:
        await docker.remove_volume(volume)
    assert first.lines == ["app: none"]
    assert second.lines == ["app: kept"]
    assert info["Labels"][LABEL_CLAIM] == claim
    assert info["Labels"][naming.LABEL_NODE] == node_name


def test_the_pod_context_of_a_manifest_carries_its_config_maps_for_volumes(
    node_name: str,
) -> None:
    manifests = load_manifests_text(_pod("ctx", "  containers: [{name: a, image: x}]") + CONFIG)
    ctx = pod_context(manifests, manifests.pods[0], node_name=node_name)
    assert ctx.configmaps["settings"]["color"] == "blue"
    assert ctx.secrets["creds"]["password"] == b"s3cret"


async def test_a_changed_config_map_replaces_the_mounted_files_in_a_running_pod(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = (
        _pod(
            "refresh",
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
    ).replace("BUSYBOX", BUSYBOX_IMAGE)
    manifests = load_manifests_text(text, node_name=node_name)
    pod = manifests.pods[0]
    context = pod_context(manifests, pod, node_name=node_name)
    changed = replace(context, configmaps={"settings": {"color": "red"}})
    async with make_manager(docker, node_name, tmp_path) as rm:
        await rm.sync_pod(pod, context=context)
        runtime = await rm.get_status_of(pod)
        app = runtime.containers[0].id
        before = await docker.exec_run(app, ["cat", "/cfg/color"])
        await rm.sync_pod(pod, runtime, context=changed)
        after = await docker.exec_run(app, ["sh", "-c", "cat /cfg/color; ls /cfg"])
        await rm.kill_pod(pod, grace_period=0)
        await rm.remove_pod(uid=runtime.uid)
    assert before.output == "blue"
    assert after.output == "redcolor\n"


def test_the_run_command_mounts_volumes_and_leaves_no_pod_directory(
    docker_engine: object, test_images: dict[str, str], node_name: str, tmp_path: Path
) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(
        _pod(
            "clivol",
            """
  volumes: [{name: cfg, configMap: {name: settings}}, {name: s, secret: {secretName: creds}}]
  containers:
  - name: show
    image: BUSYBOX
    command: [sh, -c, "cat /cfg/color; echo; cat /s/password; echo"]
    volumeMounts: [{name: cfg, mountPath: /cfg}, {name: s, mountPath: /s}]
""",
        ).replace("BUSYBOX", BUSYBOX_IMAGE)
        + CONFIG
    )
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "asynckubelet",
            "run",
            str(manifest),
            "--node-name",
            node_name,
            "--pause-image",
            PAUSE_IMAGE,
            "--no-color",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == ["clivol/show | blue", "clivol/show | s3cret"]
    pods = default_root(node_name)
    assert not pods.exists() or list(pods.iterdir()) == []
    shutil.rmtree(pods.parent, ignore_errors=True)


async def test_host_to_container_propagation_shows_a_mount_made_later_on_the_node(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    host = tmp_path / "shared"
    host.mkdir()
    await anyio.run_process(["mount", "--bind", str(host), str(host)])
    await anyio.run_process(["mount", "--make-rshared", str(host)])
    (host / "later").mkdir()
    text = _pod(
        "propagation",
        f"""
  volumes: [{{name: h, hostPath: {{path: {host}}}}}]
  containers:
  - name: show
    image: BUSYBOX
    command: [sh, -c, "while [ ! -f /h/later/marker ]; do sleep 0.1; done; cat /h/later/marker"]
    volumeMounts: [{{name: h, mountPath: /h, mountPropagation: HostToContainer}}]
""",
    )
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "marker").write_text("propagated\n")
    try:
        async with anyio.create_task_group() as tg:

            async def mount_later() -> None:
                await anyio.sleep(1)
                await anyio.run_process(["mount", "--bind", str(inner), str(host / "later")])

            tg.start_soon(mount_later)
            run = await run_manifest(
                docker, text, node=node_name, root=tmp_path / "pods", pod_security="privileged"
            )
    finally:
        with anyio.CancelScope(shield=True):
            await anyio.run_process(["umount", "-R", str(host)], check=False)
    assert run.lines == ["show: propagated"]


async def test_a_disk_empty_dir_over_its_size_limit_gets_the_pod_evicted(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "evicted",
        """
  volumes: [{name: scratch, emptyDir: {sizeLimit: 1Mi}}]
  containers:
  - name: fill
    image: BUSYBOX
    command: [sh, -c, "dd if=/dev/zero of=/scratch/big bs=1024 count=2048; sleep 3600"]
    volumeMounts: [{name: scratch, mountPath: /scratch}]
""",
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path, timeout=90)
    status = run.outcome.status
    message = 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". '
    assert status is not None
    assert (status.phase, status.reason, status.message) == ("Failed", "Evicted", message)
    assert ("Warning", "Evicted", message) in run.events


async def test_a_config_map_key_mounted_by_sub_path_is_a_single_file(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = (
        _pod(
            "cmfile",
            """
  volumes: [{name: cfg, configMap: {name: settings}}]
  containers:
  - name: show
    image: BUSYBOX
    command: [sh, -c, "cat /etc/app/colour.conf; echo; ls /etc/app"]
    volumeMounts: [{name: cfg, mountPath: /etc/app/colour.conf, subPath: color}]
""",
        )
        + CONFIG
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert run.lines == ["show: blue", "show: colour.conf"]


async def test_config_map_binary_data_is_written_as_raw_bytes_in_plain_and_projected_volumes(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "binary",
        """
  volumes:
  - {name: cfg, configMap: {name: blobs}}
  - {name: proj, projected: {sources: [{configMap: {name: blobs, items: [{key: raw, path: r}]}}]}}
  containers:
  - name: show
    image: BUSYBOX
    command: [sh, -c, "od -An -tx1 /cfg/raw; cat /cfg/text; echo; od -An -tx1 /proj/r"]
    volumeMounts: [{name: cfg, mountPath: /cfg}, {name: proj, mountPath: /proj}]
""",
    ) + (
        "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: blobs}\n"
        "data: {text: plain}\nbinaryData: {raw: /wD+AYA=}\n"
    )
    run = await run_manifest(docker, text, node=node_name, root=tmp_path)
    assert run.outcome.phase == "Succeeded", run.lines
    assert [line.split(":", 1)[1].strip() for line in run.lines] == [
        "ff 00 fe 01 80",
        "plain",
        "ff 00 fe 01 80",
    ]
