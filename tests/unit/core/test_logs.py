"""logs.py: the JSON formatter, log_event, setup_logging, and the log-format setting.

Checked by breaking it: with ``default=str``-less stringification removed
(``_jsonable`` returning the value as is) the Path/bytes test raises; with
``exc_info`` not formatted the exception test fails; with ``stacklevel`` dropped the
caller's line is log_event's own.
"""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from courtier.core.config import build_config
from courtier.core.errors import ConfigError
from courtier.core.logs import (
    NOTICE_LOGGER,
    STABLE_KEYS,
    JsonFormatter,
    JsonLineStream,
    log_event,
    setup_logging,
)


@pytest.fixture
def logger() -> logging.Logger:
    named = logging.getLogger("courtier.test_logs")
    named.propagate = False
    return named


def lines_of(stream: io.StringIO) -> list[dict[str, object]]:
    text = stream.getvalue()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def test_json_line_has_the_stable_keys_and_the_fields(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", verbose=True, stream=out, logger=logger)
    log_event(logger, logging.INFO, "handover", "handed over %d shards", 3, shard=7,
              worker="w1", host=None, delay=1.5)
    [record] = lines_of(out)
    assert list(record)[:len(STABLE_KEYS)] == list(STABLE_KEYS)
    assert record["level"] == "info" and record["logger"] == "courtier.test_logs"
    assert record["event"] == "handover" and record["message"] == "handed over 3 shards"
    assert (record["shard"], record["worker"], record["delay"]) == (7, "w1", 1.5)
    assert "host" not in record  # None: not known, left out
    assert str(record["time"]).endswith("Z") and "T" in str(record["time"])


def test_a_plain_log_call_gets_event_log(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", stream=out, logger=logger)
    logger.warning("disk %s", "full")
    logger.debug("not shown: WARNING without verbose")
    [record] = lines_of(out)
    assert (record["event"], record["message"], record["level"]) == ("log", "disk full",
                                                                       "warning")


def test_exceptions_become_a_field_and_newlines_stay_in_one_line(
        logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", stream=out, logger=logger)
    try:
        raise ValueError("bad\nvalue")
    except ValueError:
        log_event(logger, logging.ERROR, "api_error", "first line\nsecond line", exc_info=True,
                  reason="multi\nline")
    assert out.getvalue().count("\n") == 1
    [record] = lines_of(out)
    assert record["message"] == "first line\nsecond line"
    assert "Traceback" in str(record["exception"]) and "ValueError: bad" in str(
        record["exception"])


def test_values_json_cannot_hold_are_stringified(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", stream=out, logger=logger)
    log_event(logger, logging.WARNING, "odd", path=Path("/tmp/x"), raw=b"\x00",
              ratio=float("nan"), error=OSError(5, "I/O"), items=(1, Path("a")),
              nested={"k": Path("b")})
    [record] = lines_of(out)
    assert record["path"] == "/tmp/x" and record["raw"] == "b'\\x00'"
    assert record["ratio"] == "nan" and record["error"] == "[Errno 5] I/O"
    assert record["items"] == [1, "a"] and record["nested"] == {"k": "b"}


def test_a_field_named_like_a_stable_key_does_not_replace_it(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("json", stream=out, logger=logger)
    log_event(logger, logging.WARNING, "clash", "the message", message="other", level=3)
    [record] = lines_of(out)
    assert record["message"] == "the message" and record["level"] == "warning"
    assert (record["field_message"], record["field_level"]) == ("other", 3)


def test_text_format_shows_the_message_as_before(logger: logging.Logger) -> None:
    out = io.StringIO()
    setup_logging("text", stream=out, logger=logger)
    log_event(logger, logging.WARNING, "backoff", "backing off %s", "a.test", host="a.test")
    text = out.getvalue()
    assert text.endswith(" WARNING courtier.test_logs: backing off a.test\n")
    assert "{" not in text


def test_setup_again_replaces_its_handler_and_names_the_worker(
        logger: logging.Logger) -> None:
    first, second = io.StringIO(), io.StringIO()
    setup_logging("text", stream=first, logger=logger)
    setup_logging("json", stream=second, logger=logger, worker="w-2")
    logger.warning("once")
    assert first.getvalue() == ""
    [record] = lines_of(second)
    assert record["worker"] == "w-2"
    with pytest.raises(ValueError, match="text or json"):
        setup_logging("yaml", logger=logger)


def test_log_event_points_at_its_caller(logger: logging.Logger) -> None:
    seen: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = seen.append  # type: ignore[method-assign]
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        log_event(logger, logging.INFO, "here")
    finally:
        logger.removeHandler(handler)
    assert seen[0].funcName == "test_log_event_points_at_its_caller"


def test_json_line_stream_turns_progress_lines_into_objects() -> None:
    out = io.StringIO()
    stream = JsonLineStream(out)
    assert not stream.isatty()
    stream.write("12:00:00 fetched 3")
    stream.write(" | queued 4\nsecond\n")
    records = lines_of(out)
    assert [r["message"] for r in records] == ["12:00:00 fetched 3 | queued 4", "second"]
    assert {r["event"] for r in records} == {"progress"}


def test_formatter_defaults_do_not_override_a_lines_own_field() -> None:
    formatter = JsonFormatter({"worker": "w-1"})
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    record.event_fields = {"worker": "w-9"}
    assert json.loads(formatter.format(record))["worker"] == "w-9"


def test_log_format_setting_from_flag_env_and_file(tmp_path: Path) -> None:
    assert build_config({}, environ={}).log_format == "text"
    assert build_config({}, environ={"COURTIER_LOG_FORMAT": "json"}).log_format == "json"
    toml = tmp_path / "c.toml"
    toml.write_text('log-format = "json"\n')
    assert build_config({}, toml, environ={}).log_format == "json"
    assert build_config({"log_format": "text"}, toml, environ={}).log_format == "text"
    with pytest.raises(ConfigError, match="--log-format must be text or json"):
        build_config({}, environ={"COURTIER_LOG_FORMAT": "yaml"})


def test_the_crawls_notices_are_info_lines_shown_where_other_info_lines_are_not() -> None:
    """Issue #36: informational lines (a stop under way, the API's address) are logged
    at INFO, not WARNING, and still shown without -v. Red with the notice logger's level
    left unset."""
    top = logging.getLogger("courtier.test_notice_top")
    top.propagate = False
    notice = logging.getLogger(NOTICE_LOGGER)
    saved = (notice.parent, notice.level)
    notice.parent = top  # as under the root: its lines reach the handler of ``top``
    out = io.StringIO()
    try:
        setup_logging("text", stream=out, logger=top)
        log_event(notice, logging.INFO, "stopping", "stopping (SIGTERM)")
        log_event(logging.getLogger("courtier.test_notice_top.frontier"), logging.INFO,
                  "backoff", "a host backs off")
        setup_logging("text", verbose=True, stream=out, logger=top)
        log_event(notice, logging.DEBUG, "detail", "a notice's detail under -v")
    finally:
        notice.parent, _ = saved
        notice.setLevel(saved[1])
        setup_logging("text", stream=io.StringIO(), logger=top)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert " INFO courtier.notice: stopping (SIGTERM)" in lines[0]
    assert "a notice's detail under -v" in lines[1]
