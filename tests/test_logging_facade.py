"""The project's logger: loguru's records as loguru makes them (the caller's module,
function and line, bound values, exceptions), and no loguru at all for a command whose
messages are all below its level."""

from __future__ import annotations

import inspect
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from loguru import logger as loguru_logger

from asynckubelet import _logging
from asynckubelet._logging import logger


@pytest.fixture
def records() -> Iterator[list[dict[str, Any]]]:
    """Every record loguru makes meanwhile, at any level, with no threshold set."""
    seen: list[dict[str, Any]] = []

    def keep(message: Any) -> None:
        seen.append(message.record)

    sink = loguru_logger.add(keep, level=0, format="{message}")
    _logging.set_threshold(None)
    try:
        yield seen
    finally:
        loguru_logger.remove(sink)
        _logging.set_threshold(None)


def test_a_record_names_the_callers_module_function_and_line(
    records: list[dict[str, Any]],
) -> None:
    line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
    logger.bind(pod="default/web").info("pod {} synced", "web")
    ((record,),) = [records]
    assert record["message"] == "pod web synced"
    assert (record["name"], record["function"], record["line"]) == (
        __name__,
        "test_a_record_names_the_callers_module_function_and_line",
        line,
    )
    assert record["level"].name == "INFO"
    assert record["extra"]["pod"] == "default/web"


def test_exceptions_reach_the_record(records: list[dict[str, Any]]) -> None:
    error = ValueError("boom")
    logger.opt(exception=error).bind(pod="a/b").error("{}", "failed")
    try:
        raise KeyError("k")
    except KeyError:
        logger.exception("while handling")
    first, second = records
    assert (first["message"], first["extra"]["pod"]) == ("failed", "a/b")
    assert first["exception"].value is error
    assert second["level"].name == "ERROR"
    assert isinstance(second["exception"].value, KeyError)
    assert second["function"] == "test_exceptions_reach_the_record"


def test_messages_below_the_threshold_are_dropped(records: list[dict[str, Any]]) -> None:
    _logging.set_threshold("info")
    logger.debug("dropped")
    logger.trace("dropped")
    logger.info("kept")
    logger.log("WARNING", "kept too")
    assert [r["message"] for r in records] == ["kept", "kept too"]


PROBE = """
import json, sys
from asynckubelet import _logging
from asynckubelet.runtime.manager import RuntimeManager
from asynckubelet.node.foreground import run_pods
from asynckubelet._logging import logger

_logging.set_threshold("WARNING")
logger.debug("a sync")
logger.bind(pod="a/b").info("an event")
before = "loguru" in sys.modules
logger.warning("something to see")
print(json.dumps({"before": before, "after": "loguru" in sys.modules}))
"""


def test_a_command_that_logs_nothing_at_its_level_never_imports_loguru() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {"before": False, "after": True}
