"""Kubernetes resource quantities with exact arithmetic.

Values follow k8s.io/apimachinery ``resource.Quantity`` as Kueue sees them:

* Accepted text is what both gates a Kueue object passes through accept: the
  CRD schema pattern for quantities and ``ParseQuantity``.  (``ParseQuantity``
  alone also takes ``"-"``, ``"."`` and ``".G"`` as zero; the schema does not.)
* A parsed value is what the API server stores: magnitudes are rounded up
  (away from zero) to a multiple of 1n, and values written with a binary
  suffix (Ki..Ei) are capped at 2**63-1.
* Amounts are Kueue's int64s (milli-units for cpu, base units otherwise);
  ``format_amount`` prints them as Kueue's ``ResourceFormatter`` does.

Deliberate limits where apimachinery would go on (it silently wraps exponents
to int32 and keeps arbitrarily large decimals): exponents outside int32 and
magnitudes of 1e1000 or more raise QuantityError.  Both are far beyond
int64, where every Kueue amount saturates anyway.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Final

__all__ = [
    "MAX_INT64",
    "MIN_INT64",
    "QuantityError",
    "amount",
    "format_amount",
    "parse_quantity",
    "to_amount",
]


class QuantityError(ValueError):
    """A value Kubernetes would not accept as a quantity (user-facing message)."""


MAX_INT64: Final = 2**63 - 1
MIN_INT64: Final = -(2**63)

_NANO: Final = 10**9
# Beyond this many integer digits a quantity is rejected rather than computed.
_MAX_DIGITS: Final = 1000
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1

_DECIMAL_EXPONENT: Final = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}
_DECIMAL_SUFFIX: Final = {exponent: suffix for suffix, exponent in _DECIMAL_EXPONENT.items()}
_BINARY_SUFFIXES: Final = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_BINARY_POWER: Final = {suffix: 10 * i for i, suffix in enumerate(_BINARY_SUFFIXES) if suffix}

# sign, digits with an optional fraction (at least one digit somewhere, checked
# after matching), then at most one of: a binary suffix, a decimal suffix, or a
# decimal exponent.  "E" alone is exa; "E3"/"e3" is an exponent.
_QUANTITY_RE: Final = re.compile(
    r"(?P<sign>[+-]?)(?P<int>[0-9]*)(?:\.(?P<frac>[0-9]*))?"
    r"(?:(?P<suffix>[KMGTPE]i|[numkMGTPE])|[eE](?P<exp>[+-]?[0-9]+))?",
    re.ASCII,
)

# Resources Kueue always prints in BinarySI form (pkg/resources/resource_formatter.go).
_BINARY_FORMATTED: Final = frozenset({"memory", "ephemeral-storage"})
_HUGEPAGES_PREFIX: Final = "hugepages-"


def parse_quantity(value: object) -> Fraction:
    """The value Kubernetes stores for a quantity written as ``value``.

    Strings use quantity syntax ("500m", "1.5Gi", "2e-3", "-1"); ints are
    taken as they are and floats through their shortest repr, as a JSON/YAML
    number reaches apimachinery.  Booleans, NaN/inf, whitespace, unknown
    suffixes ("12Zi", "1K") and malformed numbers raise QuantityError.
    Negative values are returned as such: callers decide whether they are
    allowed.
    """
    if isinstance(value, bool):
        raise QuantityError(f"invalid quantity {json.dumps(value)}: a boolean is not a quantity")
    if isinstance(value, int):
        if abs(value) >= 10**_MAX_DIGITS:
            raise QuantityError(f"invalid quantity: integer too large (must be below 1e{_MAX_DIGITS})")
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"invalid quantity {value!r}")
        return _parse_text(repr(value))
    if isinstance(value, str):
        return _parse_text(value)
    raise QuantityError(f"invalid quantity {value!r}: expected a string or a number")


def to_amount(resource: str, value: Fraction) -> int:
    """Kueue's int64 amount for ``value``: milli-units for cpu, base units otherwise.

    Non-integral results are rounded up in magnitude as Quantity.MilliValue() and
    Value() do (for the usual int64-backed quantities that is away from zero, so
    -1.5 becomes -2), and clamped to the int64 range like Kueue's ResourceValue.
    """
    scaled = value * 1000 if resource == "cpu" else value
    magnitude = math.ceil(abs(scaled))
    result = magnitude if scaled >= 0 else -magnitude
    return max(MIN_INT64, min(MAX_INT64, result))


def amount(resource: str, value: str | int | float) -> int:
    """``to_amount(resource, parse_quantity(value))``."""
    return to_amount(resource, parse_quantity(value))


# Messages and admissions print the same few amounts over and over; the text depends only on
# (resource, amount), so it is kept (bounded) rather than recomputed.
_FORMATTED: dict[tuple[str, int], str] = {}
_FORMATTED_LIMIT = 4096


def format_amount(resource: str, amount: int) -> str:
    key = (resource, amount)
    text = _FORMATTED.get(key)
    if text is None:
        if len(_FORMATTED) >= _FORMATTED_LIMIT:
            _FORMATTED.clear()
        text = _FORMATTED[key] = _format_amount(resource, amount)
    return text


def _format_amount(resource: str, amount: int) -> str:
    """The canonical quantity string Kueue prints for an int64 amount.

    Mirrors ResourceFormatter.ResourceQuantityString:

    * ``cpu``: milli-units in DecimalSI form ("500m", "2", "1500m", "2k").
    * ``memory``, ``ephemeral-storage`` and ``hugepages-*``: BinarySI,
      re-canonicalised through a parse as Kueue does, so multiples of 1024
      (at least 1Ki) print as "36Gi"/"1000Ki" and anything else as DecimalSI
      ("1k", "1536", "1500k").  Kueue also prints resources it maps from DRA
      device classes this way; quotaflow does not model those.
    * every other resource (pods, nvidia.com/gpu, ...): DecimalSI base units.

    The amount is clamped to int64 first, as Kueue's saturating arithmetic
    would have.  Kueue prints its quota-side Unlimited sentinel (MAX_INT64) as
    "<unlimited>" in some messages; that choice is left to the caller.
    """
    value = max(MIN_INT64, min(MAX_INT64, amount))
    if resource == "cpu":
        return _decimal_si(value, -3)
    if resource in _BINARY_FORMATTED or resource.startswith(_HUGEPAGES_PREFIX):
        return _binary_si(value)
    return _decimal_si(value, 0)


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _parse_text(text: str) -> Fraction:
    match = _QUANTITY_RE.fullmatch(text)
    if match is None or not (match["int"] or match["frac"]):
        raise QuantityError(f"invalid quantity {_quote(text)}")
    frac = match["frac"] or ""
    binary_power = 0
    if match["exp"] is not None:
        exponent = _parse_exponent(match["exp"], text)
    elif match["suffix"] in _BINARY_POWER:
        exponent, binary_power = 0, _BINARY_POWER[match["suffix"]]
    else:
        exponent = _DECIMAL_EXPONENT[match["suffix"] or ""]
    digits = (match["int"] + frac).lstrip("0")
    if not digits:
        return Fraction(0)
    nanos = _nanos_rounded_up(digits, exponent - len(frac) + 9, binary_power, text)
    if binary_power:
        # apimachinery caps BinarySI magnitudes at the int64 maximum.
        nanos = min(nanos, MAX_INT64 * _NANO)
    return Fraction(-nanos if match["sign"] == "-" else nanos, _NANO)


def _parse_exponent(text: str, quantity: str) -> int:
    sign = -1 if text.startswith("-") else 1
    magnitude = text.lstrip("+-").lstrip("0") or "0"
    # Out of int64 Kubernetes rejects the suffix; out of int32 it would wrap
    # the exponent around, which is never what was meant.
    exponent = sign * int(magnitude) if len(magnitude) <= 19 else sign * 2**64
    if not _INT32_MIN <= exponent <= _INT32_MAX:
        raise QuantityError(f"invalid quantity {_quote(quantity)}: exponent out of range")
    return exponent


def _nanos_rounded_up(digits: str, exp10: int, binary_power: int, quantity: str) -> int:
    """ceil(int(digits) * 2**binary_power * 10**exp10), without huge intermediates.

    ``digits`` has no leading zeros and is not empty; the result is in nano-units.
    """
    stripped = digits.rstrip("0")
    exp10 += len(digits) - len(stripped)
    digits = stripped
    # int(digits) * 10**exp10 lies in [10**(order-1), 10**order).
    order = len(digits) + exp10
    if binary_power and order - 1 - 9 >= 19:
        return MAX_INT64 * _NANO  # certainly above the BinarySI cap
    if order - 9 > _MAX_DIGITS:
        raise QuantityError(
            f"invalid quantity {_quote(quantity)}: too large (must be below 1e{_MAX_DIGITS})"
        )
    if order < -20:
        return 1  # below 1e-20 nanos even after *2**60: rounds up to 1n
    mantissa = _int_from_digits(digits) << binary_power
    if exp10 >= 0:
        return mantissa * int(10**exp10)
    quotient, remainder = divmod(mantissa, int(10**-exp10))
    return quotient + (remainder != 0)


def _int_from_digits(digits: str) -> int:
    # int() refuses strings over 4300 digits (CPython's DoS guard); a quantity's
    # fraction may legitimately be longer, so convert in chunks.
    value = 0
    for start in range(0, len(digits), 4000):
        chunk = digits[start : start + 4000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


def _decimal_si(mantissa: int, exponent: int) -> str:
    """DecimalSI canonical form of an int64 mantissa * 10**exponent, exponent in {-3, 0}."""
    if mantissa == 0:
        return "0"
    while mantissa % 10 == 0:
        mantissa //= 10
        exponent += 1
    # SI suffixes step by 10**3: move the remainder back into the mantissa.
    shift = exponent % 3
    mantissa *= 10**shift
    exponent -= shift
    return f"{mantissa}{_DECIMAL_SUFFIX[exponent]}"


def _binary_si(value: int) -> str:
    """Kueue's newCanonicalQuantity(value, BinarySI).String()."""
    # Small magnitudes and values that are not whole multiples of 1024 print
    # as plain digits in BinarySI; Kueue re-parses that text, which yields
    # DecimalSI and so the decimal canonical form ("1k", "1500k").
    if -1024 < value < 1024 or value % 1024 != 0:
        return _decimal_si(value, 0)
    if value == MIN_INT64:
        # apimachinery negates before stripping factors of 1024; -MinInt64
        # overflows, no factor is found and the digits are printed as-is.
        return str(MIN_INT64)
    power = 0
    while value % 1024 == 0:  # at most 6 times within int64
        value //= 1024
        power += 1
    return f"{value}{_BINARY_SUFFIXES[power]}"
