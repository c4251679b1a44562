"""The image of one container of one sync: checked, pulled if needed, with pull back-off.

The kubelet's ``EnsureImageExists``, with its events and waiting reasons. A sync starts
every pull at its beginning, so images download while the sandbox and the init
containers start; several containers may use one image, and the work is done once, its
events replayed for each container, as the kubelet reports them per container.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import anyio
from lightkube.models.core_v1 import Container

from asynckubelet import errors
from asynckubelet.runtime import backoff as backoff_mod
from asynckubelet.runtime.images import ImageManager, RegistryAuth, validate_image_name
from asynckubelet.runtime.results import SyncError


class ImagePull:
    """One image of one sync; :meth:`run` once, then read :attr:`error` and :attr:`events`."""

    def __init__(
        self,
        container: Container,
        *,
        images: ImageManager,
        pod_uid: str,
        auths: Sequence[RegistryAuth],
        image_backoff: backoff_mod.Backoff,
    ) -> None:
        self.container = container
        self.images = images
        self.pod_uid = pod_uid
        self.auths = list(auths)
        self.image_backoff = image_backoff
        self.done = anyio.Event()
        self.error: tuple[SyncError, str] | None = None
        self.events: list[tuple[str, str, str]] = []
        """``(type, reason, message)`` of each event, for every container of the image."""
        self.started = False
        self.pulling = False
        """The image is not on the engine, and is being pulled (or its pull refused)."""

    async def run(self) -> None:
        if self.started:
            return
        self.started = True
        try:
            await self._run()
        finally:
            self.done.set()

    def _event(self, type: str, reason: str, message: str) -> None:
        self.events.append((type, reason, message))

    async def _run(self) -> None:
        image = self.container.image or ""
        policy = self.container.imagePullPolicy or "IfNotPresent"
        key = backoff_mod.image_pull_key(pod_uid=self.pod_uid, image=image)
        now = datetime.now(UTC)
        try:
            validate_image_name(image)
        except errors.InvalidImageName as e:
            self.error = (SyncError.INVALID_IMAGE_NAME, str(e))
            self._event("Warning", "InspectFailed", str(e))
            return
        try:
            present = policy != "Always" and await self.images.is_present(image)
        except errors.DockerError as e:
            self.error = (SyncError.IMAGE_PULL, str(e))
            return
        if present:
            self._event("Normal", "Pulled", f'Container image "{image}" already present on machine')
            return
        if policy != "Never" and self.image_backoff.is_in_backoff_since_update(key, event_time=now):
            message = backoff_mod.image_pull_back_off_message(image)
            self.error = (SyncError.IMAGE_PULL_BACK_OFF, message)
            if self.image_backoff.report_due(key):
                self._event("Normal", "BackOff", message)
                self._event("Warning", "Failed", "Error: ImagePullBackOff")
            return
        self.pulling = True
        if policy != "Never":
            self._event("Normal", "Pulling", f'Pulling image "{image}"')
        await self._ensure(image, policy, key, now)

    async def _ensure(self, image: str, policy: str, key: tuple[str, str], now: datetime) -> None:
        try:
            _, message = await self.images.ensure(image, policy=policy, auths=self.auths)
        except errors.InvalidImageName as e:
            self.error = (SyncError.INVALID_IMAGE_NAME, str(e))
            self._event("Warning", "InspectFailed", str(e))
            return
        except errors.ImageNeverPull as e:
            self.error = (SyncError.IMAGE_NEVER_PULL, str(e))
            self._event("Warning", "ErrImageNeverPull", str(e))
            return
        except errors.DockerError as e:
            self.image_backoff.next(key, event_time=now)
            self.error = (SyncError.IMAGE_PULL, str(e))
            self._event("Warning", "Failed", f'Failed to pull image "{image}": {e}')
            self._event("Warning", "Failed", "Error: ErrImagePull")
            return
        self._event("Normal", "Pulled", message)


__all__ = ["ImagePull"]
