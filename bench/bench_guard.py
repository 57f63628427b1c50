"""What the query allow-list costs: classify + parse + check beside the whole planning.

    .venv/bin/python bench/bench_guard.py [--repeat 2000]

For a few statements users send (a needle, a selective aggregation, a self-join with a CTE,
a 1,000-value IN list, a refused TRANSFORM), times `guard.classify` (tokens),
`planner.parse` + `guard.check_query` (the allow-list walk) and `planner.analyze` (parse,
guard, function rewrites, per-reference pushdown; what every query pays before pruning), in
microseconds per statement (median of `--repeat`). No engine runs. Output is Markdown.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from shoal.errors import QueryError
from shoal.query.guard import check_query, classify
from shoal.query.planner import analyze, parse
from shoal.types import LONG, STRING, TIMESTAMP

TABLES = {"logs": {"_timestamp": TIMESTAMP, "service": STRING, "message": STRING,
                   "trace_id": STRING, "status": LONG}}
STATEMENTS = {
    "needle": "SELECT * FROM logs WHERE trace_id = '4bf92f3577b34da6a3ce929d0e0e4736'",
    "selective": "SELECT count(*) AS n, avg(status) AS s FROM logs WHERE service = 'api' AND "
                 "_timestamp BETWEEN '2026-03-01 10:00:00' AND '2026-03-01 10:15:00' AND "
                 "has(message, 'timeout')",
    "cte self-join": "WITH e AS (SELECT trace_id FROM logs WHERE status >= 500) SELECT "
                     "l.service, count(*) AS n FROM logs l JOIN e ON l.trace_id = e.trace_id "
                     "GROUP BY l.service ORDER BY n DESC",
    "IN 1,000": "SELECT * FROM logs WHERE status IN (" + ", ".join(map(str, range(1000)))
                + ")",
    "refused": "SELECT TRANSFORM(message) USING 'sh' AS (o string) FROM logs",
}


def median_us(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        try:
            fn()
        except QueryError:
            pass
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=2000)
    args = ap.parse_args()
    print("| statement | classify µs | parse + check µs | of which check µs | analyze µs |")
    print("|---|---:|---:|---:|---:|")
    for name, sql in STATEMENTS.items():
        r = max(20, args.repeat // (20 if "1,000" in name else 1))
        c = median_us(lambda: classify(sql), r)
        p = median_us(lambda: parse(sql), r)
        pc = median_us(lambda: check_query(parse(sql)), r)
        a = median_us(lambda: analyze(sql, TABLES), r)
        print(f"| {name} | {c:,.0f} | {pc:,.0f} | {max(0.0, pc - p):,.0f} | {a:,.0f} |")


if __name__ == "__main__":
    main()
