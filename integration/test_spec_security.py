"""Security contexts on real Docker, read back from inside the container."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import anyio
import builders
import pytest

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.status import generate
from asynckubelet.runtime import naming
from integration.harness import BUSYBOX_IMAGE
from integration.spec_helpers import Events, make_manager, run_manifest

pytestmark = pytest.mark.anyio


def _pod(name: str, container_extra: str, pod_extra: str = "") -> str:
    body = f"{pod_extra}\n{builders.APP_YAML}{container_extra}"
    return builders.pod_yaml(name, body, restartPolicy="Never")


async def _lines(
    docker: DockerClient, node: str, root: Path, text: str, *, seccomp_default: bool = True
) -> list[str]:
    run = await run_manifest(
        docker,
        text,
        node=node,
        root=root,
        pod_security="privileged",
        seccomp_default=seccomp_default,
    )
    return run.lines


async def test_run_as_user_group_supplemental_groups_and_fs_group_set_the_process_ids(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "ids",
        """
    command: [sh, -c, "id; stat -c %g /data"]
    volumeMounts: [{name: data, mountPath: /data}]
""",
        """
  securityContext: {runAsUser: 1000, runAsGroup: 3000, supplementalGroups: [4000], fsGroup: 2000}
  volumes: [{name: data, emptyDir: {}}]
""",
    )
    lines = await _lines(docker, node_name, tmp_path, text)
    assert lines[0].startswith("app: uid=1000 gid=3000 groups=")
    assert "2000" in lines[0]
    assert "4000" in lines[0]
    assert lines[1] == "app: 2000"


async def test_run_as_non_root_refuses_an_image_that_runs_as_root(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "nonroot", "    command: [sh, -c, 'true']\n    securityContext: {runAsNonRoot: true}"
    )
    pod = load_manifests_text(text.replace("BUSYBOX", BUSYBOX_IMAGE), node_name=node_name).pods[0]
    events = Events()
    async with make_manager(docker, node_name, tmp_path, events) as rm:
        result = await rm.sync_pod(pod)
        runtime = await rm.get_status_of(pod)
    assert pod.metadata is not None
    message = (
        "container has runAsNonRoot and image will run as root "
        f'(pod: "nonroot_default({pod.metadata.uid})", container: app)'
    )
    status = generate(pod, runtime, waiting_reasons=result.waiting_reasons(), now=datetime.now(UTC))
    assert status.containerStatuses is not None
    state = status.containerStatuses[0].state
    assert state is not None
    assert state.waiting is not None
    assert (state.waiting.reason, state.waiting.message) == ("CreateContainerConfigError", message)
    assert ("Warning", "Failed", f"Error: {message}") in events.seen


async def test_run_as_non_root_with_a_non_root_user_runs(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "nonrootok",
        "    command: [id, -u]\n    securityContext: {runAsNonRoot: true, runAsUser: 1234}",
    )
    assert await _lines(docker, node_name, tmp_path, text) == ["app: 1234"]


async def test_capabilities_drop_all_and_add_one(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "caps",
        """
    command: [sh, -c, "grep CapEff /proc/self/status"]
    securityContext: {capabilities: {drop: [ALL], add: [NET_BIND_SERVICE]}}
""",
    )
    assert await _lines(docker, node_name, tmp_path, text) == ["app: CapEff:\t0000000000000400"]


async def test_a_read_only_root_filesystem_refuses_writes(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "rofs",
        """
    command: [sh, -c, "touch /x 2>/dev/null || echo refused"]
    securityContext: {readOnlyRootFilesystem: true}
""",
    )
    assert await _lines(docker, node_name, tmp_path, text) == ["app: refused"]


async def test_no_privilege_escalation_sets_no_new_privs(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "nnp",
        """
    command: [sh, -c, "grep NoNewPrivs /proc/self/status"]
    securityContext: {allowPrivilegeEscalation: false}
""",
    )
    assert await _lines(docker, node_name, tmp_path, text) == ["app: NoNewPrivs:\t1"]


@pytest.mark.parametrize(
    ("context", "default", "mode"),
    [
        ("{}", True, "2"),
        ("{}", False, "0"),
        ("{seccompProfile: {type: Unconfined}}", True, "0"),
        ("{seccompProfile: {type: RuntimeDefault}}", False, "2"),
    ],
)
async def test_a_container_without_a_profile_is_filtered_unless_the_default_is_off(
    docker: DockerClient, node_name: str, tmp_path: Path, context: str, default: bool, mode: str
) -> None:
    text = _pod(
        "seccomp",
        f"""
    command: [sh, -c, "grep '^Seccomp:' /proc/self/status"]
    securityContext: {context}
""",
    )
    lines = await _lines(docker, node_name, tmp_path, text, seccomp_default=default)
    assert lines == [f"app: Seccomp:\t{mode}"]


@pytest.mark.parametrize(("default", "outcome"), [(True, "refused"), (False, "made")])
async def test_a_pod_that_set_nothing_cannot_make_a_user_namespace_unless_the_default_is_off(
    docker: DockerClient, node_name: str, tmp_path: Path, default: bool, outcome: str
) -> None:
    text = _pod(
        "unshare",
        '    command: [sh, -c, "unshare -Ur true 2>/dev/null && echo made || echo refused"]',
    )
    lines = await _lines(docker, node_name, tmp_path, text, seccomp_default=default)
    assert lines == [f"app: {outcome}"]


async def test_namespaced_sysctls_are_set_for_the_pod(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "sysctl",
        "    command: [cat, /proc/sys/kernel/shm_rmid_forced]",
        "  securityContext: {sysctls: [{name: kernel.shm_rmid_forced, value: '1'}]}",
    )
    assert await _lines(docker, node_name, tmp_path, text) == ["app: 1"]


async def _every_capability(docker: DockerClient, node: str) -> str:
    """The effective capabilities of a bare container the engine is asked to give all of
    them (``CapAdd: [ALL]``); skips where the machine withholds some from every process, as
    runc then refuses to start such a container."""
    cid = await docker.create_container(
        {
            "Image": BUSYBOX_IMAGE,
            "Cmd": ["grep", "CapEff", "/proc/self/status"],
            "Labels": {naming.LABEL_NODE: node},
            "HostConfig": {"CapAdd": ["ALL"]},
        },
        name=f"{node}-every-capability",
    )
    try:
        try:
            await docker.start_container(cid)
        except errors.DockerError as e:
            if "operation not permitted" not in str(e):
                raise
            pytest.skip(f"this machine cannot give a container every capability: {e}")
        assert await docker.wait_container(cid) == 0
        (line,) = [line.text async for line in docker.logs(cid)]
        return line
    finally:
        await docker.remove_container(cid, force=True)


async def test_a_privileged_container_has_every_capability(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    every = await _every_capability(docker, node_name)
    text = _pod(
        "privileged",
        "    command: [grep, CapEff, /proc/self/status]\n    securityContext: {privileged: true}",
    )
    assert await _lines(docker, node_name, tmp_path, text) == [f"app: {every}"]


async def test_an_unconfined_apparmor_profile_is_accepted_by_the_engine(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "apparmor",
        "    command: [echo, ran]\n    securityContext: {appArmorProfile: {type: Unconfined}}",
    )
    assert await _lines(docker, node_name, tmp_path, text) == ["app: ran"]


@pytest.mark.parametrize(
    ("proc_mount", "host_users", "masked"),
    [("Default", "true", "2"), ("Unmasked", "false", "0")],
)
async def test_proc_mount_unmasked_drops_the_engines_masked_and_read_only_proc_paths(
    docker: DockerClient,
    node_name: str,
    tmp_path: Path,
    proc_mount: str,
    host_users: str,
    masked: str,
) -> None:
    text = _pod(
        "procmount",
        f"""
    command: [sh, -c, "grep -cE ' /proc/(keys|sys) ' /proc/self/mountinfo || true"]
    securityContext: {{procMount: {proc_mount}}}
""",
        f"  hostUsers: {host_users}",
    )
    assert await _lines(docker, node_name, tmp_path, text) == [f"app: {masked}"]


async def test_selinux_options_become_label_options_container_over_pod(
    docker: DockerClient, node_name: str, tmp_path: Path
) -> None:
    text = _pod(
        "selinux",
        """
    command: [sleep, "60"]
    securityContext: {seLinuxOptions: {type: container_t, level: "s0:c7,c8"}}
""",
        "  securityContext: {seLinuxOptions: {user: system_u, role: system_r, type: spc_t}}",
    )
    pod = load_manifests_text(
        text.replace("BUSYBOX", BUSYBOX_IMAGE), node_name=node_name, pod_security="privileged"
    ).pods[0]
    async with make_manager(docker, node_name, tmp_path) as rm:
        await rm.sync_pod(pod)
        await rm.sync_pod(pod, await rm.get_status_of(pod))
        runtime = await rm.get_status_of(pod)
        (app,) = runtime.containers
        app_info = await docker.inspect_container(app.id)
        sandbox_info = await docker.inspect_container(runtime.sandboxes[0].id)
        await rm.kill_pod(pod, grace_period=0)
    assert app.state.value == "running"
    assert app_info["HostConfig"]["SecurityOpt"] == [
        "label=type:container_t",
        "label=level:s0:c7,c8",
    ]
    assert sandbox_info["HostConfig"]["SecurityOpt"] == [
        "no-new-privileges",
        "label=user:system_u",
        "label=role:system_r",
        "label=type:spc_t",
    ]


@pytest.mark.parametrize("default", [True, False])
async def test_the_sandbox_is_filtered_by_the_engines_profile_whatever_the_default(
    docker: DockerClient, node_name: str, tmp_path: Path, default: bool
) -> None:
    text = _pod("sandbox", '    command: [sleep, "60"]')
    pod = load_manifests_text(text.replace("BUSYBOX", BUSYBOX_IMAGE), node_name=node_name).pods[0]
    async with make_manager(docker, node_name, tmp_path, seccomp_default=default) as rm:
        await rm.sync_pod(pod)
        runtime = await rm.get_status_of(pod)
        sandbox = await docker.inspect_container(runtime.sandboxes[0].id)
        status = await anyio.Path(f"/proc/{sandbox['State']['Pid']}/status").read_text()
        await rm.kill_pod(pod, grace_period=0)
    assert sandbox["HostConfig"]["SecurityOpt"] == ["no-new-privileges"]
    assert "Seccomp:\t2" in status.splitlines()
