"""Kubernetes LabelSelector parsing, validation and matching."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from domain.selectors import (
    LabelSelector,
    SelectorError,
    node_affinity_matches,
    parse_node_selector_terms,
)

ALPHA = {"team": "a", "tier": "gold"}
BETA = {"team": "b"}
BARE: dict[str, str] = {}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    raw: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        raw["values"] = list(values)
    return raw


def test_absent_selector_matches_nothing() -> None:
    nothing = LabelSelector.parse(None)
    assert not nothing.matches({})
    assert not nothing.matches(ALPHA)


@pytest.mark.parametrize("raw", [{}, {"matchLabels": {}}, {"matchExpressions": []},
                                 {"matchLabels": None, "matchExpressions": None}])
def test_empty_selector_matches_everything(raw: dict[str, Any]) -> None:
    everything = LabelSelector.parse(raw)
    assert everything.matches({})
    assert everything.matches(ALPHA)
    assert everything == LabelSelector.parse({})


def test_match_labels_are_anded() -> None:
    selector = LabelSelector.parse({"matchLabels": {"team": "a", "tier": "gold"}})
    assert selector.matches(ALPHA)
    assert selector.matches({**ALPHA, "extra": "x"})
    assert not selector.matches({"team": "a"})
    assert not selector.matches({"team": "a", "tier": "silver"})
    assert not selector.matches(BARE)


@pytest.mark.parametrize(
    ("expression", "alpha", "beta", "bare"),
    [
        (expr("team", "In", "a"), True, False, False),
        (expr("team", "In", "a", "b"), True, True, False),
        (expr("team", "NotIn", "a"), False, True, True),  # NotIn holds when the label is absent
        (expr("tier", "NotIn", "silver"), True, True, True),
        (expr("tier", "Exists"), True, False, False),
        (expr("tier", "DoesNotExist"), False, True, True),
    ],
)
def test_operators(expression: dict[str, Any], alpha: bool, beta: bool, bare: bool) -> None:
    selector = LabelSelector.parse({"matchExpressions": [expression]})
    assert (selector.matches(ALPHA), selector.matches(BETA), selector.matches(BARE)) == (alpha, beta, bare)


def test_labels_and_expressions_combine() -> None:
    selector = LabelSelector.parse(
        {"matchLabels": {"team": "a"}, "matchExpressions": [expr("tier", "In", "gold", "silver"), expr("x", "DoesNotExist")]}
    )
    assert selector.matches(ALPHA)
    assert not selector.matches({**ALPHA, "x": ""})
    assert not selector.matches({"team": "a", "tier": "bronze"})


def test_empty_label_value_is_a_value() -> None:
    selector = LabelSelector.parse({"matchLabels": {"flag": ""}})
    assert selector.matches({"flag": ""})
    assert not selector.matches({})
    assert LabelSelector.parse({"matchExpressions": [expr("flag", "Exists")]}).matches({"flag": ""})


def test_matching_is_case_sensitive() -> None:
    selector = LabelSelector.parse({"matchLabels": {"Team": "A"}})
    assert selector.matches({"Team": "A"})
    assert not selector.matches({"team": "A"})
    assert not selector.matches({"Team": "a"})


def test_prefixed_keys() -> None:
    selector = LabelSelector.parse({"matchLabels": {"kubernetes.io/metadata.name": "alpha"}})
    assert selector.matches({"kubernetes.io/metadata.name": "alpha"})


def test_selectors_are_immutable_hashable_and_order_insensitive() -> None:
    one = LabelSelector.parse({"matchLabels": {"a": "1", "b": "2"},
                               "matchExpressions": [expr("c", "In", "x", "y"), expr("d", "Exists")]})
    two = LabelSelector.parse({"matchExpressions": [expr("d", "Exists"), expr("c", "In", "y", "x")],
                               "matchLabels": {"b": "2", "a": "1"}})
    assert one == two
    assert hash(one) == hash(two)
    assert len({one, two, LabelSelector.parse({}), LabelSelector.parse(None)}) == 3
    with pytest.raises(AttributeError):
        one.matches_nothing = True  # type: ignore[misc]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"matchExpressions": [expr("team", "In")]}, "matchExpressions[0].values: must be specified"),
        ({"matchExpressions": [{"key": "team", "operator": "NotIn", "values": []}]}, "must be specified"),
        ({"matchExpressions": [expr("team", "Exists", "a")]}, "matchExpressions[0].values: may not be specified"),
        ({"matchExpressions": [expr("a", "Exists"), expr("team", "DoesNotExist", "a")]},
         "matchExpressions[1].values: may not be specified"),
        ({"matchExpressions": [expr("team", "in", "a")]}, '"in" is not a valid selector operator'),
        ({"matchExpressions": [expr("team", "exists")]}, "not a valid selector operator"),
        ({"matchExpressions": [expr("team", "Gt", "1")]}, "not a valid selector operator"),
        ({"matchExpressions": [expr("team", "Equals", "a")]}, "not a valid selector operator"),
        ({"matchExpressions": [{"key": "team"}]}, "not a valid selector operator"),
        ({"matchExpressions": [{"operator": "Exists"}]}, "name part must be non-empty"),
        ({"matchLabels": {"bad key": "a"}}, 'invalid label key "bad key"'),
        ({"matchLabels": {"-start": "a"}}, "invalid label key"),
        ({"matchLabels": {"a" * 64: "a"}}, "no more than 63 characters"),
        ({"matchLabels": {"Example.com/x": "a"}}, "prefix part"),
        ({"matchLabels": {"/x": "a"}}, "invalid label key"),
        ({"matchLabels": {"a/b/c": "a"}}, "invalid label key"),
        ({"matchLabels": {"example.com/": "a"}}, "name part must be non-empty"),
        ({"matchLabels": {"team": "a b"}}, 'matchLabels.team: invalid label value "a b"'),
        ({"matchLabels": {"team": "-a"}}, "invalid label value"),
        ({"matchLabels": {"team": "a" * 64}}, "no more than 63 characters"),
        ({"matchLabels": {"team": 1}}, "label values must be strings"),
        ({"matchLabels": {"team": True}}, "label values must be strings"),
        ({"matchLabels": {"team": None}}, "label values must be strings"),
        ({"matchExpressions": [expr("team", "In", "ok", "not ok")]}, "matchExpressions[0].values[1]"),
        ({"matchLabels": ["team"]}, "matchLabels: must be a mapping"),
        ({"matchExpressions": {"key": "team"}}, "matchExpressions: must be a list"),
        ({"matchExpressions": ["team"]}, "matchExpressions[0]: must be a mapping"),
        ({"matchExpressions": [{"key": "t", "operator": "In", "values": "a"}]}, "values: must be a list"),
        ({"matchLabel": {"team": "a"}}, "matchLabel: unknown field"),
        ({"matchExpressions": [{"key": "t", "operator": "Exists", "value": ["a"]}]}, "unknown field"),
        (["team"], "must be a mapping"),
    ],
)
def test_invalid_selectors_are_rejected(raw: Any, message: str) -> None:
    with pytest.raises(SelectorError, match=message.replace("[", r"\[").replace("]", r"\]")):
        LabelSelector.parse(raw)


def test_selector_error_is_a_value_error() -> None:
    assert issubclass(SelectorError, ValueError)


@pytest.mark.parametrize(
    "key", ["a", "A1", "my.name", "123-abc", "a_b", "example.com/MyName", "kubernetes.io/metadata.name",
            "a-b.c/d", "x" * 63, ("s" * 253) + "/n"],
)
def test_valid_keys(key: str) -> None:
    assert LabelSelector.parse({"matchLabels": {key: "v"}}).matches({key: "v"})


# A reference matcher written straight from the Kubernetes definitions.
def reference_matches(raw: dict[str, Any], labels: dict[str, str]) -> bool:
    for key, value in raw.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for e in raw.get("matchExpressions", []):
        key, op, values = e["key"], e["operator"], e.get("values", [])
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


keys = st.sampled_from(["a", "b", "c", "example.com/d"])
values = st.sampled_from(["", "x", "y", "z"])
nonempty_values = st.lists(values, min_size=1, max_size=3)
expressions = st.one_of(
    st.builds(lambda k, op, vs: {"key": k, "operator": op, "values": vs}, keys, st.sampled_from(["In", "NotIn"]),
              nonempty_values),
    st.builds(lambda k, op: {"key": k, "operator": op}, keys, st.sampled_from(["Exists", "DoesNotExist"])),
)
selectors = st.fixed_dictionaries(
    {}, optional={"matchLabels": st.dictionaries(keys, values, max_size=3),
                  "matchExpressions": st.lists(expressions, max_size=4)}
)
label_sets = st.dictionaries(keys, values, max_size=4)


@given(selectors, label_sets)
def test_matches_agrees_with_the_definition(raw: dict[str, Any], labels: dict[str, str]) -> None:
    assert LabelSelector.parse(raw).matches(labels) == reference_matches(raw, labels)


@given(selectors, st.randoms())
def test_parse_ignores_order(raw: dict[str, Any], rng: Any) -> None:
    shuffled = dict(raw)
    if "matchLabels" in raw:
        items = list(raw["matchLabels"].items())
        rng.shuffle(items)
        shuffled["matchLabels"] = dict(items)
    if "matchExpressions" in raw:
        exprs = [dict(e, values=rng.sample(e["values"], len(e["values"]))) if "values" in e else e
                 for e in raw["matchExpressions"]]
        rng.shuffle(exprs)
        shuffled["matchExpressions"] = exprs
    assert LabelSelector.parse(shuffled) == LabelSelector.parse(raw)


# --- required node affinity, as Kueue's flavor assigner matches it -----------------------------
_FLAVOR = {"zone": "a", "gen": "5", "tier": "gold"}


def _terms(*terms: list[dict[str, object]]) -> tuple[tuple[tuple[str, str, tuple[str, ...]], ...], ...]:
    return parse_node_selector_terms([{"matchExpressions": list(t)} for t in terms])


def _req(key: str, op: str, *values: str) -> dict[str, object]:
    return {"key": key, "operator": op, "values": list(values)} if values else {"key": key, "operator": op}


@pytest.mark.parametrize(
    ("requirement", "matches"),
    [
        (_req("zone", "In", "a", "b"), True),
        (_req("zone", "In", "b"), False),
        (_req("zone", "NotIn", "b"), True),
        (_req("zone", "NotIn", "a"), False),
        (_req("zone", "Exists"), True),
        (_req("zone", "DoesNotExist"), False),
        (_req("gen", "Gt", "4"), True),
        (_req("gen", "Gt", "5"), False),
        (_req("gen", "Lt", "6"), True),
        (_req("gen", "Lt", "-1"), False),
        (_req("tier", "Gt", "1"), False),  # not an integer label: no match
        # A key the flavor does not label is dropped, whatever the operator.
        (_req("rack", "In", "r1"), True),
        (_req("rack", "Exists"), True),
    ],
)
def test_each_operator_against_a_flavors_labels(requirement: dict[str, object], matches: bool) -> None:
    assert node_affinity_matches(_terms([requirement]), _FLAVOR) is matches


def test_terms_are_ored_and_expressions_anded() -> None:
    assert node_affinity_matches(_terms([_req("zone", "In", "b")], [_req("gen", "Gt", "4")]), _FLAVOR)
    assert not node_affinity_matches(_terms([_req("zone", "In", "b")], [_req("gen", "Gt", "9")]), _FLAVOR)
    assert not node_affinity_matches(_terms([_req("zone", "In", "a"), _req("gen", "Gt", "9")]), _FLAVOR)
    assert node_affinity_matches(_terms([_req("zone", "In", "a"), _req("gen", "Gt", "4")]), _FLAVOR)


def test_a_term_with_no_key_the_flavor_has_makes_the_affinity_match() -> None:
    # Kueue's flavorSelector drops the whole affinity once one term is left empty.
    terms = _terms([_req("zone", "In", "b")], [_req("rack", "In", "r1")])
    assert node_affinity_matches(terms, _FLAVOR)
    assert not node_affinity_matches(_terms([_req("zone", "In", "b")]), _FLAVOR)


def test_match_fields_are_validated_then_dropped() -> None:
    terms = parse_node_selector_terms([{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}])
    assert terms == ((),)
    assert node_affinity_matches(terms, _FLAVOR)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ([], ": Required value: must have at least one node selector term"),
        ([{"matchExpressions": [_req("zone", "In")]}],
         "[0].matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"),
        ([{"matchExpressions": [_req("zone", "Exists", "a")]}],
         "[0].matchExpressions[0].values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"),
        ([{"matchExpressions": [_req("gen", "Gt", "1", "2")]}],
         "[0].matchExpressions[0].values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"),
        ([{"matchExpressions": [_req("gen", "Lt", "x")]}],
         "[0].matchExpressions[0].values[0]: for 'Gt', 'Lt' operators, the value must be an integer"),
        ([{"matchExpressions": [_req("gen", "Like", "x")]}],
         '[0].matchExpressions[0].operator: Unsupported value: "Like": supported values: "DoesNotExist", "Exists", '
         '"Gt", "In", "Lt", "NotIn"'),
    ],
)
def test_node_selector_terms_are_validated_as_kubernetes_validates_a_pod(raw: object, message: str) -> None:
    with pytest.raises(SelectorError) as info:
        parse_node_selector_terms(raw)
    assert str(info.value) == message
