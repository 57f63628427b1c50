"""Configuration: defaults, then a TOML file, then `SHOAL_*` variables, then flags.

Loaded once at the edge (CLI, server) and passed down. This module is the only reader of
`SHOAL_*` variables: `load_config` at the edge, and `setting_from_env` for the one low-level
fallback that has no `Config` at hand (`shoal.storage.open_store`'s S3 endpoint, for a
store opened from a bare URL). Variables that are not shoal's are read or set where they
belong and are documented there: `AWS_*` credentials and region (`shoal.storage`),
`SPARK_HOME` / `SPARK_CONF_DIR` (`shoal.query.spark.cluster`), `PYSPARK_PYTHON`,
`PYSPARK_DRIVER_PYTHON` and `SPARK_LOCAL_IP`, which the Spark launcher sets for itself
(`shoal.query.spark.session`), and the allocator and BLAS knobs `shoal.native` sets before
pyarrow loads.
Defaults give the embedded single-machine setup: everything under `./shoal-data` (SQLite
catalog `catalog.db`, extents under `objects/`, Spark `local[*]`).

File keys are the variable names without the prefix, lower-cased (`catalog_url = "..."`).
The file is `--config`, else `SHOAL_CONFIG`, else `./shoal.toml` if it exists.

Spark settings pass through untouched: the file's `[spark]` table
(`"spark.executor.memory" = "4g"`) and `SHOAL_SPARK_CONF` (`key=value` pairs separated by
`;` or newlines; its keys win over the file's). They win over shoal's own Spark defaults
(`shoal.query.spark.cluster`), which apply only where neither these nor `spark-defaults.conf` set
a key.

Every setting has a one-line description in `SETTINGS`; docs/configuration.md holds the
table `python -m shoal.config --markdown` prints (`--update docs/configuration.md` rewrites
it in place), and a test keeps the two equal.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any, Literal

from shoal.errors import ConfigError

ENV_PREFIX = "SHOAL_"


@dataclass(frozen=True)
class Config:
    data_dir: str = "./shoal-data"
    catalog_url: str | None = None     # default: sqlite:///<data_dir>/catalog.db
    storage_url: str | None = None     # default: file://<data_dir>/objects
    s3_endpoint: str | None = None
    spark_master: str = "local[*]"
    host: str = "127.0.0.1"
    port: int = 8720
    tokens: str | None = None          # "token=scope1,scope2;token2=scope"
    tokens_file: str | None = None
    # OTLP (docs/otlp.md): the gRPC port (0 = off; unset: the default port, served only if
    # it is free, see `listener_port`) and the standard tables, made on first use.
    otlp_grpc_port: int | None = None
    otlp_grpc_default_port: int = 4317
    otlp_logs_table: str = "otel_logs"
    otlp_spans_table: str = "otel_spans"
    otlp_metrics_table: str = "otel_metrics"
    # Prometheus: where remote write and scrape jobs land samples and metadata
    # (layout: shoal.types.prometheus), made on first use.
    prometheus_table: str = "prom_samples"
    prometheus_metadata_table: str = "prom_metadata"
    # Sentry SDK ingest: the table events and transactions land in, made on first use.
    sentry_table: str = "sentry_events"
    # PromQL: Prometheus's --query.lookback-delta and --query.max-samples.
    promql_lookback_s: float = 300.0
    promql_max_samples: int = 50_000_000
    # How OTLP metrics appear to PromQL: under an `otel_` prefix, as they are, or not at all.
    promql_otlp_metrics: str = "prefixed"
    # Arrow Flight SQL: its port (0 = off; unset: the default port if it is free) and, for
    # grpc+tls, PEM cert and key.
    flight_port: int | None = None
    flight_default_port: int = 8815
    flight_tls_cert: str | None = None
    flight_tls_key: str | None = None
    # Kafka (docs/kafka.md): bootstrap servers for pipelines whose table binding names none.
    kafka_bootstrap: str | None = None
    # `shoal serve` runs the maintenance scheduler + a worker, and the Kafka pipelines of
    # bound tables (SHOAL_MAINTENANCE / SHOAL_PIPELINES = false to leave them to others).
    maintenance: bool = True
    pipelines: bool = True
    # Where bound pipelines may read from or connect to (docs/security.md): comma-separated
    # directories / `s3://bucket/prefix` prefixes (the data directory is always allowed) and
    # `host` or `host:port` entries (none by default). The operator's own flags and
    # configuration (e.g. `--path`, SHOAL_KAFKA_BOOTSTRAP) are trusted as they are.
    allowed_paths: str | None = None
    allowed_hosts: str | None = None
    # The HTTP edge: extra names the server answers to in `Host` (loopback names always),
    # and origins granted CORS (none by default: a browser page elsewhere gets nothing).
    http_hosts: str | None = None
    cors_origins: str | None = None
    # Bounded cost of a request: query wall time, result rows and bytes, queries running at
    # once (more get 429 + Retry-After), and the time a client may take to send a body.
    query_timeout_s: float = 300.0
    query_max_rows: int = 1_000_000
    query_max_bytes: int = 256 << 20
    query_concurrency: int = 4
    body_timeout_s: float = 60.0
    # Fairness: the slots one client (its token, or its address without tokens) may hold
    # (0: all but one), and how long a Flight SQL stream may hold its slot while its client
    # reads nothing before it is cancelled.
    query_concurrency_per_client: int = 0
    flight_idle_timeout_s: float = 30.0
    # The time a client may take to send a request's line and headers (the connection is
    # closed after it), and how long `shoal serve` lets in-flight requests finish after
    # SIGTERM before it cancels them and stops.
    header_timeout_s: float = 20.0
    shutdown_timeout_s: float = 30.0
    # Which engine answers a SELECT (docs/sql.md): `auto` runs it in process (the embedded
    # engine) when it is vetted identical to Spark, Spark is not a bigger cluster, and its
    # pruned scans' projected columns take at most `local_scan_max_bytes` (a bound on the
    # work, not on memory: the engine streams its inputs and spills); `local` / `spark` force.
    # `local_query_max_bytes` / SHOAL_LOCAL_QUERY_MAX_BYTES, its former name, still sets it.
    query_engine: str = "auto"
    local_scan_max_bytes: int = 8 << 30
    # Whether extents written by ingest get hidden sub-columns of their dynamic columns'
    # common JSON paths (docs/storage.md): path queries read them instead of parsing JSON,
    # at the cost of the writer parsing every value once more. Compaction always writes them.
    shred_on_write: bool = False
    # The memory one embedded-engine query may take (DuckDB's `memory_limit` for its
    # database; its inputs stream through it). Past it, DuckDB spills to the data
    # directory's scratch area, up to `local_query_spill_bytes`; past that it is answered by
    # Spark (`auto`) or refused with 400 `query_memory_exceeded` (`local`). 0: no spilling.
    local_query_memory: int = 512 << 20
    local_query_spill_bytes: int = 4 << 30
    # `shoal serve` coerces NDJSON bodies in this many worker processes
    # (`shoal.ingest.pool`); 0: in the server process. 0 by default: on the 2-core machines
    # measured, the pool cost as much CPU as it freed (BENCHMARKS.md, REST on every core).
    coerce_workers: int = 0

    # Spark: settings passed through to Spark as they are ([spark] table /
    # SHOAL_SPARK_CONF), and how long a non-local session may take to show that an executor
    # runs shoal and reaches the catalog and store (`shoal.query.spark.cluster`).
    spark_conf: tuple[tuple[str, str], ...] = ()
    spark_start_timeout_s: float = 180.0
    # `spark.driver.memory` of the sessions shoal starts, unless set by the user.
    spark_driver_memory: str = "2g"
    # A running server the CLI and `shoal.connect(url=...)` talk to instead of the data
    # directory (`shoal.remote`), and the bearer token they send it.
    url: str | None = None
    token: str | None = None

    @property
    def spark_settings(self) -> dict[str, str]:
        return dict(self.spark_conf)

    @property
    def data_path(self) -> Path:
        return Path(self.data_dir).expanduser().resolve()

    @property
    def resolved_catalog_url(self) -> str:
        return self.catalog_url or f"sqlite:///{self.data_path / 'catalog.db'}"

    @property
    def resolved_storage_url(self) -> str:
        return self.storage_url or (self.data_path / "objects").as_uri()

    def listener_port(self, listener: Literal["otlp_grpc", "flight"]) -> tuple[int, bool]:
        """(port, required) of an extra listener of `shoal serve`: a port set by the config
        file, a variable or a flag is required (taken: the server does not start); unset,
        the default port is served if it is free, and a taken one is a warning (the
        server serves the rest). Port 0: off."""
        port = getattr(self, f"{listener}_port")
        if port is not None:
            return port, True
        return getattr(self, f"{listener}_default_port"), False

    def ensure_data_dir(self) -> None:
        if self.catalog_url is None or self.storage_url is None:
            self.data_path.mkdir(parents=True, exist_ok=True)

    def require_data_dir(self) -> None:
        """Fail, naming it, when the data directory that holds the catalog or the objects
        does not exist (for the commands that must not make one)."""
        if (self.catalog_url is None or self.storage_url is None) \
                and not self.data_path.is_dir():
            from shoal.errors import DataDirNotFoundError

            raise DataDirNotFoundError(str(self.data_path))


_FIELDS = {f.name: f for f in fields(Config)}
_INT_FIELDS = frozenset({"port", "otlp_grpc_port", "flight_port", "otlp_grpc_default_port",
                         "flight_default_port", "query_max_rows",
                         "query_max_bytes", "query_concurrency", "local_scan_max_bytes",
                         "local_query_spill_bytes",
                         "query_concurrency_per_client",
                         "local_query_memory",
                         "promql_max_samples", "coerce_workers"})
QUERY_ENGINES = ("auto", "local", "spark")
PROMQL_OTLP_MODES = ("prefixed", "bare", "off")
# Former names still accepted (file key, SHOAL_ variable, flag) -> the setting they set.
RENAMED = {"local_query_max_bytes": "local_scan_max_bytes"}
_FLOAT_FIELDS = frozenset({"query_timeout_s", "body_timeout_s", "promql_lookback_s",
                           "flight_idle_timeout_s", "header_timeout_s",
                           "shutdown_timeout_s", "spark_start_timeout_s"})
_BOOL_FIELDS = frozenset({"maintenance", "pipelines", "shred_on_write"})
_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


def parse_spark_conf(text: str) -> dict[str, str]:
    """`key=value` pairs separated by `;` or newlines (SHOAL_SPARK_CONF)."""
    out: dict[str, str] = {}
    for item in re.split(r"[;\n]", text):
        if not item.strip():
            continue
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"SHOAL_SPARK_CONF: expected key=value, got {item.strip()!r}")
        out[key.strip()] = value.strip()
    return out


def _spark_table(path: str, value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError(f"config file {path}: [spark] must be a table of Spark settings")
    out: dict[str, str] = {}
    for key, item in value.items():
        if isinstance(item, dict):      # dotted keys written bare: spark.executor.memory = ..
            out.update({f"{key}.{k}": v for k, v in _spark_table(path, item).items()})
        elif isinstance(item, bool):
            out[key] = "true" if item else "false"
        else:
            out[key] = str(item)
    return out


def _coerce(name: str, value: Any) -> Any:
    if value is None:
        return None
    if name == "spark_conf":
        if isinstance(value, str):
            value = parse_spark_conf(value)
        return tuple(sorted(dict(value).items()))
    if name in _BOOL_FIELDS:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        raise ConfigError(f"{name} must be true or false, got {value!r}")
    if name in _FLOAT_FIELDS:
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be a number, got {value!r}") from None
        if not number > 0:
            raise ConfigError(f"{name} must be positive, got {value!r}")
        return number
    if name in _INT_FIELDS:
        try:
            return int(value)
        except (TypeError, ValueError):
            raise ConfigError(f"{name} must be an integer, got {value!r}") from None
    if name == "promql_otlp_metrics":
        text = str(value).strip().lower()
        if text not in PROMQL_OTLP_MODES:
            raise ConfigError(f"promql_otlp_metrics must be one of "
                              f"{', '.join(PROMQL_OTLP_MODES)}, got {value!r}")
        return text
    if name == "query_engine":
        text = str(value).strip().lower()
        if text not in QUERY_ENGINES:
            raise ConfigError(f"query_engine must be one of {', '.join(QUERY_ENGINES)}, "
                              f"got {value!r}")
        return text
    return str(value)


def load_config(*, config_file: str | None = None, env: Mapping[str, str] | None = None,
                **flags: Any) -> Config:
    """Build the configuration; `flags` set to None are ignored."""
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    path = config_file or env.get(ENV_PREFIX + "CONFIG")
    if path is None and Path("shoal.toml").is_file():
        path = "shoal.toml"
    if path is not None:
        try:
            with open(path, "rb") as f:
                doc = tomllib.load(f)
        except FileNotFoundError:
            raise ConfigError(f"config file not found: {path}") from None
        except tomllib.TOMLDecodeError as e:
            raise ConfigError(f"config file {path}: {e}") from None
        for key, value in doc.items():
            if key == "spark":
                values["spark_conf"] = _spark_table(path, value)
                continue
            key = RENAMED.get(key, key)
            if key not in _FIELDS:
                raise ConfigError(f"config file {path}: unknown key {key!r}")
            values[key] = _coerce(key, value)
    spark = dict(values.pop("spark_conf", {}))
    for old, name in RENAMED.items():     # the former name; the current one wins below
        var = ENV_PREFIX + old.upper()
        if env.get(var):
            values[name] = _coerce(name, env[var])
    for name in _FIELDS:
        var = ENV_PREFIX + name.upper()
        if var in env and env[var] != "":
            if name == "spark_conf":
                spark.update(parse_spark_conf(env[var]))
            else:
                values[name] = _coerce(name, env[var])
    if spark:
        values["spark_conf"] = _coerce("spark_conf", spark)
    for name, value in flags.items():
        name = RENAMED.get(name, name)
        if name not in _FIELDS:
            raise TypeError(f"unknown configuration flag {name!r}")
        if value is not None:
            values[name] = _coerce(name, value)
    return replace(Config(), **values)


def setting_from_env(name: str, env: Mapping[str, str] | None = None) -> Any:
    """One setting's value from `SHOAL_<NAME>` (None when unset or empty), parsed as
    `load_config` parses it: for code below the edge that has no `Config` at hand."""
    if name not in _FIELDS:
        raise TypeError(f"unknown configuration setting {name!r}")
    env = os.environ if env is None else env
    text = env.get(ENV_PREFIX + name.upper())
    return None if not text else _coerce(name, text)


# One line per setting for docs/configuration.md (Markdown; links relative to docs/). A new
# field of `Config` needs its line here: the docs test fails without it.
SETTINGS: dict[str, str] = {
    "data_dir": "Data directory: the SQLite catalog and local objects live under it unless "
                "`catalog_url` / `storage_url` say otherwise (`--data-dir`).",
    "catalog_url": "The catalog database: SQLite, or `postgresql://user@host:5432/db` for "
                   "several processes or machines.",
    "storage_url": "The object store of extents: a directory, `file:///abs/dir`, or "
                   "`s3://bucket/prefix`.",
    "s3_endpoint": "An S3-compatible server, e.g. `http://127.0.0.1:9000`; credentials and "
                   "region from `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`.",
    "spark_master": "Spark master: `local[*]` in process, or a cluster "
                    "([deployment](deployment.md#on-a-spark-cluster)).",
    "host": "Address `shoal serve` binds (`--host`); beyond loopback it needs tokens.",
    "port": "HTTP port of `shoal serve` (`--port`).",
    "tokens": "Bearer tokens and their scopes, `tok1=ingest,query;tok2=admin`; with no "
              "token only loopback clients are served ([security](security.md)).",
    "url": "A running `shoal serve` (`http://host:8720`) that the CLI and "
           "`shoal.connect(url=...)` send their work to instead of opening the data "
           "directory (`--url`; [CLI](cli.md#talking-to-a-server)).",
    "token": "The bearer token the CLI and Python client send to `url` (`--token`).",
    "tokens_file": "A file of tokens, one `token scope,scope` per line (`#` comments).",
    "otlp_grpc_port": "OTLP/gRPC port of `shoal serve` (`--otlp-grpc-port`); 0 = off. Set, "
                      "a taken port stops the server; unset, see the next line.",
    "otlp_grpc_default_port": "OTLP/gRPC port when `otlp_grpc_port` is unset: served if "
                              "free, else a warning in the log and in `/readyz` "
                              "([deployment](deployment.md#extra-listeners)).",
    "otlp_logs_table": "Table OTLP logs land in, made on first use ([OTLP](otlp.md)).",
    "otlp_spans_table": "Table OTLP spans land in, made on first use.",
    "otlp_metrics_table": "Table OTLP metrics land in, made on first use.",
    "prometheus_table": "Table remote write and scrape jobs land samples in, made on first "
                        "use ([Prometheus](prometheus.md)).",
    "prometheus_metadata_table": "Table of metric metadata (type, help, unit), made on "
                                 "first use.",
    "sentry_table": "Table the Sentry SDK endpoints write events and transactions into, "
                    "made on first use ([Sentry](sentry.md)).",
    "promql_lookback_s": "PromQL lookback delta, as Prometheus's `--query.lookback-delta`.",
    "promql_max_samples": "Most samples one PromQL query may load, as Prometheus's "
                          "`--query.max-samples`.",
    "promql_otlp_metrics": "OTLP metrics in PromQL: `prefixed` (as `otel_<name>`, apart from "
                           "Prometheus's own series), `bare` (Prometheus's OTLP names, "
                           "sharing its namespace) or `off` ([Prometheus](prometheus.md)).",
    "flight_port": "Arrow Flight SQL port of `shoal serve` (`--flight-port`); 0 = off. Set, "
                   "a taken port stops the server; unset, see the next line.",
    "flight_default_port": "Flight SQL port when `flight_port` is unset: served if free, "
                           "else a warning in the log and in `/readyz` "
                           "([deployment](deployment.md#extra-listeners)).",
    "flight_tls_cert": "PEM certificate for Flight SQL; with the key, `grpc+tls` instead "
                       "of plaintext `grpc+tcp`.",
    "flight_tls_key": "PEM private key for Flight SQL, with `flight_tls_cert`.",
    "kafka_bootstrap": "Kafka bootstrap servers for bound tables whose binding names none "
                       "([Kafka](kafka.md)).",
    "maintenance": "`shoal serve` runs the maintenance scheduler and a worker; `false` "
                   "leaves maintenance to `shoal maintain`.",
    "pipelines": "`shoal serve` runs the pipelines bound to tables (Kafka, file-drop, "
                 "scrape); `false` leaves them to `shoal pipeline`.",
    "allowed_paths": "Directories and `s3://bucket/prefix` prefixes bound pipelines may "
                     "read besides the data directory, comma-separated.",
    "allowed_hosts": "`host` or `host:port` entries bound pipelines and scrape jobs may "
                     "connect to, comma-separated.",
    "http_hosts": "Names the server answers to in `Host` besides the loopback names, "
                  "comma-separated.",
    "cors_origins": "Origins granted CORS, comma-separated; none: a page elsewhere gets "
                    "nothing.",
    "query_timeout_s": "Wall time a query may run before it is cancelled.",
    "query_max_rows": "Most rows one answer holds; the rest is cut and the stats say so.",
    "query_max_bytes": "Most bytes of Arrow data one answer holds.",
    "query_concurrency": "Queries running at once; more get 429 with `Retry-After`.",
    "body_timeout_s": "Time a client may take to send a request body.",
    "query_concurrency_per_client": "Query slots one client (its token, or its address "
                                    "without tokens) may hold; 0 = all but one of "
                                    "`query_concurrency` (at least 1).",
    "flight_idle_timeout_s": "A Flight SQL stream whose client reads nothing this long is "
                             "cancelled and frees its query slot.",
    "header_timeout_s": "Time a client may take to send a request's line and headers; the "
                        "connection is closed after it.",
    "shutdown_timeout_s": "Time `shoal serve` lets in-flight requests finish after SIGTERM "
                          "before it cancels them.",
    "query_engine": "Which engine answers a SELECT: `auto` (in process when vetted identical "
                    "to Spark and small enough), `local` or `spark` "
                    "([SQL](sql.md#two-engines-embedded-duckdb-and-spark)).",
    "local_scan_max_bytes": "Most stored bytes of the projected columns of pruned scans "
                            "`auto` runs in process (a bound on the work, not memory); "
                            "`SHOAL_LOCAL_QUERY_MAX_BYTES`, its former name, still sets it "
                            "([SQL](sql.md#two-engines-embedded-duckdb-and-spark)).",
    "shred_on_write": "Ingest writes the common JSON paths of `dynamic` columns as hidden "
                      "sub-columns too (path queries read them; ingest parses each value "
                      "once more); compaction writes them whatever this says "
                      "([storage](storage.md#shredded-paths-of-dynamic-columns)).",
    "local_query_memory": "Memory one embedded-engine query may take (DuckDB's working "
                          "memory; its inputs stream through it); past it the query spills "
                          "to disk.",
    "local_query_spill_bytes": "Most bytes one embedded-engine query may spill under the "
                               "data directory's `scratch/`; past it `auto` runs Spark, "
                               "`local` answers 400 `query_memory_exceeded`; 0: no "
                               "spilling.",
    "coerce_workers": "Processes `shoal serve` coerces NDJSON bodies in "
                      "(`--coerce-workers`); 0 = in the server process "
                      "([deployment](deployment.md#coercion-workers)).",
    "spark_conf": "Spark settings passed through as they are, `key=value;key=value` (or the "
                  "file's `[spark]` table); they win over shoal's defaults "
                  "([deployment](deployment.md#spark-settings)).",
    "spark_start_timeout_s": "Time a non-local Spark session may take to show that an "
                             "executor runs shoal and reaches the catalog and store.",
    "spark_driver_memory": "`spark.driver.memory` of the sessions shoal starts, unless "
                           "`spark_conf` or `spark-defaults.conf` sets it.",
}
# Defaults that are not a value: what an unset setting means.
_UNSET = {"catalog_url": "`sqlite:///<data_dir>/catalog.db`",
          "storage_url": "`file://<data_dir>/objects`", "s3_endpoint": "AWS",
          "allowed_paths": "the data directory only", "http_hosts": "loopback names only",
          "tokens": "none: loopback only", "spark_conf": "shoal's defaults",
          "otlp_grpc_port": "unset: `otlp_grpc_default_port` if free",
          "flight_port": "unset: `flight_default_port` if free"}
DOCS_BEGIN = "<!-- settings: generated by `python -m shoal.config --markdown`; do not edit -->"
DOCS_END = "<!-- end of settings -->"


def _kind(name: str) -> str:
    if name in _BOOL_FIELDS:
        return "`true` / `false`"
    if name in _FLOAT_FIELDS:
        return "seconds" if name.endswith("_s") else "number"
    if name in _INT_FIELDS:
        return "bytes" if name.endswith("_bytes") else "integer"
    if name == "query_engine":
        return " / ".join(f"`{e}`" for e in QUERY_ENGINES)
    if name == "promql_otlp_metrics":
        return " / ".join(f"`{e}`" for e in PROMQL_OTLP_MODES)
    if name == "spark_conf":
        return "`key=value` pairs"
    return "string"


def _default(name: str) -> str:
    value = getattr(Config(), name)
    if name in _UNSET:
        return _UNSET[name]
    if value is None or value == ():
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and name.endswith("_bytes") and value % (1 << 20) == 0:
        return f"{value} ({value >> 20} MiB)"
    if isinstance(value, str):
        return f"`{value}`"
    return str(value) if name.endswith("port") else f"{value:,}"


def markdown_table() -> str:
    """The settings table of docs/configuration.md, between its markers."""
    rows = [DOCS_BEGIN, "", "| variable | file key | type | default | what it sets |",
            "|---|---|---|---|---|",
            f"| `{ENV_PREFIX}CONFIG` | | path | `./shoal.toml` if present | The config file "
            "(`--config`). |"]
    for name in _FIELDS:
        if name not in SETTINGS:
            raise ConfigError(f"setting {name!r} has no line in shoal.config.SETTINGS")
        key = "`[spark]` table" if name == "spark_conf" else f"`{name}`"
        rows.append(f"| `{ENV_PREFIX}{name.upper()}` | {key} | {_kind(name)} | "
                    f"{_default(name)} | {SETTINGS[name]} |")
    rows += ["", DOCS_END]
    return "\n".join(rows) + "\n"


def replace_marked(path: str, begin: str, end: str, block: str, what: str) -> bool:
    """Replace the text of the page at `path` from the line `begin` through the line `end`
    with `block` (which holds both markers); True if the page changed. Generated tables in
    docs/ (settings, routes) are kept this way."""
    text = Path(path).read_text()
    start, stop = text.find(begin), text.find(end)
    if start < 0 or stop < start:
        raise ConfigError(f"{path}: no {what} markers ({begin!r} ... {end!r})")
    new = text[:start] + block + text[stop + len(end) + 1:]
    Path(path).write_text(new)
    return new != text


def table_tool(argv: list[str], markdown: Callable[[], str], update: Callable[[str], bool],
               usage: str) -> int:
    """The command line of a generated docs table: `--markdown` prints it, `--update PAGE`
    rewrites it in the page."""
    if argv == ["--markdown"]:
        print(markdown(), end="")
        return 0
    if len(argv) == 2 and argv[0] == "--update":
        print(f"{argv[1]}: {'updated' if update(argv[1]) else 'already up to date'}")
        return 0
    print(f"usage: {usage}")
    return 2


def update_docs(path: str) -> bool:
    """Rewrite the settings table of the page at `path`; True if it changed."""
    return replace_marked(path, DOCS_BEGIN, DOCS_END, markdown_table(), "settings")


def _main(argv: list[str]) -> int:
    return table_tool(argv, markdown_table, update_docs,
                      "python -m shoal.config --markdown | --update docs/configuration.md")


if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
