"""A process that runs one DELETE for crash tests (a real subprocess, killed with SIGKILL).

    python -m tests.query.delete_proc --data-dir D [--catalog URL] --sql "DELETE ..."
        [--pause-at STAGE] [--stages]

Prints `STARTED`, then (with `--stages`) `STAGE <stage> <json>` at every stage of the
delete: `extents_written` (the rewritten extents are in the store), `committing` (each CAS
attempt), `committed`; with `--pause-at` it prints `PAUSED ...` there and sleeps until
killed. At the end it prints `DONE <json answer>`.
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--data-dir", required=True)
    p.add_argument("--catalog")
    p.add_argument("--sql", required=True)
    p.add_argument("--pause-at")
    p.add_argument("--stages", action="store_true")
    args = p.parse_args(argv)

    import shoal
    from shoal.query.ddl import DeleteRows, TruncateTable, parse_ddl
    from tests.support.writer import pause_hook

    db = shoal.connect(data_dir=args.data_dir, catalog_url=args.catalog)
    stmt = parse_ddl(args.sql)
    assert isinstance(stmt, DeleteRows | TruncateTable)
    print("STARTED", flush=True)
    report = db.query_engine.run_delete(stmt, on_stage=pause_hook(args.pause_at,
                                                              report=args.stages))
    print("DONE " + json.dumps(report.to_table().to_pylist()[0]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
