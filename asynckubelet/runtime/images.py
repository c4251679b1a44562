"""The image manager: pull policies, registry auth from pull secrets, shared pulls.

The kubelet's ``EnsureImageExists``: ``Never`` uses only what is present
(``ErrImageNeverPull``), ``IfNotPresent`` pulls when absent, ``Always`` pulls every time a
container starts. Unlike the kubelet's default serial puller, pulls run concurrently, and a
pull already in flight for the same image (from any pod) is joined rather than repeated.
A :class:`PullListener` (the command line's progress display, the node's log) is told
each pull's start, Docker's per-layer progress messages and the end, once per pull.

Images of the project's own registry name (``asynckubelet.local/...``) are never pulled:
no registry serves that name, and asking Docker to pull it would only send a lookup off
the machine. The ones the project knows how to make (the pause image, busybox, the probe
helper) are made here when missing, announced in one line; any other such image missing
is an ``ErrImagePull`` that says so.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio

from asynckubelet import errors
from asynckubelet._logging import logger
from asynckubelet.docker import DockerAPI, PullProgress
from asynckubelet.images import build as image_build

_DOMAIN_RE = re.compile(r"^(localhost|[^/]*[.:][^/]*)(/|$)")
_REFERENCE_RE = re.compile(
    r"^(?:(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*"
    r"(?::[0-9]+)?)/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?"
    r"(?:@[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,})?$"
)
DOCKER_HUB = "docker.io"
LOCAL_REGISTRY = image_build.LOCAL_REGISTRY
CANNOT_BE_PULLED = "cannot be pulled"
"""In the message of a local image that is missing and cannot be made here: waiting will
not bring it (a caller that ends on permanent errors looks for these words)."""
CANNOT_BE_BUILT = "cannot be built on this machine"

Announce = Callable[[str], None]
"""Told, in one line, what the image manager does by itself (an image made locally)."""


def validate_image_name(image: str) -> None:
    """Raise ``InvalidImageName`` unless ``image`` parses as a Docker reference."""
    if not image or not _REFERENCE_RE.match(image):
        raise errors.InvalidImageName(
            f'Failed to apply default image tag "{image}": couldn\'t parse image name '
            f'"{image}": invalid reference format',
            image=image,
        )


def registry_of(image: str) -> str:
    """The registry host of an image reference (``docker.io`` when none is named)."""
    match = _DOMAIN_RE.match(image)
    return match.group(1) if match else DOCKER_HUB


def is_local_image(image: str) -> bool:
    """The image is named in the project's own registry (``asynckubelet.local/...``)."""
    return registry_of(image) == LOCAL_REGISTRY


def with_default_tag(image: str) -> str:
    """``busybox`` -> ``busybox:latest``; tagged or digest references unchanged."""
    last = image.rsplit("/", 1)[-1]
    if "@" in image or ":" in last:
        return image
    return f"{image}:latest"


DOCKER_CONFIG_JSON = "kubernetes.io/dockerconfigjson"
DOCKER_CFG = "kubernetes.io/dockercfg"
_AUTH_FIELDS = ("username", "password", "auth", "email", "identitytoken", "registrytoken")


@dataclass(frozen=True)
class RegistryAuth:
    """Credentials for one registry, from a pull secret. The secret parts never show in a
    ``repr`` (so neither in a log line nor a traceback)."""

    server: str
    username: str = ""
    password: str = field(default="", repr=False)
    auth: str = field(default="", repr=False)
    problem: str = ""
    """Why the pull secret this stands for cannot be used (then nothing else is set): a
    pull fails with ``ErrImagePull`` and this message, as the kubelet's does when it
    cannot make a keyring of the pod's pull secrets."""

    def header(self) -> dict[str, str]:
        user, password = self.username, self.password
        if self.auth and not user:
            user, password = _decode_auth(self.auth)
        return {"username": user, "password": password, "serveraddress": self.server}


class PullSecretError(ValueError):
    """A pull secret's data has an unexpected shape; the message holds none of its values."""


def _decode_auth(auth: str) -> tuple[str, str]:
    try:
        text = base64.b64decode(auth, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise PullSecretError("auth is not valid base64 of UTF-8 text") from None
    user, sep, password = text.partition(":")
    if not sep:
        raise PullSecretError(
            "unable to parse auth field, must be formatted as base64(username:password)"
        )
    return user, password


def _entry(server: str, entry: object) -> RegistryAuth:
    if not isinstance(entry, dict):
        raise PullSecretError(f"the entry of {server!r} must be an object")
    for name in _AUTH_FIELDS:
        if name in entry and not isinstance(entry[name], str):
            raise PullSecretError(f"{name} of {server!r} must be a string")
    auth = RegistryAuth(
        server=_normalise_server(server),
        username=str(entry.get("username", "")),
        password=str(entry.get("password", "")),
        auth=str(entry.get("auth", "")),
    )
    if auth.auth:
        try:
            _decode_auth(auth.auth)
        except PullSecretError as e:
            raise PullSecretError(f"{server!r}: {e}") from None
    return auth


def parse_pull_secret(kind: str, data: Mapping[str, bytes]) -> list[RegistryAuth]:
    """Registry credentials of one ``kubernetes.io/dockerconfigjson`` or
    ``kubernetes.io/dockercfg`` Secret (other types hold none). Raises
    :class:`PullSecretError`, whose message names the key and the problem, never a value."""
    if kind == DOCKER_CONFIG_JSON:
        key = ".dockerconfigjson"
    elif kind == DOCKER_CFG:
        key = ".dockercfg"
    else:
        return []
    if key not in data:
        raise PullSecretError(f"a Secret of type {kind} needs the key {key}")
    try:
        parsed = json.loads(data[key].decode("utf-8"))
    except UnicodeDecodeError:
        raise PullSecretError(f"{key} is not UTF-8 text") from None
    except json.JSONDecodeError as e:
        raise PullSecretError(
            f"{key} is not valid JSON: {e.msg}: line {e.lineno} column {e.colno}"
        ) from None
    if not isinstance(parsed, dict):
        raise PullSecretError(f"{key} must be a JSON object")
    entries = parsed.get("auths", {}) if kind == DOCKER_CONFIG_JSON else parsed
    if not isinstance(entries, dict):
        raise PullSecretError(f"{key}: auths must be an object")
    return [_entry(str(server), entry) for server, entry in entries.items()]


def auths_from_secrets(secrets: Iterable[tuple[str, Mapping[str, bytes]]]) -> list[RegistryAuth]:
    """Registry credentials from ``(type, data)`` of ``kubernetes.io/dockerconfigjson`` and
    ``kubernetes.io/dockercfg`` Secrets; other types are skipped. A secret that cannot be
    read becomes one :class:`RegistryAuth` with ``problem`` set, so every pull of the pod
    fails with ``ErrImagePull`` saying why, instead of the sync failing."""
    found: list[RegistryAuth] = []
    for kind, data in secrets:
        try:
            found.extend(parse_pull_secret(kind, data))
        except PullSecretError as e:
            found.append(
                RegistryAuth(server="", problem=f"invalid pull secret of type {kind}: {e}")
            )
    return found


def _normalise_server(server: str) -> str:
    server = re.sub(r"^https?://", "", server).rstrip("/")
    if server.endswith("/v1") or server.endswith("/v2"):
        server = server[:-3]
    if server in ("index.docker.io", "registry-1.docker.io"):
        return DOCKER_HUB
    return server


class PullListener(Protocol):
    """Follows image pulls: each pull's start, Docker's progress messages, its end."""

    def pull_started(self, image: str) -> None: ...

    def pull_progress(self, image: str, progress: PullProgress) -> None: ...

    def pull_finished(self, image: str, error: str | None) -> None: ...


class ImageManager:
    """Ensures images are present, joining pulls that are already in flight."""

    def __init__(
        self,
        docker: DockerAPI,
        *,
        listener: PullListener | None = None,
        announce: Announce | None = None,
    ) -> None:
        self._docker = docker
        self._inflight: dict[str, _Pull] = {}
        self._looking: dict[str, _Look] = {}
        self.listener = listener
        """Told about every pull this manager makes (joined pulls are told once)."""
        self.announce: Announce = announce or _log_announcement
        """Told about each image made here because it was missing."""

    async def is_present(self, image: str) -> bool:
        """Whether the engine has ``image``. The pods of a burst mostly run the same few
        images: those asking about one while the engine is being asked share its answer."""
        look = self._looking.get(image)
        if look is not None:
            await look.done.wait()
            if look.error is not None:
                raise look.error
            if look.present is not None:
                return look.present
            # The one who asked was cancelled before the answer: ask again.
            return await self.is_present(image)
        look = self._looking[image] = _Look()
        try:
            look.present = await self._docker.image_exists(image)
        except errors.DockerError as e:
            look.error = e
            raise
        finally:
            look.done.set()
            del self._looking[image]
        return look.present

    async def ensure(
        self, image: str, *, policy: str, auths: Iterable[RegistryAuth] = ()
    ) -> tuple[bool, str]:
        """Make ``image`` present per ``policy``; returns (pulled, message for events).

        Raises ``InvalidImageName``, ``ImageNeverPull`` or ``ImagePullError``.
        """
        validate_image_name(image)
        present = await self.is_present(image)
        if policy == "Never":
            if present:
                return False, f'Container image "{image}" already present on machine'
            raise errors.ImageNeverPull(
                f'Container image "{image}" is not present with pull policy of Never',
                image=image,
            )
        if present and (policy != "Always" or is_local_image(image)):
            return False, f'Container image "{image}" already present on machine'
        started = anyio.current_time()
        if is_local_image(image):
            await self.provide_local(image)
            took = anyio.current_time() - started
            return True, f'Successfully built image "{image}" on this machine in {took:.3f}s'

        await self.pull(image, auths=auths)
        took = anyio.current_time() - started
        return True, f'Successfully pulled image "{image}" in {took:.3f}s'

    async def provide_local(self, image: str) -> None:
        """Make one of the project's own images here (or wait for it being made), announced
        in one line; :class:`~errors.ImagePullError` saying why when it cannot be made."""
        ref = with_default_tag(image)
        local = image_build.local_image(ref)
        if local is None:
            raise errors.ImagePullError(
                f'image "{ref}" is named in {LOCAL_REGISTRY}, the registry of images made '
                f"on this machine, and {CANNOT_BE_PULLED}; load it into the engine first "
                "(`docker save IMAGE > FILE.tar`, then `asynckubelet images load FILE.tar`)",
                image=ref,
            )
        build = self._inflight.get(ref)
        if build is not None:
            await build.done.wait()
            if build.error is not None:
                raise build.error
            return
        build = self._inflight[ref] = _Pull()
        self.announce(f"{ref}: not on the engine; building it from {local.source}")
        try:
            await local.build(self._docker)
        except errors.ImageBuildError as e:
            build.error = errors.ImagePullError(
                f'image "{ref}" is missing and {CANNOT_BE_BUILT}: {e}; make it where it can '
                f"be built with `{local.command}`, or name another image",
                image=ref,
            )
            raise build.error from e
        except errors.DockerError as e:
            build.error = e
            raise
        finally:
            build.done.set()
            del self._inflight[ref]

    async def pull(self, image: str, *, auths: Iterable[RegistryAuth] = ()) -> None:
        """Pull ``image``, or wait for the pull of it already running. Images of the
        project's own registry are made here instead (:meth:`provide_local`)."""
        if is_local_image(image):
            await self.provide_local(image)
            return
        ref = with_default_tag(image)
        auths = list(auths)
        broken = [a.problem for a in auths if a.problem]
        if broken:
            raise errors.ImagePullError(broken[0], image=ref)
        pull = self._inflight.get(ref)
        if pull is None:
            pull = _Pull()
            self._inflight[ref] = pull
            listener = self.listener
            if listener is not None:
                listener.pull_started(ref)
            try:
                await self._pull_with_auths(ref, auths)
            except errors.DockerError as e:
                pull.error = e
                raise
            finally:
                pull.done.set()
                del self._inflight[ref]
                if listener is not None:
                    listener.pull_finished(ref, str(pull.error) if pull.error else None)
            return
        await pull.done.wait()
        if pull.error is not None:
            raise pull.error

    async def _pull_with_auths(self, ref: str, auths: list[RegistryAuth]) -> None:
        registry = registry_of(ref)
        matching = [a for a in auths if a.server == registry]
        logger.debug("pulling image {} ({} credential(s))", ref, len(matching))
        last: errors.DockerError | None = None
        candidates: list[RegistryAuth | None] = [*matching] or [None]
        listener = self.listener
        for auth in candidates:
            try:
                await self._docker.pull_image(
                    ref,
                    auth=auth.header() if auth else None,
                    on_progress=(
                        (lambda p: listener.pull_progress(ref, p)) if listener is not None else None
                    ),
                )
                return
            except errors.ImagePullError as e:
                last = e
        assert last is not None  # noqa: S101  (type narrowing: the loop ran at least once)
        raise last


def _log_announcement(text: str) -> None:
    logger.info("{}", text)


class _Pull:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.error: Any = None


class _Look:
    def __init__(self) -> None:
        self.done = anyio.Event()
        self.present: bool | None = None
        self.error: errors.DockerError | None = None
