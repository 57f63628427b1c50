"""A sync pipeline in its own process, for the crash tests.

    python -m tests.support.sync_worker DATA_DIR TABLE [--die-at N] [--once]

Runs the sync bound to TABLE of the shoal at DATA_DIR (hosts 127.0.0.1 allowed), printing
`STAGE <name> <position>` for each pipeline stage reached (extents written, committed,
confirmed, ...). With `--die-at N` the process SIGKILLs itself right after printing the Nth
stage line: a real crash at a chosen point. With `--once` it exits 0 after catching up and
prints `DONE`.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

import shoal
from shoal.frontends.sync.kind import resolve_sync_binding
from shoal.frontends.sync.pipeline import SyncPipeline


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("data_dir")
    ap.add_argument("table")
    ap.add_argument("--die-at", type=int, default=0)
    ap.add_argument("--once", action="store_true")
    args = ap.parse_args()
    db = shoal.connect(data_dir=args.data_dir, allowed_hosts="127.0.0.1")
    binding = resolve_sync_binding(db, args.table)
    assert binding is not None
    seen = 0

    def on_stage(name: str, **info: object) -> None:
        nonlocal seen
        seen += 1
        print(f"STAGE {name} {info.get('position')}", flush=True)
        if seen == args.die_at:
            os.kill(os.getpid(), signal.SIGKILL)

    pipeline = SyncPipeline(db, binding, on_stage=on_stage)
    pipeline.run(once=args.once)
    pipeline.close()
    print("DONE", flush=True)
    sys.exit(0)


if __name__ == "__main__":
    main()
