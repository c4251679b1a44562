"""The API server's three patch types over an object's JSON: JSON patch (RFC 6902), JSON
merge patch (RFC 7386) and strategic merge patch, whose lists of named things merge by
their key (containers by ``name``, ports by ``containerPort``...) as upstream's struct
tags say for the kinds served, with the ``$patch`` (``delete``, ``replace``, ``merge``),
``$retainKeys``, ``$setElementOrder`` and ``$deleteFromPrimitiveList`` directives. A
patch is hostile input: a malformed one is a ``ValueError`` worded as the API server's.
"""

from __future__ import annotations

import copy
import json
from typing import Any

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "imagePullSecrets": "name",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "hostAliases": "ip",
    "topologySpreadConstraints": "topologyKey",
    "ownerReferences": "uid",
    "conditions": "type",
    "containerStatuses": "name",
    "initContainerStatuses": "name",
    "resourceClaims": "name",
}
"""``patchMergeKey`` of each list field of the kinds served (by field name: the same key
wherever upstream's types use the name), ``ports`` aside."""
PORT_KEYS = {"containers": "containerPort", "spec": "port"}
"""A ``ports`` list merges by ``containerPort`` in a container and by ``port`` in a
Service's spec."""
PRIMITIVE_MERGE = {"finalizers"}
"""Lists of strings merged as sets (``patchStrategy:"merge"``)."""
MAX_OPERATIONS = 10_000
MAX_COPIED_BYTES = 3 * 1024 * 1024
"""What a JSON patch's ``copy`` operations may copy in all (upstream's
``AccumulatedCopySizeLimit``, the request size limit): doubling a document at each
``copy`` would otherwise grow it without bound."""


def json_patch(document: Any, patch: Any) -> Any:
    """``patch`` (a list of RFC 6902 operations) applied to a copy of ``document``."""
    if not isinstance(patch, list):
        raise ValueError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    if len(patch) > MAX_OPERATIONS:
        raise ValueError(f"the JSON patch has more than {MAX_OPERATIONS} operations")
    doc = copy.deepcopy(document)
    copied = [0]
    for op in patch:
        if not isinstance(op, dict):
            raise ValueError("json patch operation must be an object")
        doc = _operation(doc, op, copied)
    return doc


def _operation(doc: Any, op: dict[str, Any], copied: list[int]) -> Any:
    """``doc`` after one operation; ``copied`` counts the bytes ``copy`` copied."""
    kind = op.get("op")
    path = _pointer(op.get("path"))
    if kind == "add":
        return _put(doc, path, copy.deepcopy(_value(op)), insert=True)
    if kind == "remove":
        return _remove(doc, path)[0]
    if kind == "replace":
        _get(doc, path)
        return _put(doc, path, copy.deepcopy(_value(op)), insert=False)
    if kind in ("move", "copy"):
        source = _pointer(op.get("from"))
        value = copy.deepcopy(_get(doc, source))
        if kind == "copy":
            copied[0] += len(json.dumps(value))
            if copied[0] > MAX_COPIED_BYTES:
                raise ValueError(f"Unable to copy, would exceed limit: {MAX_COPIED_BYTES}")
        else:
            doc = _remove(doc, source)[0]
        return _put(doc, path, value, insert=True)
    if kind == "test":
        if _get(doc, path) != _value(op):
            raise ValueError(f"testing value {op.get('path')} failed: test failed")
        return doc
    raise ValueError(f"Unexpected kind: {kind}")


def _value(op: dict[str, Any]) -> Any:
    if "value" not in op:
        raise ValueError(f"missing value for operation {op.get('op')} at {op.get('path')}")
    return op["value"]


def _pointer(text: Any) -> list[str]:
    if not isinstance(text, str) or (text and not text.startswith("/")):
        raise ValueError(f"invalid JSON pointer: {text!r}")
    if not text:
        return []
    return [p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/")]


def _index(container: list[Any], part: str, *, insert: bool) -> int:
    if insert and part == "-":
        return len(container)
    if not part.isdigit():
        raise ValueError(f"invalid array index {part!r}")
    i = int(part)
    if i > len(container) or (i == len(container) and not insert):
        raise ValueError(f"array index out of bounds: {i}")
    return i


def _get(doc: Any, path: list[str]) -> Any:
    for part in path:
        if isinstance(doc, dict) and part in doc:
            doc = doc[part]
        elif isinstance(doc, list):
            doc = doc[_index(doc, part, insert=False)]
        else:
            raise ValueError(f"doc is missing path: /{'/'.join(path)}")
    return doc


def _put(doc: Any, path: list[str], value: Any, *, insert: bool) -> Any:
    if not path:
        return value
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        i = _index(parent, last, insert=insert)
        if insert:
            parent.insert(i, value)
        else:
            parent[i] = value
    else:
        raise ValueError(f"doc is missing path: /{'/'.join(path)}")
    return doc


def _remove(doc: Any, path: list[str]) -> tuple[Any, Any]:
    if not path:
        raise ValueError("cannot remove the whole document")
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, last, insert=False))
    raise ValueError(f"doc is missing path: /{'/'.join(path)}: missing value")


def merge_patch(document: Any, patch: Any) -> Any:
    """RFC 7386: ``patch``'s maps merged into ``document``'s, a null removing a key, any
    other value (a list included) replacing."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(document) if isinstance(document, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(document: Any, patch: Any) -> Any:
    """``patch`` merged into ``document`` as the API server merges a strategic patch."""
    if not isinstance(patch, dict):
        raise ValueError(
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        )
    return _merge_map(copy.deepcopy(document) if isinstance(document, dict) else {}, patch, "")


def _merge_map(original: dict[str, Any], patch: dict[str, Any], field: str) -> dict[str, Any]:
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return {}
    if directive not in (None, "merge"):
        raise ValueError(
            f"Unknown patch type: {directive}, Only merge, replace and delete are supported"
        )
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys") or key.startswith("$setElementOrder/"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            name = key.split("/", 1)[1]
            if isinstance(original.get(name), list) and isinstance(value, list):
                original[name] = [v for v in original[name] if v not in value]
            continue
        _merge_value(original, key, value, field)
    if isinstance(retain, list):
        kept = {str(k) for k in retain}
        for key in [k for k in original if k not in kept]:
            original.pop(key)
    return original


def _merge_value(original: dict[str, Any], key: str, value: Any, field: str) -> None:
    if value is None:
        original.pop(key, None)
    elif isinstance(value, dict) and isinstance(original.get(key), dict):
        merged = _merge_map(original[key], value, key)
        if merged or value.get("$patch") != "delete":
            original[key] = merged
        else:
            original.pop(key)
    elif isinstance(value, dict):
        if value.get("$patch") != "delete":
            original[key] = _merge_map({}, value, key)
    elif isinstance(value, list):
        original[key] = _merge_list(original.get(key), value, key, field)
    else:
        original[key] = copy.deepcopy(value)


def _merge_key(name: str, parent: str) -> str | None:
    if name == "ports":
        return PORT_KEYS.get(parent, "containerPort")
    return MERGE_KEYS.get(name)


def _merge_list(original: Any, patch: list[Any], name: str, parent: str) -> list[Any]:
    current = copy.deepcopy(original) if isinstance(original, list) else []
    if any(isinstance(p, dict) and p.get("$patch") == "replace" for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    key = _merge_key(name, parent)
    if name in PRIMITIVE_MERGE and all(not isinstance(p, (dict, list)) for p in patch):
        return current + [p for p in patch if p not in current]
    if key is None or not all(isinstance(p, dict) for p in patch):
        return [copy.deepcopy(p) for p in patch if not (isinstance(p, dict) and "$patch" in p)]
    for item in patch:
        if key not in item:
            raise ValueError(f"map: {json.dumps(item)} does not contain declared merge key: {key}")
        at = next(
            (i for i, c in enumerate(current) if isinstance(c, dict) and c.get(key) == item[key]),
            None,
        )
        if item.get("$patch") == "delete":
            if at is not None:
                current.pop(at)
        elif at is None:
            current.append(_merge_map({}, item, name))
        else:
            current[at] = _merge_map(current[at], item, name)
    return current


def patched(document: Any, patch: Any, content_type: str) -> Any:
    """``document`` with ``patch`` of ``content_type`` applied."""
    if content_type == JSON_PATCH:
        return json_patch(document, patch)
    if content_type == MERGE_PATCH:
        if not isinstance(patch, dict):
            raise ValueError(
                "json: cannot unmarshal array into Go value of type map[string]interface {}"
            )
        return merge_patch(document, patch)
    return strategic_merge_patch(document, patch)
