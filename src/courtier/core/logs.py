"""Log lines a person or a log pipeline can read: ``--log-format text|json``.

* ``text`` (the default, on a terminal and off it): ``TIME LEVEL LOGGER: message``,
  as courtier always printed.
* ``json``: one JSON object per line (Loki, Elasticsearch, Vector index it without
  regexes), with stable keys::

      time     RFC 3339 UTC with milliseconds, "2026-12-03T20:35:01.123Z"
      level    debug | info | warning | error | critical
      logger   the logger's name ("courtier.frontier")
      event    a short stable snake_case name ("fetch", "backoff", "handover" …;
               "log" for a line logged without one)
      message  the text the text format shows
      host, url, shard, worker, outcome, reason   when the line knows them
      …        any other field the call gave (e.g. "status", "delay")
      exception  the formatted traceback, when the line carries one

  A field whose name is one of the first five keys is written as ``field_<name>``;
  a value JSON cannot hold (bytes, a Path, an exception, NaN) is written as its
  ``str()``. Newlines inside a message or a traceback are escaped by JSON, so a
  record is always exactly one line.

:func:`log_event` logs a line with its event name and fields (through ``extra=``),
so the text format shows the message unchanged and the JSON format carries the
fields; :func:`setup_logging` is what the command line calls. The event names are
listed in docs/operations.md ("Logs").
"""

from __future__ import annotations

import json
import logging
import math
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TextIO

__all__ = [
    "KNOWN_FIELDS",
    "LOG_FORMATS",
    "NOTICE_LOGGER",
    "STABLE_KEYS",
    "TEXT_FORMAT",
    "JsonFormatter",
    "log_event",
    "setup_logging",
]

LOG_FORMATS: Final = ("text", "json")
TEXT_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"
#: keys every JSON line has
STABLE_KEYS: Final = ("time", "level", "logger", "event", "message")
#: keys written (in this order, after the stable ones) when a line knows them
KNOWN_FIELDS: Final = ("host", "url", "shard", "worker", "outcome", "reason")
#: the logger of the info lines a crawl process announces to whoever runs it (the API's
#: address, a stop under way, what became of the worker processes of ``crawl --workers
#: N``): shown at the default level, where other info lines are not
NOTICE_LOGGER: Final = "courtier.notice"
#: ``event`` of a line logged without one (a library's, or a call not converted yet)
PLAIN_EVENT: Final = "log"
_MARK: Final = "_courtier_handler"


def log_event(logger: logging.Logger, level: int, event: str, msg: str = "", /,
              *args: object, exc_info: Any = None, **fields: object) -> None:
    """Log ``msg % args`` (``event`` when no message is given) with the event name and
    ``fields`` attached for the JSON format. Fields of None are left out (not known).
    Costs one ``isEnabledFor`` when the level is off."""
    if not logger.isEnabledFor(level):
        return
    known = {k: v for k, v in fields.items() if v is not None}
    logger.log(level, msg or event, *args, exc_info=exc_info, stacklevel=2,
               extra={"event": event, "event_fields": known})


def _jsonable(value: object) -> object:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return str(value)


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line (see the module docstring). ``defaults``:
    fields of every line that does not give them itself (a worker process's ``worker``)."""

    def __init__(self, defaults: Mapping[str, object] | None = None) -> None:
        super().__init__()
        self.defaults = dict(defaults or {})

    def format(self, record: logging.LogRecord) -> str:
        created = datetime.fromtimestamp(record.created, UTC)
        out: dict[str, object] = {
            "time": created.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": str(getattr(record, "event", None) or PLAIN_EVENT),
            "message": record.getMessage(),
        }
        fields = getattr(record, "event_fields", None)
        if self.defaults:
            fields = {**self.defaults, **(fields if isinstance(fields, Mapping) else {})}
        if isinstance(fields, Mapping):
            for name in KNOWN_FIELDS:
                if name in fields:
                    out[name] = _jsonable(fields[name])
            for name in sorted(set(fields) - set(KNOWN_FIELDS)):
                key = f"field_{name}" if name in out or name in STABLE_KEYS else str(name)
                out[key] = _jsonable(fields[name])
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            out["exception"] = record.exc_text
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False, allow_nan=False)


def setup_logging(log_format: str = "text", verbose: bool = False,
                  stream: TextIO | None = None, logger: logging.Logger | None = None,
                  worker: str | None = None) -> None:
    """Send log records to ``stream`` (stderr) in ``log_format``; DEBUG with ``verbose``,
    else WARNING, save the info lines of :data:`NOTICE_LOGGER`. Calling it again replaces
    the handler it installed. Like ``logging.basicConfig``, it leaves a root logger alone
    that others configured (a test runner, an application embedding courtier); ``logger``
    targets another one.
    With json, Python warnings are logged too (``py.warnings``), so they are JSON lines."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"log format must be text or json, not {log_format!r}")
    target = logger or logging.getLogger()
    for handler in [h for h in target.handlers if getattr(h, _MARK, False)]:
        target.removeHandler(handler)
        handler.close()
    if logger is None and target.handlers:
        return
    handler = logging.StreamHandler(stream or sys.stderr)
    setattr(handler, _MARK, True)
    text = TEXT_FORMAT if worker is None else TEXT_FORMAT.replace(
        " %(name)s", f" {worker} %(name)s")
    handler.setFormatter(JsonFormatter({"worker": worker} if worker else None)
                         if log_format == "json" else logging.Formatter(text))
    target.addHandler(handler)
    target.setLevel(logging.DEBUG if verbose else logging.WARNING)
    logging.getLogger(NOTICE_LOGGER).setLevel(logging.DEBUG if verbose else logging.INFO)
    if logger is None:
        logging.captureWarnings(log_format == "json")


class JsonLineStream:
    """A text stream for code that writes whole lines (the progress display's ``log``
    mode): each line becomes one JSON log line (``event`` ``progress``, level info) on
    ``stream``, whatever the log level, as the text lines are."""

    def __init__(self, stream: TextIO | None = None, event: str = "progress",
                 logger: str = "courtier.crawl.progress") -> None:
        self.stream = stream or sys.stderr
        self.event, self.logger = event, logger
        self.formatter = JsonFormatter()
        self._partial = ""

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        for line in lines:
            record = logging.LogRecord(self.logger, logging.INFO, __file__, 0, line.strip(),
                                       None, None)
            record.event = self.event
            self.stream.write(self.formatter.format(record) + "\n")
        return len(text)

    def flush(self) -> None:
        self.stream.flush()
