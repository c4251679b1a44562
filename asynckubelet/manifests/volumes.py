"""A pod's volumes as ``ValidatePod`` checks them: one source each, safe paths, file modes.

A volume's paths end up as files the node writes into a container, so a path that climbs
out (``..``) or a mode out of range is refused before anything is made. Mirrors the volume
part of ``pkg/apis/core/validation/validation.go`` (``validateVolumes``,
``validateVolumeSource``, ``validateKeyToPath``, ``validateDownwardAPIVolumeFile``,
``validateProjectionSources``, ``validateLocalDescendingPath``).
"""

from __future__ import annotations

from collections.abc import Sequence

from lightkube.models.core_v1 import (
    DownwardAPIVolumeFile,
    KeyToPath,
    ServiceAccountTokenProjection,
    Volume,
    VolumeProjection,
)

from asynckubelet.errors import FieldError
from asynckubelet.manifests.messages import (
    duplicate,
    forbidden,
    invalid,
    is_dns1123_label,
    not_supported,
    required,
)
from asynckubelet.manifests.objectmeta import _names
from asynckubelet.manifests.quantity import Quantity, QuantityError, parse_quantity

__all__ = [
    "VOLUME_TYPES",
    "validate_local_descending_path",
    "validate_local_non_reserved_path",
]


# validateVolumeSource's order, which decides which source "may not specify more than 1".
VOLUME_TYPES = (
    "emptyDir",
    "hostPath",
    "gitRepo",
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "secret",
    "nfs",
    "iscsi",
    "glusterfs",
    "flocker",
    "persistentVolumeClaim",
    "rbd",
    "cinder",
    "cephfs",
    "quobyte",
    "downwardAPI",
    "fc",
    "flexVolume",
    "configMap",
    "azureFile",
    "vsphereVolume",
    "photonPersistentDisk",
    "portworxVolume",
    "azureDisk",
    "storageos",
    "projected",
    "scaleIO",
    "csi",
    "ephemeral",
    "image",
)


_HOST_PATH_TYPES = (
    "",
    "BlockDevice",
    "CharDevice",
    "Directory",
    "DirectoryOrCreate",
    "File",
    "FileOrCreate",
    "Socket",
)
_FILE_MODE = "must be a number between 0 and 0777 (octal), both inclusive"
_BACKSTEPS = "must not contain '..'"


def _validate_volumes(volumes: Sequence[Volume], errs: list[FieldError]) -> dict[str, Volume]:
    valid: dict[str, Volume] = {}
    seen: set[str] = set()
    for i, vol in enumerate(volumes):
        path = f"spec.volumes[{i}]"
        vol_errs = _validate_volume_source(vol, path)
        if not vol.name:
            vol_errs.append(required(f"{path}.name"))
        else:
            _names(vol_errs, f"{path}.name", vol.name, is_dns1123_label(vol.name))
        if vol.name in seen:
            vol_errs.append(duplicate(f"{path}.name", vol.name))
        if vol_errs:
            errs.extend(vol_errs)
        else:
            seen.add(vol.name)
            valid[vol.name] = vol
    return valid


def _validate_volume_source(vol: Volume, path: str) -> list[FieldError]:  # noqa: C901  (mirrors upstream validateVolumeSource)
    errs: list[FieldError] = []
    count = 0
    for kind in VOLUME_TYPES:
        source = getattr(vol, kind, None)
        if source is None:
            continue
        if count:
            errs.append(forbidden(f"{path}.{kind}", "may not specify more than 1 volume type"))
            continue
        count += 1
    if count == 0:
        errs.append(required(path, "must specify a volume type"))
    if vol.hostPath is not None:
        if not vol.hostPath.path:
            errs.append(required(f"{path}.hostPath.path"))
        elif ".." in vol.hostPath.path.split("/"):
            errs.append(invalid(f"{path}.hostPath.path", vol.hostPath.path, _BACKSTEPS))
        if vol.hostPath.type not in _HOST_PATH_TYPES:
            errs.append(not_supported(f"{path}.hostPath.type", vol.hostPath.type, _HOST_PATH_TYPES))
    if vol.emptyDir is not None and vol.emptyDir.sizeLimit is not None:
        _quantity(errs, f"{path}.emptyDir.sizeLimit", vol.emptyDir.sizeLimit)
    for kind in ("secret", "configMap", "downwardAPI", "projected"):
        source = getattr(vol, kind)
        mode = getattr(source, "defaultMode", None) if source is not None else None
        if mode is not None and not 0 <= mode <= 0o777:
            errs.append(invalid(f"{path}.{kind}.defaultMode", mode, _FILE_MODE))
    if vol.secret is not None:
        if not vol.secret.secretName:
            errs.append(required(f"{path}.secret.secretName"))
        for i, item in enumerate(vol.secret.items or []):
            _validate_key_to_path(item, f"{path}.secret.items[{i}]", errs)
    if vol.configMap is not None:
        if not vol.configMap.name:
            errs.append(required(f"{path}.configMap.name"))
        for i, item in enumerate(vol.configMap.items or []):
            _validate_key_to_path(item, f"{path}.configMap.items[{i}]", errs)
    if vol.downwardAPI is not None:
        for file in vol.downwardAPI.items or []:
            _validate_downward_file(file, f"{path}.downwardAPI", errs)
    if vol.projected is not None:
        _validate_projection_sources(vol.projected.sources or [], f"{path}.projected", errs)
    return errs


def validate_local_descending_path(value: str, path: str) -> list[FieldError]:
    """``validateLocalDescendingPath``: relative, and no ``..`` element."""
    errs: list[FieldError] = []
    if value.startswith("/"):
        errs.append(invalid(path, value, "must be a relative path"))
    if ".." in value.split("/"):
        errs.append(invalid(path, value, _BACKSTEPS))
    return errs


def validate_local_non_reserved_path(value: str, path: str) -> list[FieldError]:
    """``ValidateLocalNonReservedPath``: a descending path that does not start with ``..``
    (the atomic writer keeps its ``..data`` and ``..<timestamp>`` entries there)."""
    errs = validate_local_descending_path(value, path)
    if value.startswith("..") and not value.startswith("../"):
        errs.append(invalid(path, value, "must not start with '..'"))
    return errs


def _file_mode(mode: int | None, path: str, errs: list[FieldError]) -> None:
    if mode is not None and not 0 <= mode <= 0o777:
        errs.append(invalid(path, mode, _FILE_MODE))


def _validate_key_to_path(item: KeyToPath, path: str, errs: list[FieldError]) -> None:
    """``validateKeyToPath``."""
    if not item.key:
        errs.append(required(f"{path}.key"))
    if not item.path:
        errs.append(required(f"{path}.path"))
    errs.extend(validate_local_non_reserved_path(item.path or "", f"{path}.path"))
    _file_mode(item.mode, f"{path}.mode", errs)


def _validate_downward_file(file: DownwardAPIVolumeFile, path: str, errs: list[FieldError]) -> None:
    """``validateDownwardAPIVolumeFile``; as upstream, the errors name the volume source,
    not the item."""
    if not file.path:
        errs.append(required(f"{path}.path"))
    errs.extend(validate_local_non_reserved_path(file.path or "", f"{path}.path"))
    _file_mode(file.mode, f"{path}.mode", errs)


def _validate_projection_sources(  # noqa: C901  (mirrors upstream validateProjectionSources)
    sources: Sequence[VolumeProjection], projected: str, errs: list[FieldError]
) -> None:
    """``validateProjectionSources``: each source's paths, no path written twice."""
    paths: set[str] = set()

    def claim(item_path: str | None, shown: str) -> None:
        if item_path:
            if item_path in paths:
                errs.append(invalid(projected, shown, "conflicting duplicate paths"))
            paths.add(item_path)

    for j, source in enumerate(sources):
        src = f"{projected}.sources[{j}]"
        count = 0
        for kind in ("secret", "configMap"):
            ref = getattr(source, kind)
            if ref is None:
                continue
            count += 1
            if not ref.name:
                errs.append(required(f"{src}.{kind}.name"))
            for i, item in enumerate(ref.items or []):
                _validate_key_to_path(item, f"{src}.{kind}.items[{i}]", errs)
                claim(item.path, ref.name or "")
        if source.downwardAPI is not None:
            count += 1
            for file in source.downwardAPI.items or []:
                _validate_downward_file(file, f"{src}.downwardAPI", errs)
                claim(file.path, file.path or "")
        if source.serviceAccountToken is not None:
            count += 1
            _validate_token_projection(source.serviceAccountToken, projected, j, errs)
        if source.clusterTrustBundle is not None:
            count += 1
            bundle_path = source.clusterTrustBundle.path
            if not bundle_path:
                errs.append(required(f"{src}.clusterTrustBundle.path"))
            errs.extend(
                validate_local_non_reserved_path(
                    bundle_path or "", f"{src}.clusterTrustBundle.path"
                )
            )
            claim(bundle_path, bundle_path or "")
        if count > 1:
            errs.append(forbidden(src, "may not specify more than 1 volume type per source"))


def _validate_token_projection(
    token: ServiceAccountTokenProjection, projected: str, index: int, errs: list[FieldError]
) -> None:
    """``validateProjectionSources``' rules for a ``serviceAccountToken`` (its path is
    reported on the projected volume, as the API server does)."""
    path = f"{projected}.sources[{index}].serviceAccountToken"
    seconds = token.expirationSeconds
    if seconds is not None and seconds < 600:
        errs.append(
            invalid(
                f"{path}.expirationSeconds",
                seconds,
                "may not specify a duration less than 10 minutes",
            )
        )
    if seconds is not None and seconds > 1 << 32:
        errs.append(
            invalid(
                f"{path}.expirationSeconds",
                seconds,
                "may not specify a duration larger than 2^32 seconds",
            )
        )
    if not token.path:
        errs.append(required(f"{projected}.path"))
    else:
        errs.extend(validate_local_non_reserved_path(token.path, f"{projected}.path"))


def _quantity(errs: list[FieldError], path: str, text: str) -> Quantity | None:
    try:
        return parse_quantity(text)
    except QuantityError as e:
        errs.append(invalid(path, text, str(e)))
        return None
