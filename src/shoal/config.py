"""Configuration: defaults, then a TOML file, then `SHOAL_*` variables, then flags (SPEC §11).

Loaded once at the edge (CLI, server) and passed down; nothing reads the environment later.
Defaults give the embedded single-machine setup: everything under `./shoal-data` (SQLite
catalog `catalog.db`, extents under `objects/`, Spark `local[*]`).

File keys are the variable names without the prefix, lower-cased (`catalog_url = "..."`).
The file is `--config`, else `SHOAL_CONFIG`, else `./shoal.toml` if it exists.

Spark settings pass through untouched (issue 19): the file's `[spark]` table
(`"spark.executor.memory" = "4g"`) and `SHOAL_SPARK_CONF` (`key=value` pairs separated by
`;` or newlines; its keys win over the file's). They win over shoal's own Spark defaults
(`shoal.query.spark.cluster`), which apply only where neither these nor `spark-defaults.conf` set
a key.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

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
    # OTLP (SPEC §7.2): the gRPC port (0 = off) and the standard tables, made on first use.
    otlp_grpc_port: int = 4317
    otlp_logs_table: str = "otel_logs"
    otlp_spans_table: str = "otel_spans"
    otlp_metrics_table: str = "otel_metrics"
    # Prometheus (issue 16): where remote write and scrape jobs land samples and metadata
    # (layout: shoal.types.prometheus), made on first use.
    prometheus_table: str = "prom_samples"
    prometheus_metadata_table: str = "prom_metadata"
    # PromQL (issue 16): Prometheus's --query.lookback-delta and --query.max-samples.
    promql_lookback_s: float = 300.0
    promql_max_samples: int = 50_000_000
    # Arrow Flight SQL (issue 15): its port (0 = off) and, for grpc+tls, PEM cert and key.
    flight_port: int = 8815
    flight_tls_cert: str | None = None
    flight_tls_key: str | None = None
    # Kafka (SPEC §7.3): bootstrap servers for pipelines whose table binding names none.
    kafka_bootstrap: str | None = None
    # `shoal serve` runs the maintenance scheduler + a worker, and the Kafka pipelines of
    # bound tables (SHOAL_MAINTENANCE / SHOAL_PIPELINES = false to leave them to others).
    maintenance: bool = True
    pipelines: bool = True
    # Where bound pipelines may read from or connect to (SPEC §8, §11): comma-separated
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
    # Which engine answers a SELECT (SPEC §8): `auto` runs it in process (the embedded
    # engine) when it is vetted identical to Spark and its pruned scans plan at most
    # `local_query_max_bytes` (which bounds the engine's memory); `local` / `spark` force.
    query_engine: str = "auto"
    local_query_max_bytes: int = 256 << 20
    # The memory one embedded-engine query may take: DuckDB's working memory (its database's
    # `memory_limit`, no spilling) and, separately, its inputs read as Arrow. Past either it
    # is answered by Spark (`auto`) or refused with 400 `query_memory_exceeded` (`local`).
    local_query_memory: int = 512 << 20
    # `shoal serve` coerces NDJSON bodies in this many worker processes (issue 18;
    # `shoal.ingest.pool`); 0: in the server process. 0 by default: on the 2-core machines
    # measured, the pool cost as much CPU as it freed (BENCHMARKS.md, REST on every core).
    coerce_workers: int = 0

    # Spark (issue 19): settings passed through to Spark as they are ([spark] table /
    # SHOAL_SPARK_CONF), and how long a non-local session may take to show that an executor
    # runs shoal and reaches the catalog and store (`shoal.query.spark.cluster`).
    spark_conf: tuple[tuple[str, str], ...] = ()
    spark_start_timeout_s: float = 180.0

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

    def ensure_data_dir(self) -> None:
        if self.catalog_url is None or self.storage_url is None:
            self.data_path.mkdir(parents=True, exist_ok=True)


_FIELDS = {f.name: f for f in fields(Config)}
_INT_FIELDS = frozenset({"port", "otlp_grpc_port", "flight_port", "query_max_rows",
                         "query_max_bytes", "query_concurrency", "local_query_max_bytes",
                         "query_concurrency_per_client",
                         "local_query_memory",
                         "promql_max_samples", "coerce_workers"})
QUERY_ENGINES = ("auto", "local", "spark")
_FLOAT_FIELDS = frozenset({"query_timeout_s", "body_timeout_s", "promql_lookback_s",
                           "flight_idle_timeout_s", "header_timeout_s",
                           "shutdown_timeout_s", "spark_start_timeout_s"})
_BOOL_FIELDS = frozenset({"maintenance", "pipelines"})
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
            if key not in _FIELDS:
                raise ConfigError(f"config file {path}: unknown key {key!r}")
            values[key] = _coerce(key, value)
    spark = dict(values.pop("spark_conf", {}))
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
        if name not in _FIELDS:
            raise TypeError(f"unknown configuration flag {name!r}")
        if value is not None:
            values[name] = _coerce(name, value)
    return replace(Config(), **values)
