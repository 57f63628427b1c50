"""A real browser for the console tests: Debian's chromium driven by Playwright.

`launch_chromium(playwright)` starts `/usr/bin/chromium` (Playwright's own browser download
is never used) headless, without any of its background network traffic. A missing chromium
skips the tests on a developer machine and fails them under `CI=true`, like the other
Debian-packaged binaries (`tests.support.prometheus.binary`).
"""

from __future__ import annotations

from typing import Any

from tests.support.prometheus import binary
from tests.support.tiers import guard

CHROMIUM_ARGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync")
VIEWPORT = {"width": 1280, "height": 800}


def launch_chromium(playwright: Any) -> Any:
    """A Playwright `Browser` over Debian's chromium."""
    guard("a browser", "services")
    return playwright.chromium.launch(executable_path=binary("chromium"),
                                      args=list(CHROMIUM_ARGS))
