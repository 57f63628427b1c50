#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite, Postgres- and S3-backed tests included.
# `--fast` (with any other pytest arguments) runs only the tests that need no Spark, external
# server or browser: the inner loop (CONTRIBUTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# One worker per core (at most four: each may start its own Spark JVM), a test file kept on
# one worker so its module-wide servers start once. `-n 0` runs in one process (a debugger).
# The 25 slowest tests close the report: the suite is kept under ~30 minutes on 2 cores.
exec .venv/bin/python -m pytest -q -p no:cacheprovider -n auto --maxprocesses 4 \
  --dist loadfile --durations=25 "$@"
