"""The loader is total and bounded: any input ends in field errors, at a cost its size allows.

Sizes and memory are asserted with generous, deterministic budgets (bytes traced by
``tracemalloc``, decode steps), never with a clock.
"""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from asynckubelet.cli.app import app
from asynckubelet.errors import ManifestError
from asynckubelet.manifests import (
    inspect_manifests,
    inspect_manifests_text,
    load_manifests,
    load_manifests_text,
    loading,
    validation,
)
from asynckubelet.manifests.decoding import MAX_DOCUMENT_BYTES, load_documents

MIB = 1024 * 1024
TOO_LONG = f"<document>: Too long: must have at most {MAX_DOCUMENT_BYTES} bytes"


def errors(text: str, **kwargs: Any) -> list[str]:
    report = inspect_manifests_text(text, node_name="n", pod_security="privileged", **kwargs)
    return [str(e) for e in report.errors]


def pod_text(extra: str = "", container: str = "") -> str:
    return (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
        f"  containers: [{{name: c, image: busybox{container}}}]\n{extra}"
    )


def laughs(levels: int, fanout: int) -> str:
    """A "billion laughs" alias bomb: ``fanout ** levels`` strings from a few lines."""
    text = "a0: &a0 lol\n"
    for level in range(1, levels + 1):
        refs = ", ".join([f"*a{level - 1}"] * fanout)
        text += f"a{level}: &a{level} [{refs}]\n"
    return text


def peak_bytes(call: Callable[[], object]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


# -- size --------------------------------------------------------------------------------


def test_text_over_the_api_servers_request_limit_is_refused_before_parsing() -> None:
    text = "[" * (MAX_DOCUMENT_BYTES + 1)
    assert errors(text) == [TOO_LONG]


def test_text_at_the_limit_is_read() -> None:
    text = pod_text()
    text += "#" * (MAX_DOCUMENT_BYTES - len(text))
    assert errors(text) == []


def test_the_limit_counts_bytes_not_characters() -> None:
    text = pod_text() + "#" + "é" * (MAX_DOCUMENT_BYTES // 2)
    assert len(text) < MAX_DOCUMENT_BYTES < len(text.encode())
    assert errors(text) == [TOO_LONG]


def test_an_oversized_file_is_refused_without_reading_it_whole(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as f:
        f.truncate(64 * MIB)
    report = inspect_manifests(path, node_name="n")
    assert [(str(e), e.source) for e in report.errors] == [(TOO_LONG, str(path))]
    assert peak_bytes(lambda: inspect_manifests(path, node_name="n")) < 2 * MAX_DOCUMENT_BYTES


def test_a_file_that_is_not_utf8_is_an_error_naming_the_byte(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"kind: Pod\nmetadata: {name: caf\xe9}\n")
    report = inspect_manifests(path, node_name="n")
    assert [str(e) for e in report.errors] == ["<document>: Unreadable: invalid UTF-8 at byte 30"]


def test_an_unreadable_directory_is_an_error_not_an_exception(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def denied(self: Path) -> Iterator[Path]:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", denied)
    report = inspect_manifests(tmp_path, node_name="n")
    assert [(str(e), e.source) for e in report.errors] == [
        ("<document>: Unreadable: Permission denied", str(tmp_path))
    ]


# -- aliases -----------------------------------------------------------------------------


def test_a_billion_laughs_is_refused_as_excessive_aliasing() -> None:
    assert errors(laughs(9, 9)) == [
        "<document>: Invalid YAML: line 5, column 15: document contains excessive aliasing"
    ]


def test_a_billion_laughs_costs_almost_nothing() -> None:
    assert peak_bytes(lambda: errors(laughs(9, 10))) < 1 * MIB


def test_an_alias_bomb_along_the_pod_schema_is_refused_at_once() -> None:
    envs = ", ".join(["*e"] * 9_999)
    containers = ", ".join(["*c"] * 9_999)
    text = pod_text(
        "  initContainers:\n"
        f"  - &c {{name: a, image: b, env: [&e {{name: A, value: x}}, {envs}]}}\n"
        f"  ephemeralContainers: [{containers}]\n"
    )
    found: list[str] = []
    assert peak_bytes(lambda: found.extend(errors(text))) < 2 * MIB
    assert found == [
        "<document>: Invalid YAML: line 8, column 49: document contains excessive aliasing"
    ]


def test_aliasing_is_bounded_where_go_yaml_bounds_it() -> None:
    assert list(load_documents(laughs(3, 10)))  # a thousand strings: go-yaml decodes it
    with pytest.raises(yaml.YAMLError, match="excessive aliasing"):
        list(load_documents(laughs(4, 10)))  # ten thousand: go-yaml refuses it


def test_an_anchor_that_contains_itself_is_refused() -> None:
    assert errors("a: &a [1, *a]\n") == [
        "<document>: Invalid YAML: line 1, column 11: anchor 'a' value contains itself"
    ]


def test_an_unknown_anchor_is_refused() -> None:
    assert errors("a: *nope\n") == [
        "<document>: Invalid YAML: line 1, column 4: unknown anchor 'nope' referenced"
    ]


def test_ordinary_anchors_and_merge_keys_still_work() -> None:
    text = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
        "spec:\n  containers:\n"
        "  - &base {name: a, image: busybox, imagePullPolicy: Never}\n"
        "  - {<<: *base, name: b}\n"
    )
    report = inspect_manifests_text(text, node_name="n")
    assert report.errors == ()
    spec = report.manifests.pods[0].spec
    assert spec is not None
    assert [(c.name, c.image, c.imagePullPolicy) for c in spec.containers] == [
        ("a", "busybox", "Never"),
        ("b", "busybox", "Never"),
    ]


# -- numbers -----------------------------------------------------------------------------


def test_an_integer_of_a_hundred_thousand_digits_is_a_field_error() -> None:
    digits = "1" + "0" * 100_000
    found = errors(pod_text(f"  activeDeadlineSeconds: {digits}\n"))
    assert found == [
        f'spec.activeDeadlineSeconds: Invalid value: "{digits[:1024]}"... (100001 characters): '
        "must be an integer"
    ]


def test_an_integer_of_a_hundred_thousand_digits_costs_little_memory() -> None:
    text = pod_text(f"  activeDeadlineSeconds: 1{'0' * 100_000}\n")
    assert peak_bytes(lambda: errors(text)) < 4 * MIB


def test_an_integer_beyond_int64_is_a_range_error() -> None:
    assert errors(pod_text(f"  activeDeadlineSeconds: {2**63}\n")) == [
        f"spec.activeDeadlineSeconds: Invalid value: {2**63}: must be between "
        "-9223372036854775808 and 9223372036854775807, inclusive"
    ]


@pytest.mark.parametrize(
    ("quantity", "detail"),
    [
        ("1" * 1001, "must have at most 1000 digits"),
        ("1e1000", "must have an exponent of at most 3 digits"),
    ],
)
def test_a_quantity_too_long_to_matter_is_a_field_error(quantity: str, detail: str) -> None:
    found = errors(pod_text(container=f", resources: {{limits: {{cpu: '{quantity}'}}}}"))
    assert (
        f"spec.containers[0].resources.limits[cpu]: Invalid value: {json.dumps(quantity)}: "
        in (found[0])
    )
    assert found[0].endswith(detail)


def test_a_huge_exponent_within_bounds_is_accepted_and_printed_back() -> None:
    text = pod_text(container=", resources: {limits: {memory: 1e999}, requests: {memory: 2e999}}")
    assert errors(text) == [
        'spec.containers[0].resources.requests: Invalid value: "2e999": '
        "must be less than or equal to memory limit of 1e999"
    ]


# -- totality ----------------------------------------------------------------------------


def test_a_structure_where_a_name_belongs_is_shown_by_its_type_only() -> None:
    assert errors("apiVersion: v1\nkind: {secret: [1, 2, 3]}\n") == [
        'kind: Unsupported value: <dict>: supported values: "ConfigMap", "ControllerRevision", '
        '"CronJob", "DaemonSet", "Deployment", "Job", "List", "Namespace", "Pod", "ReplicaSet", '
        '"Secret", "Service", "ServiceAccount", "StatefulSet"'
    ]


def test_a_huge_unknown_field_name_is_cut_in_the_message() -> None:
    key = "k" * 100_000
    found = errors(pod_text(f"  ? {key}\n  : 1\n"))
    assert len(found) == 1
    assert len(found[0]) < 6000
    assert found[0].startswith("spec.kkkk")
    assert "(100005 characters)" in found[0]


def test_errors_past_the_limit_are_counted_not_kept() -> None:
    containers = ", ".join(f"{{name: A{i}, image: b}}" for i in range(loading.MAX_ERRORS + 50))
    text = (
        f"apiVersion: v1\nkind: Pod\nmetadata: {{name: p}}\nspec: {{containers: [{containers}]}}\n"
    )
    found = errors(text)
    assert len(found) == loading.MAX_ERRORS + 1
    assert found[-1] == "<document>: Too many: 50 more errors not shown (at most 1000)"


def test_a_failure_no_rule_foresaw_is_a_field_error_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(pod: object) -> list[object]:
        raise KeyError("secret text from the manifest")

    monkeypatch.setattr(validation, "validate_pod", broken)
    with pytest.raises(ManifestError) as caught:
        load_manifests_text(pod_text(), source_name="p.yaml", node_name="n")
    assert [(str(e), e.source) for e in caught.value.errors] == [
        ("<document>: Internal error: KeyError while checking this document", "p.yaml[0]")
    ]
    assert "secret text" not in str(caught.value)


def test_every_hostile_input_raises_a_manifest_error_with_exit_code_one(tmp_path: Path) -> None:
    inputs: Iterator[tuple[str, str]] = iter(
        [
            ("bomb.yaml", laughs(9, 9)),
            ("self.yaml", "a: &a [*a]\n"),
            ("int.yaml", pod_text(f"  activeDeadlineSeconds: 1{'0' * 100_000}\n")),
            ("key.yaml", "? [a, b]\n: 1\n"),
            ("tag.yaml", "kind: !!python/object:os.system echo\n"),
            ("nul.yaml", 'kind: "Pod\\0"\n'),
        ]
    )
    for name, text in inputs:
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(ManifestError) as caught:
            load_manifests(path, node_name="n")
        assert caught.value.errors, name
        assert all(e.source.startswith(str(path)) for e in caught.value.errors), name
        result = CliRunner().invoke(app, ["validate", str(path), "--node-name", "n"])
        assert result.exit_code == 1, (name, result.output)
        assert result.exception is None or isinstance(result.exception, SystemExit), name
        assert "Traceback" not in result.output, name


def test_errors_past_the_limit_cost_a_reference_each_not_a_message() -> None:
    text = pod_text(container=", args: [" + "1," * 300_000 + "1]")
    found: list[str] = []
    peak = peak_bytes(lambda: found.extend(errors(text)))
    assert found[-1] == "<document>: Too many: 299001 more errors not shown (at most 1000)"
    assert peak < 30 * MIB


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("a: !!int b\n", "cannot decode !!str `b` as a !!int"),
        ("a: !!bool maybe\n", "cannot decode !!str `maybe` as a !!bool"),
        ("a: !!float x\n", "cannot decode !!str `x` as a !!float"),
        (f"a: !!int {'9' * 5000}\n", f"cannot decode !!str `{'9' * 64}...` as a !!int"),
    ],
)
def test_an_explicit_tag_its_value_does_not_fit_is_a_yaml_error(text: str, problem: str) -> None:
    assert errors(text) == [f"<document>: Invalid YAML: line 1, column 4: {problem}"]


def test_an_explicit_tag_that_fits_is_honoured() -> None:
    assert list(load_documents('a: !!int "5"\nb: !!str 5\nc: !!float "1.5"\n')) == [
        {"a": 5, "b": "5", "c": 1.5}
    ]
