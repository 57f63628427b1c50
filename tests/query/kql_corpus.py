"""The KQL corpus: generated logs and queries with their hand-written
Spark SQL and DuckDB equivalents.

Data: `logs` (4 extents of 300 rows, one per 90 minutes from T0; services api, web, worker,
db; levels info/warn/error; messages with tokens, "deadlock" only in the third extent; a
dynamic `attrs` {"http": {"method", "status"}, "region"} absent on some rows; `latency_ms`
and `user` with nulls and empties), `teams` (service -> team, tier) and `audit` (a table of
other columns, for union).

Each `Case`: the KQL, the SQL a person would write for shoal (run through shoal), the DuckDB
SQL over the same rows (default: the same text; `has()` and `get_json_object()` are DuckDB
macros there), how to compare (`order`: rows in order; `count`: only the number of rows),
and `local`: whether the embedded engine answers it (else it needs Spark).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

T0 = datetime(2026, 3, 1, tzinfo=UTC)
NOW = T0 + timedelta(hours=6)
NOW_NS = int(NOW.timestamp()) * 1_000_000_000
SERVICES = ["api", "web", "worker", "db"]
METHODS = ["GET", "POST", "PUT", "DELETE"]


def log_rows() -> list[list[dict[str, Any]]]:
    """Four batches (extents) of 300 rows, 18 s apart: 6 hours in all."""
    rng = random.Random(15)
    batches = []
    for b in range(4):
        rows = []
        for i in range(300):
            n = b * 300 + i
            ts = T0 + timedelta(seconds=18 * n)
            service = SERVICES[rng.randrange(4)]
            level = rng.choices(["info", "warn", "error"], [60, 25, 15])[0]
            kind = rng.randrange(5)
            if b == 2 and i % 50 == 7:
                message = f"Deadlock detected on table orders-{i}"
                level = "error"
            elif kind == 0:
                message = f"GET /users/{rng.randrange(100)} ok"
            elif kind == 1:
                message = f"user u{rng.randrange(20)} login failed"
            elif kind == 2:
                message = f"timeout after {rng.randrange(1, 9) * 100}ms"
            elif kind == 3:
                message = f"Cache miss for key-{rng.randrange(50)}"
            else:
                message = f"request served in {rng.randrange(1, 500)} ms"
            row: dict[str, Any] = {
                "_timestamp": ts.isoformat().replace("+00:00", "Z"), "service": service,
                "level": level, "message": message,
                "latency_ms": None if n % 17 == 0 else rng.randrange(1, 2000),
                "user": [None, "", f"u{rng.randrange(10)}", f"u{rng.randrange(10)}"][n % 4],
            }
            if n % 11 != 0:
                row["attrs"] = {"http": {"method": METHODS[rng.randrange(4)],
                                         "status": rng.choice([200, 200, 201, 404, 500])},
                                "region": rng.choice(["eu", "us"])}
            rows.append(row)
        batches.append(rows)
    return batches


TEAMS = [{"_timestamp": T0.isoformat().replace("+00:00", "Z"), "service": s, "team": t,
          "tier": k} for k, (s, t) in enumerate([("api", "edge"), ("web", "edge"),
                                                 ("worker", "batch"), ("billing", "money")])]
AUDIT = [{"_timestamp": (T0 + timedelta(minutes=7 * i)).isoformat().replace("+00:00", "Z"),
          "service": SERVICES[i % 4], "action": ["login", "logout", "grant"][i % 3]}
         for i in range(30)]


def duck_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows as DuckDB reads them: timestamps parsed, dynamic values as JSON text."""
    out = []
    for r in rows:
        d = dict(r)
        d["_timestamp"] = datetime.fromisoformat(r["_timestamp"].replace("Z", "+00:00"))
        if "attrs" in d or "level" in d:
            d["attrs"] = json.dumps(r["attrs"], separators=(",", ":")) if r.get(
                "attrs") is not None else None
        out.append(d)
    return out


@dataclass(frozen=True)
class Case:
    id: str
    kql: str
    sql: str
    duck: str | None = None
    compare: str = "rows"           # rows (sorted) | order | count
    local: bool = True
    ordered_lists: bool = False     # arrays compared in order (else as multisets)


TS = "CAST('{}' AS TIMESTAMP)"


def ts(minutes: int) -> str:
    return TS.format((T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S"))


def duck_ts(minutes: int) -> str:
    return "TIMESTAMPTZ '{}+00'".format(
        (T0 + timedelta(minutes=minutes)).strftime("%Y-%m-%d %H:%M:%S"))


CASES = [
    # ---- where ----------------------------------------------------------------------------
    Case("eq", 'logs | where level == "error" | project _timestamp, service, message',
         "SELECT _timestamp, service, message FROM logs WHERE level = 'error'"),
    Case("neq_string_null_is_empty", 'logs | where user != "u3" | count',
         "SELECT count(*) AS Count FROM logs WHERE user IS NULL OR user <> 'u3'"),
    Case("lt_gt", "logs | where latency_ms > 500 and latency_ms <= 1500 | count",
         "SELECT count(*) AS Count FROM logs WHERE latency_ms > 500 AND latency_ms <= 1500"),
    Case("or_not", 'logs | where not(level == "info") or service == "db" | count',
         "SELECT count(*) AS Count FROM logs WHERE NOT level = 'info' OR service = 'db'"),
    Case("in", 'logs | where service in ("api", "db") | summarize c = count() by service',
         "SELECT service, count(*) AS c FROM logs WHERE service IN ('api', 'db') "
         "GROUP BY service"),
    Case("not_in", 'logs | where service !in ("api", "db") | summarize c = count() by service',
         "SELECT service, count(*) AS c FROM logs WHERE service IS NULL OR "
         "service NOT IN ('api', 'db') GROUP BY service"),
    Case("between_numbers", "logs | where latency_ms between (100 .. 200) | count",
         "SELECT count(*) AS Count FROM logs WHERE latency_ms BETWEEN 100 AND 200"),
    Case("between_datetimes",
         "logs | where _timestamp between (datetime(2026-03-01 01:00) .. 30m) | count",
         f"SELECT count(*) AS Count FROM logs WHERE _timestamp BETWEEN {ts(60)} AND {ts(90)}",
         f"SELECT count(*) AS Count FROM logs WHERE _timestamp BETWEEN {duck_ts(60)} AND "
         f"{duck_ts(90)}"),
    Case("has", 'logs | where message has "deadlock" | project _timestamp, message',
         "SELECT _timestamp, message FROM logs WHERE has(message, 'deadlock')"),
    Case("not_has", 'logs | where message !has "timeout" | count',
         "SELECT count(*) AS Count FROM logs WHERE message IS NULL OR "
         "NOT has(message, 'timeout')"),
    Case("has_is_whole_term", 'logs | where message has "dead" | count',
         "SELECT count(*) AS Count FROM logs WHERE has(message, 'dead')"),
    Case("contains_caseless", 'logs | where message contains "CACHE mi" | count',
         "SELECT count(*) AS Count FROM logs WHERE lower(message) LIKE '%cache mi%'",
         local=True),
    Case("contains_cs", 'logs | where message contains_cs "Cache" | count',
         "SELECT count(*) AS Count FROM logs WHERE message LIKE '%Cache%'"),
    Case("not_contains", 'logs | where message !contains "ms" | count',
         "SELECT count(*) AS Count FROM logs WHERE message IS NULL OR "
         "NOT lower(message) LIKE '%ms%'"),
    Case("startswith", 'logs | where message startswith "get /" | count',
         "SELECT count(*) AS Count FROM logs WHERE lower(message) LIKE 'get /%'"),
    Case("endswith", 'logs | where message endswith " OK" | count',
         "SELECT count(*) AS Count FROM logs WHERE lower(message) LIKE '% ok'"),
    Case("matches_regex", 'logs | where message matches regex "u1[0-9] login" | count',
         "SELECT count(*) AS Count FROM logs WHERE message RLIKE 'u1[0-9] login'",
         "SELECT count(*) AS Count FROM logs WHERE regexp_matches(message, 'u1[0-9] login')"),
    Case("isnull", "logs | where isnull(latency_ms) | count",
         "SELECT count(*) AS Count FROM logs WHERE latency_ms IS NULL"),
    Case("isnotnull", "logs | where isnotnull(latency_ms) | count",
         "SELECT count(*) AS Count FROM logs WHERE latency_ms IS NOT NULL"),
    Case("isempty", "logs | where isempty(user) | count",
         "SELECT count(*) AS Count FROM logs WHERE user IS NULL OR user = ''"),
    Case("isnotempty", "logs | where isnotempty(user) | summarize c = count() by user",
         "SELECT user, count(*) AS c FROM logs WHERE user IS NOT NULL AND user <> '' "
         "GROUP BY user"),
    Case("caseless_eq", 'logs | where level =~ "ERROR" | count',
         "SELECT count(*) AS Count FROM logs WHERE lower(level) = 'error'"),
    # ---- dynamic ---------------------------------------------------------------------------
    Case("dot_path", 'logs | where attrs.http.method == "GET" | count',
         "SELECT count(*) AS Count FROM logs "
         "WHERE get_json_object(attrs, '$.http.method') = 'GET'"),
    Case("bracket_path", "logs | where attrs['region'] == 'eu' | summarize c = count() "
         "by service",
         "SELECT service, count(*) AS c FROM logs WHERE get_json_object(attrs, '$.region') "
         "= 'eu' GROUP BY service"),
    Case("path_by", "logs | summarize c = count() by method = tostring(attrs.http.method)",
         "SELECT get_json_object(attrs, '$.http.method') AS method, count(*) AS c FROM logs "
         "GROUP BY get_json_object(attrs, '$.http.method')"),
    Case("path_number", "logs | where attrs.http.status == 500 | count",
         "SELECT count(*) AS Count FROM logs "
         "WHERE try_cast(get_json_object(attrs, '$.http.status') AS DOUBLE) = 500",
         "SELECT count(*) AS Count FROM logs "
         "WHERE try_cast(get_json_object(attrs, '$.http.status') AS DOUBLE) = 500",
         local=False),
    Case("parse_json", "logs | extend a = parse_json(attrs) | where a.region == 'us' | count",
         "SELECT count(*) AS Count FROM logs WHERE get_json_object(attrs, '$.region') = 'us'"),
    Case("project_path_name", "logs | where service == 'db' | project attrs.region",
         "SELECT get_json_object(attrs, '$.region') AS attrs_region FROM logs "
         "WHERE service = 'db'"),
    # ---- projections -------------------------------------------------------------------------
    Case("project_rename_expr",
         "logs | where level == 'warn' | project ts = _timestamp, svc = service, "
         "slow = latency_ms > 1000",
         "SELECT _timestamp AS ts, service AS svc, latency_ms > 1000 AS slow FROM logs "
         "WHERE level = 'warn'"),
    Case("project_away", "teams | project-away _timestamp, props",
         "SELECT service, team, tier FROM teams"),
    Case("project_rename", "teams | project-rename owner = team | project service, owner",
         "SELECT service, team AS owner FROM teams"),
    Case("extend_replace_in_place",
         "teams | extend tier = tier * 10 | project-away _timestamp, props",
         "SELECT service, team, tier * 10 AS tier FROM teams"),
    Case("extend_chain", "teams | extend t2 = tier + 1, t3 = t2 * 2 | project service, t3",
         "SELECT service, (tier + 1) * 2 AS t3 FROM teams"),
    Case("extend_then_where_pushes",
         "logs | extend slow = latency_ms > 1500 | where slow and service == 'api' | count",
         "SELECT count(*) AS Count FROM logs WHERE latency_ms > 1500 AND service = 'api'"),
    Case("iff", "logs | extend speed = iff(latency_ms > 1000, 'slow', 'fast') "
         "| summarize c = count() by speed",
         "SELECT IF(latency_ms > 1000, 'slow', 'fast') AS speed, count(*) AS c FROM logs "
         "GROUP BY IF(latency_ms > 1000, 'slow', 'fast')"),
    Case("case", "logs | summarize c = count() by band = case(latency_ms < 500, 'low', "
         "latency_ms < 1500, 'mid', 'high')",
         "SELECT CASE WHEN latency_ms < 500 THEN 'low' WHEN latency_ms < 1500 THEN 'mid' "
         "ELSE 'high' END AS band, count(*) AS c FROM logs GROUP BY 1"),
    Case("strcat", "teams | project label = strcat(service, '/', team, '#', tier)",
         "SELECT concat_ws('', service, '/', team, '#', CAST(tier AS STRING)) AS label "
         "FROM teams"),
    Case("tolong_toreal", "teams | project service, t = tolong(tier) * 2, r = toreal(tier) / 2",
         "SELECT service, CAST(tier AS BIGINT) * 2 AS t, CAST(tier AS DOUBLE) / 2 AS r "
         "FROM teams"),
    Case("toint_of_path", "logs | summarize total = sum(toint(attrs.http.status)) by service",
         "SELECT service, sum(try_cast(get_json_object(attrs, '$.http.status') AS INT)) "
         "AS total FROM logs GROUP BY service", local=False),
    Case("format_datetime",
         "logs | summarize c = count() by hour = format_datetime(_timestamp, 'yyyy-MM-dd HH')",
         "SELECT date_format(_timestamp, 'yyyy-MM-dd HH') AS hour, count(*) AS c FROM logs "
         "GROUP BY 1",
         "SELECT strftime(_timestamp, '%Y-%m-%d %H') AS hour, count(*) AS c FROM logs "
         "GROUP BY 1"),
    # ---- summarize ---------------------------------------------------------------------------
    Case("count_by", "logs | summarize count() by level",
         "SELECT level, count(*) AS count_ FROM logs GROUP BY level"),
    Case("countif", "logs | summarize errors = countif(level == 'error'), n = count() "
         "by service",
         "SELECT service, count(CASE WHEN level = 'error' THEN 1 END) AS errors, "
         "count(*) AS n FROM logs GROUP BY service"),
    Case("dcount", "logs | summarize dcount(user) by service",
         "SELECT service, count(DISTINCT user) AS dcount_user FROM logs GROUP BY service"),
    Case("sum_avg_min_max",
         "logs | summarize sum(latency_ms), avg(latency_ms), min(latency_ms), "
         "max(latency_ms) by level",
         "SELECT level, sum(latency_ms) AS sum_latency_ms, avg(latency_ms) AS avg_latency_ms, "
         "min(latency_ms) AS min_latency_ms, max(latency_ms) AS max_latency_ms FROM logs "
         "GROUP BY level"),
    Case("bin_hour", "logs | summarize c = count() by bin(_timestamp, 1h)",
         "SELECT date_trunc('HOUR', _timestamp) AS _timestamp, count(*) AS c FROM logs "
         "GROUP BY date_trunc('HOUR', _timestamp)"),
    Case("bin_5m", "logs | where level == 'error' | summarize c = count() by "
         "bin(_timestamp, 5m)",
         "SELECT timestamp_seconds(floor(unix_seconds(_timestamp) / 300) * 300) AS _timestamp, "
         "count(*) AS c FROM logs WHERE level = 'error' GROUP BY 1",
         "SELECT time_bucket(INTERVAL 5 MINUTE, _timestamp, TIMESTAMPTZ '1970-01-01 00:00:00+00')"
         " AS _timestamp, count(*) AS c FROM logs WHERE level = 'error' GROUP BY 1"),
    Case("percentile", "logs | summarize percentile(latency_ms, 50) by service",
         "SELECT service, percentile_approx(latency_ms, 0.5, 1000000) AS percentile_latency_ms_50"
         " FROM logs GROUP BY service",
         "SELECT service, quantile_disc(latency_ms, 0.5) AS percentile_latency_ms_50 FROM logs "
         "GROUP BY service"),
    Case("percentiles", "logs | summarize percentiles(latency_ms, 90, 99)",
         "SELECT percentile_approx(latency_ms, 0.9, 1000000) AS percentile_latency_ms_90, "
         "percentile_approx(latency_ms, 0.99, 1000000) AS percentile_latency_ms_99 FROM logs",
         "SELECT quantile_disc(latency_ms, 0.9) AS percentile_latency_ms_90, "
         "quantile_disc(latency_ms, 0.99) AS percentile_latency_ms_99 FROM logs"),
    Case("make_list", "logs | where message has 'deadlock' | summarize make_list(service)",
         "SELECT collect_list(service) AS list_service FROM logs WHERE has(message, 'deadlock')",
         "SELECT list(service) AS list_service FROM logs WHERE has(message, 'deadlock')",
         local=False),
    Case("arg_max", "logs | summarize arg_max(_timestamp, message, level) by service",
         "SELECT service, max(_timestamp) AS _timestamp, max_by(message, _timestamp) AS message, "
         "max_by(level, _timestamp) AS level FROM logs GROUP BY service",
         "SELECT service, max(_timestamp) AS _timestamp, arg_max(message, _timestamp) AS "
         "message, arg_max(level, _timestamp) AS level FROM logs GROUP BY service"),
    Case("arg_min_star", "logs | where service == 'db' | summarize arg_min(latency_ms, *) "
         "by level",
         "SELECT level, latency_ms, _timestamp, props, service, message, attrs, user FROM logs "
         "WHERE service = 'db' QUALIFY row_number() OVER (PARTITION BY level "
         "ORDER BY latency_ms ASC NULLS LAST, _timestamp ASC) = 1"),
    Case("arg_max_beside_count", "logs | summarize n = count(), arg_max(latency_ms, message) "
         "by service",
         "SELECT g.service, g.n, g.mx AS latency_ms, (SELECT min(l.message) FROM logs l "
         "WHERE l.service = g.service AND l.latency_ms = g.mx) AS message FROM (SELECT "
         "service, count(*) AS n, max(latency_ms) AS mx FROM logs GROUP BY service) g"),
    Case("arg_min_all_null_group", "logs | summarize arg_min(latency_ms, message) "
         "by missing = isnull(latency_ms)",
         "SELECT missing, latency_ms, message FROM (SELECT latency_ms IS NULL AS missing, "
         "latency_ms, message, row_number() OVER (PARTITION BY latency_ms IS NULL ORDER BY "
         "latency_ms ASC NULLS LAST, message ASC NULLS FIRST) AS rn FROM logs) AS w "
         "WHERE rn = 1"),
    # ---- top-nested and make-series ------------------------------------------------------
    Case("top_nested", "logs | top-nested 2 of service by c = count(), "
         "top-nested 1 of level by avg(latency_ms)",
         "WITH s AS (SELECT service, count(*) AS c FROM logs GROUP BY service "
         "ORDER BY c DESC, service LIMIT 2), l AS (SELECT service, level, avg(latency_ms) AS a, "
         "row_number() OVER (PARTITION BY service ORDER BY avg(latency_ms) DESC, level) AS rn "
         "FROM logs WHERE service IN (SELECT service FROM s) GROUP BY service, level) "
         "SELECT s.service, s.c, l.level, l.a AS aggregated_level FROM s JOIN l "
         "ON s.service = l.service WHERE l.rn = 1"),
    Case("top_nested_others", "logs | where level != 'info' | top-nested 3 of "
         "attrs.http.method with others = 'OTHER' by n = count()",
         "WITH g AS (SELECT get_json_object(attrs, '$.http.method') AS m, count(*) AS n "
         "FROM logs WHERE level <> 'info' GROUP BY 1), r AS (SELECT m, n, row_number() OVER "
         "(ORDER BY n DESC, m ASC NULLS FIRST) AS rn FROM g) SELECT m AS attrs_http_method, n "
         "FROM r WHERE rn <= 3 UNION ALL SELECT 'OTHER', sum(n) FROM r WHERE rn > 3"),
    Case("top_nested_all_values_asc", "teams | top-nested of team by t = sum(tier) asc, "
         "top-nested 1 of service with others = 'rest' by n = count()",
         "SELECT * FROM VALUES ('batch', 2L, 'worker', 1L), ('edge', 1L, 'api', 1L), "
         "('edge', 1L, 'rest', 1L), ('money', 3L, 'billing', 1L) AS v(team, t, service, n)",
         "SELECT * FROM (VALUES ('batch', 2, 'worker', 1), ('edge', 1, 'api', 1), "
         "('edge', 1, 'rest', 1), ('money', 3, 'billing', 1)) AS v(team, t, service, n)"),
    Case("make_series", "logs | where level == 'error' | make-series n = count() default = -1, "
         "avg(latency_ms) on _timestamp from datetime(2026-03-01 01:00) "
         "to datetime(2026-03-01 02:00) step 5m by service",
         "SELECT service, transform(sequence(0, 11), i -> coalesce(aggregate(filter(bins, "
         "x -> x.b = i), CAST(NULL AS BIGINT), (acc, x) -> x.c), -1)) AS n, "
         "transform(sequence(0, 11), i -> coalesce(aggregate(filter(bins, x -> x.b = i), "
         "CAST(NULL AS DOUBLE), (acc, x) -> x.a), 0)) AS avg_latency_ms, "
         f"transform(sequence(0, 11), i -> {ts(60)} + make_dt_interval(0, 0, i * 5)) "
         "AS _timestamp FROM (SELECT service, collect_list(struct(b, c, a)) AS bins FROM "
         f"(SELECT service, (unix_micros(_timestamp) - unix_micros({ts(60)})) DIV 300000000 "
         "AS b, count(*) AS c, avg(latency_ms) AS a FROM logs WHERE level = 'error' AND "
         f"_timestamp >= {ts(60)} AND _timestamp < {ts(120)} GROUP BY 1, 2) GROUP BY service)",
         "SELECT s.service, list(coalesce(x.c, -1) ORDER BY k.b) AS n, "
         "list(coalesce(x.a, 0) ORDER BY k.b) AS avg_latency_ms, "
         f"list({duck_ts(60)} + k.b * INTERVAL 5 MINUTE ORDER BY k.b) AS _timestamp "
         f"FROM (SELECT DISTINCT service FROM logs WHERE level = 'error' AND _timestamp >= "
         f"{duck_ts(60)} AND _timestamp < {duck_ts(120)}) s CROSS JOIN range(12) k(b) "
         "LEFT JOIN (SELECT service, (epoch_us(_timestamp) - epoch_us("
         f"{duck_ts(60)})) // 300000000 AS b, count(*) AS c, avg(latency_ms) AS a FROM logs "
         f"WHERE level = 'error' AND _timestamp >= {duck_ts(60)} AND _timestamp < "
         f"{duck_ts(120)} GROUP BY 1, 2) x ON x.service = s.service AND x.b = k.b "
         "GROUP BY s.service", local=False, ordered_lists=True),
    Case("summarize_expr_of_aggregates",
         "logs | summarize errors = countif(level == 'error'), n = count() by service "
         "| extend share = errors * 100 / n | project service, share",
         "SELECT service, count(CASE WHEN level = 'error' THEN 1 END) * 100 DIV count(*) AS "
         "share FROM logs GROUP BY service",
         "SELECT service, count(CASE WHEN level = 'error' THEN 1 END) * 100 // count(*) AS "
         "share FROM logs GROUP BY service"),
    Case("summarize_by_only", "logs | summarize by service, level",
         "SELECT DISTINCT service, level FROM logs"),
    # ---- order, limits, distinct, count ------------------------------------------------------
    Case("sort_default_desc", "teams | sort by tier | project service, tier",
         "SELECT service, tier FROM teams ORDER BY tier DESC", compare="order"),
    Case("sort_asc_nulls", "logs | where service == 'api' and level == 'warn' "
         "| sort by latency_ms asc nulls last, _timestamp asc | project latency_ms, _timestamp",
         "SELECT latency_ms, _timestamp FROM logs WHERE service = 'api' AND level = 'warn' "
         "ORDER BY latency_ms ASC NULLS LAST, _timestamp ASC", compare="order"),
    Case("top", "logs | top 5 by latency_ms | project latency_ms",
         "SELECT latency_ms FROM logs ORDER BY latency_ms DESC NULLS LAST LIMIT 5",
         compare="order"),
    Case("sort_then_project_keeps_order",
         "logs | where level == 'error' | sort by _timestamp asc | project message | take 7",
         "SELECT message FROM logs WHERE level = 'error' ORDER BY _timestamp LIMIT 7",
         compare="order"),
    Case("take", "logs | take 13", "SELECT * FROM logs LIMIT 13", compare="count"),
    Case("distinct", "logs | distinct service, level",
         "SELECT DISTINCT service, level FROM logs"),
    Case("count_after_where", "logs | where service == 'web' | count",
         "SELECT count(*) AS Count FROM logs WHERE service = 'web'"),
    Case("time_window_ago", "logs | where _timestamp > ago(1h) | count",
         f"SELECT count(*) AS Count FROM logs WHERE _timestamp > {ts(300)}",
         f"SELECT count(*) AS Count FROM logs WHERE _timestamp > {duck_ts(300)}"),
    Case("now_minus", "logs | where _timestamp <= now() - 5h and level == 'error' | count",
         f"SELECT count(*) AS Count FROM logs WHERE _timestamp <= {ts(60)} "
         "AND level = 'error'",
         f"SELECT count(*) AS Count FROM logs WHERE _timestamp <= {duck_ts(60)} "
         "AND level = 'error'"),
    # ---- let, union, join --------------------------------------------------------------------
    Case("let_scalar", "let cutoff = 1000; let lvl = 'warn'; logs | where latency_ms > cutoff "
         "and level == lvl | count",
         "SELECT count(*) AS Count FROM logs WHERE latency_ms > 1000 AND level = 'warn'"),
    Case("let_timespan", "let window = 90m; logs | where _timestamp > ago(window) "
         "| summarize c = count() by service",
         f"SELECT service, count(*) AS c FROM logs WHERE _timestamp > {ts(270)} "
         "GROUP BY service",
         f"SELECT service, count(*) AS c FROM logs WHERE _timestamp > {duck_ts(270)} "
         "GROUP BY service"),
    Case("let_tabular", "let errors = logs | where level == 'error'; errors "
         "| summarize c = count() by service",
         "SELECT service, count(*) AS c FROM logs WHERE level = 'error' GROUP BY service"),
    Case("union_same", "union teams, (teams | where tier > 1) | summarize c = count() "
         "by service",
         "SELECT service, count(*) AS c FROM (SELECT service FROM teams UNION ALL "
         "SELECT service FROM teams WHERE tier > 1) AS u GROUP BY service"),
    Case("union_by_name", "audit | union (teams | where tier == 0) | project service, action, "
         "team",
         "SELECT service, action, CAST(NULL AS STRING) AS team FROM audit UNION ALL "
         "SELECT service, CAST(NULL AS STRING) AS action, team FROM teams WHERE tier = 0",
         local=False),
    Case("join_inner", "logs | where level == 'error' | join kind=inner teams on service "
         "| summarize c = count() by team",
         "SELECT t.team, count(*) AS c FROM logs l JOIN teams t ON l.service = t.service "
         "WHERE l.level = 'error' GROUP BY t.team"),
    Case("join_leftouter", "logs | summarize n = count() by service "
         "| join kind=leftouter (teams | project service, team) on service "
         "| project service, n, team",
         "SELECT l.service, l.n, t.team FROM (SELECT service, count(*) AS n FROM logs "
         "GROUP BY service) l LEFT JOIN teams t ON l.service = t.service"),
    Case("join_left_right_keys", "audit | join kind=inner (teams | project svc = service, "
         "team) on $left.service == $right.svc | summarize c = count() by team, action",
         "SELECT t.team, a.action, count(*) AS c FROM audit a JOIN teams t "
         "ON a.service = t.service GROUP BY t.team, a.action"),
    Case("join_default_innerunique", "audit | join teams on service "
         "| summarize c = count() by team",
         "SELECT t.team, count(*) AS c FROM (SELECT DISTINCT service FROM audit) a "
         "JOIN teams t ON a.service = t.service GROUP BY t.team"),
    Case("union_withsource", "union withsource=src teams, audit | summarize c = count() "
         "by src",
         "SELECT 'teams' AS src, count(*) AS c FROM teams UNION ALL "
         "SELECT 'audit', count(*) FROM audit", local=False),
    Case("in_caseless", "logs | where level in~ ('ERROR', 'Warn') | count",
         "SELECT count(*) AS Count FROM logs WHERE lower(level) IN ('error', 'warn')"),
    Case("join_columns_named_1", "teams | join kind=inner (teams | where tier < 2) on service "
         "| project service, tier, tier1",
         "SELECT a.service, a.tier, b.tier AS tier1 FROM teams a JOIN teams b "
         "ON a.service = b.service WHERE b.tier < 2"),
    # ---- buckets, percentiles and everyday functions the embedded engine answers -----------
    Case("bin_30s", "logs | summarize c = count() by bin(_timestamp, 30s)",
         "SELECT timestamp_micros(unix_micros(_timestamp) - pmod(unix_micros(_timestamp), "
         "30000000)) AS _timestamp, count(*) AS c FROM logs GROUP BY 1",
         "SELECT time_bucket(INTERVAL 30 SECOND, _timestamp, TIMESTAMPTZ '1970-01-01 "
         "00:00:00+00') AS _timestamp, count(*) AS c FROM logs GROUP BY 1"),
    Case("bin_day_and_number", "logs | summarize c = count() by bin(_timestamp, 1d), "
         "b = bin(latency_ms, 250)",
         "SELECT date_trunc('DAY', _timestamp) AS _timestamp, latency_ms - pmod(latency_ms, 250) "
         "AS b, count(*) AS c FROM logs GROUP BY 1, 2"),
    Case("percentiles_ends", "logs | summarize percentiles(latency_ms, 0, 100) by level",
         "SELECT level, percentile_approx(latency_ms, 0.0, 1000000) AS percentile_latency_ms_0, "
         "percentile_approx(latency_ms, 1.0, 1000000) AS percentile_latency_ms_100 FROM logs "
         "GROUP BY level",
         "SELECT level, min(latency_ms) AS percentile_latency_ms_0, max(latency_ms) AS "
         "percentile_latency_ms_100 FROM logs GROUP BY level"),
    Case("upper_lower", "teams | project u = toupper(team), l = tolower(service)",
         "SELECT upper(team) AS u, lower(service) AS l FROM teams"),
    Case("extend_arithmetic_text_filters",
         "logs | where message startswith 'timeout' and service has 'api' "
         "| extend ms2 = latency_ms * 2 + 1 | project ms2",
         "SELECT latency_ms * 2 + 1 AS ms2 FROM logs WHERE lower(message) LIKE 'timeout%' "
         "AND has(service, 'api')"),
    Case("countif_since_ago", "logs | where _timestamp > ago(2h) "
         "| summarize n = countif(latency_ms > 1000) by service",
         f"SELECT service, count(CASE WHEN latency_ms > 1000 THEN 1 END) AS n FROM logs "
         f"WHERE _timestamp > {ts(240)} GROUP BY service",
         f"SELECT service, count(CASE WHEN latency_ms > 1000 THEN 1 END) AS n FROM logs "
         f"WHERE _timestamp > {duck_ts(240)} GROUP BY service"),
    Case("summarize_by_bin_then_top", "logs | where level == 'error' "
         "| summarize c = count() by service, bin(_timestamp, 2h) | top 3 by c",
         "SELECT service, timestamp_micros(unix_micros(_timestamp) - pmod(unix_micros("
         "_timestamp), 7200000000)) AS _timestamp, count(*) AS c FROM logs WHERE level = 'error' "
         "GROUP BY 1, 2 ORDER BY c DESC NULLS LAST LIMIT 3",
         "SELECT service, time_bucket(INTERVAL 2 HOUR, _timestamp, TIMESTAMPTZ '1970-01-01 "
         "00:00:00+00') AS _timestamp, count(*) AS c FROM logs WHERE level = 'error' "
         "GROUP BY 1, 2 ORDER BY c DESC NULLS LAST LIMIT 3", compare="count"),
    Case("tostring_numbers", "teams | project s = tostring(tier), "
         "x = tostring(toreal(tier) / 4), b = tostring(tier > 1)",
         "SELECT CAST(tier AS STRING) AS s, CAST(CAST(tier AS DOUBLE) / 4 AS STRING) AS x, "
         "CAST(tier > 1 AS STRING) AS b FROM teams",
         "SELECT CAST(tier AS VARCHAR) AS s, CAST(CAST(tier AS DOUBLE) / 4 AS VARCHAR) AS x, "
         "CAST(tier > 1 AS VARCHAR) AS b FROM teams"),
]
