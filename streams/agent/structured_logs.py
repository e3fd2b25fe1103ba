"""structlog configuration: one JSON object per line on standard error.

The agent logs one line per input event at debug (`event`, with its `offset`) and one per
decision at info (`decision`, with `cause_offset`, `cause_index` and the decision log `offset`).
Library logs (aiokafka, Faust, mode) go through the standard `logging` module; `stdlib_config()`
renders them as the same JSON lines, so a log shipper sees one format.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import msgspec
import structlog

LEVELS = ("debug", "info", "warning", "error")

_encode = msgspec.json.Encoder().encode


def _serialize(obj: Any, **_: Any) -> str:
    try:
        return _encode(obj).decode()
    except (TypeError, msgspec.EncodeError):
        return _encode({k: v if isinstance(v, (str, int, float, bool, type(None))) else repr(v) for k, v in obj.items()}).decode()


def _shared_processors() -> list[Any]:
    return [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]


def configure(level: str = "info", stream: TextIO | None = None) -> None:
    """Configure structlog (our own logs) and the root stdlib logger (libraries)."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
    out = stream or sys.stderr
    structlog.configure(
        processors=[
            *_shared_processors(),
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(serializer=_serialize),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.WriteLoggerFactory(file=out),
        cache_logger_on_first_use=True,
    )
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(out)
    handler.setFormatter(_formatter())
    handler.addFilter(RateLimit())
    root.addHandler(handler)
    # Library chatter at info would drown the per-decision lines.
    root.setLevel(max(numeric, logging.WARNING))


class RateLimit(logging.Filter):
    """Lets the same library message (logger + format string) through at most once per
    `interval` seconds. aiokafka logs every failed reconnect and metadata attempt while a broker
    is away -- thousands of identical lines a second; one line says as much."""

    def __init__(self, interval: float = 10.0) -> None:
        super().__init__()
        self.interval = interval
        self._last: dict[tuple[str, object], float] = {}
        self._dropped: dict[tuple[str, object], int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.msg)
        now = record.created
        last = self._last.get(key)
        if last is not None and now - last < self.interval:
            self._dropped[key] = self._dropped.get(key, 0) + 1
            return False
        self._last[key] = now
        dropped = self._dropped.pop(key, 0)
        if dropped:
            record.msg = f"{record.msg} (and {dropped} more like it in the last {self.interval:.0f} s)"
        if len(self._last) > 1000:
            self._last.clear()
        return True


def _formatter() -> logging.Formatter:
    return structlog.stdlib.ProcessorFormatter(
        processor=structlog.processors.JSONRenderer(serializer=_serialize),
        foreign_pre_chain=[
            structlog.stdlib.add_logger_name,
            *_shared_processors(),
        ],
    )


def stdlib_config(level: str = "info") -> dict[str, Any]:
    """A `logging.config.dictConfig` for Faust's and mode's Worker: the same JSON lines."""
    numeric = logging.getLevelNamesMapping()[level.upper()]
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": _formatter}},
        "filters": {"ratelimit": {"()": RateLimit}},
        "handlers": {
            "stderr": {
                "class": "logging.StreamHandler",
                "formatter": "json",
                "filters": ["ratelimit"],
                "stream": "ext://sys.stderr",
            }
        },
        "root": {"handlers": ["stderr"], "level": logging.getLevelName(max(numeric, logging.WARNING))},
    }
