"""TLS towards a remote engine: the Docker CLI's environment, endpoints and TLS failures
reported with the engine's address and the problem, without a daemon."""

from __future__ import annotations

import ssl
from pathlib import Path

import aiodocker
import pytest

from asynckubelet import errors
from asynckubelet.docker import DockerClient
from asynckubelet.docker.engine import (
    EngineTLS,
    engine_endpoint,
    tls_context,
    tls_from_environment,
)
from asynckubelet.docker.errors import is_transient, map_error

ADDRESS = "tcp://192.0.2.10:2376"
HOME_DOCKER = Path.home() / ".docker"


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, None),
        ({"DOCKER_TLS_VERIFY": ""}, None),
        ({"DOCKER_CERT_PATH": "/certs"}, None),
        ({"DOCKER_TLS_VERIFY": "1"}, EngineTLS(verify=True, cert_path=HOME_DOCKER)),
        ({"DOCKER_TLS_VERIFY": "true"}, EngineTLS(verify=True, cert_path=HOME_DOCKER)),
        (
            {"DOCKER_TLS_VERIFY": "1", "DOCKER_CERT_PATH": "/certs"},
            EngineTLS(verify=True, cert_path=Path("/certs")),
        ),
        ({"DOCKER_TLS": "1"}, EngineTLS(verify=False, cert_path=HOME_DOCKER)),
        (
            {"DOCKER_TLS": "1", "DOCKER_TLS_VERIFY": "1"},
            EngineTLS(verify=True, cert_path=HOME_DOCKER),
        ),
    ],
)
def test_tls_settings_are_read_from_the_environment_as_the_docker_cli_does(
    environ: dict[str, str], expected: EngineTLS | None
) -> None:
    assert tls_from_environment(environ) == expected


def test_a_tcp_address_without_tls_is_spoken_to_over_plain_http(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DOCKER_TLS_VERIFY", raising=False)
    monkeypatch.delenv("DOCKER_TLS", raising=False)
    endpoint = engine_endpoint("tcp://192.0.2.10:2375")
    assert (endpoint.address, endpoint.url, endpoint.tls) == (
        "tcp://192.0.2.10:2375",
        "http://192.0.2.10:2375",
        None,
    )


def test_a_tcp_address_with_tls_is_spoken_to_over_https(tmp_path: Path) -> None:
    endpoint = engine_endpoint(ADDRESS, tls=EngineTLS(verify=False, cert_path=tmp_path))
    assert (endpoint.address, endpoint.url) == (ADDRESS, "https://192.0.2.10:2376")
    assert isinstance(endpoint.tls, ssl.SSLContext)


def test_tls_settings_do_not_apply_to_a_unix_socket(tmp_path: Path) -> None:
    endpoint = engine_endpoint("unix:///run/x.sock", tls=EngineTLS(verify=True, cert_path=tmp_path))
    assert (endpoint.url, endpoint.tls) == ("unix:///run/x.sock", None)


def test_docker_tls_without_verify_encrypts_but_accepts_any_engine_certificate(
    tmp_path: Path,
) -> None:
    settings = EngineTLS(verify=False, cert_path=tmp_path)
    unverified = tls_context(settings, address=ADDRESS)
    assert unverified.verify_mode is ssl.CERT_NONE
    assert unverified.minimum_version is ssl.TLSVersion.TLSv1_2


def test_a_missing_ca_names_the_engine_the_file_and_the_setting(tmp_path: Path) -> None:
    with pytest.raises(errors.RuntimeUnavailable) as caught:
        tls_context(EngineTLS(verify=True, cert_path=tmp_path), address=ADDRESS)
    message = str(caught.value)
    assert ADDRESS in message
    assert str(tmp_path / "ca.pem") in message
    assert "DOCKER_CERT_PATH" in message


def test_an_unusable_client_certificate_names_the_engine_and_the_files(tmp_path: Path) -> None:
    (tmp_path / "cert.pem").write_text("not a certificate\n")
    (tmp_path / "key.pem").write_text("not a key\n")
    with pytest.raises(errors.RuntimeUnavailable) as caught:
        tls_context(EngineTLS(verify=False, cert_path=tmp_path), address=ADDRESS)
    assert ADDRESS in str(caught.value)
    assert str(tmp_path / "cert.pem") in str(caught.value)


@pytest.mark.anyio
async def test_the_client_reports_the_address_it_was_given(tmp_path: Path) -> None:
    async with DockerClient(url=ADDRESS, tls=EngineTLS(verify=False, cert_path=tmp_path)) as c:
        assert c.url == ADDRESS


def _verify_failed(message: str) -> ssl.SSLCertVerificationError:
    error = ssl.SSLCertVerificationError(1, f"certificate verify failed: {message}")
    error.verify_message = message
    return error


def _alert(reason: str) -> ssl.SSLError:
    error = ssl.SSLError(1, f"[SSL: {reason}] alert")
    error.reason = reason
    return error


def _wrapped(cause: BaseException) -> aiodocker.DockerError:
    outer = aiodocker.DockerError(900, f"Cannot connect to Docker Engine via https://x [{cause}]")
    outer.__cause__ = cause
    return outer


@pytest.mark.parametrize(
    ("cause", "words"),
    [
        (
            _verify_failed("unable to get local issuer certificate"),
            "the engine's certificate is not trusted (unable to get local issuer certificate)",
        ),
        (
            _verify_failed("IP address mismatch, certificate is not valid for '192.0.2.10'."),
            "the engine's certificate is not trusted (IP address mismatch",
        ),
        (
            _alert("SSLV3_ALERT_BAD_CERTIFICATE"),
            "the engine refused this client's certificate (sslv3_alert_bad_certificate)",
        ),
        (
            _alert("TLSV13_ALERT_CERTIFICATE_REQUIRED"),
            "the engine refused this client's certificate",
        ),
        (
            _alert("WRONG_VERSION_NUMBER"),
            "the engine does not speak TLS at this address",
        ),
    ],
)
def test_a_tls_failure_names_the_engine_and_the_problem(cause: BaseException, words: str) -> None:
    mapped = map_error(_wrapped(cause), what="version", address=ADDRESS)
    assert isinstance(mapped, errors.RuntimeUnavailable)
    assert str(mapped).startswith(
        f"version: cannot talk to the Docker engine at {ADDRESS} over TLS"
    )
    assert words in str(mapped)


def test_a_tls_failure_is_not_retried() -> None:
    cause = _wrapped(_verify_failed("unable to get local issuer certificate"))
    mapped = map_error(cause, address=ADDRESS)
    mapped.__cause__ = cause
    assert not is_transient(mapped)


def test_plain_http_to_a_tls_port_says_to_turn_tls_on_and_is_not_retried() -> None:
    cause = aiodocker.DockerError(400, "Client sent an HTTP request to an HTTPS server.\n")
    mapped = map_error(cause, address=ADDRESS)
    mapped.__cause__ = cause
    assert isinstance(mapped, errors.RuntimeUnavailable)
    assert f"the Docker engine at {ADDRESS} speaks TLS only" in str(mapped)
    assert "DOCKER_TLS_VERIFY=1" in str(mapped)
    assert not is_transient(mapped)


def test_a_refused_connection_is_still_retried() -> None:
    cause = ConnectionRefusedError(111, "Connection refused")
    mapped = map_error(cause, address=ADDRESS)
    mapped.__cause__ = cause
    assert is_transient(mapped)


@pytest.mark.anyio
async def test_with_no_engine_answering_the_client_names_the_socket_it_tries(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from asynckubelet.docker import engine

    missing = tmp_path / "docker.sock"
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(engine, "DEFAULT_SOCKET", missing)
    monkeypatch.setattr(engine, "OWN_ENGINE_SOCKET", tmp_path / "own.sock")
    monkeypatch.setattr(engine, "default_socket", lambda: missing)
    assert engine_endpoint(None).address == f"unix://{missing}"
    async with DockerClient(url=None, retry_attempts=1) as docker:
        assert docker.url == f"unix://{missing}"
        with pytest.raises(errors.RuntimeUnavailable, match=str(missing)):
            await docker.info()


def test_the_default_socket_is_the_first_place_that_holds_a_socket(tmp_path: Path) -> None:
    import socket

    from asynckubelet.docker import engine

    usual, other = tmp_path / "usual.sock", tmp_path / "other.sock"
    assert engine.default_socket([usual, other]) == usual
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(other))
        assert engine.default_socket([usual, other]) == other
        with socket.socket(socket.AF_UNIX) as t:
            t.bind(str(usual))
            assert engine.default_socket([usual, other]) == usual
