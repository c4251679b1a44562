"""The events of a container whose image cannot be pulled, in the kubelet's words."""

from __future__ import annotations

import pytest
from lightkube.models.core_v1 import Container

from asynckubelet import errors
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime.images import ImageManager
from asynckubelet.runtime.pulls import ImagePull
from asynckubelet.runtime.results import SyncError
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio

IMAGE = "registry.example/app:1"


async def test_a_failed_pull_then_its_back_off_are_reported_as_the_kubelet_reports_them() -> None:
    docker = FakeDocker()
    docker.fail("pull_image", errors.ImagePullError("manifest unknown"), times=None)
    backoff = backoff_mod.Backoff()
    container = Container(name="app", image=IMAGE)

    def pull() -> ImagePull:
        return ImagePull(
            container, images=ImageManager(docker), pod_uid="u1", auths=[], image_backoff=backoff
        )

    first = pull()
    await first.run()
    assert first.error is not None
    assert first.error[0] is SyncError.IMAGE_PULL
    assert [(t, r) for t, r, _ in first.events] == [
        ("Normal", "Pulling"),
        ("Warning", "Failed"),
        ("Warning", "Failed"),
    ]
    assert first.events[-1][2] == "Error: ErrImagePull"

    second = pull()
    await second.run()
    assert second.error == (SyncError.IMAGE_PULL_BACK_OFF, f'Back-off pulling image "{IMAGE}"')
    assert second.events == [
        ("Normal", "BackOff", f'Back-off pulling image "{IMAGE}"'),
        ("Warning", "Failed", "Error: ImagePullBackOff"),
    ]
