"""``asynckubelet validate``: the verdict on manifests, as text or JSON, and the exit code."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from asynckubelet.cli.app import app

EXAMPLES = Path(__file__).resolve().parent / "data" / "examples"
GOOD = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  nodeSelector: {disk: ssd}
  containers: [{name: app, image: "nginx:1.25"}]
"""
BAD = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: app, image: "nginx:1.25", ports: [{containerPort: 70000}]}
  - {name: app, imagee: nginx}
"""
PRIVILEGED = """\
apiVersion: v1
kind: Pod
metadata: {name: root}
spec:
  containers: [{name: x, image: "busybox:1", securityContext: {privileged: true}}]
"""

runner = CliRunner()


def write(tmp_path: Path, text: str, name: str = "pod.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_an_accepted_manifest_exits_0_and_lists_its_warnings(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    result = runner.invoke(app, ["validate", path, "--node-name", "n"])
    assert result.exit_code == 0, result.output
    assert (
        f"warning: {path}[0]: spec.nodeSelector: Ignored: not honoured on this node"
        in result.output
    )
    assert "accepted: 1 pod, 0 configmaps, 0 secrets, 1 warning" in result.output


def test_a_rejected_manifest_exits_1_and_prints_every_error(tmp_path: Path) -> None:
    path = write(tmp_path, BAD)
    result = runner.invoke(app, ["validate", path])
    assert result.exit_code == 1
    lines = result.output.splitlines()
    assert (
        f"error: {path}[0]: spec.containers[0].ports[0].containerPort: Invalid value: 70000: "
        "must be between 1 and 65535, inclusive" in lines
    )
    assert f'error: {path}[0]: spec.containers[1].name: Duplicate value: "app"' in lines
    assert (
        f"error: {path}[0]: spec.containers[1].imagee: strict decoding error: "
        'unknown field "spec.containers[1].imagee"'
    ) in lines
    assert lines[-1] == "rejected: 4 errors"


def test_json_output_is_data(tmp_path: Path) -> None:
    path = write(tmp_path, BAD)
    result = runner.invoke(app, ["validate", path, "-o", "json"])
    assert result.exit_code == 1
    document = json.loads(result.output)
    assert document["accepted"] is False
    assert {
        "source": f"{path}[0]",
        "field": "spec.containers[1].image",
        "reason": "Required value",
        "detail": "",
        "message": "spec.containers[1].image: Required value",
    } in document["errors"]
    assert document["pods"] == []


def test_json_output_lists_accepted_objects(tmp_path: Path) -> None:
    result = runner.invoke(
        app, ["validate", write(tmp_path, GOOD), "-o", "json", "--node-name", "n"]
    )
    assert result.exit_code == 0
    document = json.loads(result.output)
    assert document["accepted"] is True
    assert [p["name"] for p in document["pods"]] == ["web"]
    assert document["warnings"][0]["field"] == "spec.nodeSelector"


def test_lenient_makes_unknown_fields_warnings(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("image:", "colour: blue, image:"))
    assert runner.invoke(app, ["validate", path]).exit_code == 1
    result = runner.invoke(app, ["validate", path, "--lenient"])
    assert result.exit_code == 0
    assert 'unknown field "spec.containers[0].colour"' in result.output


def test_pod_security_level_is_chosen_on_the_command_line(tmp_path: Path) -> None:
    path = write(tmp_path, PRIVILEGED)
    result = runner.invoke(app, ["validate", path])
    assert result.exit_code == 1
    assert (
        'spec: Forbidden: violates PodSecurity "baseline:latest": privileged '
        '(container "x" must not set securityContext.privileged=true)'
    ) in result.output
    assert runner.invoke(app, ["validate", path, "--pod-security", "privileged"]).exit_code == 0


def test_an_unknown_level_is_a_usage_error(tmp_path: Path) -> None:
    result = runner.invoke(app, ["validate", write(tmp_path, GOOD), "--pod-security", "lax"])
    assert result.exit_code == 2


def test_several_files_and_stdin(tmp_path: Path) -> None:
    one = write(tmp_path, GOOD, "one.yaml")
    result = runner.invoke(app, ["validate", one, "-"], input=GOOD.replace("web", "api"))
    assert result.exit_code == 0
    assert "accepted: 2 pods" in result.output


def test_the_documentation_examples_validate() -> None:
    result = runner.invoke(app, ["validate", str(EXAMPLES)])
    assert result.exit_code == 0, result.output
