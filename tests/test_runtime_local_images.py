"""The project's own images (``asynckubelet.local/...``) are made on this machine when
missing, announced in one line, and never pulled; the default sandbox image is one of
them, while a ``pause_image`` the user names is pulled as any image is."""

from __future__ import annotations

import functools

import pytest

from asynckubelet import errors
from asynckubelet.images import build as image_build
from asynckubelet.images.build import File, ImageConfig, ImageLoader, LocalImage, image_archive
from asynckubelet.runtime import images
from asynckubelet.runtime.images import ImageManager
from asynckubelet.runtime.manager import RuntimeConfig, RuntimeManager
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio


async def _load_tiny(docker: ImageLoader, *, tag: str) -> str:
    archive = image_archive(
        repo_tag=tag, files=[File(path="/x", data=b"x")], config=ImageConfig(cmd=["/x"])
    )
    await docker.load_image(archive)
    return "sha256:tiny"


async def _cannot_build(docker: ImageLoader, *, tag: str) -> str:
    raise errors.ImageBuildError("no C compiler found: install musl-tools", image=tag)


@pytest.fixture
def buildable(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every known local image is made by a tiny builder; returns the tags it made."""
    made: list[str] = []
    known = image_build.local_image

    def local(tag: str) -> LocalImage | None:
        found = known(tag)
        if found is None:
            return None

        async def build(docker: ImageLoader) -> str:
            made.append(tag)
            return await _load_tiny(docker, tag=tag)

        return LocalImage(build=build, source=found.source, command=found.command)

    monkeypatch.setattr(image_build, "local_image", local)
    return made


async def test_a_missing_busybox_image_is_built_once_and_announced(buildable: list[str]) -> None:
    docker = FakeDocker()
    said: list[str] = []
    manager = ImageManager(docker, announce=said.append)
    pulled, message = await manager.ensure(image_build.DEFAULT_BUSYBOX_TAG, policy="IfNotPresent")
    again, _ = await manager.ensure(image_build.DEFAULT_BUSYBOX_TAG, policy="IfNotPresent")
    assert (pulled, again) == (True, False)
    assert buildable == [image_build.DEFAULT_BUSYBOX_TAG]
    assert message.startswith(f'Successfully built image "{image_build.DEFAULT_BUSYBOX_TAG}"')
    assert said == [
        f"{image_build.DEFAULT_BUSYBOX_TAG}: not on the engine; building it from the host's "
        "static busybox (Debian's busybox-static)"
    ]
    assert docker.count("pull_image") == 0


async def test_a_local_image_with_pull_policy_always_is_not_pulled(buildable: list[str]) -> None:
    docker = FakeDocker(images=[image_build.DEFAULT_BUSYBOX_TAG])
    pulled, _ = await ImageManager(docker).ensure(image_build.DEFAULT_BUSYBOX_TAG, policy="Always")
    assert pulled is False
    assert docker.count("pull_image") == 0
    assert buildable == []


async def test_an_unknown_image_of_the_local_registry_is_an_error_and_never_pulled() -> None:
    docker = FakeDocker()
    with pytest.raises(errors.ImagePullError, match=images.CANNOT_BE_PULLED) as raised:
        await ImageManager(docker).ensure("asynckubelet.local/other:1", policy="IfNotPresent")
    assert docker.count("pull_image") == 0
    assert "`asynckubelet images load FILE.tar`" in str(raised.value)


async def test_the_default_sandbox_image_is_built_when_missing_never_pulled(
    buildable: list[str],
) -> None:
    docker = FakeDocker()
    async with RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker) as rm:
        assert await rm.pause_image() == image_build.DEFAULT_PAUSE_TAG
        assert await rm.pause_image() == image_build.DEFAULT_PAUSE_TAG
    assert buildable == [image_build.DEFAULT_PAUSE_TAG]
    assert docker.count("pull_image") == 0


async def test_a_sandbox_image_that_cannot_be_built_names_the_command_that_builds_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    known = image_build.local_image(image_build.DEFAULT_PAUSE_TAG)
    assert known is not None
    monkeypatch.setattr(
        image_build,
        "local_image",
        lambda tag: LocalImage(
            build=functools.partial(_cannot_build, tag=tag),
            source=known.source,
            command=known.command,
        ),
    )
    docker = FakeDocker()
    async with RuntimeManager(RuntimeConfig(node_name="n1"), docker=docker) as rm:
        with pytest.raises(errors.ImagePullError) as caught:
            await rm.pause_image()
    message = str(caught.value)
    assert images.CANNOT_BE_BUILT in message
    assert "install musl-tools" in message
    assert "`asynckubelet images build-pause`" in message
    assert docker.count("pull_image") == 0


async def test_a_named_sandbox_image_is_used_as_named(buildable: list[str]) -> None:
    docker = FakeDocker()
    config = RuntimeConfig(node_name="n1", pause_image="127.0.0.1:5000/pause:1")
    async with RuntimeManager(config, docker=docker) as rm:
        assert await rm.pause_image() == "127.0.0.1:5000/pause:1"
    assert buildable == []
    assert docker.count("image_exists") == 0
