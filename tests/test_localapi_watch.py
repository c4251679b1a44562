"""Watches of the local API's pods: the initial events and bookmark of a watch-list, field
selectors, Tables, and a deleted pod's last changes before it goes."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from localapi_helpers import Client, apply, plain, serving

from asynckubelet.kubectl.tables import TABLE_ACCEPT
from asynckubelet.node.kubelet import Kubelet

pytestmark = pytest.mark.anyio


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[Client, Kubelet]]:
    async with serving(tmp_path) as pair:
        yield pair


async def events_until(
    lines: Any, done: Any, *, limit: int = 50
) -> list[tuple[str, dict[str, Any]]]:
    seen: list[tuple[str, dict[str, Any]]] = []
    with anyio.fail_after(10):
        while len(seen) < limit:
            line = await lines.readline()
            assert line, "the watch ended"
            event = json.loads(line)
            seen.append((event["type"], event["object"]))
            if done(seen):
                break
    return seen


WATCH_LIST = "watch=true&sendInitialEvents=true&allowWatchBookmarks=true"
"""A watch that starts with each object there (the API server's watch-list)."""


def names(events: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, str]]:
    return [(kind, (body.get("metadata") or {}).get("name", "")) for kind, body in events]


async def test_a_watch_starts_with_each_pod_then_a_bookmark_then_changes(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, plain("a"), plain("b"), plain("other", "team"))
    await node.wait("default", "b", "Running", timeout=10)
    response = await client.get(f"/api/v1/namespaces/default/pods?{WATCH_LIST}")
    initial = await events_until(response.content, lambda seen: seen[-1][0] == "BOOKMARK")
    assert sorted(names(initial[:-1])) == [("ADDED", "a"), ("ADDED", "b")]
    assert initial[-1][1]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    await node.delete("default", "a", grace_period=0)
    later = await events_until(response.content, lambda seen: seen[-1][0] == "DELETED")
    assert {name for _, name in names(later)} == {"a"}
    assert later[-1][1]["status"]["phase"] in ("Running", "Succeeded", "Failed", "Pending")
    response.close()


async def test_a_watch_of_one_pod_by_field_selector_sees_only_it(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, plain("a"), plain("b"))
    await node.wait("default", "b", "Running", timeout=10)
    response = await client.get(
        f"/api/v1/pods?{WATCH_LIST}&fieldSelector=metadata.name%3Db",
        headers={"Accept": TABLE_ACCEPT},
    )
    initial = await events_until(response.content, lambda seen: seen[-1][0] == "BOOKMARK")
    (kind, table), _ = initial
    assert kind == "ADDED"
    assert table["kind"] == "Table"
    assert [row["cells"][0] for row in table["rows"]] == ["b"]
    response.close()


async def test_a_watch_sees_a_deleted_pods_containers_stopped_before_it_goes(
    served: tuple[Client, Kubelet],
) -> None:
    client, node = served
    await apply(client, plain("a"))
    await node.wait("default", "a", "Ready", timeout=10)
    response = await client.get(
        f"/api/v1/namespaces/default/pods?{WATCH_LIST}", headers={"Accept": TABLE_ACCEPT}
    )
    await events_until(response.content, lambda seen: seen[-1][0] == "BOOKMARK")
    await node.delete("default", "a")
    later = await events_until(response.content, lambda seen: seen[-1][0] == "DELETED")
    assert [(kind, *table["rows"][0]["cells"][1:3]) for kind, table in later] == [
        ("MODIFIED", "1/1", "Terminating"),
        ("MODIFIED", "0/1", "Completed"),
        ("DELETED", "0/1", "Completed"),
    ]
    response.close()


async def test_a_watch_of_an_empty_namespace_sends_the_bookmark_at_once(
    served: tuple[Client, Kubelet],
) -> None:
    client, _ = served
    response = await client.get(f"/api/v1/namespaces/empty/pods?{WATCH_LIST}")
    assert names(await events_until(response.content, lambda seen: True)) == [("BOOKMARK", "")]
    response.close()


async def test_a_watch_by_another_field_is_a_bad_request(
    served: tuple[Client, Kubelet],
) -> None:
    client, _ = served
    response = await client.get("/api/v1/pods?watch=true&fieldSelector=spec.containers%3Dn1")
    assert response.status == 400
