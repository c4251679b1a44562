"""The node's Node object: registration, then status reports.

The kubelet's ``registerWithAPIServer`` and ``updateNodeStatus``: the node creates its Node
with labels, taints and a first status (the API server keeps a Node's status on create);
when one of that name exists, it is adopted, and only the default and configured labels
are put right (its spec, taints included, is the cluster's). Then, every
``update_frequency`` seconds, the Node is read again (its ``spec.podCIDR``, labels and
taints are what admission and the pod network need), the host is sampled, and the status
is patched when :func:`~asynckubelet.cluster.nodestatus.needs_report` says so. The Node
is never deleted by the node: a Node that disappears is registered again.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
from lightkube.models.core_v1 import Node

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.cluster import nodestatus
from asynckubelet.cluster.api import ClusterAPI
from asynckubelet.cluster.events import EventReporter
from asynckubelet.cluster.host import sample_host
from asynckubelet.cluster.nodestatus import HostSample, NodeFacts, Readiness, Thresholds
from asynckubelet.cluster.retry import Reconnect, call
from asynckubelet.node.admission import Taint

REGISTER_RETRY_MAX = 7.0


@dataclass
class NodeRegistrar:
    """Registers the Node and keeps its status current."""

    api: ClusterAPI
    facts: NodeFacts
    labels: dict[str, str]
    taints: tuple[Taint, ...]
    arch: str
    readiness: Callable[[], Awaitable[Readiness]]
    nodefs: Path
    imagefs: Path | None = None
    thresholds: Thresholds = field(default_factory=Thresholds)
    update_frequency: float = nodestatus.UPDATE_FREQUENCY
    report_frequency: float = nodestatus.REPORT_FREQUENCY
    events: EventReporter | None = None
    sample: Callable[[], HostSample] | None = None
    clock: Callable[[], float] = anyio.current_time
    node: Node | None = None
    """The Node as the API server last showed it."""
    last_report: float | None = None
    reports: int = 0
    _wake: anyio.Event = field(default_factory=anyio.Event)
    _ready: bool | None = None

    @property
    def name(self) -> str:
        return self.facts.name

    def uid(self) -> str | None:
        return self.node.metadata.uid if self.node is not None and self.node.metadata else None

    def poke(self) -> None:
        """Compute and maybe send the status now, not at the next tick."""
        self._wake.set()

    async def _first_status(self) -> dict[str, Any]:
        conditions = nodestatus.node_conditions(
            sample=self._sample(),
            readiness=await self.readiness(),
            previous=[],
            now=datetime.now(UTC),
            thresholds=self.thresholds,
        )
        return nodestatus.status_fields(self.facts, conditions)

    def _sample(self) -> HostSample:
        if self.sample is not None:
            return self.sample()
        return sample_host(nodefs=self.nodefs, imagefs=self.imagefs)

    async def register(self) -> Node:
        """Create or adopt the Node; retried until the API server answers. A refusal
        (403: this kubeconfig is not this node's) is a KubeconfigError-worthy
        ClusterAPIError that ends the node."""
        backoff = Reconnect(initial=0.1, maximum=REGISTER_RETRY_MAX)
        while True:
            try:
                node = await self._register_once()
            except errors.ClusterAPIError as e:
                if e.code in (401, 403):
                    raise
                logger.warning("registering node {} failed; retrying: {}", self.name, e)
                await backoff.failed()
                continue
            except errors.ClusterError as e:
                logger.warning("registering node {} failed; retrying: {}", self.name, e)
                await backoff.failed()
                continue
            self.node = node
            return node

    async def _register_once(self) -> Node:
        wanted = nodestatus.registration(
            self.facts, labels=self.labels, taints=self.taints, arch=self.arch
        )
        wanted_dict = wanted.to_dict()
        wanted_dict["status"] = await self._first_status()
        try:
            created = await self.api.create_node(cast(Node, Node.from_dict(wanted_dict)))
        except errors.ClusterAPIError as e:
            if not e.conflict:
                raise
        else:
            logger.info("registered node {}", self.name)
            self.last_report = self.clock()
            self.reports += 1
            return created
        existing = await self.api.get_node(self.name)
        if existing is None:
            raise errors.ClusterError(f"node {self.name} exists and then does not")
        patch = nodestatus.label_patch(existing, labels=self.labels, arch=self.arch)
        if patch is not None:
            existing = await self.api.patch_node(self.name, patch)
        logger.info("node {} exists; adopted it", self.name)
        return existing

    async def update_once(self) -> bool:
        """Read the Node, compute its status, send it when needed; True when sent."""
        node = await call(lambda: self.api.get_node(self.name))
        if node is None:
            logger.warning("node {} was deleted; registering it again", self.name)
            self.last_report = None
            node = await self._register_once()
        self.node = node
        readiness = await self.readiness()
        previous = (node.status.conditions if node.status else None) or []
        conditions = nodestatus.node_conditions(
            sample=self._sample(),
            readiness=readiness,
            previous=previous,
            now=datetime.now(UTC),
            thresholds=self.thresholds,
        )
        fields = nodestatus.status_fields(self.facts, conditions)
        now = self.clock()
        if not nodestatus.needs_report(
            current=node.status,
            fields=fields,
            last_report=self.last_report,
            now=now,
            report_frequency=self.report_frequency,
        ):
            self._note_ready(conditions)
            return False
        self.node = await call(lambda: self.api.patch_node_status(self.name, {"status": fields}))
        self.last_report = now
        self.reports += 1
        self._note_ready(conditions)
        return True

    def _note_ready(self, conditions: list[Any]) -> None:
        ready = next((c.status == "True" for c in conditions if c.type == nodestatus.READY), False)
        if ready == self._ready:
            return
        self._ready = ready
        if self.events is not None:
            word = "NodeReady" if ready else "NodeNotReady"
            self.events.node_event(
                type="Normal", reason=word, message=f"Node {self.name} status is now: {word}"
            )

    async def run(
        self, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
    ) -> None:
        """Keep the status current (the Node must be registered)."""
        task_status.started()
        while True:
            try:
                await self.update_once()
            except errors.ClusterError as e:
                logger.warning("updating the status of node {} failed: {}", self.name, e)
            with anyio.move_on_after(self.update_frequency):
                await self._wake.wait()
            self._wake = anyio.Event()


__all__ = ["NodeRegistrar"]
