"""Kubernetes label selectors (metav1.LabelSelector), as Kueue evaluates them.

Semantics follow apimachinery's LabelSelectorAsSelector: an absent selector
matches nothing (Kueue: a ClusterQueue without namespaceSelector admits no
namespace), an empty one matches everything, and all requirements must hold.
Validation follows metav1 ValidateLabelSelector, which Kueue's ClusterQueue
webhook applies: operators In/NotIn/Exists/DoesNotExist (case-sensitive),
values required for In/NotIn and forbidden otherwise, keys must be
qualified names and values valid label values.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = [
    "LabelSelector",
    "NodeRequirement",
    "NodeSelectorTerm",
    "SelectorError",
    "node_affinity_matches",
    "parse_node_selector_terms",
]


class SelectorError(ValueError):
    """An invalid label selector (user-facing message)."""


_NAME: Final = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?", re.ASCII)
_DNS_SUBDOMAIN: Final = re.compile(
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*", re.ASCII
)
_NAME_RULE: Final = (
    "must consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character"
)
_KNOWN_FIELDS: Final = frozenset({"matchLabels", "matchExpressions"})
_EXPRESSION_FIELDS: Final = frozenset({"key", "operator", "values"})

# A requirement as (key, accepted or rejected values); kept as sorted tuples
# so that equal selectors compare and hash equal.
_Requirement = tuple[str, frozenset[str]]


@dataclass(frozen=True, slots=True)
class LabelSelector:
    """A parsed label selector.  Build with ``parse``; match with ``matches``."""

    matches_nothing: bool = False
    label_in: tuple[_Requirement, ...] = ()  # matchLabels and In
    label_not_in: tuple[_Requirement, ...] = ()
    exists: tuple[str, ...] = ()
    does_not_exist: tuple[str, ...] = ()

    @staticmethod
    def parse(raw: Mapping[str, Any] | None) -> LabelSelector:
        """Validate a decoded metav1.LabelSelector; None is the absent selector."""
        if raw is None:
            return LabelSelector(matches_nothing=True)
        if not isinstance(raw, Mapping):
            raise SelectorError("a label selector must be a mapping")
        unknown = sorted(str(field) for field in raw if field not in _KNOWN_FIELDS)
        if unknown:
            raise SelectorError(f"{unknown[0]}: unknown field")

        label_in: list[_Requirement] = []
        label_not_in: list[_Requirement] = []
        exists: list[str] = []
        does_not_exist: list[str] = []

        match_labels = raw.get("matchLabels") or {}
        if not isinstance(match_labels, Mapping):
            raise SelectorError("matchLabels: must be a mapping of strings to strings")
        for key in sorted(match_labels, key=str):
            _check_key(key, "matchLabels")
            value = match_labels[key]
            _check_value(value, f"matchLabels.{key}")
            label_in.append((key, frozenset((value,))))

        expressions = raw.get("matchExpressions") or ()
        if isinstance(expressions, (str, bytes)) or not isinstance(expressions, Sequence):
            raise SelectorError("matchExpressions: must be a list")
        for i, expression in enumerate(expressions):
            where = f"matchExpressions[{i}]"
            key, operator, values = _expression(expression, where)
            if operator in ("In", "NotIn"):
                if not values:
                    raise SelectorError(f"{where}.values: must be specified when operator is In or NotIn")
                target = label_in if operator == "In" else label_not_in
                target.append((key, frozenset(values)))
            elif operator in ("Exists", "DoesNotExist"):
                if values:
                    raise SelectorError(
                        f"{where}.values: may not be specified when operator is Exists or DoesNotExist"
                    )
                (exists if operator == "Exists" else does_not_exist).append(key)
            else:
                raise SelectorError(
                    f"{where}.operator: {_show(operator)} is not a valid selector operator "
                    "(In, NotIn, Exists, DoesNotExist)"
                )

        return LabelSelector(
            label_in=_canonical(label_in),
            label_not_in=_canonical(label_not_in),
            exists=tuple(sorted(set(exists))),
            does_not_exist=tuple(sorted(set(does_not_exist))),
        )

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether a set of labels (e.g. a namespace's) satisfies every requirement."""
        if self.matches_nothing:
            return False
        for key, accepted in self.label_in:
            value = labels.get(key)
            if value is None or value not in accepted:
                return False
        for key, rejected in self.label_not_in:
            # NotIn also holds when the label is absent.
            value = labels.get(key)
            if value is not None and value in rejected:
                return False
        for key in self.exists:
            if key not in labels:
                return False
        for key in self.does_not_exist:
            if key in labels:
                return False
        return True


def _expression(raw: object, where: str) -> tuple[str, object, tuple[str, ...]]:
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: must be a mapping")
    unknown = sorted(str(field) for field in raw if field not in _EXPRESSION_FIELDS)
    if unknown:
        raise SelectorError(f"{where}.{unknown[0]}: unknown field")
    key = raw.get("key", "")
    _check_key(key, f"{where}.key")
    raw_values = raw.get("values") or ()
    if isinstance(raw_values, (str, bytes)) or not isinstance(raw_values, Sequence):
        raise SelectorError(f"{where}.values: must be a list of strings")
    for j, value in enumerate(raw_values):
        _check_value(value, f"{where}.values[{j}]")
    return key, raw.get("operator"), tuple(raw_values)


def _check_key(key: object, where: str) -> str:
    """Label keys are qualified names: an optional DNS-subdomain prefix and '/', then a name."""
    if not isinstance(key, str):
        raise SelectorError(f"{where}: label keys must be strings, got {_show(key)}")
    prefix, slash, name = key.rpartition("/")
    problem = ""
    if slash and ("/" in prefix or not prefix):
        problem = "must be a name with an optional DNS subdomain prefix and '/' (e.g. 'example.com/name')"
    elif slash and (len(prefix) > 253 or not _DNS_SUBDOMAIN.fullmatch(prefix)):
        problem = "prefix part must be a lowercase DNS subdomain of at most 253 characters"
    elif not name:
        problem = "name part must be non-empty"
    elif len(name) > 63:
        problem = "name part must be no more than 63 characters"
    elif not _NAME.fullmatch(name):
        problem = f"name part {_NAME_RULE}"
    if problem:
        raise SelectorError(f"{where}: invalid label key {_show(key)}: {problem}")
    return key


def _check_value(value: object, where: str) -> None:
    if not isinstance(value, str):
        raise SelectorError(f"{where}: label values must be strings, got {_show(value)}")
    if len(value) > 63:
        raise SelectorError(f"{where}: invalid label value {_show(value)}: must be no more than 63 characters")
    if value and not _NAME.fullmatch(value):
        raise SelectorError(f"{where}: invalid label value {_show(value)}: a valid label value {_NAME_RULE}")


def _canonical(requirements: list[_Requirement]) -> tuple[_Requirement, ...]:
    unique = set(requirements)
    return tuple(sorted(unique, key=lambda r: (r[0], sorted(r[1]))))


def _show(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


# --- Node affinity (core/v1 NodeSelector), as Kueue's flavor assigner matches it -------------
# A requirement as (key, operator, values); a term is requirements ANDed; terms are ORed.
NodeRequirement = tuple[str, str, tuple[str, ...]]
NodeSelectorTerm = tuple[NodeRequirement, ...]
NODE_OPERATORS: Final = ("DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn")
_INTEGER: Final = re.compile(r"[-+]?[0-9]+", re.ASCII)


def parse_node_selector_terms(raw: object) -> tuple[NodeSelectorTerm, ...]:
    """`requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms`, validated as
    Kubernetes validates a pod's (ValidateNodeSelector), with paths relative to the list.
    `matchFields` are validated for shape and then dropped, as Kueue's flavor assigner drops
    them (they select nodes by name, which flavors do not have)."""
    if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
        raise SelectorError(": must be a list of node selector terms")
    if not raw:
        raise SelectorError(": Required value: must have at least one node selector term")
    terms: list[NodeSelectorTerm] = []
    for i, term in enumerate(raw):
        if not isinstance(term, Mapping):
            raise SelectorError(f"[{i}]: must be a mapping")
        requirements: list[NodeRequirement] = []
        for field in ("matchExpressions", "matchFields"):
            items = term.get(field) or ()
            if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
                raise SelectorError(f"[{i}].{field}: must be a list")
            for j, item in enumerate(items):
                requirement = _node_requirement(item, f"[{i}].{field}[{j}]")
                if field == "matchExpressions":
                    requirements.append(requirement)
        terms.append(tuple(requirements))
    return tuple(terms)


def _node_requirement(raw: object, where: str) -> NodeRequirement:
    if not isinstance(raw, Mapping):
        raise SelectorError(f"{where}: must be a mapping")
    key = _check_key(raw.get("key", ""), f"{where}.key")
    operator = raw.get("operator")
    raw_values = raw.get("values") or ()
    if isinstance(raw_values, (str, bytes)) or not isinstance(raw_values, Sequence):
        raise SelectorError(f"{where}.values: must be a list of strings")
    values = tuple(raw_values)
    for j, value in enumerate(values):
        if not isinstance(value, str):
            raise SelectorError(f"{where}.values[{j}]: must be a string, got {_show(value)}")
    if operator in ("In", "NotIn"):
        if not values:
            raise SelectorError(f"{where}.values: Required value: must be specified when `operator` is 'In' or 'NotIn'")
    elif operator in ("Exists", "DoesNotExist"):
        if values:
            raise SelectorError(
                f"{where}.values: Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
            )
    elif operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise SelectorError(
                f"{where}.values: Required value: must be specified single value when `operator` is 'Lt' or 'Gt'"
            )
        if not _INTEGER.fullmatch(values[0]):
            # What NodeSelectorRequirementsAsSelector answers when the flavor assigner matches it.
            raise SelectorError(f"{where}.values[0]: for 'Gt', 'Lt' operators, the value must be an integer")
    else:
        supported = ", ".join(f'"{op}"' for op in NODE_OPERATORS)
        raise SelectorError(f"{where}.operator: Unsupported value: {_show(operator)}: supported values: {supported}")
    return key, str(operator), values


def node_affinity_matches(terms: tuple[NodeSelectorTerm, ...], labels: Mapping[str, str]) -> bool:
    """Whether a flavor with node labels `labels` can satisfy required node affinity `terms`,
    as Kueue's flavorSelector (pkg/scheduler/flavorassigner) decides: only requirements on keys
    the flavor itself labels count; a term left with none makes the whole affinity match (terms
    are ORed); otherwise some term must have all its requirements hold."""
    kept: list[tuple[NodeRequirement, ...]] = []
    for term in terms:
        relevant = tuple(r for r in term if r[0] in labels)
        if not relevant:
            return True
        kept.append(relevant)
    if not kept:
        return True
    return any(all(_node_requirement_holds(r, labels) for r in term) for term in kept)


def _node_requirement_holds(requirement: NodeRequirement, labels: Mapping[str, str]) -> bool:
    key, operator, values = requirement
    value = labels.get(key)
    if operator == "In":
        return value is not None and value in values
    if operator == "NotIn":
        return value is None or value not in values
    if operator == "Exists":
        return value is not None
    if operator == "DoesNotExist":
        return value is None
    # Gt / Lt: the label must be an integer too (labels.Requirement.Matches).
    if value is None or not _INTEGER.fullmatch(value):
        return False
    if operator == "Gt":
        return int(value) > int(values[0])
    return int(value) < int(values[0])
