#!/usr/bin/env bash
# Create .venv (Python >= 3.11) and install shoal with every pinned dependency.
# Idempotent: a second run only re-checks that the install is complete.
set -euo pipefail
cd "$(dirname "$0")/.."

pick_python() {
  for p in "${PYTHON:-}" python3.11 python3.12 python3.13 python3; do
    [ -n "$p" ] || continue
    if command -v "$p" >/dev/null 2>&1 &&
       "$p" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
      echo "$p"; return 0
    fi
  done
  echo "shoal needs Python >= 3.11 (set PYTHON=/path/to/python3.11)" >&2
  return 1
}

# Debian packages the tests run for real: Prometheus (remote write, PromQL differential) and
# its node exporter (a scrape target); chromium drives the console tests (Playwright).
# Installed when missing and we may (root with apt-get).
debs=()
for pair in prometheus:prometheus promtool:prometheus chromium:chromium \
            prometheus-node-exporter:prometheus-node-exporter; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || debs+=("${pair#*:}")
done
if [ "${#debs[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    export DEBIAN_FRONTEND=noninteractive
    # Wait for another apt-get (a second checkout setting up at the same time) instead of failing.
    apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${debs[@]}" >/dev/null
  else
    echo "warning: Debian packages missing (${debs[*]}): the Prometheus tests need them" >&2
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$(pick_python)" -m venv .venv
fi
stamp=.venv/.shoal-installed
# The C extensions are built by the install: their sources are part of what the stamp covers.
want="$(cat pyproject.toml setup.py constraints.txt src/shoal/_native.h src/shoal/*/_*.c | sha256sum | cut -d' ' -f1)"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  .venv/bin/python -m pip install --quiet --upgrade pip
  .venv/bin/python -m pip install --quiet -c constraints.txt -e '.[dev]'
  echo "$want" > "$stamp"
fi
# shoal's own bytecode, written once: an editable install leaves it to the first import, and
# with PYTHONDONTWRITEBYTECODE set every command would compile its modules again (~70 ms).
.venv/bin/python -m compileall -q src/shoal >/dev/null
if ! command -v java >/dev/null 2>&1; then
  echo "warning: java (17+) not found: the Spark query lane needs it" >&2
fi
