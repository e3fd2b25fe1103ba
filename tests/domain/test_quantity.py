"""Quantity parsing, Kueue amounts and Kueue's canonical formatting.

Expected values were cross-checked against k8s.io/apimachinery v0.37
(ParseQuantity, MilliValue/Value, and Kueue's ResourceFormatter logic).
"""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.quantity import (
    MAX_INT64,
    MIN_INT64,
    QuantityError,
    amount,
    format_amount,
    parse_quantity,
    to_amount,
)

int64s = st.integers(min_value=MIN_INT64, max_value=MAX_INT64)
resources = st.sampled_from(
    ["cpu", "memory", "ephemeral-storage", "hugepages-2Mi", "pods", "nvidia.com/gpu"]
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("0", Fraction(0)),
        ("2", Fraction(2)),
        ("-1", Fraction(-1)),
        ("+3", Fraction(3)),
        ("007", Fraction(7)),
        ("0.5", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("5.", Fraction(5)),
        ("500m", Fraction(1, 2)),
        ("250u", Fraction(1, 4000)),
        ("3n", Fraction(3, 10**9)),
        ("1k", Fraction(1000)),
        ("1.5M", Fraction(1_500_000)),
        ("2G", Fraction(2 * 10**9)),
        ("1T", Fraction(10**12)),
        ("1P", Fraction(10**15)),
        ("1E", Fraction(10**18)),  # "E" alone is exa, not an exponent
        ("1Ki", Fraction(1024)),
        ("1.5Gi", Fraction(3 * 2**29)),
        ("36Gi", Fraction(36 * 2**30)),
        ("2Ti", Fraction(2 * 2**40)),
        ("1Pi", Fraction(2**50)),
        ("1Ei", Fraction(2**60)),
        ("-.5Ki", Fraction(-512)),
        ("1e3", Fraction(1000)),
        ("1E3", Fraction(1000)),
        ("1e+3", Fraction(1000)),
        ("2e-3", Fraction(1, 500)),
        ("1e-0", Fraction(1)),
        ("1.m", Fraction(1, 1000)),
        ("1.G", Fraction(10**9)),
    ],
)
def test_parse_quantity_exact_values(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Kubernetes stores magnitudes rounded up to a whole nano-unit.
        ("1e-10", Fraction(1, 10**9)),
        ("0.0000000015", Fraction(2, 10**9)),
        ("-1e-10", Fraction(-1, 10**9)),
        ("1e-300", Fraction(1, 10**9)),
        ("0.000000000000000000000000000001Ki", Fraction(1, 10**9)),
        ("1.000000000000000000000000000001Ki", Fraction(1024) + Fraction(1, 10**9)),
        # Binary-suffixed values are capped at the int64 maximum; decimal ones are not.
        ("8Ei", Fraction(MAX_INT64)),
        ("16Ei", Fraction(MAX_INT64)),
        ("-16Ei", Fraction(-MAX_INT64)),
        ("99999999999999999999Ki", Fraction(MAX_INT64)),
        ("8191Pi", Fraction(8191 * 2**50)),
        ("1e19", Fraction(10**19)),
    ],
)
def test_parse_quantity_matches_what_kubernetes_stores(text: str, expected: Fraction) -> None:
    assert parse_quantity(text) == expected


def test_parse_quantity_handles_very_long_fractions() -> None:
    # Longer than CPython's 4300-digit int() limit.
    assert parse_quantity("0." + "0" * 5000 + "1") == Fraction(1, 10**9)
    assert parse_quantity("1." + "1" * 6000) == Fraction(1_111_111_112, 10**9)


@pytest.mark.parametrize(
    "text",
    [
        "12Zi", "", "1.2.3", "abc", "1 Gi", " 1", "1 ", "1\n", "1K", "1k1", "1mi", "1ki",
        "1e", "1e+", "1E-", "1e2.5", "1ee3", "1Ki3", "1KiB", "0x10", "1_000",
        # apimachinery's parser alone reads these as zero; the CRD schema rejects them.
        ".", "-", "+", ".G", "-.", "+Ki",
        "--1", "+-1", "1-", "Inf", "NaN", "١",
    ],
)
def test_parse_quantity_rejects_what_kubernetes_rejects(text: str) -> None:
    with pytest.raises(QuantityError, match="invalid quantity"):
        parse_quantity(text)


def test_quantity_error_message_quotes_the_input() -> None:
    with pytest.raises(QuantityError) as excinfo:
        parse_quantity("12Zi")
    assert str(excinfo.value) == 'invalid quantity "12Zi"'
    assert isinstance(excinfo.value, ValueError)


@pytest.mark.parametrize("value", ["1e1000", "1e9999999999", "1e-9999999999", 10**1000])
def test_parse_quantity_rejects_absurd_magnitudes(value: str | int) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)


def test_parse_quantity_tiny_exponents_round_up_without_blowing_up() -> None:
    assert parse_quantity("1e-2147483648") == Fraction(1, 10**9)
    assert parse_quantity("0e2147483647") == 0


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (3, Fraction(3)),
        (-2, Fraction(-2)),
        (0, Fraction(0)),
        (1.5, Fraction(3, 2)),
        (0.1, Fraction(1, 10)),  # via repr "0.1", not the binary float
        (1e-05, Fraction(1, 100_000)),
        (1e20, Fraction(10**20)),
        (-0.0, Fraction(0)),
    ],
)
def test_parse_quantity_numbers(value: int | float, expected: Fraction) -> None:
    assert parse_quantity(value) == expected


@pytest.mark.parametrize("value", [True, False, float("nan"), float("inf"), float("-inf"), None, [1], b"1"])
def test_parse_quantity_rejects_non_quantities(value: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(value)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", "2", 2000),
        ("cpu", "1e-3", 1),
        ("cpu", "0.0001", 1),  # rounded up, as MilliValue does
        ("cpu", "1.5", 1500),
        ("cpu", 1, 1000),
        ("cpu", "100u", 1),
        ("memory", "1Ki", 1024),
        ("memory", "0.5", 1),
        ("memory", "1500m", 2),
        ("memory", "4Gi", 4 * 2**30),
        ("memory", "1k", 1000),
        ("pods", "3", 3),
        ("nvidia.com/gpu", "2", 2),
        ("example.com/foo", "100m", 1),
        ("cpu", "0", 0),
        ("memory", "0", 0),
        # Negative magnitudes round up too: away from zero, like int64-backed quantities.
        ("memory", "-1.5", -2),
        ("cpu", "-0.5m", -1),
        ("cpu", "-1", -1000),
        # Saturation at the int64 bounds, like Kueue's ResourceValue.
        ("cpu", "1E", MAX_INT64),
        ("cpu", "9223372036854775.807", MAX_INT64),
        ("cpu", "9223372036854775.806", MAX_INT64 - 1),
        ("memory", "1e19", MAX_INT64),
        ("memory", "8Ei", MAX_INT64),
        ("memory", "-1e19", MIN_INT64),
        ("cpu", "-8Ei", MIN_INT64),
    ],
)
def test_amount(resource: str, value: str | int, expected: int) -> None:
    assert amount(resource, value) == expected


def test_to_amount_rounds_up_exact_fractions() -> None:
    assert to_amount("cpu", Fraction(1, 3)) == 334
    assert to_amount("memory", Fraction(1, 3)) == 1
    assert to_amount("memory", Fraction(4)) == 4
    assert to_amount("memory", Fraction(-7, 2)) == -4


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", 0, "0"),
        ("cpu", 500, "500m"),
        ("cpu", 2000, "2"),
        ("cpu", 1500, "1500m"),
        ("cpu", 4000, "4"),
        ("cpu", 2_000_000, "2k"),
        ("cpu", 1, "1m"),
        ("cpu", 10, "10m"),
        ("cpu", -1500, "-1500m"),
        ("cpu", MAX_INT64, "9223372036854775807m"),
        ("memory", 0, "0"),
        ("memory", 1, "1"),
        ("memory", 1023, "1023"),
        ("memory", 1000, "1k"),  # below 1024: DecimalSI
        ("memory", 1024, "1Ki"),
        ("memory", 1025, "1025"),
        ("memory", 1536, "1536"),
        ("memory", 2048, "2Ki"),
        ("memory", 5000, "5k"),
        ("memory", 1_500_000, "1500k"),
        ("memory", 1_024_000, "1000Ki"),
        ("memory", 36 * 2**30, "36Gi"),
        ("memory", 2**60, "1Ei"),
        ("memory", 10**9, "1G"),
        ("memory", -2048, "-2Ki"),
        ("memory", -1000, "-1k"),
        ("memory", MAX_INT64, "9223372036854775807"),
        ("memory", MIN_INT64, "-9223372036854775808"),
        ("ephemeral-storage", 10 * 2**30, "10Gi"),
        ("hugepages-2Mi", 2**21, "2Mi"),
        ("hugepages-1Gi", 3000, "3k"),
        ("pods", 4, "4"),
        ("pods", 1000, "1k"),
        ("pods", 1024, "1024"),
        ("pods", 1_500_000, "1500k"),
        ("nvidia.com/gpu", 8, "8"),
        ("example.com/bytes", 2048, "2048"),  # not binary-formatted
        ("pods", 9 * 10**18, "9E"),
    ],
)
def test_format_amount(resource: str, value: int, expected: str) -> None:
    assert format_amount(resource, value) == expected


def test_format_amount_clamps_to_int64() -> None:
    assert format_amount("cpu", 2**70) == format_amount("cpu", MAX_INT64)
    assert format_amount("pods", -(2**70)) == format_amount("pods", MIN_INT64)


@given(resources, int64s)
def test_format_amount_round_trips(resource: str, value: int) -> None:
    text = format_amount(resource, value)
    assert amount(resource, text) == value
    assert format_amount(resource, amount(resource, text)) == text


@given(
    st.integers(min_value=-(10**6), max_value=10**6),
    st.sampled_from(["Ki", "Mi", "Gi", "Ti", "Pi"]),
)
def test_binary_suffixes_agree_with_integers(mantissa: int, suffix: str) -> None:
    power = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50}[suffix]
    exact = mantissa * 2**power
    capped = max(-MAX_INT64, min(MAX_INT64, exact))  # the BinarySI magnitude cap
    assert parse_quantity(f"{mantissa}{suffix}") == capped
    assert amount("memory", f"{mantissa}{suffix}") == capped


@given(
    st.integers(min_value=-(10**12), max_value=10**12),
    st.sampled_from(["n", "u", "m", "", "k", "M", "G", "T", "P", "E"]),
)
def test_decimal_suffixes_agree_with_exponents(mantissa: int, suffix: str) -> None:
    exponent = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}[
        suffix
    ]
    expected = mantissa * Fraction(10) ** exponent
    assert parse_quantity(f"{mantissa}{suffix}") == expected
    assert parse_quantity(f"{mantissa}e{exponent}") == expected
    assert parse_quantity(f"{mantissa}E{exponent:+d}") == expected


@given(st.integers(min_value=-(10**30), max_value=10**30))
def test_integers_and_their_text_agree(value: int) -> None:
    assert parse_quantity(value) == parse_quantity(str(value)) == value


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_floats_parse_through_their_repr(value: float) -> None:
    # Shortest repr is what a JSON/YAML number carries; it is exact unless
    # it needs sub-nano precision, which Kubernetes rounds up.
    parsed = parse_quantity(value)
    exact = Fraction(repr(value))
    assert abs(parsed) >= abs(exact)
    assert abs(parsed - exact) < Fraction(1, 10**9)


@given(st.integers(min_value=0, max_value=10**15), st.integers(min_value=0, max_value=12))
def test_amount_is_the_ceiling(units: int, decimals: int) -> None:
    text = f"{units // 10**decimals}.{units % 10**decimals:0{decimals}d}" if decimals else str(units)
    exact = Fraction(units, 10**decimals)
    nanos = -((-exact * 10**9) // 1)  # Kubernetes keeps whole nano-units
    assert amount("memory", text) == -((-nanos) // 10**9)
    assert amount("cpu", text) == -((-nanos) // 10**6)
