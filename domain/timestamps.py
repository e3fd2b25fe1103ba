"""RFC 3339 timestamps as integer microseconds since the epoch: exact, orderable, clock-free."""

from __future__ import annotations

from datetime import datetime, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class TimestampError(ValueError):
    pass


def parse_time(value: object) -> int:
    # datetime.fromisoformat (C) reads the usual "YYYY-MM-DDTHH:MM:SS.ffffffZ" in a fraction of
    # what slicing the fixed layout in Python cost; every event carries a time.
    if type(value) is str:
        try:
            delta = _fromisoformat(value) - _EPOCH
        except (ValueError, TypeError):
            pass  # a naive time (TypeError) or an error: the general path decides
        else:
            return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    return _parse_general(value)


_fromisoformat = datetime.fromisoformat


def _parse_general(value: object) -> int:
    if not isinstance(value, str) or not value:
        raise TimestampError(f"invalid RFC 3339 time {value!r}")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise TimestampError(f"invalid RFC 3339 time {value!r}") from None
    if parsed.tzinfo is None:
        # Kubernetes always serialises UTC; a naive time is read as UTC rather than local time,
        # which would make the order depend on the machine.
        parsed = parsed.replace(tzinfo=timezone.utc)
    delta = parsed - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def format_time(micros: int) -> str:
    seconds, micro = divmod(micros, 1_000_000)
    dt = datetime.fromtimestamp(seconds, tz=timezone.utc)
    text = dt.strftime("%Y-%m-%dT%H:%M:%S")
    return f"{text}.{micro:06d}Z" if micro else f"{text}Z"
