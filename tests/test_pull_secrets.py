"""Pull secrets of an unexpected shape: an ErrImagePull that says why, never a crash, and
never a secret value in a message, a ``repr`` or a log line."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from asynckubelet import errors
from asynckubelet.manifests import load_manifests_text
from asynckubelet.runtime.images import (
    ImageManager,
    PullSecretError,
    RegistryAuth,
    auths_from_secrets,
    parse_pull_secret,
)

SECRET = "hunter2-very-secret"
AUTH = base64.b64encode(f"alice:{SECRET}".encode()).decode()


def _json(value: Any) -> dict[str, bytes]:
    return {".dockerconfigjson": json.dumps(value).encode()}


BAD: list[tuple[str, str, dict[str, bytes], str]] = [
    (
        "not JSON",
        "kubernetes.io/dockerconfigjson",
        {".dockerconfigjson": f'{{"auths": {SECRET}'.encode()},
        ".dockerconfigjson is not valid JSON: Expecting value: line 1 column 11",
    ),
    (
        "no key",
        "kubernetes.io/dockerconfigjson",
        {"password": SECRET.encode()},
        "a Secret of type kubernetes.io/dockerconfigjson needs the key .dockerconfigjson",
    ),
    (
        "a list",
        "kubernetes.io/dockerconfigjson",
        _json([SECRET]),
        ".dockerconfigjson must be a JSON object",
    ),
    (
        "auths a list",
        "kubernetes.io/dockerconfigjson",
        _json({"auths": [SECRET]}),
        ".dockerconfigjson: auths must be an object",
    ),
    (
        "entry a string",
        "kubernetes.io/dockerconfigjson",
        _json({"auths": {"reg.example": SECRET}}),
        "the entry of 'reg.example' must be an object",
    ),
    (
        "password a number",
        "kubernetes.io/dockerconfigjson",
        _json({"auths": {"reg.example": {"username": SECRET, "password": 5}}}),
        "password of 'reg.example' must be a string",
    ),
    (
        "auth not base64",
        "kubernetes.io/dockerconfigjson",
        _json({"auths": {"reg.example": {"auth": SECRET + "!"}}}),
        "'reg.example': auth is not valid base64 of UTF-8 text",
    ),
    (
        "auth without a colon",
        "kubernetes.io/dockerconfigjson",
        _json({"auths": {"reg.example": {"auth": base64.b64encode(SECRET.encode()).decode()}}}),
        "'reg.example': unable to parse auth field, must be formatted as base64(username:password)",
    ),
    (
        "not UTF-8",
        "kubernetes.io/dockercfg",
        {".dockercfg": b"\xff\xfe\xfd" + SECRET.encode()},
        ".dockercfg is not UTF-8 text",
    ),
]


@pytest.mark.parametrize(("case", "kind", "data", "message"), BAD, ids=[b[0] for b in BAD])
def test_a_pull_secret_of_an_unexpected_shape_is_refused_without_its_values(
    case: str, kind: str, data: dict[str, bytes], message: str
) -> None:
    with pytest.raises(PullSecretError) as e:
        parse_pull_secret(kind, data)
    assert str(e.value) == message
    assert SECRET not in str(e.value)


def test_an_unreadable_pull_secret_becomes_an_auth_that_names_its_problem() -> None:
    found = auths_from_secrets([BAD[0][1:3]])
    assert [(a.server, a.problem) for a in found] == [
        (
            "",
            "invalid pull secret of type kubernetes.io/dockerconfigjson: "
            ".dockerconfigjson is not valid JSON: Expecting value: line 1 column 11",
        )
    ]


def test_credentials_never_show_in_the_repr_of_an_auth() -> None:
    (auth,) = auths_from_secrets(
        [("kubernetes.io/dockerconfigjson", _json({"auths": {"r.io": {"auth": AUTH}}}))]
    )
    assert auth.header()["password"] == SECRET
    assert SECRET not in repr(auth)
    assert AUTH not in repr(auth)
    assert SECRET not in repr(RegistryAuth(server="r.io", username="u", password=SECRET))


class FakeDocker:
    def __init__(self) -> None:
        self.pulls: list[Any] = []

    async def image_exists(self, image: str) -> bool:
        return False

    async def pull_image(
        self, ref: str, *, auth: Any = None, on_progress: Callable[..., None] | None = None
    ) -> None:
        self.pulls.append(auth)


def test_a_pull_with_an_unreadable_pull_secret_fails_as_err_image_pull_and_pulls_nothing() -> None:
    docker = FakeDocker()
    images = ImageManager(docker)  # type: ignore[arg-type]
    auths = auths_from_secrets([BAD[4][1:3]])

    async def pull() -> None:
        await images.ensure("reg.example/app:1", policy="IfNotPresent", auths=auths)

    with pytest.raises(errors.ImagePullError) as e:
        anyio.run(pull)
    assert e.value.kubelet_reason == "ErrImagePull"
    assert str(e.value).startswith("invalid pull secret of type kubernetes.io/dockerconfigjson")
    assert SECRET not in str(e.value)
    assert docker.pulls == []


def _secret(kind: str, data: dict[str, str]) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "regcred"},
            "type": kind,
            "stringData": data,
        }
    )


@pytest.mark.parametrize(
    ("kind", "data", "error"),
    [
        (
            "kubernetes.io/dockerconfigjson",
            {".dockerconfigjson": f'{{"auths": {SECRET}'},
            'data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": '
            "Expecting value at line 1 column 11",
        ),
        (
            "kubernetes.io/dockercfg",
            {".dockercfg": json.dumps([SECRET])},
            'data[.dockercfg]: Invalid value: "<secret contents redacted>": '
            "json: cannot unmarshal array into Go value of type map[string]interface {}",
        ),
        (
            "kubernetes.io/dockerconfigjson",
            {"password": SECRET},
            "data[.dockerconfigjson]: Required value",
        ),
    ],
)
def test_a_pull_secret_that_is_not_a_json_object_is_a_field_error_at_load_time(
    kind: str, data: dict[str, str], error: str
) -> None:
    with pytest.raises(errors.ManifestError) as e:
        load_manifests_text(_secret(kind, data))
    assert [str(x) for x in e.value.errors] == [error]
    assert SECRET not in str(e.value)


def test_a_well_formed_pull_secret_loads() -> None:
    text = _secret(
        "kubernetes.io/dockerconfigjson",
        {".dockerconfigjson": json.dumps({"auths": {"r.io": {"auth": AUTH}}})},
    )
    assert len(load_manifests_text(text).secrets) == 1
