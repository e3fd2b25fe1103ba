"""Which form of the engine runs: domain/ compiled by mypyc (deploy/compile.py) or its sources.

The build puts C extension modules next to domain/'s sources, where they shadow the .py files on
import. Two things follow, both handled here:

- A source edited after the build would silently not run. The build records every source's
  sha256 in domain/.compiled.json; where a compiled module's source changed since,
  `choose_engine_form` runs the sources instead (and says so on stderr) until `make` rebuilds.
- Sometimes the interpreted engine is wanted anyway (a debugger, readable tracebacks, tests
  that patch a domain function, which compiled callers would not see). QUOTAFLOW_PURE_PYTHON=1
  makes every `domain.*` import load the source.

domain/__init__.py calls `choose_engine_form`, so Python itself makes the choice before any
engine module loads, whoever imports domain first. This module is the loader, not part of the
engine: it reads the environment and the build's files, and deploy/compile.py never compiles it.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

ENV = "QUOTAFLOW_PURE_PYTHON"
DOMAIN = Path(__file__).resolve().parent
MANIFEST = DOMAIN / ".compiled.json"
_EXTENSIONS = tuple(importlib.machinery.EXTENSION_SUFFIXES)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def extension_files() -> list[Path]:
    """Every extension module in domain/ and its subpackages: the compiled modules and mypyc's
    shared library."""
    return sorted(p for p in DOMAIN.rglob("*") if p.name.endswith(_EXTENSIONS))


def compiled_modules() -> list[str]:
    """Names below domain/ ("scheduler", "preemption.classical") of the modules that exist as
    extension modules (not mypyc's shared library, domain/native__mypyc, which has no source of
    its own)."""
    names = {".".join((*p.relative_to(DOMAIN).parent.parts, p.name.split(".", 1)[0])) for p in extension_files()}
    return sorted(n for n in names if not n.endswith("__mypyc"))


def stale() -> list[str]:
    """Compiled modules whose source no longer matches what was compiled."""
    present = compiled_modules()
    if not present:
        return []
    try:
        recorded = json.loads(MANIFEST.read_text())["sources"]
    except (OSError, ValueError, KeyError, TypeError):
        return present
    out = []
    for name in present:
        source = DOMAIN / f"{name.replace('.', '/')}.py"
        if not source.exists() or recorded.get(name) != digest(source):
            out.append(name)
    return out


def running_compiled() -> bool:
    """Does the imported engine run compiled? (Imports domain.)"""
    from domain import scheduler

    return not (getattr(scheduler, "__file__", None) or "").endswith(".py")


class _SourceOnly:
    """Loads `domain` and its modules and subpackages from their .py files, never an extension
    module.

    A meta path finder needs only find_spec; not deriving from importlib.abc.MetaPathFinder
    keeps importlib.abc out of the start-up of every process that imports domain."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname == "domain":
            return importlib.util.spec_from_file_location(
                fullname, DOMAIN / "__init__.py", submodule_search_locations=[str(DOMAIN)])
        if fullname.startswith("domain."):
            relative = fullname[len("domain."):].replace(".", "/")
            package = DOMAIN / relative / "__init__.py"
            if package.exists():
                return importlib.util.spec_from_file_location(
                    fullname, package, submodule_search_locations=[str(DOMAIN / relative)])
            source = DOMAIN / f"{relative}.py"
            if source.exists():
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def use_pure_python() -> None:
    """Import domain from its sources from now on. Refuses if domain was already imported."""
    if any(isinstance(f, _SourceOnly) for f in sys.meta_path):
        return
    loaded = _engine_modules_loaded()
    if loaded:
        raise RuntimeError(f"{ENV}: domain was imported before the switch ({', '.join(loaded[:3])})")
    import importlib.util  # noqa: F401  (for _SourceOnly; imported here, not by every process that imports streams/)

    sys.meta_path.insert(0, _SourceOnly())


def _engine_modules_loaded() -> list[str]:
    """The engine's modules imported so far: not the package itself, nor this loader, which
    domain/__init__.py imports to make the choice."""
    return sorted(n for n in sys.modules if n.startswith("domain.") and n != __name__)


def pure_python_requested() -> bool:
    return os.environ.get(ENV, "") not in ("", "0")


def choose_engine_form() -> None:
    """Run domain/'s sources if asked to (QUOTAFLOW_PURE_PYTHON=1) or if the build is stale."""
    if pure_python_requested():
        use_pure_python()
        return
    names = stale()
    if names and not _engine_modules_loaded():
        print(f"quotaflow: domain/ was compiled from older sources ({', '.join(names)}); running the "
              "sources instead (slower, same decisions). `make` recompiles.", file=sys.stderr)
        use_pure_python()
