"""The daemon client's reading of HTTP/1.1 answers: bodies framed by their length, by
chunks or by the connection's end, read whole or line by line, and a malformed answer
named as the daemon's failure, never a traceback."""

from __future__ import annotations

import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from socket_helpers import unix_server

from asynckubelet import errors
from asynckubelet.api.client import NodeClient
from asynckubelet.node.operations import PodLogOptions


def test_a_body_framed_by_its_length_is_read_whole(
    answering: tuple[Path, list[bytes], list[bytes]],
) -> None:
    path, answers, requests = answering
    answers.append(b'HTTP/1.1 200 OK\r\nContent-Length: 22\r\n\r\n{"kind":"X","n":"y\\n"}')
    assert NodeClient(path).object("configmaps", "default", "c") == {"kind": "X", "n": "y\n"}
    assert requests[0].startswith(b"GET /api/v1/namespaces/default/configmaps/c HTTP/1.1\r\n")
    assert b"\r\nAccept: application/json\r\n" in requests[0]


def test_a_chunked_stream_is_read_line_by_line_across_chunks(
    answering: tuple[Path, list[bytes], list[bytes]],
) -> None:
    path, answers, _ = answering
    lines = [b'{"type":"ADDED","object":{"a":1}}\n', b'{"type":"DELETED","object":{}}\n']
    body = lines[0] + lines[1]
    chunks = [body[:10], body[10:40], body[40:]]
    answers.append(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
        + b"0\r\n\r\n"
    )
    events = list(NodeClient(path).watch(None))
    assert [e["type"] for e in events] == ["ADDED", "DELETED"]


def test_a_body_ended_by_the_connection_gives_its_last_line_without_newline(
    answering: tuple[Path, list[bytes], list[bytes]],
) -> None:
    path, answers, _ = answering
    answers.append(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\none\ntwo")
    assert list(NodeClient(path).log("default", "web", PodLogOptions())) == [b"one\n", b"two"]


def test_a_log_line_longer_than_16_kib_comes_in_pieces_that_add_up_to_it(
    answering: tuple[Path, list[bytes], list[bytes]],
) -> None:
    path, answers, requests = answering
    body = "é".encode() * 20000 + b"\nend"
    chunks = [body[i : i + 7000] for i in range(0, len(body), 7000)]
    answers.append(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks)
        + b"0\r\n\r\n"
    )
    pieces = list(NodeClient(path).log("default", "web", PodLogOptions(limit_bytes=99)))
    assert b"".join(pieces) == body
    assert [len(p) for p in pieces] == [16384, 16384, 7233, 3]
    assert b"limitBytes=99" in requests[0]


def test_a_request_body_is_sent_with_its_length(
    answering: tuple[Path, list[bytes], list[bytes]],
) -> None:
    path, answers, requests = answering
    answers.append(b'HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{"items":[]}')
    assert NodeClient(path).apply([("é.yaml", "kind: ConfigMap")]) == {"items": []}
    head, _, body = requests[0].partition(b"\r\n\r\n")
    assert f"Content-Length: {len(body)}".encode() in head
    assert b'"source": "\\u00e9.yaml"' in body


def test_a_status_answer_is_the_daemons_error_with_its_reason(
    answering: tuple[Path, list[bytes], list[bytes]],
) -> None:
    path, answers, _ = answering
    status = b'{"kind":"Status","reason":"NotFound","message":"pods \\"x\\" not found"}'
    answers.append(
        b"HTTP/1.1 404 Not Found\r\nContent-Length: %d\r\n\r\n%s" % (len(status), status)
    )
    with pytest.raises(errors.DaemonError, match='pods "x" not found') as caught:
        NodeClient(path).pod("default", "x")
    assert caught.value.reason == "NotFound"


@pytest.mark.parametrize(
    "answer",
    [
        b"SSH-2.0-OpenSSH\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n{}",
        b"HTTP/1.1 200 OK\r\nX: " + b"a" * 70000 + b"\r\n\r\n",
        b"",
    ],
    ids=["not-http", "short-body", "bad-chunk", "bad-header", "long-line", "nothing"],
)
def test_a_malformed_answer_is_the_daemons_failure_in_one_line(
    answering: tuple[Path, list[bytes], list[bytes]], answer: bytes
) -> None:
    path, answers, _ = answering
    answers.append(answer)
    with pytest.raises(errors.DaemonError, match="node daemon"):
        NodeClient(path).version()


def test_no_daemon_listening_is_said_with_the_socket(tmp_path: Path) -> None:
    with pytest.raises(errors.DaemonError, match="cannot reach the node daemon at"):
        NodeClient(tmp_path / "api.sock").version()
    assert NodeClient(tmp_path / "api.sock").healthy() is False


def test_the_servers_version_is_the_build_its_api_names(
    answering: tuple[Path, list[bytes], list[bytes]],
) -> None:
    path, answers, requests = answering
    body = b'{"gitVersion":"v1.33.0+asynckubelet.0.9.1"}'
    answers.append(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    assert NodeClient(path).version() == "0.9.1"
    assert requests[0].startswith(b"GET /version HTTP/1.1\r\n")


def test_the_node_configuration_is_what_the_daemon_published_beside_its_socket(
    tmp_path: Path,
) -> None:
    client = NodeClient(tmp_path / "api.sock")
    assert client.node() == {}
    (tmp_path / "node.json").write_text('{"node_name": "n1", "docker_host": "unix:///d.sock"}')
    assert client.node() == {"node_name": "n1", "docker_host": "unix:///d.sock"}
    (tmp_path / "node.json").write_text("[not json")
    assert client.node() == {}


def test_a_name_is_one_path_segment_whatever_it_holds(
    answering: tuple[Path, list[bytes], list[bytes]],
) -> None:
    path, answers, requests = answering
    answers.append(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
    NodeClient(path).pod("a b", "../../x?y#z")
    assert requests[0].startswith(
        b"GET /api/v1/namespaces/a%20b/pods/..%2F..%2Fx%3Fy%23z HTTP/1.1\r\n"
    )


def test_a_plain_name_is_used_as_it_is() -> None:
    from asynckubelet.api.client import quote

    assert quote("web-1.example_x~") == "web-1.example_x~"
    assert quote("é") == "%C3%A9"
    assert quote("") == ""


@pytest.fixture
def slow_stream(tmp_path: Path) -> Iterator[Path]:
    """A unix socket that answers each request with a stream's head at once, then stays
    silent for 0.6 s, then sends one line and ends."""

    def answer(conn: socket.socket, head: bytes, rest: bytes) -> None:
        conn.sendall(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n")
        time.sleep(0.6)
        conn.sendall(b'{"type":"MODIFIED","object":{"a":1}}\n')

    with unix_server(tmp_path / "api.sock", answer) as path:
        yield path


def test_a_watch_stays_open_while_nothing_changes(slow_stream: Path) -> None:
    events = list(NodeClient(slow_stream, timeout=0.2).watch(None))
    assert [e["type"] for e in events] == ["MODIFIED"]


def test_a_followed_log_stays_open_while_the_container_is_silent(slow_stream: Path) -> None:
    lines = list(
        NodeClient(slow_stream, timeout=0.2).log("default", "web", PodLogOptions(follow=True))
    )
    assert lines == [b'{"type":"MODIFIED","object":{"a":1}}\n']


def test_an_answer_that_does_not_come_is_given_up_after_the_timeout(tmp_path: Path) -> None:
    path = tmp_path / "api.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen()
    try:
        with pytest.raises(errors.DaemonError, match="timed out"):
            list(NodeClient(path, timeout=0.2).watch(None))
    finally:
        server.close()
