"""Sinks added through ``add_sink`` never print the values a traceback's frames hold."""

from __future__ import annotations

from loguru import logger

from asynckubelet.cli.logsetup import add_sink

SECRET = "s3cr3t-value-in-a-local"


def _fails(password: str) -> None:
    token = password.upper()
    raise KeyError(len(token))


def _logged(add: object) -> str:
    lines: list[str] = []
    sink = add(lines.append)  # type: ignore[operator]
    logger.enable("asynckubelet")
    try:
        try:
            _fails(SECRET)
        except KeyError:
            logger.exception("sync failed")
    finally:
        logger.remove(sink)
    return "".join(lines)


def test_a_logged_traceback_holds_no_local_value_through_add_sink() -> None:
    text = _logged(lambda s: add_sink(s, level="DEBUG", diagnose=True, backtrace=True))
    assert "KeyError" in text
    assert "_fails" in text
    assert SECRET not in text
    assert SECRET.upper() not in text


def test_logurus_own_default_would_have_printed_it() -> None:
    text = _logged(lambda s: logger.add(s, level="DEBUG"))
    assert SECRET in text


def test_records_that_hold_secret_values_show_none_in_their_repr() -> None:
    from datetime import UTC, datetime

    from asynckubelet.node.tokens import Token
    from asynckubelet.runtime.env import Environment, PodContext

    now = datetime.now(UTC)
    shown = [
        repr(PodContext(secrets={"creds": {"password": SECRET.encode()}})),
        repr(Environment(env=(("PASSWORD", SECRET),), command=None, args=None)),
        repr(Token(value=SECRET, issued_at=now, expires_at=now)),
    ]
    assert not any(SECRET in text for text in shown)
