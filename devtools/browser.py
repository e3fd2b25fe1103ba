"""A headless Chromium for the browser tests: Debian's packages, found or installed.

Like the Kafka broker (devtools/local_broker.py), the browser is something the tests fetch for
themselves from a package registry rather than something a developer must remember: `ensure`
finds Chromium on PATH or, as root on a Debian-like machine, installs Debian's `chromium`
package with apt, with `chromium-driver` (the WebDriver server of the same build, which the
Selenium tests drive). Tests never download a browser of their own (a test tool's browser
download is not reachable from CI).

    python -m devtools.browser ensure     # prints the browser's path, or explains on stderr
    python -m devtools.browser find       # prints it only if already installed
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys

NAMES = ("chromium", "chromium-headless-shell", "chromium-browser")
PACKAGE = "chromium"
DRIVER_PACKAGE = "chromium-driver"
DRIVER = "chromedriver"
# Without these, Chromium reaches out to Google's hosts at start, which a closed network refuses.
HEADLESS_FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)


def find() -> str | None:
    return next((path for name in NAMES if (path := shutil.which(name))), None)


def find_driver() -> str | None:
    return shutil.which(DRIVER)


def ensure() -> str:
    """The browser's path, installing Debian's package if it is missing and we may."""
    found = find()
    if found and find_driver():
        return found
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise RuntimeError(f"no Chromium and {DRIVER} on PATH ({', '.join(NAMES)}); "
                           f"install Debian's `{PACKAGE}` and `{DRIVER_PACKAGE}` packages")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for command in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", PACKAGE, DRIVER_PACKAGE]):
        done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"`{' '.join(command)}` failed: {(done.stderr or done.stdout).strip()[-500:]}")
    found = find()
    if not found or not find_driver():
        raise RuntimeError(f"apt installed `{PACKAGE}` and `{DRIVER_PACKAGE}` but no browser or {DRIVER} is on PATH")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devtools.browser")
    parser.add_argument("command", choices=("ensure", "find"))
    args = parser.parse_args(argv)
    try:
        path = ensure() if args.command == "ensure" else find()
    except RuntimeError as exc:
        print(f"devtools.browser: {exc}", file=sys.stderr)
        return 1
    if path is None:
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
