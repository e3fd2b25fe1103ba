"""Compile the admission engine (domain/) to C extension modules with mypyc, in place.

domain/ is plain, mypy-strict Python; mypyc turns those same sources into C extensions that
run the engine about 1.5x faster with the same decisions, byte for byte (the test suite checks
the compiled engine against the interpreted one). Nothing requires the compiled form: without
it (no C compiler, `--clean`), Python imports the .py sources and quotaflow behaves the same,
only slower.

Built in place, the extension modules sit next to their sources and shadow them on import. A
source edited after the build would silently not run, so the build records each source's
sha256 in domain/.compiled.json, and domain/_engine_form.py's `stale()` (checked by the
CLI and the tests) names any module whose source no longer matches its build. `make` rebuilds
whenever a source changes; QUOTAFLOW_PURE_PYTHON=1 runs the sources without removing the build.

    python deploy/compile.py            # build (about a minute on 2 cores)
    python deploy/compile.py --check    # exit 1 if a compiled module is stale
    python deploy/compile.py --clean    # back to pure Python
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from domain._engine_form import DOMAIN, MANIFEST, digest, extension_files, stale  # noqa: E402

# The C library the compiled modules share (mypyc's group): domain/native__mypyc*.so, inside
# the package so that a wheel carries it with the modules.
GROUP = "domain.native"

# Kept interpreted: msgspec reads these classes' fields and annotations at run time (Structs it
# encodes and decodes, and WorkloadSpec, which snapshots store as a dataclass); mypyc's native
# classes do not offer them in the form msgspec expects. Package markers (`__init__.py`, also
# those of subpackages such as domain/preemption/) stay interpreted too, and so does the loader
# that chooses the engine's form (_engine_form, run by domain/__init__.py): neither is the engine.
INTERPRETED = frozenset({"_engine_form", "decisions", "snapshot", "typed_events", "workload"})


def module_name(path: Path) -> str:
    """A source's module name below domain/: "scheduler", "preemption.classical"."""
    return ".".join(path.relative_to(DOMAIN).with_suffix("").parts)


def modules() -> list[Path]:
    """The sources compiled: every .py file of domain/ and its subpackages but the above."""
    return sorted(p for p in DOMAIN.rglob("*.py")
                  if p.stem != "__init__" and module_name(p) not in INTERPRETED)


def clean() -> None:
    for path in extension_files():
        path.unlink()
    MANIFEST.unlink(missing_ok=True)


def build() -> None:
    # Imported here: only a build needs mypy and setuptools (both in the dev extras).
    from mypyc.build import mypycify
    from setuptools import Distribution

    clean()
    sources = modules()
    os.chdir(ROOT)  # mypyc names modules by their path relative to the working directory
    extensions = mypycify([str(p.relative_to(ROOT)) for p in sources], opt_level="3", group_name=GROUP)
    dist = Distribution({"name": "quotaflow-domain", "ext_modules": extensions, "packages": [], "py_modules": []})
    cmd = dist.get_command_obj("build_ext")
    cmd.inplace = True
    cmd.build_temp = str(ROOT / "build" / "mypyc-temp")
    dist.run_command("build_ext")
    MANIFEST.write_text(json.dumps({
        "python": sys.version.split()[0],
        "sources": {module_name(p): digest(p) for p in sources},
    }, indent=1, sort_keys=True) + "\n")


def main(argv: list[str]) -> int:
    if argv[1:] == ["--clean"]:
        clean()
        return 0
    if argv[1:] == ["--check"]:
        names = stale()
        if names:
            print(f"stale compiled modules in domain/: {', '.join(names)} (run: make, or python deploy/compile.py)",
                  file=sys.stderr)
            return 1
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    build()
    print(f"compiled {len(modules())} domain modules with mypyc", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
