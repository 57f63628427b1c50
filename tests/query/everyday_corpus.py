"""The everyday corpus: the statements people run against their logs every day (dashboards,
error rates per service, percentiles, time buckets, text filters, top-N per group, JSON
paths, casts, rounding, date formatting, conditional counts, string functions), in SQL and
in KQL, over one log table.

The table (`logs`) has the columns of the benchmarks' generated logs (bench/logdata.py):
`service`, `level`, `message`, `trace_id`, `status` (int), `duration_ms` (long) and a
dynamic `attrs` {"http": {"method", "route"}, "user": {"id"}}. `log_rows` makes a small one
(fixed seed, one row every 4 s from `T0`, nulls in every column but the timestamp, `attrs`
missing or partial on some rows); the benchmark runs the same statements over logdata's
rows, which start at the same instant.

Each `Statement` is its text, its language and whether its rows come in an order the
statement fixes (`ordered`; otherwise answers are compared as sorted rows). Statements are
written so that every engine's answer is fully determined (ties broken by `trace_id`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

from shoal.types import DYNAMIC, INT, LONG, STRING, Column

T0 = datetime.fromtimestamp(1_700_000_000, tz=UTC)      # bench/logdata.py's first row
SERVICES = [f"svc-{i}" for i in range(8)]
WORDS = ("request served cache miss hit user login token refresh payment declined timeout "
         "upstream retry connection reset handler queue worker shard replica commit").split()
LOG_COLUMNS = [Column("service", STRING), Column("level", STRING), Column("message", STRING),
               Column("trace_id", STRING), Column("status", INT), Column("duration_ms", LONG),
               Column("attrs", DYNAMIC)]
# The window of the "one service, 15 minutes" statements (inside both data sets).
WINDOW = ("2023-11-14 22:15:00", "2023-11-14 22:30:00")


def log_rows(n: int = 400, seed: int = 7) -> list[dict[str, Any]]:
    """`n` log lines as NDJSON documents (nulls included), one every 4 s from T0."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        ts = T0 + timedelta(seconds=4 * i)
        row: dict[str, Any] = {
            "_timestamp": ts.isoformat().replace("+00:00", "Z"),
            "service": None if i % 53 == 0 else rng.choice(SERVICES),
            "level": None if i % 41 == 0 else rng.choice(("info", "info", "info", "warn",
                                                            "error")),
            "message": None if i % 37 == 0 else " ".join(rng.choices(WORDS, k=6)),
            "trace_id": "%032x" % rng.getrandbits(128),
            "status": None if i % 29 == 0 else rng.choice((200, 200, 200, 201, 404, 500)),
            "duration_ms": None if i % 31 == 0 else rng.randint(1, 5000),
        }
        if i % 13 != 0:
            attrs: dict[str, Any] = {"http": {"method": rng.choice(("GET", "POST")),
                                              "route": f"/api/v1/{rng.choice(WORDS)}"}}
            if i % 5 != 0:
                attrs["user"] = {"id": rng.randint(1, 100_000)}
            row["attrs"] = attrs
        rows.append(row)
    return rows


@dataclass(frozen=True)
class Statement:
    id: str
    text: str
    lang: Literal["sql", "kql"] = "sql"
    ordered: bool = False


def sql(id: str, text: str, *, ordered: bool = False) -> Statement:
    return Statement(id, text, "sql", ordered)


def kql(id: str, text: str, *, ordered: bool = False) -> Statement:
    return Statement(id, text, "kql", ordered)


LO, HI = (f"TIMESTAMP '{w}'" for w in WINDOW)
K_LO, K_HI = (f"datetime({w})" for w in WINDOW)

# The named benchmark target: one service, 15 minutes, count / avg / p95.
ONE_SERVICE_15M = "one_service_15m_count_avg_p95"

STATEMENTS: list[Statement] = [
    # ---- dashboards: counts and error rates ---------------------------------------------
    sql("count_all", "SELECT count(*) AS n FROM logs"),
    sql("count_by_service", "SELECT service, count(*) AS n FROM logs GROUP BY service"),
    sql("count_by_level_ordered", "SELECT level, count(*) AS n FROM logs GROUP BY level "
        "ORDER BY n DESC, level", ordered=True),
    sql("error_rate_per_service",
        "SELECT service, count(*) AS total, count_if(level = 'error') AS errors, "
        "round(100.0 * count_if(level = 'error') / count(*), 2) AS error_pct "
        "FROM logs GROUP BY service ORDER BY error_pct DESC, service", ordered=True),
    sql("filter_5xx_per_service",
        "SELECT service, count(*) FILTER (WHERE status >= 500) AS e5xx, count(*) AS n "
        "FROM logs GROUP BY service"),
    sql("status_classes",
        "SELECT CAST(floor(status / 100) AS INT) AS class, count(*) AS n FROM logs "
        "GROUP BY 1"),
    sql("having_busy_services", "SELECT service, count(*) AS n FROM logs GROUP BY service "
        "HAVING count(*) > 20"),
    sql("distinct_services", "SELECT count(DISTINCT service) AS services FROM logs"),
    sql("first_last_seen", "SELECT min(_timestamp) AS first_seen, max(_timestamp) AS last_seen "
        "FROM logs"),
    sql("top_services", "SELECT service, count(*) AS n FROM logs GROUP BY service "
        "ORDER BY n DESC, service LIMIT 5", ordered=True),
    sql("avg_filter_errors",
        "SELECT service, avg(duration_ms) FILTER (WHERE level = 'error') AS err_ms, "
        "avg(duration_ms) AS all_ms FROM logs GROUP BY service"),
    # ---- percentiles ---------------------------------------------------------------------
    sql("p50_p95_p99_per_service",
        "SELECT service, percentile_approx(duration_ms, 0.5) AS p50, "
        "percentile_approx(duration_ms, 0.95) AS p95, "
        "percentile_approx(duration_ms, 0.99) AS p99 FROM logs GROUP BY service"),
    sql("p95_exact", "SELECT percentile(duration_ms, 0.95) AS p95 FROM logs"),
    sql("median", "SELECT median(duration_ms) AS p50 FROM logs"),
    sql("p95_exact_per_level", "SELECT level, percentile(duration_ms, 0.95) AS p95, "
        "percentile(status, 0.5) FILTER (WHERE service = 'svc-1') AS svc1_status FROM logs "
        "GROUP BY level"),
    # ---- spread and distinct counts (a variance agrees with Spark to 1e-12, not bit for bit;
    # approx_count_distinct is the exact count here, an estimate in Spark) -----------------
    sql("latency_spread_per_service",
        "SELECT service, stddev(duration_ms) AS sd, variance(duration_ms) AS var, "
        "stddev_pop(duration_ms) AS sd_pop FROM logs GROUP BY service"),
    sql("distinct_services_approx", "SELECT approx_count_distinct(service) AS services, "
        "approx_count_distinct(level) AS levels FROM logs"),
    sql(ONE_SERVICE_15M,
        "SELECT count(*) AS n, avg(duration_ms) AS avg_ms, "
        "percentile_approx(duration_ms, 0.95) AS p95 FROM logs "
        f"WHERE service = 'svc-3' AND _timestamp >= {LO} AND _timestamp < {HI}"),
    # ---- time buckets --------------------------------------------------------------------
    sql("bucket_1m", "SELECT date_trunc('minute', _timestamp) AS minute, count(*) AS n "
        "FROM logs GROUP BY 1 ORDER BY 1", ordered=True),
    sql("bucket_5m",
        "SELECT timestamp_seconds(floor(unix_seconds(_timestamp) / 300) * 300) AS bucket, "
        "count(*) AS n, avg(duration_ms) AS avg_ms FROM logs GROUP BY 1 ORDER BY 1",
        ordered=True),
    sql("bucket_1h_by_service", "SELECT date_trunc('hour', _timestamp) AS hour, service, "
        "count(*) AS n FROM logs GROUP BY 1, 2"),
    sql("per_day", "SELECT to_date(_timestamp) AS day, count(*) AS n FROM logs GROUP BY 1"),
    sql("date_format_minute", "SELECT date_format(_timestamp, 'yyyy-MM-dd HH:mm') AS minute, "
        "count(*) AS n FROM logs GROUP BY 1 ORDER BY 1", ordered=True),
    sql("hour_of_day", "SELECT hour(_timestamp) AS h, count(*) AS n FROM logs GROUP BY 1"),
    sql("errors_per_minute_window",
        "SELECT date_trunc('minute', _timestamp) AS minute, count(*) AS errors FROM logs "
        f"WHERE level = 'error' AND _timestamp >= {LO} AND _timestamp < {HI} "
        "GROUP BY 1 ORDER BY 1", ordered=True),
    sql("per_minute_delta",
        "SELECT minute, n, n - lag(n) OVER (ORDER BY minute) AS delta FROM "
        "(SELECT date_trunc('minute', _timestamp) AS minute, count(*) AS n FROM logs "
        "GROUP BY 1) ORDER BY minute", ordered=True),
    sql("running_total",
        "SELECT minute, sum(n) OVER (ORDER BY minute) AS running FROM "
        "(SELECT date_trunc('minute', _timestamp) AS minute, count(*) AS n FROM logs "
        "GROUP BY 1) ORDER BY minute", ordered=True),
    sql("epoch_seconds", "SELECT unix_seconds(min(_timestamp)) AS first_s FROM logs"),
    # ---- text filters --------------------------------------------------------------------
    sql("like", "SELECT count(*) AS n FROM logs WHERE message LIKE '%timeout%'"),
    sql("ilike", "SELECT service, count(*) AS n FROM logs WHERE message ILIKE '%TIMEOUT%' "
        "GROUP BY service"),
    sql("not_like", "SELECT level, count(*) AS n FROM logs WHERE message NOT LIKE 'cache%' "
        "GROUP BY level"),
    sql("rlike", "SELECT count(*) AS n FROM logs WHERE message RLIKE 'payment (declined|retry)'"),
    sql("has_token", "SELECT service, count(*) AS n FROM logs WHERE has(message, 'timeout') "
        "GROUP BY service"),
    sql("startswith", "SELECT count(*) AS n FROM logs WHERE startswith(message, 'cache')"),
    sql("in_list", "SELECT count(*) AS n FROM logs "
        "WHERE service IN ('svc-1', 'svc-2', 'svc-3')"),
    sql("between_durations", "SELECT count(*) AS n FROM logs "
        "WHERE duration_ms BETWEEN 100 AND 500"),
    sql("is_null", "SELECT count(*) AS n FROM logs WHERE status IS NULL"),
    sql("trace_prefix", "SELECT count(*) AS n FROM logs WHERE trace_id LIKE 'ab%'"),
    # ---- top-N per group -----------------------------------------------------------------
    sql("top3_slowest_per_service",
        "SELECT service, trace_id, duration_ms FROM (SELECT service, trace_id, duration_ms, "
        "row_number() OVER (PARTITION BY service ORDER BY duration_ms DESC, trace_id) AS rk "
        "FROM logs WHERE duration_ms IS NOT NULL) WHERE rk <= 3"),
    sql("qualify_slowest_per_service",
        "SELECT service, trace_id, duration_ms FROM logs WHERE duration_ms IS NOT NULL "
        "QUALIFY row_number() OVER (PARTITION BY service ORDER BY duration_ms DESC, "
        "trace_id) = 1"),
    sql("rank_services", "SELECT service, n, rank() OVER (ORDER BY n DESC) AS r FROM "
        "(SELECT service, count(*) AS n FROM logs GROUP BY service)"),
    sql("latest_error_trace", "SELECT service, max_by(trace_id, _timestamp) AS last_trace "
        "FROM logs WHERE level = 'error' GROUP BY service"),
    sql("recent_errors", "SELECT _timestamp, service, message FROM logs WHERE level = 'error' "
        "ORDER BY _timestamp DESC, trace_id LIMIT 20", ordered=True),
    sql("errors_joined_to_totals",
        "WITH errs AS (SELECT service, count(*) AS e FROM logs WHERE level = 'error' "
        "GROUP BY service) SELECT l.service, errs.e, count(*) AS n FROM logs l "
        "JOIN errs ON l.service = errs.service GROUP BY l.service, errs.e"),
    # ---- JSON paths into attrs -----------------------------------------------------------
    sql("json_method", "SELECT get_json_object(attrs, '$.http.method') AS method, "
        "count(*) AS n FROM logs GROUP BY 1"),
    sql("json_route_filter", "SELECT count(*) AS n FROM logs "
        "WHERE get_json_object(attrs, '$.http.route') = '/api/v1/payment'"),
    sql("json_cast_user", "SELECT max(CAST(get_json_object(attrs, '$.user.id') AS BIGINT)) "
        "AS max_user FROM logs"),
    sql("json_missing", "SELECT count(*) AS n FROM logs "
        "WHERE get_json_object(attrs, '$.user.id') IS NULL"),
    # ---- casts, rounding, conditionals, null handling ------------------------------------
    sql("cast_status_string", "SELECT CAST(status AS STRING) AS status, count(*) AS n "
        "FROM logs GROUP BY 1"),
    sql("avg_seconds_rounded", "SELECT round(avg(duration_ms) / 1000.0, 3) AS avg_s FROM logs"),
    sql("round_avg_per_level", "SELECT level, round(avg(duration_ms), 1) AS avg_ms FROM logs "
        "GROUP BY level"),
    sql("floor_seconds", "SELECT floor(duration_ms / 1000) AS secs, count(*) AS n FROM logs "
        "GROUP BY 1"),
    sql("case_speed", "SELECT CASE WHEN duration_ms < 100 THEN 'fast' "
        "WHEN duration_ms < 1000 THEN 'ok' ELSE 'slow' END AS speed, count(*) AS n "
        "FROM logs GROUP BY 1"),
    sql("coalesce_level", "SELECT coalesce(level, 'unknown') AS level, count(*) AS n "
        "FROM logs GROUP BY 1"),
    sql("nvl_status", "SELECT nvl(status, 0) AS status, count(*) AS n FROM logs GROUP BY 1"),
    sql("if_slow", "SELECT service, sum(if(duration_ms > 1000, 1, 0)) AS slow FROM logs "
        "GROUP BY service"),
    # ---- string functions ----------------------------------------------------------------
    sql("upper_level", "SELECT upper(level) AS level, count(*) AS n FROM logs GROUP BY 1"),
    sql("concat_key", "SELECT concat(service, ':', level) AS k, count(*) AS n FROM logs "
        "GROUP BY 1"),
    sql("substring_prefix", "SELECT substring(trace_id, 1, 1) AS prefix, count(*) AS n "
        "FROM logs GROUP BY 1"),
    sql("length_range", "SELECT max(length(message)) AS longest, min(length(message)) "
        "AS shortest FROM logs"),
    sql("split_first_word", "SELECT split(message, ' ')[0] AS first_word, count(*) AS n "
        "FROM logs GROUP BY 1"),
    sql("regexp_extract_word", "SELECT regexp_extract(message, '(timeout|retry)', 1) AS w, "
        "count(*) AS n FROM logs GROUP BY 1"),
    sql("replace_service", "SELECT count(DISTINCT replace(service, 'svc-', '')) AS n "
        "FROM logs"),
    sql("lower_trim", "SELECT lower(trim(level)) AS level, count(*) AS n FROM logs "
        "GROUP BY 1"),
    # ---- KQL -----------------------------------------------------------------------------
    kql("kql_count_by_service", "logs | summarize n = count() by service"),
    kql("kql_errors_ordered", "logs | where level == 'error' | summarize errors = count() "
        "by service | order by errors desc, service asc", ordered=True),
    kql("kql_error_rate", "logs | summarize errors = countif(level == 'error'), "
        "total = count() by service | extend rate = round(100.0 * errors / total, 2)"),
    kql("kql_percentiles", "logs | summarize percentiles(duration_ms, 50, 95, 99) by service"),
    kql("kql_bin_1m", "logs | summarize n = count() by bin(_timestamp, 1m) "
        "| order by _timestamp asc", ordered=True),
    kql("kql_bin_5m_level", "logs | summarize n = count() by bin(_timestamp, 5m), level"),
    kql("kql_bin_1h", "logs | summarize n = count() by bin(_timestamp, 1h)"),
    kql("kql_bin_1d", "logs | summarize n = count() by bin(_timestamp, 1d)"),
    kql("kql_has", "logs | where message has 'timeout' | count"),
    kql("kql_contains", "logs | where message contains 'PAYMENT' "
        "| summarize n = count() by level"),
    kql("kql_regex", "logs | where message matches regex 'payment (declined|retry)' | count"),
    kql("kql_slowest", "logs | where isnotnull(duration_ms) | sort by duration_ms desc, "
        "trace_id asc | take 5 | project service, trace_id, duration_ms", ordered=True),
    kql("kql_json_method", "logs | where attrs.http.method == 'POST' "
        "| summarize n = count() by service"),
    kql("kql_json_route", "logs | extend route = tostring(attrs.http.route) "
        "| summarize n = count() by route"),
    kql("kql_one_service_15m", "logs | where service == 'svc-3' and _timestamp between "
        f"({K_LO} .. {K_HI}) | summarize n = count(), avg_ms = avg(duration_ms), "
        "p95 = percentile(duration_ms, 95)"),
    kql("kql_dcount", "logs | summarize dcount(service)"),
    kql("kql_format_hour", "logs | summarize n = count() by "
        "hour = format_datetime(_timestamp, 'yyyy-MM-dd HH')"),
    kql("kql_isnull", "logs | where isnull(status) | count"),
]
