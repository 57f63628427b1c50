"""What a fresh `shoal serve`'s first ingest request pays beyond the second one.

    .venv/bin/python bench/bench_first_request.py [--repeat 3] [--settle 2.0]

A real `shoal serve --lazy-spark` on a new data directory (table `t`: string, long); once
`/readyz` answers (`tests/support/server.start_server`) and `--settle` seconds have passed
(what a server gets between its start and its first client), the same 1,000-line NDJSON
body is posted twice. Reported per round: the
first and the second request's latency and their ratio. The server warms its coercion up in
the background as it starts (`shoal.ingest.coerce.warm_up`): without it the first request
imports the rest of pyarrow (and pandas) itself.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import shoal  # noqa: E402
from tests.support.server import start_server  # noqa: E402

BODY = b"".join(b'{"_timestamp":"2024-01-01T00:00:00Z","s":"x","n":%d}\n' % i
                for i in range(1000))


def one_round(settle_s: float) -> tuple[float, float]:
    data = tempfile.mkdtemp(prefix="shoal-bench-first-")
    db = shoal.connect(data_dir=data)
    db.create_table("t", [shoal.Column("s", shoal.STRING), shoal.Column("n", shoal.LONG)])
    db.close()
    with start_server(data, extra_args=["--lazy-spark"]) as server:
        time.sleep(settle_s)     # what a server gets between its start and its first client
        took = []
        for _ in range(2):
            t0 = time.perf_counter()
            urllib.request.urlopen(urllib.request.Request(f"{server.url}/v1/ingest/t",
                                                          data=BODY, method="POST"), timeout=60)
            took.append(time.perf_counter() - t0)
    return took[0], took[1]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--settle", type=float, default=2.0)
    args = ap.parse_args()
    print("| round | first request ms | second request ms | first / second |")
    print("|---:|---:|---:|---:|")
    for r in range(args.repeat):
        first, second = one_round(args.settle)
        print(f"| {r + 1} | {first * 1e3:.0f} | {second * 1e3:.0f} | {first / second:.1f}x |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
