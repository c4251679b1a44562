"""API pods through the node: validation, admission, status, deletion (FakeDocker)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, cast

import anyio
import pytest
from fake_cluster import FakeCluster, pod
from lightkube.models.core_v1 import Pod, PodStatus
from polling import until

from asynckubelet.cluster.events import EventReporter, Involved
from asynckubelet.cluster.objects import ObjectCache, ObjectRef, pod_object_refs
from asynckubelet.cluster.reporter import PodStatusReporter
from asynckubelet.cluster.source import SOURCE_READY, ApiPodSource, validate
from asynckubelet.node.admission import NodeInfo, NodeResources
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.testing import FakeDocker

pytestmark = pytest.mark.anyio
BUSYBOX = "akltest.local/busybox:1.35"


def U(name: str) -> str:
    """A pod UID as the API server makes them (a UUID), the same for the same name."""
    return str(uuid.uuid5(uuid.NAMESPACE_OID, name))


PAUSE = "akltest.local/pause:3.10"


@dataclass
class Harness:
    api: FakeCluster
    docker: FakeDocker
    kubelet: Kubelet
    source: ApiPodSource
    reporter: PodStatusReporter
    pods: dict[str, Pod]

    def bind(self, *items: Pod) -> None:
        uids: set[str] = set()
        for item in items:
            assert item.metadata is not None
            assert item.metadata.uid
            self.pods[item.metadata.uid] = item
            uids.add(item.metadata.uid)
        self.source.on_change(dict(self.pods), uids)

    def remove(self, uid: str) -> None:
        self.pods.pop(uid)
        self.source.on_change(dict(self.pods), {uid})

    def patches(self, name: str) -> list[dict[str, Any]]:
        return [dict(p["status"]) for n, p in self.api.status_patches if n == name]


def api_pod(name: str, uid: str, **spec: Any) -> Pod:
    spec.setdefault("containers", [{"name": "c", "image": BUSYBOX}])
    return pod(name, uid, node="n1", **spec)


@asynccontextmanager
async def harness(*, cpu_millis: int = 2000) -> AsyncIterator[Harness]:
    api = FakeCluster()
    docker = FakeDocker(images=[BUSYBOX, PAUSE], url="tcp://fake:2375")
    config = KubeletConfig(
        node_name="n1",
        pause_image=PAUSE,
        docker_url="tcp://fake:2375",
        housekeeping_period=0.2,
        resync_period=0.2,
        host_ips=("10.0.0.5",),
        wait_for_sources=frozenset({SOURCE_READY}),
    )
    async with Kubelet(config, docker=docker) as kubelet:
        reporter = PodStatusReporter(api, resync=0.2)
        source = ApiPodSource(
            api=api,
            kubelet=kubelet,
            objects=ObjectCache(api, first_read_wait=0.1),
            reporter=reporter,
            node_info=lambda: NodeInfo(
                name="n1",
                allocatable=NodeResources(cpu_millis=cpu_millis, memory=8 * 1024**3),
                labels={"kubernetes.io/hostname": "n1"},
            ),
        )
        stop = reporter.attach(kubelet.status)
        async with anyio.create_task_group() as tg:
            await tg.start(source.objects.run)
            await tg.start(reporter.run)
            first = anyio.Event()
            await tg.start(
                lambda task_status: source.run(first_list=first, task_status=task_status)
            )
            h = Harness(api, docker, kubelet, source, reporter, {})
            h.bind()
            first.set()
            await source.synced.wait()
            try:
                yield h
            finally:
                stop()
                tg.cancel_scope.cancel()


async def test_a_bound_pod_runs_and_its_status_reaches_the_api_with_the_uid_as_precondition() -> (
    None
):
    async with harness() as h:
        h.bind(api_pod("web", U("web")))
        await until(lambda: any(s.get("phase") == "Running" for s in h.patches("web")))
        patch = next(p for n, p in h.api.status_patches if n == "web")
        assert patch["metadata"] == {"uid": U("web")}
        shown: dict[str, Any] = {}
        for status in h.patches("web"):
            shown.update(status)
        assert (shown["phase"], shown["hostIP"]) == ("Running", "10.0.0.5")
        assert h.kubelet.has_pod(U("web"))


async def test_a_pod_that_fails_validation_fails_with_the_field_error_and_nothing_runs() -> None:
    async with harness() as h:
        h.bind(api_pod("bad", U("bad"), containers=[{"name": "c", "image": ""}]))
        await until(lambda: bool(h.patches("bad")))
        status = h.patches("bad")[-1]
        assert status["phase"] == "Failed"
        assert status["reason"] == "FailedValidation"
        assert "spec.containers[0].image: Required value" in status["message"]
        assert h.docker.count("create_container") == 0
        assert not h.kubelet.has_pod(U("bad"))


async def test_a_pod_over_the_nodes_cpu_is_rejected_in_the_kubelets_words() -> None:
    async with harness(cpu_millis=1000) as h:
        big = [{"name": "c", "image": BUSYBOX, "resources": {"requests": {"cpu": "2"}}}]
        h.bind(api_pod("big", U("big"), containers=big))
        await until(lambda: bool(h.patches("big")))
        status = h.patches("big")[-1]
        assert (status["phase"], status["reason"]) == ("Failed", "OutOfcpu")
        assert status["message"] == (
            "Pod was rejected: Node didn't have enough resource: cpu, requested: 2000,"
            " used: 0, capacity: 1000"
        )
        assert not h.kubelet.has_pod(U("big"))


async def test_a_deleted_pod_is_stopped_then_deleted_for_good_with_grace_zero_and_its_uid() -> None:
    async with harness() as h:
        web = api_pod("web", U("web"), terminationGracePeriodSeconds=3)
        h.bind(web)
        await until(lambda: any(s.get("phase") == "Running" for s in h.patches("web")))
        deleting = cast(Pod, Pod.from_dict(web.to_dict()))
        assert deleting.metadata is not None
        deleting.metadata.deletionTimestamp = datetime.now(UTC)
        deleting.metadata.deletionGracePeriodSeconds = 3
        deleting.metadata.resourceVersion = "2"
        h.bind(deleting)
        await until(lambda: ("delete_pod", ("web", U("web"), 0)) in h.api.calls)
        assert not h.kubelet.has_pod(U("web"))
        assert not [c for c in h.docker.containers.values() if c.status == "running"]


async def test_a_pod_removed_from_the_api_is_stopped() -> None:
    async with harness() as h:
        h.bind(api_pod("web", U("web"), terminationGracePeriodSeconds=1))
        await until(lambda: h.kubelet.has_pod(U("web")))
        h.remove(U("web"))
        await until(lambda: not h.kubelet.has_pod(U("web")))
        assert ("delete_pod", ("web", U("web"), 0)) not in h.api.calls


async def test_a_mirror_pod_is_never_run() -> None:
    async with harness() as h:
        mirror = api_pod("static-n1", U("mirror"))
        assert mirror.metadata is not None
        mirror.metadata.annotations = {"kubernetes.io/config.mirror": "abc"}
        h.bind(mirror)
        await anyio.sleep(0.3)
        assert not h.kubelet.has_pod(U("mirror"))
        assert h.docker.count("create_container") == 0


def test_validation_keeps_the_api_uid() -> None:
    checked = validate(
        api_pod("p", "6f0c8e3a-1111-2222-3333-444455556666"),
        node_name="n1",
        pod_security="baseline",
    )
    assert checked.pod is not None
    assert checked.pod.metadata is not None
    assert checked.pod.metadata.uid == "6f0c8e3a-1111-2222-3333-444455556666"


def test_a_pod_names_its_configmaps_and_secrets_from_volumes_env_and_pull_secrets() -> None:
    p = api_pod(
        "p",
        "u",
        containers=[
            {
                "name": "c",
                "image": BUSYBOX,
                "env": [
                    {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "cm-env", "key": "k"}}},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "s-env", "key": "k"}}},
                ],
                "envFrom": [
                    {"configMapRef": {"name": "cm-from"}},
                    {"secretRef": {"name": "s-from"}},
                ],
            }
        ],
        volumes=[
            {"name": "v1", "configMap": {"name": "cm-vol"}},
            {"name": "v2", "secret": {"secretName": "s-vol"}},
            {
                "name": "v3",
                "projected": {
                    "sources": [
                        {"configMap": {"name": "kube-root-ca.crt"}},
                        {"serviceAccountToken": {"path": "token"}},
                    ]
                },
            },
        ],
        imagePullSecrets=[{"name": "regcred"}],
    )
    assert pod_object_refs(p) == {
        ObjectRef("ConfigMap", "default", name)
        for name in ("cm-env", "cm-from", "cm-vol", "kube-root-ca.crt")
    } | {ObjectRef("Secret", "default", name) for name in ("s-env", "s-from", "s-vol", "regcred")}


async def test_events_about_a_pod_are_posted_once_and_repeats_patch_the_count() -> None:
    api = FakeCluster()
    now = [0.0]
    reporter = EventReporter(
        api,
        node_name="n1",
        resolve=lambda uid: Involved("Pod", "default", "web", U("web")),
        clock=lambda: now[0],
        burst=2,
    )
    from asynckubelet.node.events import EventRecorder

    recorder = EventRecorder(node_name="n1")
    reporter.attach(recorder)
    web = api_pod("web", U("web"))
    async with anyio.create_task_group() as tg:
        await tg.start(reporter.run)
        recorder(web, type="Normal", reason="Pulled", message="already present", container="c")
        recorder(web, type="Warning", reason="BackOff", message="Back-off restarting")
        recorder(web, type="Warning", reason="BackOff", message="Back-off restarting")
        await anyio.sleep(0.1)
        now[0] += 300
        recorder(web, type="Warning", reason="BackOff", message="Back-off restarting")
        await anyio.sleep(0.1)
        tg.cancel_scope.cancel()
    assert [(e.reason, e.count) for e in api.events] == [("Pulled", 1), ("BackOff", 1)]
    first = api.events[0]
    assert first.involvedObject.fieldPath == "spec.containers{c}"
    assert (first.source.component, first.source.host) == ("kubelet", "n1")  # type: ignore[union-attr]
    assert reporter.dropped == 1
    assert [p["count"] for _, p in api.event_patches] == [3]


async def test_a_failed_sync_reason_the_api_server_still_shows_is_cleared_once_the_pod_runs() -> (
    None
):
    async with harness() as h:
        stale = api_pod("web", U("web"))
        stale.status = PodStatus(phase="Running", reason="FailedSync", message="error syncing pod")
        h.bind(stale)

        def shown() -> dict[str, Any]:
            merged: dict[str, Any] = {"phase": "Running", "reason": "FailedSync"}
            for status in h.patches("web"):
                merged.update(status)
            return merged

        await until(lambda: any(s.get("phase") == "Running" for s in h.patches("web")))
        await anyio.sleep(0.5)
        assert (shown()["phase"], shown()["reason"]) == ("Running", None)


async def test_an_ephemeral_container_the_api_server_added_runs_and_is_reported() -> None:
    async with harness() as h:
        h.bind(api_pod("web", U("web")))
        await until(lambda: any(s.get("phase") == "Running" for s in h.patches("web")))
        debugger = {"name": "debugger", "image": BUSYBOX, "targetContainerName": "c"}
        h.bind(api_pod("web", U("web"), ephemeralContainers=[debugger]))

        def reported() -> list[dict[str, Any]]:
            found: list[dict[str, Any]] = []
            for status in h.patches("web"):
                found = status.get("ephemeralContainerStatuses") or found
            return found

        await until(lambda: any("running" in s["state"] for s in reported()))
        (status,) = reported()
        assert (status["name"], status["ready"], status["restartCount"]) == ("debugger", False, 0)
        assert status["containerID"].startswith("docker://")
        shown: dict[str, Any] = {}
        for patch in h.patches("web"):
            shown.update(patch)
        assert [c["name"] for c in shown["containerStatuses"]] == ["c"]
