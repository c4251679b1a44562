"""The node commands' error paths and file handling, without Docker."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from lightkube.models.core_v1 import Pod
from typer.testing import CliRunner

from asynckubelet.cli import app
from asynckubelet.cli.commands import delete as delete_command
from asynckubelet.manifests import load_manifests_text
from asynckubelet.runtime.types import PodRuntimeStatus

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: app, image: "busybox:1.35"}]
"""


def invoke(*args: str, state: Path) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        app, [*args], env={"ASYNCKUBELET_STATE_DIR": str(state), "ASYNCKUBELET_NODE_NAME": "n1"}
    )
    return result.exit_code, result.stdout, result.stderr


def test_apply_writes_the_file_into_the_manifest_directory(tmp_path: Path) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD)
    code, out, _ = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert (code, out) == (0, "pod/web created\n")
    assert (tmp_path / "s" / "manifests" / "web.yaml").read_text() == POD


def test_apply_of_the_same_file_again_reports_unchanged(tmp_path: Path) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD)
    invoke("apply", "-f", str(source), state=tmp_path / "s")
    code, out, _ = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert (code, out) == (0, "pod/web unchanged\n")


def test_apply_of_an_edited_file_reports_configured(tmp_path: Path) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD)
    invoke("apply", "-f", str(source), state=tmp_path / "s")
    source.write_text(POD.replace("busybox:1.35", "busybox:1.36"))
    code, out, _ = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert (code, out) == (0, "pod/web configured\n")


def test_apply_of_an_invalid_manifest_names_the_field_and_writes_nothing(tmp_path: Path) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD.replace("name: app", "name: App_1"))
    code, _, err = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert code == 1
    assert "spec.containers[0].name" in err
    assert not (tmp_path / "s" / "manifests").exists()


def test_apply_wait_without_a_running_daemon_says_so(tmp_path: Path) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD)
    code, _, err = invoke("apply", "-f", str(source), "--wait", state=tmp_path / "s")
    assert code == 1
    assert "no `asynckubelet serve` runs" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("get", "pods", "-o", "table"), "--output must be wide, yaml or json"),
        (("get", "services"), 'doesn\'t have a resource type "services"'),
        (("describe", "node", "x"), 'doesn\'t have a resource type "node"'),
        (("logs", "web", "--since", "5 minutes"), "invalid duration"),
        (("delete",), "give `delete pod NAME` or `delete -f FILE`"),
        (("serve", "--listen", "nowhere"), "--listen must be HOST:PORT"),
        (("serve", "--listen", "0.0.0.0:10255"), "--allow-remote"),
        (("serve", "--log-format", "xml"), "--log-format must be text or json"),
        (("serve", "--log-level", "loud"), "--log-level must be"),
        (("apply", "-f", "x.yaml", "--pod-security", "lax"), "--pod-security must be one of"),
    ],
)
def test_bad_arguments_are_refused_with_a_clear_message(
    args: tuple[str, ...], message: str, tmp_path: Path
) -> None:
    code, _, err = invoke(*args, state=tmp_path / "s")
    assert code != 0
    assert message in " ".join(err.split())


class OnePodRuntime:
    """Docker holding one pod, ``default/web``; ``stubborn``: removing it leaves it there."""

    def __init__(self, *, stubborn: bool) -> None:
        self.pods = {"u1": ("default", "web")}
        self.stubborn = stubborn

    async def list_pod_uids(self) -> dict[str, tuple[str, str]]:
        return dict(self.pods)

    async def get_pod_status(self, *, uid: str, name: str, namespace: str) -> PodRuntimeStatus:
        return PodRuntimeStatus(uid=uid, name=name, namespace=namespace)

    async def kill_pod(self, *args: object, **kwargs: object) -> None:
        pass

    async def remove_pod(self, *, uid: str) -> None:
        if not self.stubborn:
            self.pods.pop(uid)


@pytest.fixture
def on_docker(monkeypatch: pytest.MonkeyPatch) -> Callable[[bool], None]:
    """Make ``delete`` see ``default/web`` on a fake Docker (no daemon runs)."""

    def install(stubborn: bool) -> None:
        runtime = OnePodRuntime(stubborn=stubborn)

        @contextlib.asynccontextmanager
        async def node_runtime(node: object) -> AsyncIterator[OnePodRuntime]:
            yield runtime

        async def node_pods(rm: object, node: object) -> list[Pod]:
            return [load_manifests_text(POD, node_name="n1").pods[0]]

        monkeypatch.setattr(delete_command, "node_runtime", node_runtime)
        monkeypatch.setattr(delete_command, "node_pods", node_pods)

    return install


def test_delete_reports_the_pod_deleted_once_it_is_gone(
    on_docker: Callable[[bool], None], tmp_path: Path
) -> None:
    on_docker(False)
    code, out, err = invoke("delete", "pod", "web", state=tmp_path / "s")
    assert (code, out, err) == (0, 'pod "web" deleted\n', "")


def test_delete_that_times_out_fails_naming_the_pods_still_there(
    on_docker: Callable[[bool], None], tmp_path: Path
) -> None:
    on_docker(True)
    code, out, err = invoke("delete", "pod", "web", "--timeout", "0.2", state=tmp_path / "s")
    assert (code, out) == (1, "")
    assert err == (
        "error: timed out after 0.2s waiting for the pods to be gone; still present: default/web\n"
    )
