"""``delete --wait`` reads as kubectl's boolean flag: alone it is ``--wait=true``,
``--wait=false`` and ``--wait false`` turn waiting off, and a value that is not a boolean
is refused in kubectl's words before anything is deleted."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from daemon_helpers import Daemon, invoke, running_daemon

from asynckubelet.cli.options import bare_booleans

CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
"""


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def node(state: Path) -> Iterator[Daemon]:
    with running_daemon(state, node_name="daemon-node", pod_security="privileged") as d:
        yield d


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[bool | None]:
    """The ``wait`` each delete asks the node for."""
    from asynckubelet.api.remote import RemoteNode

    seen: list[bool | None] = []
    real = RemoteNode.delete

    def delete(self: RemoteNode, objects: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("wait"))
        return real(self, objects, **kwargs)

    monkeypatch.setattr(RemoteNode, "delete", delete)
    return seen


@pytest.mark.parametrize(
    ("flags", "waits"),
    [
        ([], True),
        (["--wait"], True),
        (["--wait=true"], True),
        (["--wait=True"], True),
        (["--wait=1"], True),
        (["--wait=false"], False),
        (["--wait=0"], False),
        (["--wait", "false"], False),
        (["--wait", "true"], True),
    ],
)
def test_delete_wait_alone_or_with_a_value_as_kubectl_reads_it(
    tmp_path: Path,
    state: Path,
    node: Daemon,
    asked: list[bool | None],
    flags: list[str],
    waits: bool,
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(CONFIG)
    assert invoke(state, "apply", "-f", str(path))[0] == 0
    code, out, err = invoke(state, "delete", "configmap", "settings", *flags)
    assert (code, out, err) == (0, 'configmap "settings" deleted\n', "")
    assert asked == [waits]


def test_a_bare_wait_before_the_objects_leaves_them_arguments(
    tmp_path: Path, state: Path, node: Daemon, asked: list[bool | None]
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(CONFIG)
    assert invoke(state, "apply", "-f", str(path))[0] == 0
    code, out, err = invoke(state, "delete", "--wait", "configmap", "settings")
    assert (code, out, err) == (0, 'configmap "settings" deleted\n', "")
    assert asked == [True]


@pytest.mark.parametrize("value", ["maybe", "yes", ""])
def test_a_wait_that_is_not_a_boolean_is_refused_and_nothing_is_deleted(
    tmp_path: Path, state: Path, node: Daemon, asked: list[bool | None], value: str
) -> None:
    path = tmp_path / "cm.yaml"
    path.write_text(CONFIG)
    assert invoke(state, "apply", "-f", str(path))[0] == 0
    code, out, err = invoke(state, "delete", "configmap", "settings", f"--wait={value}")
    assert (code, out) == (2, "")
    assert f'invalid argument "{value}" for "--wait" flag: want true or false' in err
    assert asked == []
    assert node.node.objects.get("ConfigMap", "default", "settings") is not None


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--wait"], ["--wait=true"]),
        (["pod", "web", "--wait"], ["pod", "web", "--wait=true"]),
        (["--wait", "pod", "web"], ["--wait=true", "pod", "web"]),
        (["--wait", "false", "pod"], ["--wait", "false", "pod"]),
        (["--wait", "FALSE"], ["--wait", "FALSE"]),
        (["--wait", "t"], ["--wait=true", "t"]),
        (["--wait=false", "--wait"], ["--wait=false", "--wait=true"]),
        (["--now", "pod"], ["--now", "pod"]),
        (["pod", "--", "--wait"], ["pod", "--", "--wait"]),
    ],
)
def test_bare_booleans_gives_a_flag_alone_the_value_true(
    args: list[str], expected: list[str]
) -> None:
    assert bare_booleans(args, {"--wait"}) == expected
