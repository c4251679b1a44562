"""A node over a fake engine serving its Kubernetes API on a loopback port, and the requests
the Kubernetes API's unit tests make of it."""

from __future__ import annotations

import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import anyio
import pytest
from daemon_helpers import IMAGES
from lightkube.models.core_v1 import Container, Pod, PodSpec
from lightkube.models.meta_v1 import ObjectMeta

from asynckubelet.api.kube import pki
from asynckubelet.api.kube.server import KubeAPI, serve_kube_api
from asynckubelet.node.kubelet import Kubelet, KubeletConfig
from asynckubelet.testing import FakeDocker


@dataclass
class Served:
    api: KubeAPI
    node: Kubelet
    state: Path

    def context(self, *, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=self.state / pki.PKI_DIR / "ca.crt")
        if cert is not None and key is not None:
            context.load_cert_chain(cert, key)
        return context

    def admin(self) -> ssl.SSLContext:
        directory = self.state / pki.PKI_DIR
        return self.context(cert=directory / "admin.crt", key=directory / "admin.key")

    async def request(
        self,
        path: str,
        *,
        method: str = "GET",
        context: ssl.SSLContext | None = None,
        accept: str = "application/json",
    ) -> tuple[int, str, dict[str, Any]]:
        async with (
            aiohttp.ClientSession() as session,
            session.request(
                method,
                self.api.url + path,
                ssl=context or self.admin(),
                headers={"Accept": accept},
            ) as response,
        ):
            text = await response.text()
            return response.status, response.headers.get("Content-Type", ""), json.loads(text)


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """A test's node serving its Kubernetes API (:func:`served_node`)."""
    async with served_node(tmp_path) as found:
        yield found


@contextlib.asynccontextmanager
async def served_node(tmp_path: Path) -> AsyncIterator[Served]:
    """A node over a fake engine serving its Kubernetes API on a free loopback port."""
    state = tmp_path / "state"
    config = KubeletConfig(node_name="n1", state_dir=state, housekeeping_period=3600)
    node = Kubelet(config, docker=FakeDocker(images=IMAGES))
    async with node, anyio.create_task_group() as tg:
        api: KubeAPI = await tg.start(
            lambda task_status: serve_kube_api(
                node, state_dir=state, host="127.0.0.1", port=0, task_status=task_status
            )
        )
        yield Served(api=api, node=node, state=state)
        tg.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def served_with_pod(tmp_path: Path, body: dict[str, Any]) -> AsyncIterator[Served]:
    """:func:`served_node` with the pod ``body`` created in its ``default`` namespace."""
    async with served_node(tmp_path) as found:
        code, answer = await call(found, "POST", "/api/v1/namespaces/default/pods", body)
        assert code == 201, answer
        yield found


async def call(
    api: Served, method: str, path: str, body: Any = None, *, kind: str = "application/json"
) -> tuple[int, dict[str, Any]]:
    """The status and JSON answer of ``method path`` with ``body`` as JSON of type ``kind``."""
    data = None if body is None else json.dumps(body)
    code, answer, _ = await answered(api, method, path, data, kind=kind)
    return code, answer


async def answered(
    api: Served, method: str, path: str, data: str | None, *, kind: str
) -> tuple[int, dict[str, Any], list[str]]:
    """The status, JSON answer and ``Warning`` headers of ``method path`` sending ``data`` as
    ``kind``."""
    async with (
        aiohttp.ClientSession() as session,
        session.request(
            method,
            api.api.url + path,
            ssl=api.admin(),
            data=data,
            headers={"Content-Type": kind, "Accept": "application/json"},
        ) as response,
    ):
        text = await response.text()
        return response.status, json.loads(text), response.headers.getall("Warning", [])


def pod(name: str, **labels: str) -> Pod:
    return Pod(
        apiVersion="v1",
        kind="Pod",
        metadata=ObjectMeta(name=name, namespace="default", labels=labels or None),
        spec=PodSpec(containers=[Container(name="app", image="busybox:1.35")]),
    )


async def watch_lines(served: Served, path: str, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    async with (
        aiohttp.ClientSession() as session,
        session.get(served.api.url + path, ssl=served.admin()) as response,
    ):
        async for line in response.content:
            found.append(json.loads(line))
            if len(found) == count:
                break
    return found


__all__ = [
    "Served",
    "answered",
    "call",
    "pod",
    "served",
    "served_node",
    "served_with_pod",
    "watch_lines",
]
