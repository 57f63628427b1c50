"""A maintenance worker process for crash tests (a real subprocess with its own Spark).

    python -m tests.maintenance.worker_proc --data-dir D [--catalog URL] --name W
        --lease S [--pause-at STAGE]

Runs units until idle. With `--pause-at` (a compaction stage: extents_written, committing)
it prints `PAUSED <stage> <json>` there and sleeps, so the test can SIGKILL it exactly then.
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", required=True)
    p.add_argument("--catalog")
    p.add_argument("--name", required=True)
    p.add_argument("--lease", type=float, default=5.0)
    p.add_argument("--pause-at")
    args = p.parse_args(argv)

    import shoal
    from shoal.maintenance.service import build_worker
    from shoal.maintenance.worker import WorkerSettings
    from tests.support.writer import pause_hook

    hook = pause_hook(args.pause_at)
    db = shoal.connect(data_dir=args.data_dir, catalog_url=args.catalog,
                       spark_master="local[1]")
    worker = build_worker(db, name=args.name, on_stage=hook,
                          settings=WorkerSettings(lease_s=args.lease))
    for outcome in worker.run_until_idle():
        print(f"RAN {outcome.unit.id} {outcome.ok}", flush=True)
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
