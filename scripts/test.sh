#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite, Postgres- and S3-backed tests included.
# `--fast` (with any other pytest arguments) runs only the tests that need no Spark, external
# server or browser: the inner loop (CONTRIBUTING.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The fast tier runs on one worker per core (at most four; pytest-xdist). The full suite runs
# in one process: its Spark streaming tests (Kafka) lost their Python workers' connect-back
# when two Spark JVMs shared 2 cores (measured: 37.5 min on two workers with one such failure
# per run, against ~42 min in one process).
# The 25 slowest tests close the report.
workers=()
for a in "$@"; do
  if [ "$a" = "--fast" ]; then workers=(-n auto --maxprocesses 4); fi
done
exec .venv/bin/python -m pytest -q -p no:cacheprovider ${workers[@]+"${workers[@]}"} --durations=25 "$@"
