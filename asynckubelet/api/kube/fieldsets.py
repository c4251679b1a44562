"""Sets of field paths of an object, as upstream's structured-merge-diff keeps them for
server-side apply: each path a tuple of elements in the ``FieldsV1`` encoding (``f:name``
a field, ``k:{"name":"app"}`` an element of a list merged by its keys, ``v:"x"`` a value
of a set), read from and written to ``metadata.managedFields[*].fieldsV1``.

The schema facts are upstream's for the kinds served: the lists merged by keys
(``x-kubernetes-list-map-keys``: containers by ``name``, a container's ports by
``containerPort`` and ``protocol``, a Service's by ``port`` and ``protocol``...), the
lists kept as sets (``finalizers``), the maps owned whole (``x-kubernetes-map-type:
atomic``: a workload's label ``selector``, a Service's ``selector``, ``nodeSelector``);
every other list is owned whole. A path is hostile input's: walking one never raises.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

Path = tuple[str, ...]

LIST_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "imagePullSecrets": ("name",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
    "ownerReferences": ("uid",),
    "resourceClaims": ("name",),
}
"""``x-kubernetes-list-map-keys`` of the lists of the kinds served, by field name."""
CONTAINER_PORT_KEYS = ("containerPort", "protocol")
SERVICE_PORT_KEYS = ("port", "protocol")
KEY_DEFAULTS = {"protocol": "TCP"}
"""Key fields the schema defaults, as the key of an element that leaves them out."""
SET_LISTS = frozenset({"finalizers"})
"""Lists of scalars kept as sets (``x-kubernetes-list-type: set``)."""
ATOMIC_MAPS = frozenset({"selector", "nodeSelector"})
"""Maps owned whole wherever they are in the kinds served."""
STRUCT_FIELDS = frozenset({"metadata", "spec", "template", "strategy", "updateStrategy"})
"""Fields that are structs (never absent in the API server's object), whose node an
``Update`` does not own apart from its fields; any other map added is owned itself."""
IGNORED: frozenset[Path] = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:metadata",),
        *(
            ("f:metadata", f"f:{name}")
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "selfLink",
                "uid",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    }
)
"""Paths no manager owns (upstream's stripped metadata); ``status`` neither, outside its
subresource."""


def _list_keys(path: Path, name: str, kind: str) -> tuple[str, ...] | None:
    if name == "ports":
        return (
            SERVICE_PORT_KEYS if kind == "Service" and path == ("f:spec",) else CONTAINER_PORT_KEYS
        )
    return LIST_KEYS.get(name)


def _key_element(item: Any, keys: tuple[str, ...]) -> str | None:
    """``k:{...}`` of a list element, None when it lacks a key."""
    if not isinstance(item, dict):
        return None
    found = {}
    for key in sorted(keys):
        value = item.get(key, KEY_DEFAULTS.get(key))
        if value is None:
            return None
        found[key] = value
    return "k:" + _compact(found)


def _compact(value: Any) -> str:
    """``value`` as the ``FieldsV1`` encoding writes a key or a value: compact JSON, keys
    sorted, text as it is."""
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _owned(path: Path) -> bool:
    return path not in IGNORED and path[:1] != ("f:status",)


def walk(obj: Any, kind: str, path: Path = ()) -> Iterator[tuple[Path, str, Any]]:
    """Every node of ``obj`` under ``path``: ``(path, what, value)``, ``what`` being
    ``leaf`` (a scalar, null, an empty map, a list or map owned whole), ``map`` or
    ``item`` (an element of a keyed list)."""
    if not isinstance(obj, dict):
        return
    for name, value in obj.items():
        child = (*path, f"f:{name}")
        if isinstance(value, dict) and value and name not in ATOMIC_MAPS:
            yield child, "map", None
            yield from walk(value, kind, child)
        elif isinstance(value, list) and value:
            yield from _walk_list(value, name, kind, path, child)
        else:
            yield child, "leaf", value


def _walk_list(
    value: list[Any], name: str, kind: str, parent: Path, path: Path
) -> Iterator[tuple[Path, str, Any]]:
    if name in SET_LISTS and all(not isinstance(v, (dict, list)) for v in value):
        for item in value:
            yield (*path, "v:" + _compact(item)), "leaf", item
        return
    keys = _list_keys(parent, name, kind)
    elements = [_key_element(item, keys) for item in value] if keys else [None]
    if keys is None or None in elements or len(set(elements)) != len(elements):
        yield path, "leaf", value
        return
    for item, element in zip(value, elements, strict=True):
        at = (*path, str(element))
        yield at, "item", None
        yield from walk(item, kind, at)


def applied_set(config: Mapping[str, Any], kind: str) -> set[Path]:
    """The fields an apply of ``config`` owns (upstream's ``ToFieldSet``): its leaves and
    its list elements, not the maps holding them."""
    return {p for p, what, _ in walk(config, kind) if what != "map" and _owned(p)}


def changed_set(
    old: Mapping[str, Any] | None, new: Mapping[str, Any], kind: str
) -> tuple[set[Path], set[Path]]:
    """What an update from ``old`` to ``new`` sets (fields added or changed, maps and
    elements added) and what it removes."""
    before = {p: (what, v) for p, what, v in walk(old or {}, kind)}
    after = {p: (what, v) for p, what, v in walk(new, kind)}
    changed = set()
    for path, (what, value) in after.items():
        if not _owned(path):
            continue
        was = before.get(path)
        if was is None:
            if what != "map" or path[-1][2:] not in STRUCT_FIELDS:
                changed.add(path)
        elif what == "leaf" and was != (what, value):
            changed.add(path)
    removed = {p for p in before if p not in after}
    return changed, removed


def value_at(obj: Any, path: Path) -> tuple[bool, Any]:
    """``(found, value)`` of ``path`` in ``obj``."""
    at = obj
    for element in path:
        kind, _, text = element.partition(":")
        if kind == "f" and isinstance(at, dict) and text in at:
            at = at[text]
        elif kind in ("k", "v") and isinstance(at, list):
            found = _find(at, kind, text)
            if found is None:
                return False, None
            at = at[found]
        else:
            return False, None
    return True, at


def _find(items: list[Any], kind: str, text: str) -> int | None:
    try:
        wanted = json.loads(text)
    except ValueError:
        return None
    for i, item in enumerate(items):
        if kind == "v" and item == wanted:
            return i
        if (
            kind == "k"
            and isinstance(item, dict)
            and isinstance(wanted, dict)
            and all(item.get(k, KEY_DEFAULTS.get(k)) == v for k, v in wanted.items())
        ):
            return i
    return None


def remove(obj: Any, path: Path) -> None:
    """``path`` removed from ``obj`` in place (nothing when it is not there)."""
    if not path:
        return
    found, parent = value_at(obj, path[:-1])
    if not found:
        return
    kind, _, text = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(text, None)
    elif kind in ("k", "v") and isinstance(parent, list):
        at = _find(parent, kind, text)
        if at is not None:
            parent.pop(at)


def merged(live: Any, config: Any, kind: str, path: Path = ()) -> Any:
    """``config`` merged into ``live`` as an apply merges it: maps field by field, keyed
    lists element by element (live order kept, new elements after), sets as sets,
    anything else replaced."""
    atomic = bool(path) and path[-1][2:] in ATOMIC_MAPS
    if isinstance(config, dict) and isinstance(live, dict) and not atomic:
        result = copy.deepcopy(live)
        for name, value in config.items():
            result[name] = merged(live.get(name), value, kind, (*path, f"f:{name}"))
        return result
    if isinstance(config, list) and isinstance(live, list) and path:
        name = path[-1][2:]
        if name in SET_LISTS:
            return copy.deepcopy(live) + [v for v in config if v not in live]
        keys = _list_keys(path[:-1], name, kind)
        if keys is not None:
            return _merged_list(live, config, keys, kind, path)
    return copy.deepcopy(config)


def _merged_list(
    live: list[Any], config: list[Any], keys: tuple[str, ...], kind: str, path: Path
) -> list[Any]:
    result = copy.deepcopy(live)
    for item in config:
        element = _key_element(item, keys)
        if element is None:
            return copy.deepcopy(config)
        at = _find(result, "k", element[2:])
        if at is None:
            result.append(copy.deepcopy(item))
        else:
            result[at] = merged(result[at], item, kind, (*path, element))
    return result


# -- FieldsV1 ---------------------------------------------------------------------------------


MAX_DEPTH = 64
"""How deep a ``fieldsV1`` tree is read (the kinds served nest far less)."""


def decode(fields: Any, path: Path = ()) -> set[Path]:
    """The paths a ``fieldsV1`` tree names (a malformed tree names what it can, down to
    :data:`MAX_DEPTH`)."""
    found: set[Path] = set()
    if not isinstance(fields, dict) or len(path) >= MAX_DEPTH:
        return found
    for element, children in fields.items():
        if element == ".":
            if path:
                found.add(path)
            continue
        if not isinstance(element, str) or element[:2] not in ("f:", "k:", "v:", "i:"):
            continue
        child = (*path, element)
        if not children:
            found.add(child)
        else:
            found |= decode(children, child)
    return found


def encode(paths: set[Path]) -> dict[str, Any]:
    """The ``fieldsV1`` tree of ``paths``: each member a ``{}`` leaf, or ``".": {}`` among
    its children."""
    tree: dict[str, Any] = {}
    for path in paths:
        at = tree
        for element in path:
            at = at.setdefault(element, {})
        at.setdefault("\0", True)
    return _rendered(tree)


def _rendered(node: dict[str, Any]) -> dict[str, Any]:
    children = {k: v for k, v in node.items() if k != "\0"}
    shown: dict[str, Any] = {".": {}} if node.get("\0") and children else {}
    for key in sorted(children):
        shown[key] = _rendered(children[key])
    return shown


def shown(path: Path) -> str:
    """A path as upstream prints it in a conflict: ``.spec.containers[name="app"].image``."""
    parts = []
    for element in path:
        kind, _, text = element.partition(":")
        if kind == "f":
            parts.append(f".{text}")
        elif kind == "k":
            try:
                keys = json.loads(text)
            except ValueError:
                keys = {}
            pairs = keys.items() if isinstance(keys, dict) else []
            shown_keys = (f"{k}={_shown_value(v)}" for k, v in pairs)
            parts.append("[" + ",".join(shown_keys) + "]")
        elif kind == "v":
            try:
                parts.append(f"[={_shown_value(json.loads(text))}]")
            except ValueError:
                parts.append(f"[={text}]")
        else:
            parts.append(f"[{text}]")
    return "".join(parts)


GO_ESCAPES = {
    "\a": "\\a",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    '"': '\\"',
}


def _shown_value(value: Any) -> str:
    return quoted(value) if isinstance(value, str) else _compact(value)


def quoted(text: str) -> str:
    """``text`` quoted as Go's ``%q`` quotes it (how the API server shows a name)."""
    out = []
    for char in text:
        if char in GO_ESCAPES:
            out.append(GO_ESCAPES[char])
        elif char.isprintable():
            out.append(char)
        elif ord(char) < 0x80:
            out.append(f"\\x{ord(char):02x}")
        elif ord(char) < 0x10000:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(f"\\U{ord(char):08x}")
    return '"' + "".join(out) + '"'
