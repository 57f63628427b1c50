"""KQL vs the equivalent SQL: what the KQL frontend adds to planning (target
< 5 ms).

    .venv/bin/python bench/bench_kql.py [--repeat 200]

For each query shape, over a catalog with a few tables (the logs of the KQL test corpus, 4
extents), times:

- `kql_to_sql`: KQL -> Spark SQL alone (tokenize, parse with its bounds, translate with
  its quoting), over a table list given in memory;
- `translate`: the same, reading the table list from the catalog, as
  `QueryEngine.translate_kql` does on every query;
- `plan SQL`: the hand-written SQL through shoal's planning (guard, sqlglot parse, analysis,
  stages 1-2 pruning against the catalog: `QueryEngine._scans`) — what either path pays;
- `plan KQL`: `translate` followed by planning the translated SQL (a longer statement
  when projections are spelled out).

The overhead is `plan KQL - plan SQL` at the median. Nothing runs a query, so no engine
starts. Prints a Markdown table (p50 / p99 in ms).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from shoal.frontends.kusto.kql import kql_to_sql                          # noqa: E402
from tests.query.kql_corpus import NOW_NS                       # noqa: E402
from tests.query.test_kql_corpus import make_db                 # noqa: E402

SHAPES = [
    ("needle", "logs | where message has 'deadlock' | project _timestamp, message",
     "SELECT _timestamp, message FROM logs WHERE has(message, 'deadlock')"),
    ("window count by service",
     "logs | where _timestamp > ago(1h) and level == 'error' | summarize c = count() "
     "by service",
     "SELECT service, count(*) AS c FROM logs WHERE _timestamp > "
     "CAST('2026-03-01 05:00:00' AS TIMESTAMP) AND level = 'error' GROUP BY service"),
    ("timechart", "logs | summarize c = count(), p = avg(latency_ms) by bin(_timestamp, 5m), "
     "service | render timechart",
     "SELECT timestamp_micros(unix_micros(_timestamp) - pmod(unix_micros(_timestamp), "
     "300000000)) AS _timestamp, service, count(*) AS c, avg(latency_ms) AS p FROM logs "
     "GROUP BY 1, 2"),
    ("extend + dynamic + top",
     "logs | extend m = tostring(attrs.http.method) | where m == 'GET' | top 10 by latency_ms",
     "SELECT * FROM (SELECT *, get_json_object(attrs, '$.http.method') AS m FROM logs) "
     "WHERE m = 'GET' ORDER BY latency_ms DESC LIMIT 10"),
    ("let + join",
     "let errs = logs | where level == 'error'; errs | join kind=inner teams on service "
     "| summarize c = count() by team",
     "SELECT t.team, count(*) AS c FROM logs l JOIN teams t ON l.service = t.service "
     "WHERE l.level = 'error' GROUP BY t.team"),
    ("quoted needles",
     "logs | where message contains \"dead\\\\lock\" or message startswith @\"it's\\\" "
     "or service == 'a\\'b' | project message",
     "SELECT message FROM logs WHERE message RLIKE '[Dd][Ee][Aa][Dd]\\\\\\\\[Ll][Oo][Cc][Kk]' "
     "OR message RLIKE '^[Ii][Tt]\\u0027[Ss]\\\\\\\\' OR service = 'a\\u0027b'"),
]


def timed(fn: Callable[[], object], repeat: int) -> list[float]:
    for _ in range(5):
        fn()
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def fmt(xs: list[float]) -> str:
    xs = sorted(xs)
    return f"{statistics.median(xs):.2f} / {xs[int(len(xs) * 0.99) - 1]:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=200)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = make_db(os.path.join(tmp, "data"), query_engine="local")
        engine = db.query_engine
        print(f"KQL planning overhead — {platform.machine()}, {os.cpu_count()} cores, "
              f"{args.repeat} runs each (ms, p50 / p99)\n")
        tables = {t.name: {c.name: c.type.kind for c in t.schema.columns}
                  for t in db.catalog.list_tables()}
        print("| query | kql_to_sql | translate | plan SQL | plan KQL | overhead p50 |")
        print("|---|---|---|---|---|---|")
        for name, kql, sql in SHAPES:
            pure = timed(lambda k=kql: kql_to_sql(k, tables, now_ns_utc=NOW_NS), args.repeat)
            tr = timed(lambda k=kql: engine.translate_kql(k, now_ns=NOW_NS), args.repeat)
            ps = timed(lambda s=sql: engine._scans(s, prune=True), args.repeat)
            pk = timed(lambda k=kql: engine._scans(
                engine.translate_kql(k, now_ns=NOW_NS).sql, prune=True), args.repeat)
            over = statistics.median(pk) - statistics.median(ps)
            print(f"| {name} | {fmt(pure)} | {fmt(tr)} | {fmt(ps)} | {fmt(pk)} | {over:+.2f} |")
        db.close()


if __name__ == "__main__":
    main()
