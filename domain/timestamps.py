"""RFC 3339 timestamps as integer microseconds since the epoch: exact, orderable, clock-free."""

from __future__ import annotations

from datetime import datetime, timezone

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class TimestampError(ValueError):
    pass


# Event times arrive as "YYYY-MM-DDTHH:MM:SS.ffffffZ", many per day: the day's start is parsed
# once and the time of day read from fixed positions. Anything else takes the general path.
_DAY_START: dict[str, int] = {}


def parse_time(value: object) -> int:
    if (
        type(value) is str
        and len(value) == 27
        and value[26] == "Z"
        and value[19] == "."
        and value[10] == "T"
        and value[13] == ":"
        and value[16] == ":"
        and value.isascii()
    ):
        clock = value[11:13] + value[14:16] + value[17:19] + value[20:26]
        if clock.isdigit():
            hours, minutes, seconds = int(clock[0:2]), int(clock[2:4]), int(clock[4:6])
            if hours < 24 and minutes < 60 and seconds < 60:
                day = _DAY_START.get(value[:10])
                if day is None:
                    try:
                        day = _parse_general(value[:10] + "T00:00:00Z")
                    except TimestampError:
                        return _parse_general(value)  # the error names the whole value
                    if len(_DAY_START) >= 4096:
                        _DAY_START.clear()
                    _DAY_START[value[:10]] = day
                return day + ((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + int(clock[6:])
    return _parse_general(value)


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
