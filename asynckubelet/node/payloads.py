"""What the kubelet writes into ConfigMap, Secret, downward API and projected volumes.

The files of such a volume, built as the kubelet's ``MakePayload`` builds them (every key
or the listed ``items``, each with its mode), from the objects the pod's context sees, the
pod's own fields and resources, and service-account tokens from the node's issuer. Kept
apart from :mod:`asynckubelet.node.volumes`, which makes the directories and mounts and
hands these payloads to the atomic writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from lightkube.models.core_v1 import Pod, Volume

from asynckubelet import errors
from asynckubelet.node.atomic_writer import Payload
from asynckubelet.node.tokens import TokenRequest
from asynckubelet.runtime.env import PodContext
from asynckubelet.runtime.resources import resource_field_value

DEFAULT_MODE = 0o644


def _items_payload(
    kind: str,
    name: str,
    data: Mapping[str, bytes] | None,
    items: list[Any] | None,
    default_mode: int | None,
    optional: bool,
) -> Payload:
    """ConfigMap/Secret volume files (kubelet ``MakePayload``)."""
    mode = DEFAULT_MODE if default_mode is None else default_mode
    if data is None:
        if optional:
            return {}
        raise errors.VolumeError(f'{kind.lower()} "{name}" not found', volume="")
    if not items:
        return {k: (v, mode) for k, v in data.items()}
    payload: Payload = {}
    for item in items:
        if item.key not in data:
            if optional:
                continue
            what = "config key" if kind == "ConfigMap" else "secret key"
            raise errors.VolumeError(
                f"{kind.lower()} references non-existent {what}: {item.key}", volume=""
            )
        payload[item.path] = (data[item.key], mode if item.mode is None else item.mode)
    return payload


def _quoted_map(values: Mapping[str, str] | None) -> str:
    return "\n".join(f"{k}={json.dumps(str(v))}" for k, v in sorted((values or {}).items()))


def _downward_field(pod: Pod, path: str) -> str:
    meta = pod.metadata
    assert meta is not None and pod.spec is not None  # noqa: S101  (type narrowing: an admitted pod has metadata and spec)
    simple = {
        "metadata.name": meta.name or "",
        "metadata.namespace": meta.namespace or "default",
        "metadata.uid": meta.uid or "",
        "metadata.labels": _quoted_map(meta.labels),
        "metadata.annotations": _quoted_map(meta.annotations),
    }
    if path in simple:
        return simple[path]
    for kind, source in (("labels", meta.labels), ("annotations", meta.annotations)):
        prefix = f"metadata.{kind}['"
        if path.startswith(prefix) and path.endswith("']"):
            return str((source or {}).get(path[len(prefix) : -2], ""))
    raise errors.VolumeError(f"unsupported fieldPath: {path}", volume="")


def _downward_payload(pod: Pod, items: list[Any] | None, default_mode: int | None) -> Payload:
    mode = DEFAULT_MODE if default_mode is None else default_mode
    payload: Payload = {}
    assert pod.spec is not None  # noqa: S101  (type narrowing: an admitted pod has a spec)
    for item in items or []:
        if item.fieldRef is not None:
            value = _downward_field(pod, item.fieldRef.fieldPath)
        elif item.resourceFieldRef is not None:
            ref = item.resourceFieldRef
            containers = list(pod.spec.initContainers or []) + list(pod.spec.containers or [])
            target = next((c for c in containers if c.name == ref.containerName), None)
            if target is None:
                raise errors.VolumeError(
                    f"container {ref.containerName!r} of resourceFieldRef not found", volume=""
                )
            try:
                value = resource_field_value(target, ref.resource, ref.divisor)
            except errors.ContainerConfigError as e:
                raise errors.VolumeError(str(e), volume="") from e
        else:
            continue
        payload[item.path] = (value.encode(), mode if item.mode is None else item.mode)
    return payload


def _configmap_bytes(context: PodContext, name: str) -> dict[str, bytes] | None:
    """``data`` as UTF-8 and ``binaryData`` as its raw bytes (the API server keeps the
    two key sets apart)."""
    data = context.configmaps.get(name)
    if data is None:
        return None
    return {
        **{k: str(v).encode() for k, v in data.items()},
        **context.binary_configmaps.get(name, {}),
    }


def _token_request(pod: Pod, source: Any) -> TokenRequest:
    meta, spec = pod.metadata, pod.spec
    assert meta is not None and spec is not None  # noqa: S101  (type narrowing: an admitted pod has metadata and spec)
    return TokenRequest(
        namespace=meta.namespace or "default",
        service_account=spec.serviceAccountName or spec.serviceAccount or "default",
        pod_name=meta.name or "",
        pod_uid=meta.uid or "",
        audiences=(source.audience,) if source.audience else (),
        expiration_seconds=int(source.expirationSeconds or 3600),
    )


def volume_payload(
    pod: Pod,
    volume: Volume,
    context: PodContext,
    *,
    tokens: Callable[[TokenRequest], str] | None = None,
) -> Payload:
    """The files of a ConfigMap, Secret, downward API or projected volume.

    ``tokens`` issues a projected ``serviceAccountToken``; without it none is written.
    """
    if volume.configMap is not None:
        cm = volume.configMap
        name = cm.name or ""
        return _items_payload(
            "ConfigMap",
            name,
            _configmap_bytes(context, name),
            cm.items,
            cm.defaultMode,
            bool(cm.optional),
        )
    if volume.secret is not None:
        sec = volume.secret
        name = sec.secretName or ""
        data = context.secrets.get(name)
        return _items_payload(
            "Secret",
            name,
            None if data is None else dict(data),
            sec.items,
            sec.defaultMode,
            bool(sec.optional),
        )
    if volume.downwardAPI is not None:
        return _downward_payload(pod, volume.downwardAPI.items, volume.downwardAPI.defaultMode)
    assert volume.projected is not None  # noqa: S101  (type narrowing: the last volume kind this is called for)
    mode = volume.projected.defaultMode
    payload: Payload = {}
    for source in volume.projected.sources or []:
        if source.configMap is not None:
            name = source.configMap.name or ""
            payload.update(
                _items_payload(
                    "ConfigMap",
                    name,
                    _configmap_bytes(context, name),
                    source.configMap.items,
                    mode,
                    bool(source.configMap.optional),
                )
            )
        elif source.secret is not None:
            name = source.secret.name or ""
            data = context.secrets.get(name)
            payload.update(
                _items_payload(
                    "Secret",
                    name,
                    None if data is None else dict(data),
                    source.secret.items,
                    mode,
                    bool(source.secret.optional),
                )
            )
        elif source.downwardAPI is not None:
            payload.update(_downward_payload(pod, source.downwardAPI.items, mode))
        elif source.serviceAccountToken is not None and tokens is not None:
            token = tokens(_token_request(pod, source.serviceAccountToken))
            payload[source.serviceAccountToken.path] = (
                token.encode(),
                DEFAULT_MODE if mode is None else mode,
            )
    return payload
