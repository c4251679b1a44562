"""The manifest directory source: files in, pods out; broken and removed files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
import watchfiles

from asynckubelet.manifests import Manifests
from asynckubelet.node import sources
from asynckubelet.node.sources import ManifestDirSource, is_manifest, source_name

POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  containers: [{name: a, image: busybox}]
"""


def source(directory: Path) -> tuple[ManifestDirSource, dict[str, list[str]], list[str]]:
    got: dict[str, list[str]] = {}
    errors: list[str] = []

    def sink(name: str, manifests: Manifests) -> None:
        got[name] = [p.metadata.name or "" for p in manifests.pods if p.metadata]

    src = ManifestDirSource(
        directory, sink=sink, node_name="n1", on_error=lambda p, e: errors.append(p.name)
    )
    return src, got, errors


def test_every_manifest_file_is_a_source_of_its_pods(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(POD.replace("NAME", "one"))
    (tmp_path / "b.yml").write_text(POD.replace("NAME", "two"))
    src, got, _ = source(tmp_path)
    src.load_all()
    assert got == {
        source_name(tmp_path / "a.yaml"): ["one"],
        source_name(tmp_path / "b.yml"): ["two"],
    }


def test_a_removed_file_leaves_its_source_empty(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(POD.replace("NAME", "one"))
    src, got, _ = source(tmp_path)
    src.load_all()
    path.unlink()
    src.load(path)
    assert got[source_name(path)] == []


def test_a_broken_file_is_reported_and_its_pods_are_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "a.yaml"
    path.write_text(POD.replace("NAME", "one"))
    src, got, errors = source(tmp_path)
    src.load_all()
    path.write_text("kind: Pod\nspec: [")
    src.load(path)
    assert (got[source_name(path)], errors) == (["one"], ["a.yaml"])


def test_hidden_and_foreign_files_are_not_manifests() -> None:
    assert [is_manifest(Path(n)) for n in (".a.yaml.tmp", ".a.yaml", "a.txt", "a.json")] == [
        False,
        False,
        False,
        True,
    ]


def laughs() -> str:
    text = "a0: &a0 lol\n"
    for level in range(1, 10):
        text += f"a{level}: &a{level} [{', '.join([f'*a{level - 1}'] * 9)}]\n"
    return text


BAD_FILES: list[tuple[str, bytes]] = [
    ("syntax", b"kind: Pod\nspec: ["),
    ("alias bomb", laughs().encode()),
    ("self-containing anchor", b"a: &a [*a]\n"),
    ("oversized", b"#" * (3 * 1024 * 1024 + 1)),
    ("not UTF-8", b"kind: Pod\nmetadata: {name: caf\xe9}\n"),
    ("NUL byte", b"kind: Pod\x00\n"),
    ("huge integer", POD.replace("NAME", "big").encode() + b"  priority: 1" + b"0" * 100_000),
    (
        "hostile path",
        POD.replace("NAME", "x").encode() + b"  volumes: [{name: v, secret: "
        b"{secretName: s, items: [{key: k, path: ../../../etc/cron.d/x}]}}]\n",
    ),
    ("uid that is a path", POD.replace("NAME", "web, uid: ../../etc").encode()),
]


@pytest.mark.parametrize(("kind", "content"), BAD_FILES, ids=[b[0] for b in BAD_FILES])
def test_any_bad_file_is_reported_and_the_others_still_load(
    tmp_path: Path, kind: str, content: bytes
) -> None:
    (tmp_path / "good.yaml").write_text(POD.replace("NAME", "good"))
    (tmp_path / "bad.yaml").write_bytes(content)
    src, got, errors = source(tmp_path)
    src.load_all()
    assert got == {source_name(tmp_path / "good.yaml"): ["good"]}
    assert errors == ["bad.yaml"]


def test_a_directory_named_like_a_manifest_is_no_source(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    src, got, errors = source(tmp_path)
    src.load_all()
    assert (got, errors) == ({}, [])


def test_a_failure_no_rule_foresaw_is_reported_by_its_type_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> Manifests:
        raise RuntimeError("text quoted from the file")

    (tmp_path / "a.yaml").write_text(POD.replace("NAME", "one"))
    monkeypatch.setattr(sources, "load_manifests", broken)
    messages: list[str] = []
    src = ManifestDirSource(
        tmp_path, sink=lambda n, m: None, node_name="n1", on_error=lambda p, e: messages.append(e)
    )
    src.load_all()
    assert messages == ["a.yaml: cannot be loaded (RuntimeError)"]


def test_the_error_message_names_the_first_problem_and_counts_the_rest(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: A}\nspec: {containers: [{name: B}]}\n"
    )
    messages: list[str] = []
    src = ManifestDirSource(
        tmp_path, sink=lambda n, m: None, node_name="n1", on_error=lambda p, e: messages.append(e)
    )
    src.load_all()
    assert len(messages) == 1
    assert messages[0].startswith(f'{tmp_path / "a.yaml"}[0]: metadata.name: Invalid value: "A"')
    assert messages[0].endswith("(and 2 more)")


@pytest.mark.anyio
async def test_files_are_read_off_the_event_loop_with_the_same_outcome(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(POD.replace("NAME", "good"))
    (tmp_path / "bad.yaml").write_bytes(laughs().encode())
    src, got, errors = source(tmp_path)
    await src.reload_all()
    assert (got, errors) == ({source_name(tmp_path / "good.yaml"): ["good"]}, ["bad.yaml"])


def test_namespace_labels_only_tighten_unless_the_source_allows_them(tmp_path: Path) -> None:
    privileged = (
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: infra\n  labels:\n"
        "    pod-security.kubernetes.io/enforce: privileged\n---\n"
        "apiVersion: v1\nkind: Pod\nmetadata: {name: root, namespace: infra}\n"
        "spec: {containers: [{name: a, image: busybox, securityContext: {privileged: true}}]}\n"
    )
    (tmp_path / "a.yaml").write_text(privileged)
    src, got, errors = source(tmp_path)
    src.load_all()
    assert (got, errors) == ({}, ["a.yaml"])
    src.allow_namespace_policy = True
    src.load_all()
    assert got == {source_name(tmp_path / "a.yaml"): ["root"]}


async def _until(check: Callable[[], bool]) -> None:
    """Until ``check()`` holds, looked at every 20 ms (the test's deadline bounds it)."""
    for _ in range(1000):
        if check():
            return
        await anyio.sleep(0.02)
    raise AssertionError("never happened")


@pytest.mark.anyio
async def test_a_watched_directory_is_loaded_then_followed_until_cancelled(tmp_path: Path) -> None:
    (tmp_path / "first.yaml").write_text(POD.replace("NAME", "first"))
    src, got, _ = source(tmp_path)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(src.run)
            assert got == {source_name(tmp_path / "first.yaml"): ["first"]}
            (tmp_path / ".second.yaml").write_text(POD.replace("NAME", "second"))
            (tmp_path / ".second.yaml").rename(tmp_path / "second.yaml")
            await _until(lambda: source_name(tmp_path / "second.yaml") in got)
            (tmp_path / "first.yaml").unlink()
            await _until(lambda: got[source_name(tmp_path / "first.yaml")] == [])
            assert got[source_name(tmp_path / "second.yaml")] == ["second"]
            # Cancelled, the watch ends at once: its thread sees the stop within a step
            # (it waits for no timeout; nothing else would end it).
            tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_directory_that_cannot_be_watched_is_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "first.yaml").write_text(POD.replace("NAME", "first"))
    src, got, _ = source(tmp_path)
    tries: list[int] = []
    real = watchfiles.awatch

    def awatch(*args: object, **kwargs: object) -> object:
        tries.append(1)
        if len(tries) == 1:
            raise OSError(28, "inotify watch limit reached")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(watchfiles, "awatch", awatch)
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            await tg.start(src.run)
            (tmp_path / "second.yaml").write_text(POD.replace("NAME", "second"))
            await _until(lambda: source_name(tmp_path / "second.yaml") in got)
            tg.cancel_scope.cancel()
    assert len(tries) == 2
