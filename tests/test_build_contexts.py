"""Build contexts: found by podman's convention or an annotation, hostile paths refused."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

import pytest

from asynckubelet.cli.building import pin_dicts, specs_of_dicts
from asynckubelet.errors import ImageBuildError
from asynckubelet.images.contexts import (
    ANNOTATION_PREFIX,
    context_tar,
    find_context,
    parse_annotation,
    repository_dir,
    stages,
)


def _tree(base: Path) -> Path:
    (base / "manifests" / "web").mkdir(parents=True)
    (base / "manifests" / "web" / "Dockerfile").write_text("FROM scratch\n")
    (base / "manifests" / "app").mkdir()
    (base / "manifests" / "app" / "Containerfile").write_text("FROM scratch\n")
    (base / "manifests" / "app" / "build.Dockerfile").write_text(
        "FROM scratch AS base\nFROM base AS dev\n"
    )
    (base / "outside").mkdir()
    (base / "outside" / "Dockerfile").write_text("FROM scratch\n")
    return base / "manifests"


@pytest.mark.parametrize(
    ("image", "directory"),
    [
        ("web:dev", "web"),
        ("localhost/web:dev", "web"),
        ("registry.example:5000/team/web", "web"),
        ("web@sha256:" + "a" * 64, "web"),
    ],
)
def test_the_directory_named_after_the_repository(image: str, directory: str) -> None:
    assert repository_dir(image) == directory


def test_podmans_convention_finds_the_directory_beside_the_manifests(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    found = find_context("localhost/web:dev", container="c", annotations={}, base=base)
    assert found is not None
    assert (found.context, found.dockerfile) == ((base / "web").resolve(), "Dockerfile")
    app = find_context("app:1", container="c", annotations={}, base=base)
    assert app is not None
    assert app.dockerfile == "Containerfile"


def test_an_image_with_no_directory_has_no_context(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    assert find_context("nginx:1.27", container="c", annotations={}, base=base) is None
    (base / "empty").mkdir()
    assert find_context("empty:1", container="c", annotations={}, base=base) is None


def test_a_symlinked_directory_is_not_taken_by_convention(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    (base / "evil").symlink_to(tmp_path / "outside")
    assert find_context("evil:1", container="c", annotations={}, base=base) is None


def test_the_annotation_names_context_dockerfile_target_and_args(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    found = find_context(
        "whatever:1",
        container="c",
        annotations={
            ANNOTATION_PREFIX + "c": "context=app, dockerfile=build.Dockerfile,"
            "target=dev,arg.GREETING=hi"
        },
        base=base,
    )
    assert found is not None
    assert found.context == (base / "app").resolve()
    assert (found.dockerfile, found.target, found.args) == (
        "build.Dockerfile",
        "dev",
        {"GREETING": "hi"},
    )


def test_an_annotation_for_another_container_is_not_used(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    notes = {ANNOTATION_PREFIX + "other": "context=app"}
    assert find_context("nginx:1", container="c", annotations=notes, base=base) is None


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("context=../outside", "is outside"),
        ("context=../../etc", "is outside"),
        ("context=/etc", "must be relative"),
        ("context=web/../../outside", "is outside"),
        ("context=app,dockerfile=../web/Dockerfile", "is outside"),
        ("context=app,dockerfile=/etc/passwd", "must be a path relative"),
        ("context=app,dockerfile=missing", "is not a file"),
        ("context=app,context=web", "given twice"),
        ("context=app,network=host", "unknown key 'network'"),
        ("context=app,arg.1X=y", "not a build argument name"),
        ("context=app,arg.A-B=y", "not a build argument name"),
        ("context=app,arg.=y", "not a build argument name"),
        ("context=app,arg.A=1,arg.A=2", "arg.A given twice"),
        ("context=app,arg.A=" + "x" * (32 * 1024 + 1), "longer than 32768 characters"),
        ("context=app,arg.A=a\0b", "holds a NUL character"),
        ("context=app,dockerfile=build.Dockerfile,target=prod", "is not a stage of"),
        ("context=app,target=dev", r"is not a stage of Containerfile \(stages: none\)"),
        ("context=app,dockerfile=build.Dockerfile,target=dev&x=1", "is not a stage name"),
        ("context=app,dockerfile=build.Dockerfile,target=-dev", "is not a stage name"),
        ("dockerfile=Dockerfile", "context=PATH is required"),
        ("context", "is not KEY=VALUE"),
        ("context=nothere", "is not a directory"),
    ],
)
def test_hostile_annotations_are_refused_naming_the_annotation(
    tmp_path: Path, value: str, message: str
) -> None:
    base = _tree(tmp_path)
    with pytest.raises(ImageBuildError, match=message) as caught:
        parse_annotation(value, image="x:1", base=base, field_name="annotation A")
    assert str(caught.value).startswith("annotation A: ")


def test_a_symlink_out_of_the_manifests_directory_is_refused(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    (base / "link").symlink_to(tmp_path / "outside")
    with pytest.raises(ImageBuildError, match="is outside"):
        parse_annotation("context=link", image="x:1", base=base, field_name="a")
    (base / "app" / "df").symlink_to(tmp_path / "outside" / "Dockerfile")
    with pytest.raises(ImageBuildError, match="is outside"):
        parse_annotation("context=app,dockerfile=df", image="x:1", base=base, field_name="a")


def test_the_context_tar_keeps_symlinks_as_links(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    (base / "web" / "secret").symlink_to("/etc/passwd")
    (base / "web" / "sub").mkdir()
    (base / "web" / "sub" / "f.txt").write_text("x")
    with tarfile.open(fileobj=io.BytesIO(context_tar(base / "web"))) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert set(members) == {"Dockerfile", "secret", "sub", "sub/f.txt"}
    assert members["secret"].issym()
    assert members["secret"].linkname == "/etc/passwd"
    assert members["secret"].size == 0


def test_the_context_tar_is_bounded(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    (base / "web" / "big").write_bytes(os.urandom(2048))
    with pytest.raises(ImageBuildError, match="larger than 1024 bytes"):
        context_tar(base / "web", max_bytes=1024)
    with pytest.raises(ImageBuildError, match="more than 1 entries"):
        context_tar(base / "web", max_entries=1)


def test_documents_are_pinned_to_the_built_ids_with_a_pull_policy() -> None:
    pod = {"kind": "Pod", "spec": {"containers": [{"name": "a", "image": "web:dev"}]}}
    deployment = {
        "kind": "Deployment",
        "spec": {
            "template": {
                "metadata": {"annotations": {"k": "v"}},
                "spec": {
                    "initContainers": [{"name": "i", "image": "web:dev"}],
                    "containers": [{"name": "b", "image": "nginx"}],
                },
            }
        },
    }
    cron = {
        "kind": "CronJob",
        "spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [
            {"name": "c", "image": "web:dev"}
        ]}}}}},
    }  # fmt: skip
    documents = [pod, deployment, cron, None]
    specs = list(specs_of_dicts(documents))
    assert [notes for notes, _ in specs] == [{}, {"k": "v"}, {}]
    pin_dicts(documents, {"web:dev": "sha256:abc"})
    assert pod["spec"]["containers"][0] == {  # type: ignore[index]
        "name": "a",
        "image": "sha256:abc",
        "imagePullPolicy": "IfNotPresent",
    }
    template = deployment["spec"]["template"]["spec"]  # type: ignore[index]
    assert template["initContainers"][0]["image"] == "sha256:abc"
    assert template["containers"][0] == {"name": "b", "image": "nginx"}
    job = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]  # type: ignore[index]
    assert job["containers"][0]["image"] == "sha256:abc"


def test_the_stages_of_a_dockerfile_are_its_from_as_names(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text(
        "# FROM x AS comment\n"
        "FROM busybox AS base\n"
        "from --platform=linux/amd64 busybox as Builder\r\n"
        "FROM base \\\n  AS dev\n"
        "FROM base\n"
        "RUN echo FROM y AS z\n"
    )
    assert stages(dockerfile) == ["base", "Builder", "dev"]


def test_an_annotation_target_the_dockerfile_declares_is_taken(tmp_path: Path) -> None:
    base = _tree(tmp_path)
    found = parse_annotation(
        "context=app,dockerfile=build.Dockerfile,target=base",
        image="x:1",
        base=base,
        field_name="annotation A",
    )
    assert found.target == "base"
