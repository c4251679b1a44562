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
restarted daemon finds them; those of the other persistent sources (the node's
controllers: the ReplicaSets and pods they made) in a folder of ``directory`` named after
the source. The node reads them back through the manifest loader, as hostile as any
manifest (:func:`read_persisted`). Secret values never reach a log line.

Kinds whose live form the node's controllers change (:attr:`~asynckubelet.manifests.
kinds.KindInfo.controlled`: status, revision annotations, a Job's generated selector)
keep the form they were applied in under ``kubectl.kubernetes.io/last-applied-
configuration``, as kubectl does, and an apply is ``unchanged`` when that form is: what
the controllers wrote never makes an unchanged manifest look changed. Their status,
written by :meth:`ObjectStore.update_status`, survives a new apply; their
``metadata.generation`` counts the changes of their spec.
"""

from __future__ import annotations

import base64
import builtins
import copy
import dataclasses
import json
import os
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, cast

from lightkube.models.core_v1 import Namespace, Pod

from asynckubelet import hostfs
from asynckubelet._logging import logger
from asynckubelet.errors import FieldError
from asynckubelet.manifests import Manifests
from asynckubelet.manifests import kinds as kind_table
from asynckubelet.manifests.decoding import MAX_DOCUMENT_BYTES
from asynckubelet.manifests.kinds import LAST_APPLIED

KINDS = tuple(kind_table.KINDS)
"""Every kind stored, in the order a restore applies them (Namespaces first, for their
Pod Security labels)."""
RESOURCES = {k.kind: k.resource for k in kind_table.KINDS.values()}
"""kubectl's resource name of each kind (``secret/x created``)."""
PLURALS = {k.kind: k.plural for k in kind_table.KINDS.values()}
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
KeyListener = Callable[[Key], None]
"""Told the key of every object stored, changed or removed."""


def object_key(kind: str, namespace: str | None, name: str) -> Key:
    found = kind_table.info(kind)
    cluster_scoped = found is not None and not found.namespaced
    return (kind, "" if cluster_scoped else (namespace or "default"), name)


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

    @property
    def uid(self) -> str:
        return str((self.body.get("metadata") or {}).get("uid") or "")

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.body.get("metadata") or {}).get("labels") or {})

    def typed(self) -> Any:
        """The object as its lightkube model (``Deployment``, ``Pod``...)."""
        model = kind_table.KINDS[self.kind].model
        return model.from_dict(copy.deepcopy(dict(self.body)))  # type: ignore[attr-defined]

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
    """Every object of ``manifests`` as ``(key, dict)``, in :data:`KINDS` order
    (Namespaces first)."""
    found: list[tuple[Key, dict[str, Any]]] = []
    for kind in KINDS:
        if kind == "Pod" and not pods:
            continue
        for obj in manifests.of_kind(kind):
            meta = obj.metadata
            if meta is None or not meta.name:
                continue
            body = obj.to_dict()
            body["apiVersion"], body["kind"] = kind_table.KINDS[kind].api_version, kind
            found.append((object_key(kind, meta.namespace, meta.name), body))
    return found


def _content(body: Mapping[str, Any]) -> dict[str, Any]:
    """What was applied: the object without the fields the server sets, nor its status."""
    shown = {k: v for k, v in body.items() if k != "status"}
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in SERVER_FIELDS}
    annotations = {k: v for k, v in (meta.get("annotations") or {}).items() if k != LAST_APPLIED}
    if annotations:
        meta["annotations"] = annotations
    else:
        meta.pop("annotations", None)
    shown["metadata"] = meta
    return shown


def _same_owners(old: Mapping[str, Any], new: Mapping[str, Any]) -> bool:
    """Whether ``new`` leaves the field owners (``managedFields``) of ``old`` as they are:
    it names none (a manifest) or the same."""
    owners = (new.get("metadata") or {}).get("managedFields")
    return owners is None or owners == (old.get("metadata") or {}).get("managedFields")


def applied_form(body: Mapping[str, Any]) -> dict[str, Any]:
    """The form an object was applied in: its last-applied configuration when it keeps
    one, else the object without what the server sets."""
    text = ((body.get("metadata") or {}).get("annotations") or {}).get(LAST_APPLIED)
    if isinstance(text, str):
        try:
            kept = json.loads(text)
        except ValueError:
            kept = None
        if isinstance(kept, dict):
            return kept
    return _content(body)


def _canonical(content: Mapping[str, Any]) -> str:
    return json.dumps(content, sort_keys=True, separators=(",", ":"), default=str)


def _file_name(key: Key) -> str:
    kind, namespace, name = key
    return hostfs.single_name(f"{kind.lower()}_{namespace}_{name}.json", what="object file name")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class ObjectStore:
    """Objects by ``(kind, namespace, name)``; see the module's docstring.

    ``directory`` (e.g. ``<state>/objects``) keeps the objects of ``persistent_source``,
    and those of each of ``also_persistent`` in its sub-folder of that name; None keeps
    everything in memory only.
    """

    def __init__(
        self,
        *,
        directory: Path | None = None,
        persistent_source: str = "api",
        also_persistent: Iterable[str] = (),
        clock: Callable[[], str] = _now,
    ) -> None:
        self.directory = directory
        self.persistent_source = persistent_source
        self.persistent_sources = (persistent_source, *also_persistent)
        self._clock = clock
        self._objects: dict[Key, StoredObject] = {}
        self._listeners: list[ChangeListener] = []
        self._observers: list[KeyListener] = []

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
            same = _canonical(applied_form(old.body)) == _canonical(_content(body))
            verdict = "unchanged" if same else "configured"
        return Applied(kind=key[0], namespace=key[1], name=key[2], verdict=verdict)

    def update_errors(self, manifests: Manifests) -> builtins.list[FieldError]:
        """What the API server would refuse in storing ``manifests`` over the objects
        stored (an immutable field changed), each error's source naming the object."""
        problems: builtins.list[FieldError] = []
        for key, body in manifest_bodies(manifests):
            old = self._objects.get(key)
            found = kind_table.info(key[0])
            if old is None or found is None or found.validate_update is None:
                continue
            new = self._prepared(key, body, old.uid)
            for error in found.validate_update(new, old.body):
                source = f'{key[0]} "{key[2]}"'
                problems.append(FieldError(error.field, error.reason, error.detail, source=source))
        return problems

    # -- changing ---------------------------------------------------------------------------

    def subscribe(self, listener: ChangeListener) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def observe(self, listener: KeyListener) -> Callable[[], None]:
        """Tell ``listener`` the key of every object stored, changed (status included) or
        removed, from now on; returns what stops it."""
        self._observers.append(listener)
        return lambda: self._observers.remove(listener) if listener in self._observers else None

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
            if (
                applied.verdict == "unchanged"
                and old is not None
                and old.source == source
                and _same_owners(old.body, body)
            ):
                continue
            self._store(key, body, source, old)
            if applied.verdict != "unchanged" and key[0] in ("ConfigMap", "Secret"):
                touched.add(key[1])
        self._notify(touched)
        return done

    def put_object(self, body: Mapping[str, Any], *, source: str) -> StoredObject:
        """Store one object as it is (a controller's ReplicaSet or pod), as ``source``'s;
        the stored object."""
        meta = body.get("metadata") or {}
        key = object_key(str(body.get("kind")), meta.get("namespace"), str(meta.get("name")))
        self._store(key, body, source, self._objects.get(key), applied=False)
        return self._objects[key]

    def update_status(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        status: Mapping[str, Any] | None,
        *,
        annotations: Mapping[str, str | None] | None = None,
        spec: Mapping[str, Any] | None = None,
    ) -> StoredObject | None:
        """A controller's write to a stored object: its ``status`` (None: unchanged), some
        annotations (a value of None removes one) and, for objects it owns, fields of
        its ``spec``; nothing is written when nothing changes. The object, or None."""
        key = object_key(kind, namespace, name)
        old = self._objects.get(key)
        if old is None:
            return None
        body = copy.deepcopy(dict(old.body))
        if status is not None:
            body["status"] = copy.deepcopy(dict(status))
        if annotations:
            meta = body.setdefault("metadata", {})
            kept = dict(meta.get("annotations") or {})
            for k, v in annotations.items():
                if v is None:
                    kept.pop(k, None)
                else:
                    kept[k] = v
            if kept:
                meta["annotations"] = kept
            else:
                meta.pop("annotations", None)
        if spec:
            body.setdefault("spec", {}).update(copy.deepcopy(dict(spec)))
        if body == old.body:
            return old
        obj = dataclasses.replace(old, body=body)
        self._objects[key] = obj
        if obj.source in self.persistent_sources:
            self._persist(obj)
        self._observed(key)
        return obj

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
            if (
                old is not None
                and old.source == source
                and _canonical(applied_form(old.body)) == _canonical(_content(body))
            ):
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

    def _prepared(self, key: Key, body: Mapping[str, Any], uid: str) -> dict[str, Any]:
        """``body`` as the API server stores it, given its UID (a Job's selector)."""
        prepared = copy.deepcopy(dict(body))
        found = kind_table.info(key[0])
        if found is not None and found.prepare is not None:
            found.prepare(prepared, uid=uid)
        return prepared

    def _store(
        self,
        key: Key,
        body: Mapping[str, Any],
        source: str,
        old: StoredObject | None,
        *,
        applied: bool = True,
    ) -> None:
        found = kind_table.info(key[0])
        old_meta = (old.body.get("metadata") or {}) if old is not None else {}
        uid = str(body.get("metadata", {}).get("uid") or "") if key[0] == "Pod" else ""
        uid = uid or old_meta.get("uid") or str(uuid.uuid4())
        stored = self._prepared(key, body, uid)
        meta = stored.setdefault("metadata", {})
        made = None if applied else meta.get("creationTimestamp")
        meta["creationTimestamp"] = old_meta.get("creationTimestamp") or made or self._clock()
        meta["uid"] = uid
        if found is not None and found.controlled and applied:
            annotations = dict(meta.get("annotations") or {})
            annotations[LAST_APPLIED] = _canonical(_content(body))
            meta["annotations"] = annotations
        if found is not None and found.controlled:
            if old is not None and "status" in old.body and "status" not in stored:
                stored["status"] = copy.deepcopy(old.body["status"])
            generation = int(old_meta.get("generation") or 0)
            changed = old is None or stored.get("spec") != old.body.get("spec")
            meta["generation"] = generation + 1 if changed else max(generation, 1)
        obj = StoredObject(kind=key[0], namespace=key[1], name=key[2], body=stored, source=source)
        self._objects[key] = obj
        if old is not None and old.source in self.persistent_sources and source != old.source:
            self._unpersist(key, old.source)
        if source in self.persistent_sources:
            self._persist(obj)
        logger.debug("{} {} stored from {}", obj.resource, "/".join(filter(None, key[1:])), source)
        self._observed(key)

    def _drop(self, key: Key) -> StoredObject | None:
        old = self._objects.pop(key, None)
        if old is not None:
            if old.source in self.persistent_sources:
                self._unpersist(key, old.source)
            self._observed(key)
        return old

    def _notify(self, namespaces: set[str]) -> None:
        if not namespaces:
            return
        changed = frozenset(namespaces)
        for listener in list(self._listeners):
            listener(changed)

    def _observed(self, key: Key) -> None:
        for observer in list(self._observers):
            observer(key)

    # -- persistence ------------------------------------------------------------------------

    def source_directory(self, source: str) -> Path | None:
        """Where the objects of a persistent ``source`` are kept."""
        if self.directory is None or source not in self.persistent_sources:
            return None
        if source == self.persistent_source:
            return self.directory
        return self.directory / hostfs.single_name(source, what="object source name")

    def _persist(self, obj: StoredObject) -> None:
        directory = self.source_directory(obj.source)
        if directory is None:
            return
        try:
            if directory != self.directory and self.directory is not None:
                hostfs.make_dirs(self.directory, directory.name, mode=OBJECTS_DIR_MODE)
            hostfs.write_file(
                directory,
                _file_name(obj.key),
                json.dumps(obj.body).encode(),
                mode=OBJECT_FILE_MODE,
                dir_mode=OBJECTS_DIR_MODE,
            )
        except OSError as e:
            logger.warning("cannot keep {} {}: {}", obj.resource, obj.name, e)

    def _unpersist(self, key: Key, source: str) -> None:
        directory = self.source_directory(source)
        if directory is None or not directory.is_dir():
            return
        try:
            hostfs.remove_file(directory, _file_name(key))
        except OSError as e:
            logger.warning("cannot remove the kept {} {}: {}", RESOURCES[key[0]], key[2], e)

    def restore(
        self,
        manifests: Manifests,
        *,
        source: str | None = None,
        kept: Iterable[Mapping[str, Any]] = (),
    ) -> None:
        """Take back the kept objects of ``source`` (the persistent source by default),
        once :func:`persisted_text` went through the manifest loader; their uid and
        creation time are those they were stored with, and the status the controllers
        wrote is taken from the ``kept`` bodies (the loader never reads a status)."""
        statuses: dict[Key, Any] = {}
        for body in kept:
            meta = body.get("metadata") or {}
            if isinstance(body.get("status"), dict):
                key = object_key(
                    str(body.get("kind")), meta.get("namespace"), str(meta.get("name"))
                )
                statuses[key] = body["status"]
        for key, body in manifest_bodies(manifests):
            meta = body.setdefault("metadata", {})
            meta.setdefault("creationTimestamp", self._clock())
            meta.setdefault("uid", str(uuid.uuid4()))
            found = kind_table.info(key[0])
            if found is not None and found.controlled and key in statuses:
                body["status"] = copy.deepcopy(statuses[key])
            self._objects[key] = StoredObject(
                kind=key[0],
                namespace=key[1],
                name=key[2],
                body=body,
                source=source or self.persistent_source,
            )
            self._observed(key)


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
