"""``asynckubelet get -o jsonpath=...`` and ``-o custom-columns=...`` against a served node,
side by side with real kubectl's ``get`` of the same objects through the node's API."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from integration.kubectl_helpers import PYPI_KUBECTL, Kubectl, node
from integration.serve_helpers import Daemon

__all__ = ["node"]
"""The fixtures this module takes from its helpers."""

TEMPLATES = [
    "{.kind} {.items[*].metadata.name}",
    '{range .items[*]}{.metadata.name}{"\\t"}{.spec.containers[*].image}{"\\n"}{end}',
    '{.items[?(@.metadata.name=="web")].status.phase}',
    "{.items[0].spec.containers[0].command}",
    "{.items[*].metadata.labels.nope}",
]
COLUMNS = [
    "NAME:.metadata.name,PHASE:.status.phase,IMAGES:.spec.containers[*].image",
    "NAME:{.metadata.name},MISSING:.metadata.labels.nope",
]


@pytest.fixture
def real(node: Daemon, tmp_path: Path) -> Kubectl:
    if not os.access(PYPI_KUBECTL, os.X_OK):
        pytest.skip(f"no kubectl at {PYPI_KUBECTL}")
    return Kubectl(PYPI_KUBECTL, node, home=tmp_path / "home")


def test_get_jsonpath_and_custom_columns_print_what_kubectl_prints(
    node: Daemon, real: Kubectl
) -> None:
    for template in TEMPLATES:
        ours = node.cli("get", "pods", "-o", f"jsonpath={template}")
        assert ours.returncode == 0, ours.stderr
        assert ours.stdout == real.ok("get", "pods", "-o", f"jsonpath={template}"), template
    named = node.cli("get", "pod", "web", "-o", "jsonpath={.metadata.name}")
    assert named.stdout == "web"
    for spec in COLUMNS:
        for extra in ([], ["--no-headers"]):
            ours = node.cli("get", "pods", "-o", f"custom-columns={spec}", *extra)
            assert ours.returncode == 0, ours.stderr
            theirs = real.ok("get", "pods", "-o", f"custom-columns={spec}", *extra)
            assert ours.stdout == theirs, spec
    strict = ["-o", "jsonpath={.items[*].nope}", "--allow-missing-template-keys=false"]
    failed, real_failed = node.cli("get", "pods", *strict), real("get", "pods", *strict)
    assert (failed.returncode, real_failed.returncode) == (1, 1)
    first = 'error: error executing jsonpath "{.items[*].nope}": Error executing template: '
    assert failed.stderr.startswith(first + "nope is not found.")
    assert real_failed.stderr.startswith(first + "nope is not found.")
