"""Lists in chunks (``limit``/``continue``) and ``resourceVersionMatch``, as the API
server answers them.

``kubectl get`` asks for 500 objects at a time (``--chunk-size``) and follows the
list's ``continue`` token; client libraries page the same way. The token is opaque to
the client: here it holds the list's resourceVersion and the ``namespace/name`` of the
last object sent, and the next chunk is the objects after that key, by namespace and
name, as they are now. A token whose version is older than the kind's window of changes
is the API server's ``410 Expired`` (list again without it); one that does not decode is
a ``400``.

``resourceVersionMatch`` is checked as the API server checks it; the node keeps no
snapshots, so ``Exact`` of a version other than the current one is ``410 Expired``, and
a version newer than the current one is the API server's ``Too large resource version``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from aiohttp import web

from asynckubelet.api.answers import status_body

TOO_OLD_CONTINUE = (
    "The provided continue parameter is too old to display a consistent list result. "
    "You can start a new list without the continue parameter."
)


class ListError(Exception):
    """A list request the API server refuses: its status code, reason and message."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code, self.reason, self.message = code, reason, message

    def response(self) -> web.Response:
        return web.json_response(
            status_body(self.code, self.reason, self.message), status=self.code
        )


def encode_continue(version: int, start: str) -> str:
    text = json.dumps({"v": "meta.k8s.io/v1", "rv": version, "start": start})
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    """``(resourceVersion, key of the last object sent)`` of a continue token."""
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        data = json.loads(raw)
        version, start = data["rv"], data["start"]
        if data.get("v") != "meta.k8s.io/v1" or not isinstance(version, int) or version < 0:
            raise ValueError("unsupported version")
        if not isinstance(start, str):
            raise ValueError("start")
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise ListError(400, "BadRequest", f"continue key is not valid: {e}") from None
    return version, start


def _key(entry: Any) -> str:
    meta = (entry.get("object") or {}).get("metadata") if "cells" in entry else None
    if meta is None:
        meta = entry.get("metadata") or {}
    return f"{meta.get('namespace') or ''}/{meta.get('name') or ''}"


def check_match(request: web.Request, *, version: int, floor: int) -> None:
    """``resourceVersionMatch`` (and a list's ``resourceVersion``) as the API server
    checks them."""
    match = request.query.get("resourceVersionMatch")
    asked = request.query.get("resourceVersion", "")
    if asked and not asked.isdigit():
        raise ListError(400, "BadRequest", f'invalid resource version "{asked}"')
    if match is None:
        return
    if match not in ("Exact", "NotOlderThan"):
        raise ListError(
            400,
            "BadRequest",
            f'resourceVersionMatch: Unsupported value: "{match}": '
            'supported values: "Exact", "NotOlderThan"',
        )
    if not asked:
        raise ListError(
            400,
            "BadRequest",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden "
            "unless resourceVersion is provided",
        )
    if request.query.get("continue"):
        raise ListError(
            400,
            "BadRequest",
            "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when "
            "continue is provided",
        )
    wanted = int(asked)
    if wanted > version:
        raise ListError(504, "Timeout", f"Too large resource version: {wanted}, current: {version}")
    if match == "Exact" and wanted != version:
        oldest = max(floor, wanted)
        raise ListError(410, "Expired", f"too old resource version: {wanted} ({oldest + 1})")


def page(request: web.Request, body: dict[str, Any], *, version: int, floor: int) -> dict[str, Any]:
    """``body`` (a list or a ``Table``, at ``version``) cut to the request's ``limit``
    from its ``continue`` token, with the list's resourceVersion, next token and
    ``remainingItemCount``."""
    check_match(request, version=version, floor=floor)
    field = "rows" if "rows" in body else "items"
    entries = list(body.get(field) or [])
    text = request.query.get("limit", "")
    if text and not text.isdigit():
        message = f'limit: Invalid value: "{text}": must be a non-negative integer'
        raise ListError(400, "BadRequest", message)
    limit = int(text) if text else 0
    token = request.query.get("continue", "")
    if limit or token:
        entries.sort(key=_key)
    if token:
        since, start = decode_continue(token)
        if since < floor:
            raise ListError(410, "Expired", TOO_OLD_CONTINUE)
        entries = [e for e in entries if _key(e) > start]
    meta = body.setdefault("metadata", {})
    meta["resourceVersion"] = str(version)
    meta.pop("continue", None)
    meta.pop("remainingItemCount", None)
    if limit and len(entries) > limit:
        meta["continue"] = encode_continue(version, _key(entries[limit - 1]))
        meta["remainingItemCount"] = len(entries) - limit
        entries = entries[:limit]
    body[field] = entries
    return body


__all__ = [
    "TOO_OLD_CONTINUE",
    "ListError",
    "check_match",
    "decode_continue",
    "encode_continue",
    "page",
]
