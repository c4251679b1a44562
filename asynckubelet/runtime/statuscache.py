"""What the runtime last learnt from inspecting each container of this node's pods.

Inspecting is the costly part of reading a pod's state, and an instance's inspect output
changes only with its state, so the status reader keeps the record it made of each
container and inspects again only what changed state since, or what an event was about
(:meth:`StatusCache.forget`; Docker emits ``die`` before its list shows the exit). The
sync that starts a sandbox inspects it for its network namespace and leaves that inspect
here (:meth:`StatusCache.remember_sandbox`). The cache holds the records made from the
inspect output, never the output itself (a few hundred bytes a container instead of tens
of kilobytes).
"""

from __future__ import annotations

from asynckubelet.docker import ContainerInspect
from asynckubelet.runtime import containers as ctr
from asynckubelet.runtime import naming
from asynckubelet.runtime.types import ContainerStatus, SandboxStatus

MAX_OUTDATED = 4096
"""Container ids marked outdated kept at most; past that, ids not cached are dropped."""


class StatusCache:
    """Records of inspected containers, shared by the status reader and the sync."""

    def __init__(self) -> None:
        self.image_ids: dict[str, str] = {}
        """Image reference -> the image id as cri-dockerd reports it."""
        self.inspected: dict[str, tuple[str, str, ContainerStatus | SandboxStatus]] = {}
        """Container id -> (pod uid, Docker state, record)."""
        self.outdated: set[str] = set()
        """Container ids an event was about since their last inspect (see :meth:`forget`)."""

    def forget(self, container_id: str) -> None:
        """Inspect this container afresh on the next status read. The cached record stays
        in use by a read already under way."""
        self.outdated.add(container_id)
        if len(self.outdated) > MAX_OUTDATED:
            self.outdated.intersection_update(self.inspected)

    def remember_sandbox(self, uid: str, info: ContainerInspect) -> None:
        """Keep an inspect of the pod's sandbox made by its sync (for its network), so
        that the next status read need not inspect it again while its state is the same."""
        cid = info.get("Id", "")
        state = str(info.get("State", {}).get("Status", ""))
        if cid and state and ctr.labels_of(info).get(naming.LABEL_TYPE) == naming.TYPE_SANDBOX:
            self.inspected[cid] = (uid, state, ctr.sandbox_status_from_inspect(info, ip=None))
            self.outdated.discard(cid)


__all__ = ["MAX_OUTDATED", "StatusCache"]
