"""The node commands' error paths, and apply through a daemon on a fake engine."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from daemon_helpers import Daemon, running_daemon
from lightkube.models.core_v1 import (
    ContainerState,
    ContainerStateWaiting,
    ContainerStatus,
    Pod,
    PodStatus,
)
from typer.testing import CliRunner

from asynckubelet import errors
from asynckubelet.api import inprocess
from asynckubelet.cli.app import app
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


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Daemon]:
    with running_daemon(tmp_path / "s") as d:
        yield d


def test_apply_hands_the_file_to_the_daemon_which_keeps_the_pod(
    tmp_path: Path, node: Daemon
) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD)
    code, out, _ = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert (code, out) == (0, "pod/web created\n")
    assert [o.name for o in node.node.objects.list("Pod")] == ["web"]


def test_apply_of_the_same_file_again_reports_unchanged(tmp_path: Path, node: Daemon) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD)
    invoke("apply", "-f", str(source), state=tmp_path / "s")
    code, out, _ = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert (code, out) == (0, "pod/web unchanged\n")


def test_apply_of_an_edited_file_reports_configured(tmp_path: Path, node: Daemon) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD)
    invoke("apply", "-f", str(source), state=tmp_path / "s")
    source.write_text(POD.replace("busybox:1.35", "busybox"))
    code, out, _ = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert (code, out) == (0, "pod/web configured\n")


def test_apply_of_an_invalid_manifest_names_the_field_once_and_applies_nothing(
    tmp_path: Path, node: Daemon
) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD.replace("name: app", "name: App_1"))
    code, out, err = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert (code, out) == (1, "")
    assert err.count("spec.containers[0].name") == 1
    assert node.node.objects.list("Pod") == []


def test_apply_without_a_daemon_says_how_to_start_one(tmp_path: Path) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(POD)
    code, out, err = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert (code, out) == (1, "")
    assert "no node daemon for state dir" in err
    assert "start it with `asynckubelet serve`" in " ".join(err.split())
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ("get", "pods", "-o", "table"),
            'unable to match a printer suitable for the output format "table", allowed '
            "formats are: custom-columns,custom-columns-file,json,jsonpath,jsonpath-as-json,"
            "jsonpath-file,name,wide,yaml",
        ),
        (("get", "nodes"), 'doesn\'t have a resource type "nodes"'),
        (("describe", "node", "x"), 'doesn\'t have a resource type "node"'),
        (("logs", "web", "--since", "5 minutes"), "invalid duration"),
        (
            ("delete",),
            "give `delete KIND NAME` (pod, configmap, secret, deployment, job...) or "
            "`delete -f FILE`",
        ),
        (("delete", "ingress", "x"), 'doesn\'t have a resource type "ingress"'),
        (("serve", "--listen", "nowhere"), "--listen must be HOST:PORT"),
        (("serve", "--listen", "0.0.0.0:10255"), "--allow-remote"),
        (("serve", "--log-format", "xml"), "--log-format must be text or json"),
        (("serve", "--log-level", "loud"), "--log-level must be"),
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
        async def node_runtime(**where: object) -> AsyncIterator[OnePodRuntime]:
            yield runtime

        async def node_pods(rm: object, state: object) -> list[Pod]:
            return [load_manifests_text(POD, node_name="n1").pods[0]]

        monkeypatch.setattr(inprocess, "node_runtime", node_runtime)
        monkeypatch.setattr(inprocess, "node_pods", node_pods)

    return install


def test_delete_reports_the_pod_deleted_once_it_is_gone(
    on_docker: Callable[[bool], None], tmp_path: Path
) -> None:
    on_docker(False)
    code, out, err = invoke("delete", "pod", "web", state=tmp_path / "s")
    assert (code, out) == (0, 'pod "web" deleted\n')
    assert err == f"no node daemon for state dir {tmp_path / 's'}: deleting on Docker directly\n"


def test_delete_that_times_out_fails_naming_the_pods_still_there(
    on_docker: Callable[[bool], None], tmp_path: Path
) -> None:
    on_docker(True)
    code, out, err = invoke("delete", "pod", "web", "--timeout", "0.2", state=tmp_path / "s")
    assert (code, out) == (1, "")
    assert err.splitlines()[-1] == (
        "error: timed out after 0.2s waiting for the pods to be gone; still present: default/web"
    )


MISSING = """\
apiVersion: v1
kind: Pod
metadata: {name: img-missing}
spec:
  containers: [{name: a, image: "nosuch.example/none:1"}]
"""


def waiting_in(reason: str) -> Callable[[Pod | None], bool]:
    def check(pod: Pod | None) -> bool:
        statuses = (pod.status.containerStatuses if pod and pod.status else None) or []
        return any(
            c.state and c.state.waiting and c.state.waiting.reason == reason for c in statuses
        )

    return check


def test_logs_of_a_container_waiting_on_its_image_says_why_as_the_pods_status_does(
    tmp_path: Path, node: Daemon
) -> None:
    node.docker.fail("pull_image", errors.ImagePullError("manifest unknown"), times=None)
    source = tmp_path / "missing.yaml"
    source.write_text(MISSING)
    invoke("apply", "-f", str(source), state=tmp_path / "s")
    node.portal.call(
        lambda: node.node.wait("default", "img-missing", waiting_in("ImagePullBackOff"), timeout=10)
    )
    code, _, err = invoke("logs", "img-missing", state=tmp_path / "s")
    assert (code, err) == (
        1,
        'Error from server (BadRequest): container "a" in pod "img-missing" is waiting to '
        "start: trying and failing to pull image\n",
    )


@pytest.mark.parametrize(
    ("reason", "said"),
    [
        ("ErrImagePull", "image can't be pulled"),
        ("ImagePullBackOff", "trying and failing to pull image"),
        ("CreateContainerConfigError", "CreateContainerConfigError"),
    ],
)
def test_logs_without_a_daemon_says_why_the_container_waits_as_the_pods_status_does(
    reason: str, said: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    pod = load_manifests_text(MISSING, node_name="n1").pods[0]
    waiting = ContainerState(waiting=ContainerStateWaiting(reason=reason))
    pod.status = PodStatus(
        containerStatuses=[
            ContainerStatus(
                name="a",
                image="nosuch.example/none:1",
                imageID="",
                ready=False,
                restartCount=0,
                state=waiting,
            )
        ]
    )
    runtime = OnePodRuntime(stubborn=False)

    @contextlib.asynccontextmanager
    async def node_runtime(**where: object) -> AsyncIterator[OnePodRuntime]:
        yield runtime

    async def node_pods(rm: object, state: object) -> list[Pod]:
        return [pod]

    monkeypatch.setattr(inprocess, "node_runtime", node_runtime)
    monkeypatch.setattr(inprocess, "node_pods", node_pods)
    code, _, err = invoke("logs", "img-missing", state=tmp_path / "s")
    assert code == 1
    assert err.splitlines()[-1] == (
        f'Error from server (BadRequest): container "a" in pod "img-missing" is waiting to '
        f"start: {said}"
    )


HOST_PORT = POD.replace(
    'image: "busybox:1.35"', 'image: "busybox:1.35", ports: [{containerPort: 80, hostPort: 8080}]'
)


def test_apply_of_a_pod_pod_security_forbids_is_the_api_servers_forbidden(
    tmp_path: Path, node: Daemon
) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(HOST_PORT)
    code, out, err = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert (code, out) == (1, "")
    assert err == (
        f'Error from server (Forbidden): error when creating "{source}": pods "web" is '
        'forbidden: violates PodSecurity "baseline:latest": hostPort (container "app" uses '
        "hostPort 8080)\n"
    )
    assert node.node.objects.list("Pod") == []


def test_apply_of_a_pod_with_a_schema_error_keeps_kubectls_validation_line(
    tmp_path: Path, node: Daemon
) -> None:
    source = tmp_path / "web.yaml"
    source.write_text(HOST_PORT.replace('image: "busybox:1.35", ', ""))
    code, _, err = invoke("apply", "-f", str(source), state=tmp_path / "s")
    assert code == 1
    assert err.splitlines() == [f"error: {source}[0]: spec.containers[0].image: Required value"]
