"""The manifest directory source: files in, pods out; broken and removed files."""

from __future__ import annotations

from pathlib import Path

from asynckubelet.manifests import Manifests
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
