"""The node's object store: one object per kind, namespace and name whichever source
brought it, every pod of a namespace seeing that namespace's ConfigMaps and Secrets,
kubectl's verdicts, sources that only remove their own objects, and objects kept 0600
across restarts."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest
from loguru import logger

from asynckubelet.manifests import Manifests, load_manifests_text
from asynckubelet.node.objects import (
    ObjectStore,
    forget_persisted,
    persisted_text,
    read_persisted,
)

CONFIG = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {mode: VALUE}
"""
SECRET = """\
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: NS}
stringData: {password: hunter2-do-not-print}
"""
POD = """\
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: app, image: busybox}]
"""


def load(text: str, *, ns: str = "default", value: str = "fast") -> Manifests:
    return load_manifests_text(text.replace("NS", ns).replace("VALUE", value), node_name="n1")


def test_a_configmap_from_one_source_is_seen_by_its_whole_namespace() -> None:
    store = ObjectStore()
    store.put(load(CONFIG), source="file:/etc/a.yaml")
    store.put(load(SECRET), source="api")
    view = store.view("default")
    assert view.configmaps == {"settings": {"mode": "fast"}}
    assert view.secrets == {"db": {"password": b"hunter2-do-not-print"}}
    assert store.view("other").configmaps == {}


@pytest.mark.parametrize(("value", "verdict"), [("fast", "unchanged"), ("slow", "configured")])
def test_applying_again_is_unchanged_or_configured_as_kubectl_says(
    value: str, verdict: str
) -> None:
    store = ObjectStore()
    [first] = store.put(load(CONFIG), source="api")
    [again] = store.put(load(CONFIG, value=value), source="api")
    assert (str(first), str(again)) == (
        "configmap/settings created",
        f"configmap/settings {verdict}",
    )


def test_the_server_fields_survive_an_update_and_are_not_compared() -> None:
    store = ObjectStore()
    store.put(load(CONFIG), source="api")
    before = store.get("ConfigMap", "default", "settings")
    store.put(load(CONFIG, value="slow"), source="api")
    after = store.get("ConfigMap", "default", "settings")
    assert before is not None
    assert after is not None
    assert after.body["metadata"]["uid"] == before.body["metadata"]["uid"]
    assert after.body["data"] == {"mode": "slow"}


def test_a_source_that_drops_an_object_removes_only_its_own() -> None:
    store = ObjectStore()
    store.set_source("file:a", load(CONFIG + "---\n" + SECRET))
    store.put(load(SECRET), source="api")
    store.set_source("file:a", Manifests())
    assert store.get("ConfigMap", "default", "settings") is None
    assert store.get("Secret", "default", "db") is not None


def test_listeners_hear_the_namespaces_that_changed_and_nothing_when_unchanged() -> None:
    store = ObjectStore()
    heard: list[frozenset[str]] = []
    store.subscribe(heard.append)
    store.put(load(CONFIG, ns="team-a"), source="api")
    store.put(load(CONFIG, ns="team-a"), source="api")
    store.remove("ConfigMap", "team-a", "settings")
    assert heard == [frozenset({"team-a"}), frozenset({"team-a"})]


def test_objects_of_the_api_are_kept_0600_and_file_objects_are_not(tmp_path: Path) -> None:
    directory = tmp_path / "objects"
    store = ObjectStore(directory=directory)
    store.put(load(SECRET), source="api")
    store.set_source("file:/etc/a.yaml", load(CONFIG))
    [kept] = directory.iterdir()
    assert kept.name == "secret_default_db.json"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    store.remove("Secret", "default", "db")
    assert list(directory.iterdir()) == []


def test_kept_objects_come_back_through_the_loader_with_their_uid(tmp_path: Path) -> None:
    directory = tmp_path / "objects"
    first = ObjectStore(directory=directory)
    first.put(load(CONFIG + "---\n" + SECRET + "---\n" + POD), source="api")
    uid = first.get("Secret", "default", "db")
    again = ObjectStore(directory=directory)
    again.restore(load_manifests_text(persisted_text(directory), node_name="n1"))
    restored = again.get("Secret", "default", "db")
    assert uid is not None
    assert restored is not None
    assert restored.body["metadata"]["uid"] == uid.body["metadata"]["uid"]
    assert again.view("default").secrets == {"db": {"password": b"hunter2-do-not-print"}}
    assert [p.metadata.name for p in again.pods() if p.metadata] == ["web"]


def test_a_kept_file_that_is_not_json_is_skipped(tmp_path: Path) -> None:
    directory = tmp_path / "objects"
    directory.mkdir()
    (directory / "configmap_default_x.json").write_text("{not json")
    assert read_persisted(directory) == []


def test_a_kept_object_can_be_forgotten_while_no_daemon_runs(tmp_path: Path) -> None:
    directory = tmp_path / "objects"
    ObjectStore(directory=directory).put(load(SECRET), source="api")
    assert forget_persisted(directory, "Secret", "default", "db")
    assert not forget_persisted(directory, "Secret", "default", "db")


def test_secret_values_never_reach_the_log(tmp_path: Path) -> None:
    lines: list[str] = []
    sink = logger.add(lines.append, level="TRACE")
    logger.enable("asynckubelet")
    try:
        store = ObjectStore(directory=tmp_path / "objects")
        store.put(load(SECRET), source="api")
        store.put(load(SECRET.replace("hunter2", "swordfish")), source="api")
        store.remove("Secret", "default", "db")
    finally:
        logger.remove(sink)
    assert lines
    assert not any("hunter2" in line or "swordfish" in line for line in lines)
