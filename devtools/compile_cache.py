"""`make`'s mypyc build of domain/, kept between clones: rebuilt only when its inputs change.

deploy/compile.py takes one to two minutes of a 2-core machine, and every fresh clone (each CI
run is one) used to pay it again for sources that an earlier clone had already compiled. The
build's output depends only on its inputs: domain/'s sources, the build script, the Python and
mypy that compile them and the C compiler. Their digest names a cache entry under
~/.cache/quotaflow/mypyc (or $QUOTAFLOW_CACHE_DIR/mypyc); a hit copies that entry's extension
modules and manifest into domain/, a miss runs deploy/compile.py and stores what it built.

After a restore, domain/_engine_form.stale() must name no module, or the entry is dropped and
the build runs. The manifest records each compiled source's sha256, so an entry cannot pass
for sources it was not built from.

    python -m devtools.compile_cache           # restore or build (what `make compile` runs)
    python -m devtools.compile_cache --key     # print the inputs' digest
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOMAIN = ROOT / "domain"
MANIFEST_NAME = ".compiled.json"
# Entries kept: the newest few, so branches that take turns still hit.
KEEP = 6


def cache_root() -> Path:
    # Beside the local broker's jars: $QUOTAFLOW_CACHE_DIR, else ~/.cache/quotaflow.
    from devtools.local_broker import cache_root as quotaflow_cache

    return quotaflow_cache() / "mypyc"


def _compiler() -> str:
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    try:
        done = subprocess.run([*cc.split(), "--version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return cc
    return f"{cc}\n{done.stdout}"


def _package(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "-"


def key() -> str:
    """The digest of everything the build reads."""
    h = hashlib.sha256()
    for part in (sys.version, sysconfig.get_config_var("EXT_SUFFIX") or "", sysconfig.get_platform(),
                 _package("mypy"), _package("setuptools"), _compiler(),
                 " ".join(f"{k}={os.environ.get(k, '')}" for k in ("CFLAGS", "LDFLAGS", "MYPYC_OPT_LEVEL"))):
        h.update(part.encode() + b"\0")
    for path in sorted([*DOMAIN.rglob("*.py"), ROOT / "deploy" / "compile.py"]):
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()[:32]


def _built_files() -> list[Path]:
    from domain._engine_form import extension_files

    return [*extension_files(), DOMAIN / MANIFEST_NAME]


def _restore(entry: Path) -> bool:
    from domain._engine_form import extension_files, stale

    files = [p for p in entry.rglob("*") if p.is_file()]
    if not any(p.name == MANIFEST_NAME for p in files):
        return False
    for old in extension_files():
        old.unlink()
    for src in files:
        dst = DOMAIN / src.relative_to(entry)
        dst.parent.mkdir(parents=True, exist_ok=True)
        # Copied to a new name and renamed over: a process importing domain/ meanwhile sees the
        # old file or the new one, never half of one.
        tmp = dst.with_name(f".{dst.name}.restoring")
        shutil.copy2(src, tmp)
        os.replace(tmp, dst)
    return not stale()


def _store(entry: Path) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=entry.parent))
    try:
        for src in _built_files():
            dst = staging / src.relative_to(DOMAIN)
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst)
        try:
            os.rename(staging, entry)  # atomic: another clone storing the same key wins or loses whole
        except OSError:
            pass
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    entries = sorted((p for p in entry.parent.iterdir() if not p.name.startswith(".")),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    for old in entries[KEEP:]:
        shutil.rmtree(old, ignore_errors=True)


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    if argv[1:] == ["--key"]:
        print(key())
        return 0
    if argv[1:]:
        print(__doc__, file=sys.stderr)
        return 2
    entry = cache_root() / key()
    if entry.is_dir():
        if _restore(entry):
            os.utime(entry)
            print(f"domain/ compiled: restored mypyc build from {entry}", file=sys.stderr)
            return 0
        print(f"compile cache: {entry} does not match domain/'s sources; rebuilding", file=sys.stderr)
        shutil.rmtree(entry, ignore_errors=True)
    built = subprocess.run([sys.executable, str(ROOT / "deploy" / "compile.py")], cwd=ROOT, check=False)
    if built.returncode != 0:
        return built.returncode
    try:
        _store(entry)
    except OSError as exc:  # a cache that cannot be written costs the next clone a build, nothing more
        print(f"compile cache: not stored ({exc})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
