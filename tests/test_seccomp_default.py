"""``--seccomp-default``: containers that set no seccomp profile get the engine's default
profile unless the node is told otherwise, from every entry point (``run``, ``serve``, the
cluster runner, the library) to the container the engine is asked for; the sandbox always
gets the engine's profile; changing the default restarts no container."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from daemon_helpers import IMAGES, cluster_serve
from lightkube.models.core_v1 import Pod
from typer.testing import CliRunner

from asynckubelet.cli import provision
from asynckubelet.cli.app import app
from asynckubelet.cli.options import NodeOptions
from asynckubelet.manifests import load_manifests_text
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.runtime import naming
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: plain}
spec:
  containers:
  - {name: app, image: busybox:1.35, command: [sleep, "3600"]}
"""


def plain_pod() -> Pod:
    return load_manifests_text(POD, node_name="n1").pods[0]


def security_options(docker: FakeDocker) -> dict[str, list[str]]:
    """Container type -> the ``SecurityOpt`` the engine was asked for."""
    return {
        c.labels[naming.LABEL_TYPE]: list(
            (c.config.get("HostConfig") or {}).get("SecurityOpt") or []
        )
        for c in docker.containers.values()
    }


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("config", "app_options"),
    [
        (RuntimeConfig(node_name="n1"), []),
        (RuntimeConfig(node_name="n1", seccomp_default=True), []),
        (RuntimeConfig(node_name="n1", seccomp_default=False), ["seccomp=unconfined"]),
    ],
)
async def test_a_pod_that_sets_no_profile_gets_the_engines_unless_the_default_is_off(
    config: RuntimeConfig, app_options: list[str]
) -> None:
    docker = FakeDocker(images=IMAGES)
    async with RuntimeManager(config, docker=docker) as rm:
        result = await rm.sync_pod(plain_pod())
    assert result.ok, result.errors
    assert security_options(docker) == {
        naming.TYPE_SANDBOX: ["no-new-privileges"],
        naming.TYPE_CONTAINER: app_options,
    }


@pytest.mark.anyio
@pytest.mark.parametrize("first", [False, True])
async def test_changing_the_default_restarts_no_container(first: bool) -> None:
    docker = FakeDocker(images=IMAGES)
    pod = plain_pod()
    async with RuntimeManager(
        RuntimeConfig(node_name="n1", seccomp_default=first), docker=docker
    ) as rm:
        await rm.sync_pod(pod)
        before = set(docker.containers)
    changed = RuntimeConfig(node_name="n1", seccomp_default=not first)
    async with RuntimeManager(changed, docker=docker) as rm:
        status = await rm.get_status_of(pod)
        result = await rm.sync_pod(pod, status)
        after = await rm.get_status_of(pod)
    assert result.ok, result.errors
    assert set(docker.containers) == before
    assert [c.state.value for c in after.containers] == ["running"]


@pytest.mark.parametrize("default", [True, False])
def test_the_node_hands_its_default_to_its_runtime(default: bool) -> None:
    kubelet = Kubelet(KubeletConfig(node_name="n1", seccomp_default=default), docker=FakeDocker())
    assert kubelet.runtime.config.seccomp_default is default


def test_the_default_is_on_for_the_library_and_the_command_line() -> None:
    assert KubeletConfig().seccomp_default is True
    assert RuntimeConfig().seccomp_default is True
    assert NodeOptions().seccomp_default is True
    assert NodeOptions().runtime_config().seccomp_default is True
    assert NodeOptions(seccomp_default=False).runtime_config().seccomp_default is False


@pytest.mark.parametrize(
    ("args", "env", "expected"),
    [
        ([], {}, True),
        (["--no-seccomp-default"], {}, False),
        ([], {"ASYNCKUBELET_SECCOMP_DEFAULT": "false"}, False),
        (["--seccomp-default"], {"ASYNCKUBELET_SECCOMP_DEFAULT": "false"}, True),
    ],
)
def test_serve_hands_its_seccomp_default_to_the_node(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    args: list[str],
    env: dict[str, str],
    expected: bool,
) -> None:
    from asynckubelet.cli.commands import serve

    handed: list[Any] = []
    monkeypatch.setattr(provision, "ensure_engine", lambda *args, **kwargs: None)
    monkeypatch.setattr(serve, "run_async", lambda fn, config, *args: handed.append(config))
    result = CliRunner().invoke(
        app,
        ["serve", "--listen", "127.0.0.1:0", "--nice", "0", *args],
        env={"ASYNCKUBELET_STATE_DIR": str(tmp_path), **env},
    )
    assert result.exit_code == 0, result.output
    ((config,),) = [handed]
    assert config.seccomp_default is expected


@pytest.mark.parametrize(("args", "expected"), [([], True), (["--no-seccomp-default"], False)])
def test_serve_in_cluster_mode_takes_the_seccomp_default(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, args: list[str], expected: bool
) -> None:
    code, output, kubelet = cluster_serve(monkeypatch, tmp_path, *args)
    assert code == 0, output
    assert kubelet is not None
    assert kubelet.seccomp_default is expected


@pytest.mark.parametrize(
    ("published", "given", "expected"),
    [
        ({"seccomp_default": False}, set(), False),
        ({"seccomp_default": True}, set(), True),
        ({"seccomp_default": False}, {"seccomp_default"}, True),
        ({}, set(), True),
    ],
)
def test_run_beside_a_daemon_takes_its_seccomp_default_unless_given(
    published: dict[str, Any], given: set[str], expected: bool
) -> None:
    from asynckubelet.cli.commands.run import _daemon_defaults

    node = _daemon_defaults(NodeOptions(), {"node_name": "n1", **published}, given=given)
    assert node.seccomp_default is expected
