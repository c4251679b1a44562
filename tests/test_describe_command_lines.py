"""``describe pod`` lays out a container's command and args as kubectl does: every line
of a multi-line entry on its own line, each indented under ``Command:`` / ``Args:``."""

from __future__ import annotations

from datetime import UTC, datetime

from lightkube.models.core_v1 import Container, Pod, PodSpec
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.kubectl.describe import describe_pod

NOW = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)


def _described(container: Container) -> list[str]:
    pod = Pod(
        metadata=ObjectMeta(name="web", namespace="default", uid="u1"),
        spec=PodSpec(containers=[container]),
    )
    return describe_pod(pod, [], node_name="n1", now=NOW).splitlines()


def _block(lines: list[str], title: str) -> list[str]:
    start = lines.index(f"    {title}:") + 1
    end = start
    while end < len(lines) and lines[end].startswith("      "):
        end += 1
    return lines[start:end]


def test_every_line_of_a_multi_line_command_entry_is_indented_under_command() -> None:
    lines = _described(
        Container(name="a", image="busybox", command=["sh", "-c", "echo one\necho two"])
    )
    assert _block(lines, "Command") == ["      sh", "      -c", "      echo one", "      echo two"]


def test_every_line_of_a_multi_line_args_entry_is_indented_under_args() -> None:
    lines = _described(
        Container(name="a", image="busybox", args=["set -e\nsleep 1\nexit 0", "last"])
    )
    assert _block(lines, "Args") == [
        "      set -e",
        "      sleep 1",
        "      exit 0",
        "      last",
    ]


def test_a_trailing_newline_leaves_an_indented_empty_line_as_kubectl_splits_it() -> None:
    lines = _described(Container(name="a", image="busybox", args=["echo hi\n"]))
    assert _block(lines, "Args") == ["      echo hi", "      "]


def test_single_line_entries_are_one_indented_line_each() -> None:
    lines = _described(Container(name="a", image="busybox", command=["sleep"], args=["3600"]))
    assert _block(lines, "Command") == ["      sleep"]
    assert _block(lines, "Args") == ["      3600"]
