"""Naming a namespaced object on the command line: `NS/NAME`, or `NAME` with `-n NS`, as kubectl
and kueuectl accept both."""

from __future__ import annotations

from streams.cli.common import fail

NAMESPACE_HELP = "the namespace, when NAME does not say it as NS/NAME"


def split_ref(command: str, ref: str, namespace: str | None, *, default: str | None = "default") -> tuple[str, str]:
    """(namespace, name) from `NS/NAME` or `NAME` plus `-n NS`; both forms must agree."""
    ns, sep, name = ref.rpartition("/")
    if not sep:
        ns, name = "", ref
    if sep and (not ns or "/" in ns):
        raise fail(command, f"expected NAMESPACE/NAME or NAME, got {ref!r}", 2)
    if not name:
        raise fail(command, f"expected NAMESPACE/NAME or NAME, got {ref!r}", 2)
    if ns and namespace and ns != namespace:
        raise fail(command, f"{ref!r} names namespace {ns!r} but -n says {namespace!r}", 2)
    ns = ns or namespace or default or ""
    if not ns:
        raise fail(command, f"{ref!r}: give the namespace as NS/NAME or -n NS", 2)
    return ns, name
