"""Kubernetes' rules for names and labels, with the API server's messages.

Kueue's objects never reach Kueue with a name the API server refuses, so quotaflow rejects them
too; this also bounds every name that can end up in a decision. Object names and the references
to them (a Workload's `spec.queueName`, a ClusterQueue's cohort and flavors, ...) are RFC 1123
subdomains, as in Kueue's CRDs; namespaces are RFC 1123 labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final

SUBDOMAIN_MAX: Final = 253
LABEL_MAX: Final = 63
ANNOTATIONS_MAX: Final = 256 * 1024  # bytes of keys and values together

_LABEL_RE: Final = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN_RE: Final = _LABEL_RE + r"(\." + _LABEL_RE + r")*"
_QUALIFIED_RE: Final = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_RE: Final = r"(" + _QUALIFIED_RE + r")?"

_LABEL = re.compile(_LABEL_RE)
_SUBDOMAIN = re.compile(_SUBDOMAIN_RE)
_QUALIFIED = re.compile(_QUALIFIED_RE)

SUBDOMAIN_FORMAT: Final = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    f"validation is '{_SUBDOMAIN_RE}')"
)
LABEL_FORMAT: Final = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    f"validation is '{_LABEL_RE}')"
)
QUALIFIED_FORMAT: Final = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with "
    "an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
    f"validation is '{_QUALIFIED_RE}')"
)
LABEL_VALUE_FORMAT: Final = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or "
    f"'12345', regex used for validation is '{_LABEL_VALUE_RE}')"
)
# A refused value is quoted in its message only this far, so a huge one cannot make a huge decision.
SHOWN_MAX: Final = 100


def _too_long(limit: int) -> str:
    return f"must be no more than {limit} characters"


def subdomain_problem(value: str) -> str | None:
    if len(value) > SUBDOMAIN_MAX:
        return _too_long(SUBDOMAIN_MAX)
    if _SUBDOMAIN.fullmatch(value) is None:
        return SUBDOMAIN_FORMAT
    return None


def label_problem(value: str) -> str | None:
    if len(value) > LABEL_MAX:
        return _too_long(LABEL_MAX)
    if _LABEL.fullmatch(value) is None:
        return LABEL_FORMAT
    return None


def label_key_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return "prefix part must be non-empty"
        problem = subdomain_problem(prefix)
        if problem is not None:
            return f"prefix part {problem}"
    if not name:
        return "name part must be non-empty"
    if len(name) > LABEL_MAX:
        return f"name part {_too_long(LABEL_MAX)}"
    if _QUALIFIED.fullmatch(name) is None:
        return QUALIFIED_FORMAT
    return None


def label_value_problem(value: str) -> str | None:
    if len(value) > LABEL_MAX:
        return _too_long(LABEL_MAX)
    if value and _QUALIFIED.fullmatch(value) is None:
        return LABEL_VALUE_FORMAT
    return None


def shown(value: str) -> str:
    """`value` as a message quotes it: cut short when long."""
    return value if len(value) <= SHOWN_MAX else value[:SHOWN_MAX] + "..."


def invalid(value: str, problem: str) -> str:
    """The API server's `Invalid value: "...": problem` (the caller puts the field path first)."""
    return f'Invalid value: "{shown(value)}": {problem}'


def labels_message(labels: Iterable[tuple[str, str]]) -> str | None:
    """What is wrong with the first bad label, as `invalid` words it, or None."""
    for key, value in labels:
        problem = label_key_problem(key)
        if problem is not None:
            return invalid(key, problem)
        problem = label_value_problem(value)
        if problem is not None:
            return invalid(value, problem)
    return None


def annotations_message(annotations: Iterable[tuple[str, str]]) -> str | None:
    total = 0
    for key, value in annotations:
        total += len(key.encode("utf-8", "replace")) + len(value.encode("utf-8", "replace"))
    if total > ANNOTATIONS_MAX:
        return f"Too long: must have at most {ANNOTATIONS_MAX} bytes"
    return None


__all__ = [
    "ANNOTATIONS_MAX",
    "LABEL_MAX",
    "SUBDOMAIN_MAX",
    "annotations_message",
    "invalid",
    "label_key_problem",
    "label_problem",
    "label_value_problem",
    "labels_message",
    "shown",
    "subdomain_problem",
]
