"""The command line's share of the security rules: its log sinks never print a traceback's
local variables (where secrets sit), ``apply -f -`` hands over exactly what it read from
stdin (once), which the daemon keeps closed to other users, and a Namespace label relaxes
the Pod Security level only when the operator says so (``--allow-namespace-policy``)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from daemon_helpers import running_daemon
from loguru import logger
from typer.testing import CliRunner

from asynckubelet.cli.app import app
from asynckubelet.cli.options import LogOptions
from asynckubelet.cli.output import setup_logging

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: from-stdin}
spec:
  containers: [{name: c, image: busybox}]
"""

HOST_NETWORK_UNDER_PRIVILEGED_NAMESPACE = """\
apiVersion: v1
kind: Namespace
metadata:
  name: ops
  labels: {pod-security.kubernetes.io/enforce: privileged}
---
apiVersion: v1
kind: Pod
metadata: {name: hostnet, namespace: ops}
spec:
  hostNetwork: true
  containers: [{name: c, image: busybox}]
"""


def _fails_with_a_secret_in_scope() -> None:
    password = "hunter2-do-not-print"
    raise RuntimeError(f"failed after reading {len(password)} characters")


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_a_logged_traceback_shows_no_local_variable_values(
    log_format: str, capsys: pytest.CaptureFixture[str]
) -> None:
    setup_logging(LogOptions(log_level="DEBUG", log_format=log_format))
    try:
        try:
            _fails_with_a_secret_in_scope()
        except RuntimeError:
            logger.opt(exception=True).error("sync failed")
        captured = capsys.readouterr()
        assert "sync failed" in captured.err
        assert "RuntimeError" in captured.err
        assert "hunter2-do-not-print" not in captured.err
    finally:
        logger.remove()


def test_apply_from_stdin_hands_over_what_it_read_and_the_daemon_keeps_it_0600(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    with running_daemon(state) as node:
        result = CliRunner().invoke(app, ["apply", "-f", "-", "--state-dir", str(state)], input=POD)
        assert result.exit_code == 0, result.output
        assert "pod/from-stdin created" in result.output
        [kept] = (state / "objects").iterdir()
        assert kept.name == "pod_default_from-stdin.json"
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        [pod] = node.node.objects.pods()
        assert pod.spec is not None
        assert pod.spec.containers[0].image == "busybox"


def test_apply_of_an_empty_stdin_creates_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with running_daemon(state) as node:
        result = CliRunner().invoke(app, ["apply", "-f", "-", "--state-dir", str(state)], input="")
        assert result.exit_code == 1
        assert "no objects passed to apply" in result.output
        assert node.node.objects.pods() == []


@pytest.mark.parametrize(
    ("args", "env", "accepted"),
    [
        ([], {}, False),
        (["--allow-namespace-policy"], {}, True),
        ([], {"ASYNCKUBELET_ALLOW_NAMESPACE_POLICY": "1"}, True),
    ],
)
def test_a_namespace_label_relaxes_the_level_only_when_the_operator_allows_it(
    tmp_path: Path, args: list[str], env: dict[str, str], accepted: bool
) -> None:
    manifest = tmp_path / "ops.yaml"
    manifest.write_text(HOST_NETWORK_UNDER_PRIVILEGED_NAMESPACE)
    result = CliRunner().invoke(app, ["validate", str(manifest), *args], env=env)
    assert result.exit_code == (0 if accepted else 1), result.output
    if not accepted:
        assert "hostNetwork" in result.output


def test_allow_namespace_policy_is_offered_by_every_command_that_admits_pods() -> None:
    """``apply`` admits nothing itself: the daemon admits with its own policy."""
    for command in ("run", "serve", "validate"):
        result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert "--allow-namespace-policy" in result.output, command


HELM_TEMPLATE = """\
---
# Source: web/templates/configmap.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-content
  labels:
    helm.sh/chart: web-0.1.0
    app.kubernetes.io/managed-by: Helm
data:
  index.html: "hello"
---
# Source: web/templates/deployment.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels:
    helm.sh/chart: web-0.1.0
spec:
  replicas: 1
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
        - name: web
          image: "busybox:1.35"
          imagePullPolicy: IfNotPresent
"""


def test_apply_from_stdin_takes_helm_template_output(tmp_path: Path) -> None:
    """``helm template . | asynckubelet apply -f -``: the documents with their leading
    separator and ``# Source:`` comments, each object applied as kubectl applies it."""
    state = tmp_path / "state"
    with running_daemon(state):
        argv = ["apply", "-f", "-", "--state-dir", str(state)]
        result = CliRunner().invoke(app, argv, input=HELM_TEMPLATE)
        assert result.exit_code == 0, result.output
        assert result.stdout.splitlines() == [
            "configmap/web-content created",
            "deployment.apps/web created",
        ]
        again = CliRunner().invoke(app, argv, input=HELM_TEMPLATE)
        assert again.stdout.splitlines() == [
            "configmap/web-content unchanged",
            "deployment.apps/web unchanged",
        ]
