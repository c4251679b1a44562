"""The JSONPath printer against real kubectl's on the same object: ``kubectl label
--local -f FILE -o jsonpath=...`` prints through kubectl's own printer without a server.
Skipped where the kubectl of the test extra is not installed."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from asynckubelet.cli.commands.get_args import Refused
from asynckubelet.cli.commands.get_printers import printer

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
pytestmark = pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")

POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "web",
        "namespace": "default",
        "labels": {"app.kubernetes.io/name": "web"},
        "annotations": {"note": "<a&b> é\tx", "empty": ""},
    },
    "spec": {
        "containers": [
            {
                "name": "a",
                "image": "nginx",
                "ports": [{"containerPort": 80, "protocol": "TCP"}, {"containerPort": 443}],
                "resources": {"limits": {"cpu": "500m"}},
            },
            {"name": "b", "image": "busybox", "args": ["sleep", "1"], "tty": True},
        ],
        "terminationGracePeriodSeconds": 30,
        "nodeSelector": {"disk": "ssd"},
    },
    "status": {
        "phase": "Running",
        "conditions": [
            {"type": "Ready", "status": "True"},
            {"type": "PodScheduled", "status": "False"},
        ],
        "containerStatuses": [],
    },
}

TEMPLATES = [
    "{.metadata.name}",
    "{.metadata.labels.app\\.kubernetes\\.io/name}",
    "{.spec.containers[*].name}",
    "{.spec.containers[0]}",
    "{.spec.containers[-1].args}",
    "{.spec.containers[0].ports[*].containerPort}",
    "{.spec.containers[0:2:1].image}",
    "{.spec.containers[]}",
    "{..image}",
    "{.spec.nodeSelector.*}",
    '{.status.conditions[?(@.type=="Ready")].status}',
    '{.status.conditions[?(@.status!="True")].type}',
    "{.spec.containers[?(@.tty)].name}",
    "{.spec.containers[?(@.tty==true)].name}",
    "{.spec.containers[0].ports[?(@.containerPort>100)].containerPort}",
    "{.spec.containers[0].ports[?(@.containerPort<=80)].protocol}",
    '{range .spec.containers[*]}{.name}{"\\t"}{.image}{"\\n"}{end}',
    "{range .status.conditions[*]}{.type}={.status};{end}",
    "{range .status.containerStatuses[*]}{.name}{end}done",
    "{.metadata.annotations}",
    "{.metadata.annotations.note}",
    "{.metadata.annotations.empty}|",
    "{.spec.terminationGracePeriodSeconds}",
    "{.missing}|{.spec.missing.deeper}",
    "{$.kind} {@.apiVersion}",
    "{.spec.containers[*]['name', 'image']}",
    "{.spec.containers[0].resources}",
    "{.spec.containers[1].tty} {true} {1.5}",
    "text only",
    "{'single'} {\"x\\ty\"}",
    "{.status.containerStatuses}",
]
FAILING = [
    "{.spec.containers[5].name}",
    "{.metadata.name[0]}",
    "{.spec.containers[?(@.name==1)]}",
    "{end}",
    "{nope}",
]
UNPARSABLE = ["{.metadata.name", "{[1}", "{*}", "{....x}"]


def _kubectl(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "pod.json"
    path.write_text(json.dumps(POD))
    return subprocess.run(
        [str(KUBECTL), "label", "--local", "-f", str(path), "x=y", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(tmp_path / "none")},
    )


def _labelled() -> dict[str, Any]:
    pod = copy.deepcopy(POD)
    pod["metadata"]["labels"]["x"] = "y"
    return pod


@pytest.mark.parametrize("template", TEMPLATES)
def test_jsonpath_prints_what_real_kubectl_prints(tmp_path: Path, template: str) -> None:
    real = _kubectl(tmp_path, "-o", f"jsonpath={template}")
    assert real.returncode == 0, real.stderr
    ours = printer(f"jsonpath={template}")
    assert ours is not None
    assert ours(_labelled()) == real.stdout


@pytest.mark.parametrize("template", TEMPLATES[:8])
def test_jsonpath_as_json_prints_what_real_kubectl_prints(tmp_path: Path, template: str) -> None:
    real = _kubectl(tmp_path, "-o", f"jsonpath-as-json={template}")
    ours = printer(f"jsonpath-as-json={template}")
    assert ours is not None
    assert ours(_labelled()) == real.stdout


@pytest.mark.parametrize("template", [*FAILING, "{.missing}"])
def test_failing_templates_fail_as_real_kubectl_fails(tmp_path: Path, template: str) -> None:
    real = _kubectl(tmp_path, "--allow-missing-template-keys=false", "-o", f"jsonpath={template}")
    assert real.returncode != 0
    ours = printer(f"jsonpath={template}", allow_missing=False)
    assert ours is not None
    with pytest.raises(Refused) as refused:
        ours(_labelled())
    assert f"error: {refused.value}" == real.stderr


@pytest.mark.parametrize("template", UNPARSABLE)
def test_malformed_templates_are_refused_as_real_kubectl_refuses(
    tmp_path: Path, template: str
) -> None:
    real = _kubectl(tmp_path, "-o", f"jsonpath={template}")
    assert real.returncode != 0
    with pytest.raises(Refused) as refused:
        printer(f"jsonpath={template}")
    assert f"error: {refused.value}\n" == real.stderr


NUMBERS: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "Thing",
    "metadata": {"name": "t"},
    "spec": {
        "f": [123456.5, 1234567.5, 1e20, 0.0001, 0.00001234, 5e-324, 3.0e6, -0.5],
        "i": [9007199254740993, -7, 0],
        "s": "é<&>\u2028",
    },
}


@pytest.mark.parametrize(
    "template", ["{.spec.f[*]}", "{.spec.f}", "{.spec.i[*]} {.spec.i}", "{.spec.s} {.spec}"]
)
def test_numbers_and_strings_print_as_real_kubectls_go_prints_them(
    tmp_path: Path, template: str
) -> None:
    path = tmp_path / "thing.json"
    path.write_text(json.dumps(NUMBERS))
    real = subprocess.run(
        [str(KUBECTL), "label", "--local", "-f", str(path), "x=y", "-o", f"jsonpath={template}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "KUBECONFIG": str(tmp_path / "none")},
    )
    assert real.returncode == 0, real.stderr
    thing = copy.deepcopy(NUMBERS)
    thing["metadata"]["labels"] = {"x": "y"}
    ours = printer(f"jsonpath={template}")
    assert ours is not None
    assert ours(thing) == real.stdout
