"""The node's objects: Namespaces, ConfigMaps, Secrets and the Pods applied to it, kept
as an API server keeps them.

A kubectl user applies a Secret from one file and a Pod that mounts it from another, and
expects the pod to find it: on a cluster objects live in the API server, not in the files
they came from. This store keeps one object per ``(kind, namespace, name)``, whichever
source put it there (the local API's ``apply``, a library call, a static manifest file),
and gives every pod of a namespace that namespace's ConfigMaps and Secrets
(:meth:`ObjectStore.view`). A change tells the subscribers which namespaces it touched, so
the node can wake the pods that wait for a ConfigMap and refresh mounted volumes.

Each object remembers its source. A source that lists its objects again
(:meth:`ObjectStore.set_source`, a manifest file that was edited) removes those it no
longer lists, but only those still its own: whoever stored an object last owns it.

Objects of the persistent source (the node's API) are written to ``directory`` as one
JSON file each, mode 0600 in a 0700 directory, through :mod:`asynckubelet.hostfs`, so a
restarted daemon finds them; the node reads them back through the manifest loader, as
hostile as any manifest (:func:`read_persisted`). Secret values never reach a log line.
"""

from __future__ import annotations

import base64
import builtins
import copy
import json
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

from lightkube.models.core_v1 import Namespace, Pod
from loguru import logger

from asynckubelet import hostfs
from asynckubelet.manifests import Manifests
from asynckubelet.manifests.decoding import MAX_DOCUMENT_BYTES

KINDS = ("Namespace", "ConfigMap", "Secret", "Service", "Pod")
"""Every kind stored, in the order a restore applies them (Namespaces first, for their
Pod Security labels)."""
RESOURCES = {
    "Namespace": "namespace",
    "ConfigMap": "configmap",
    "Secret": "secret",
    "Service": "service",
    "Pod": "pod",
}
"""kubectl's resource name of each kind (``secret/x created``)."""
PLURALS = {
    "Namespace": "namespaces",
    "ConfigMap": "configmaps",
    "Secret": "secrets",
    "Service": "services",
    "Pod": "pods",
}
SERVER_FIELDS = ("uid", "creationTimestamp", "resourceVersion", "generation", "managedFields")
"""Metadata the server sets: not part of what was applied, so not compared."""
OBJECTS_DIR = "objects"
"""Where in the state dir a daemon keeps its objects."""
OBJECTS_DIR_MODE = 0o700
OBJECT_FILE_MODE = 0o600

Key = tuple[str, str, str]
"""``(kind, namespace, name)``; a Namespace's namespace is ``""``."""
Verdict = Literal["created", "configured", "unchanged"]
ChangeListener = Callable[[frozenset[str]], None]
"""Told the namespaces whose ConfigMaps or Secrets changed."""
ObjectListener = Callable[["Key"], None]
"""Told the key of every object stored anew, changed or removed, whatever its kind."""


def object_key(kind: str, namespace: str | None, name: str) -> Key:
    return (kind, "" if kind == "Namespace" else (namespace or "default"), name)


@dataclass(frozen=True)
class StoredObject:
    """One object as stored: its v1 form (server fields set) and the source that put it."""

    kind: str
    namespace: str
    name: str
    body: Mapping[str, Any] = field(repr=False)
    source: str

    @property
    def key(self) -> Key:
        return (self.kind, self.namespace, self.name)

    @property
    def resource(self) -> str:
        return RESOURCES[self.kind]

    def secret_data(self) -> dict[str, bytes]:
        """A Secret's decoded ``data`` (stored as base64 text, as the API server stores it)."""
        return {k: base64.b64decode(v) for k, v in (self.body.get("data") or {}).items()}

    def created(self) -> datetime | None:
        text = (self.body.get("metadata") or {}).get("creationTimestamp")
        if not text:
            return None
        try:
            return datetime.fromisoformat(str(text).replace("Z", "+00:00"))
        except ValueError:
            return None


@dataclass(frozen=True)
class Applied:
    """What an apply did to one object, in kubectl's words."""

    kind: str
    namespace: str
    name: str
    verdict: Verdict

    @property
    def resource(self) -> str:
        return RESOURCES[self.kind]

    def __str__(self) -> str:
        return f"{self.resource}/{self.name} {self.verdict}"


@dataclass(frozen=True)
class NamespaceView:
    """What the pods of one namespace may refer to."""

    configmaps: Mapping[str, Mapping[str, str]]
    binary_configmaps: Mapping[str, Mapping[str, bytes]]
    secrets: Mapping[str, Mapping[str, bytes]] = field(repr=False)
    secret_types: Mapping[str, str]


def manifest_bodies(manifests: Manifests, *, pods: bool = True) -> list[tuple[Key, dict[str, Any]]]:
    """Every object of ``manifests`` as ``(key, v1 dict)``, Namespaces first."""
    found: list[tuple[Key, dict[str, Any]]] = []
    groups: list[tuple[str, Iterable[Any]]] = [
        ("Namespace", manifests.namespaces),
        ("ConfigMap", manifests.configmaps),
        ("Secret", manifests.secrets),
        ("Service", manifests.services),
    ]
    if pods:
        groups.append(("Pod", manifests.pods))
    for kind, objects in groups:
        for obj in objects:
            meta = obj.metadata
            if meta is None or not meta.name:
                continue
            body = obj.to_dict()
            body["apiVersion"], body["kind"] = "v1", kind
            found.append((object_key(kind, meta.namespace, meta.name), body))
    return found


def _content(body: Mapping[str, Any]) -> dict[str, Any]:
    """What was applied: the object without the fields the server sets, nor its status."""
    shown = {k: v for k, v in body.items() if k != "status"}
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in SERVER_FIELDS}
    shown["metadata"] = meta
    return shown


def _file_name(key: Key) -> str:
    kind, namespace, name = key
    return hostfs.single_name(f"{kind.lower()}_{namespace}_{name}.json", what="object file name")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectStore:
    """Objects by ``(kind, namespace, name)``; see the module's docstring.

    ``directory`` (e.g. ``<state>/objects``) keeps the objects of ``persistent_source``
    across restarts; None keeps everything in memory only.
    """

    def __init__(
        self,
        *,
        directory: Path | None = None,
        persistent_source: str = "api",
        clock: Callable[[], str] = _now,
    ) -> None:
        self.directory = directory
        self.persistent_source = persistent_source
        self._clock = clock
        self._objects: dict[Key, StoredObject] = {}
        self._listeners: list[ChangeListener] = []
        self._object_listeners: list[ObjectListener] = []

    # -- reading ----------------------------------------------------------------------------

    def get(self, kind: str, namespace: str | None, name: str) -> StoredObject | None:
        return self._objects.get(object_key(kind, namespace, name))

    def list(self, kind: str, namespace: str | None = None) -> list[StoredObject]:
        """Objects of ``kind`` (of one namespace, or of all when None), by namespace and name."""
        found = [
            o
            for o in self._objects.values()
            if o.kind == kind and (namespace is None or o.namespace == namespace)
        ]
        return sorted(found, key=lambda o: (o.namespace, o.name))

    def namespaces(self) -> builtins.list[Namespace]:
        return [
            cast(Namespace, Namespace.from_dict(copy.deepcopy(dict(o.body))))
            for o in self.list("Namespace")
        ]

    def pods(self) -> builtins.list[Pod]:
        """The Pods stored (those applied through the node's API)."""
        return [cast(Pod, Pod.from_dict(copy.deepcopy(dict(o.body)))) for o in self.list("Pod")]

    def view(self, namespace: str) -> NamespaceView:
        configmaps: dict[str, dict[str, str]] = {}
        binary: dict[str, dict[str, bytes]] = {}
        secrets: dict[str, dict[str, bytes]] = {}
        types: dict[str, str] = {}
        for o in self.list("ConfigMap", namespace):
            configmaps[o.name] = dict(o.body.get("data") or {})
            binary[o.name] = {
                k: base64.b64decode(v) for k, v in (o.body.get("binaryData") or {}).items()
            }
        for o in self.list("Secret", namespace):
            secrets[o.name] = o.secret_data()
            types[o.name] = str(o.body.get("type") or "Opaque")
        return NamespaceView(
            configmaps=configmaps, binary_configmaps=binary, secrets=secrets, secret_types=types
        )

    def verdicts(self, manifests: Manifests) -> builtins.list[Applied]:
        """What storing ``manifests`` would do to each of their objects."""
        return [self._verdict(key, body) for key, body in manifest_bodies(manifests)]

    def _verdict(self, key: Key, body: Mapping[str, Any]) -> Applied:
        old = self._objects.get(key)
        verdict: Verdict = "created"
        if old is not None:
            verdict = "unchanged" if _content(old.body) == _content(body) else "configured"
        return Applied(kind=key[0], namespace=key[1], name=key[2], verdict=verdict)

    # -- changing ---------------------------------------------------------------------------

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def subscribe_objects(self, listener: ObjectListener) -> Callable[[], None]:
        """``listener`` is told the key of every object stored, changed or removed (what a
        controller of that kind reacts to)."""
        self._object_listeners.append(listener)

        def unsubscribe() -> None:
            if listener in self._object_listeners:
                self._object_listeners.remove(listener)

        return unsubscribe

    def put(
        self, manifests: Manifests, *, source: str, pods: bool = True
    ) -> builtins.list[Applied]:
        """Store every object of ``manifests`` as ``source``'s (their Pods too, unless
        ``pods`` is False); what that did to each."""
        done: builtins.list[Applied] = []
        touched: set[str] = set()
        for key, body in manifest_bodies(manifests, pods=pods):
            applied = self._verdict(key, body)
            done.append(applied)
            old = self._objects.get(key)
            if applied.verdict == "unchanged" and old is not None and old.source == source:
                continue
            self._store(key, body, source, old)
            if applied.verdict != "unchanged" and key[0] in ("ConfigMap", "Secret"):
                touched.add(key[1])
        self._notify(touched)
        return done

    def set_source(self, source: str, manifests: Manifests) -> None:
        """Everything ``source`` holds now, apart from Pods: its objects no longer listed
        are removed (those another source stored since are left to it)."""
        keys = {key for key, _ in manifest_bodies(manifests, pods=False)}
        touched: set[str] = set()
        for key, o in list(self._objects.items()):
            if o.source == source and o.kind != "Pod" and key not in keys:
                self._drop(key)
                touched.add(key[1])
        self._notify(touched | self._put_quietly(manifests, source))

    def _put_quietly(self, manifests: Manifests, source: str) -> set[str]:
        touched: set[str] = set()
        for key, body in manifest_bodies(manifests, pods=False):
            old = self._objects.get(key)
            if old is not None and old.source == source and _content(old.body) == _content(body):
                continue
            self._store(key, body, source, old)
            touched.add(key[1])
        return touched

    def remove(self, kind: str, namespace: str | None, name: str) -> StoredObject | None:
        """Remove one object; it, or None when there was none."""
        key = object_key(kind, namespace, name)
        removed = self._drop(key)
        if removed is not None and kind in ("ConfigMap", "Secret"):
            self._notify({key[1]})
        return removed

    def _store(
        self, key: Key, body: Mapping[str, Any], source: str, old: StoredObject | None
    ) -> None:
        stored = copy.deepcopy(dict(body))
        meta = stored.setdefault("metadata", {})
        old_meta = (old.body.get("metadata") or {}) if old is not None else {}
        meta["creationTimestamp"] = old_meta.get("creationTimestamp") or self._clock()
        if key[0] != "Pod" or not meta.get("uid"):
            meta["uid"] = old_meta.get("uid") or str(uuid.uuid4())
        obj = StoredObject(kind=key[0], namespace=key[1], name=key[2], body=stored, source=source)
        self._objects[key] = obj
        if old is not None and old.source == self.persistent_source and source != old.source:
            self._unpersist(key)
        if source == self.persistent_source:
            self._persist(obj)
        self._tell(key)
        logger.debug("{} {} stored from {}", obj.resource, "/".join(filter(None, key[1:])), source)

    def _drop(self, key: Key) -> StoredObject | None:
        old = self._objects.pop(key, None)
        if old is not None and old.source == self.persistent_source:
            self._unpersist(key)
        if old is not None:
            self._tell(key)
        return old

    def _tell(self, key: Key) -> None:
        for listener in list(self._object_listeners):
            listener(key)

    def _notify(self, namespaces: set[str]) -> None:
        if not namespaces:
            return
        changed = frozenset(namespaces)
        for listener in list(self._listeners):
            listener(changed)

    # -- persistence ------------------------------------------------------------------------

    def _persist(self, obj: StoredObject) -> None:
        if self.directory is None:
            return
        try:
            hostfs.write_file(
                self.directory,
                _file_name(obj.key),
                json.dumps(obj.body).encode(),
                mode=OBJECT_FILE_MODE,
                dir_mode=OBJECTS_DIR_MODE,
            )
        except OSError as e:
            logger.warning("cannot keep {} {}: {}", obj.resource, obj.name, e)

    def _unpersist(self, key: Key) -> None:
        if self.directory is None or not self.directory.is_dir():
            return
        try:
            hostfs.remove_file(self.directory, _file_name(key))
        except OSError as e:
            logger.warning("cannot remove the kept {} {}: {}", RESOURCES[key[0]], key[2], e)

    def restore(self, manifests: Manifests) -> None:
        """Take back the kept objects, once :func:`persisted_text` went through the
        manifest loader; their uid and creation time are those they were stored with."""
        for key, body in manifest_bodies(manifests):
            meta = body.setdefault("metadata", {})
            meta.setdefault("creationTimestamp", self._clock())
            meta.setdefault("uid", str(uuid.uuid4()))
            self._objects[key] = StoredObject(
                kind=key[0], namespace=key[1], name=key[2], body=body, source=self.persistent_source
            )
            self._tell(key)


def read_persisted(directory: Path | None) -> list[dict[str, Any]]:
    """The objects kept in ``directory`` as plain dicts, to be loaded as manifests (a file
    that does not read or parse is skipped, named in the log)."""
    if directory is None or not directory.is_dir():
        return []
    found: list[dict[str, Any]] = []
    for name in sorted(os.listdir(directory)):
        if not name.endswith(".json") or name.startswith("."):
            continue
        try:
            data = json.loads(hostfs.read_file(directory, name, limit=MAX_DOCUMENT_BYTES))
        except (OSError, ValueError) as e:
            logger.warning("kept object {} not read: {}", name, type(e).__name__)
            continue
        if isinstance(data, dict) and data.get("kind") in KINDS:
            found.append(data)
    found.sort(key=lambda b: KINDS.index(b["kind"]))
    return found


def forget_persisted(directory: Path, kind: str, namespace: str | None, name: str) -> bool:
    """Remove one kept object while no daemon runs (``delete`` without one); whether it
    was there."""
    key = object_key(kind, namespace, name)
    if not directory.is_dir():
        return False
    return hostfs.remove_file(directory, _file_name(key))


def persisted_text(directory: Path | None) -> str:
    """The kept objects as one ``kind: List`` JSON document, for the manifest loader."""
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": read_persisted(directory)})


def secret_summary(body: Mapping[str, Any]) -> dict[str, Any]:
    """A Secret as the local API lists it: everything but its values."""
    shown = {k: v for k, v in body.items() if k not in ("data", "stringData")}
    shown["metadata"] = dict(body.get("metadata") or {})
    return shown


def data_count(obj: StoredObject) -> int:
    """kubectl's DATA column: keys of ``data`` (and ``binaryData``)."""
    return len(obj.body.get("data") or {}) + len(obj.body.get("binaryData") or {})


__all__ = [
    "KINDS",
    "Applied",
    "NamespaceView",
    "ObjectStore",
    "StoredObject",
    "data_count",
    "forget_persisted",
    "manifest_bodies",
    "object_key",
    "persisted_text",
    "read_persisted",
    "secret_summary",
]
