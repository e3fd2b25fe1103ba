"""Typed access to decoded JSON/YAML with errors that name the offending path.

Input arrives as plain mappings (from JSON or YAML); these helpers turn a wrong shape into an
`InvalidInput` whose message says where, so a producer can fix the event from the `Rejected`
decision alone.
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any


class InvalidInput(ValueError):
    """An input event or object that Kueue's API validation would refuse."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, (list, tuple)):
        return "array"
    return type(value).__name__


class Fields:
    """A view of one mapping at a known path; `reason` is the rejection reason on errors."""

    __slots__ = ("data", "path", "reason")

    def __init__(self, data: object, path: builtins.str, reason: builtins.str) -> None:
        if data is None:
            data = {}
        elif type(data) is not dict and not isinstance(data, Mapping):  # dict first: no ABC check
            raise InvalidInput(reason, f"{path}: expected an object, got {type_name(data)}")
        self.data: Mapping[str, Any] = data
        self.path = path
        self.reason = reason

    def fail(self, key: builtins.str, message: builtins.str) -> InvalidInput:
        return InvalidInput(self.reason, f"{self._at(key)}: {message}")

    def _at(self, key: builtins.str) -> builtins.str:
        return f"{self.path}.{key}" if self.path else key

    def has(self, key: builtins.str) -> builtins.bool:
        return self.data.get(key) is not None

    def sub(self, key: builtins.str) -> Fields:
        return Fields(self.data.get(key), self._at(key), self.reason)

    def opt_sub(self, key: builtins.str) -> Fields | None:
        if self.data.get(key) is None:
            return None
        return self.sub(key)

    def str(self, key: builtins.str, default: builtins.str | None = None) -> builtins.str:
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise self.fail(key, "required value")
            return default
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {type_name(value)}")
        return value

    def opt_str(self, key: builtins.str) -> builtins.str | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise self.fail(key, f"expected a string, got {type_name(value)}")
        return value

    def enum(self, key: builtins.str, allowed: Sequence[builtins.str], default: builtins.str) -> builtins.str:
        value = self.str(key, default)
        if value not in allowed:
            choices = ", ".join(f'"{a}"' for a in allowed)
            raise self.fail(key, f'Unsupported value: "{value}": supported values: {choices}')
        return value

    def int(self, key: builtins.str, default: builtins.int | None = None) -> builtins.int:
        value = self.data.get(key)
        if value is None:
            if default is None:
                raise self.fail(key, "required value")
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, f"expected an integer, got {type_name(value)}")
        return value

    def opt_int(self, key: builtins.str) -> builtins.int | None:
        if self.data.get(key) is None:
            return None
        return self.int(key)

    def bool(self, key: builtins.str, default: builtins.bool) -> builtins.bool:
        value = self.data.get(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, f"expected a boolean, got {type_name(value)}")
        return value

    def list(self, key: builtins.str) -> builtins.list[Any]:
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, (list, tuple)):
            raise self.fail(key, f"expected an array, got {type_name(value)}")
        return list(value)

    def str_list(self, key: builtins.str) -> builtins.list[builtins.str]:
        items = self.list(key)
        for i, item in enumerate(items):
            if not isinstance(item, str):
                raise self.fail(f"{key}[{i}]", f"expected a string, got {type_name(item)}")
        return items

    def objects(self, key: builtins.str) -> builtins.list[Fields]:
        return [
            Fields(item, f"{self._at(key)}[{i}]", self.reason)
            for i, item in enumerate(self.list(key))
        ]

    def str_map(self, key: builtins.str) -> dict[builtins.str, builtins.str]:
        value = self.data.get(key)
        if value is None:
            return {}
        if type(value) is not dict and not isinstance(value, Mapping):
            raise self.fail(key, f"expected an object, got {type_name(value)}")
        out: dict[builtins.str, builtins.str] = {}
        for k in sorted(value):
            v = value[k]
            if not isinstance(k, str) or not isinstance(v, str):
                raise self.fail(f"{key}.{k}", "expected a string")
            out[k] = v
        return out

    def raw(self, key: builtins.str) -> Any:
        return self.data.get(key)
