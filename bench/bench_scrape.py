"""Scraping a Prometheus target with ~10k series: samples/s shoal parses and
commits vs the same exposition parsed by prometheus_client alone (the parse limit).

    .venv/bin/python bench/bench_scrape.py [--series 10000] [--repeat 7]

The bench serves the exposition itself (a real HTTP server on loopback, text format 0.0.4 or
OpenMetrics 1.0.0): counters with two labels, gauges, and histograms (8 buckets + sum +
count). Reported per format, medians of `--repeat`:

- parse only: `prometheus_client`'s parser over the body, every sample materialised (the
  reference: shoal parses with it, so it bounds what a scrape can do);
- shoal parse: `parse_exposition` (the parser plus shoal's sample tuples and metadata);
- shoal scrape: one `Scraper.scrape()` end to end — HTTP GET, parse, target labels, the
  Arrow batch (`SampleRows`), staleness bookkeeping, and the commit of one extent through
  the write path (`ingest_arrow`) into a local data directory;

as samples/s and as a ratio of the reference; the three run interleaved, so each repetition
meets the same machine load. The load average is printed.

Then the fetch alone (`--fetches` GETs of a 20-byte exposition, interleaved, median per
GET): a plain `httpx.Client` (what the scraper used before `shoal.outbound`) against
`OutboundClient`, the policy-checked, address-pinned client the scraper uses now, once with
an IP-literal target and once with `localhost` (a name: one system lookup per connection;
the bench's server closes every connection, so every GET connects and checks anew).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from prometheus_client.openmetrics.parser import (  # noqa: E402
    text_string_to_metric_families as om_families)
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

import httpx  # noqa: E402

import shoal  # noqa: E402
from shoal.config import Config  # noqa: E402
from shoal.locations import LocationPolicy  # noqa: E402
from shoal.outbound import OutboundClient  # noqa: E402
from shoal.frontends.prometheus.scrape import Scraper, parse_exposition  # noqa: E402
from shoal.frontends.prometheus.binding import parse_binding  # noqa: E402
from tests.support.exposition import (OPENMETRICS_TYPE, TEXT_TYPE,  # noqa: E402
                                      exposition_server)

TYPES = {False: TEXT_TYPE, True: OPENMETRICS_TYPE}


def exposition(series: int, *, openmetrics: bool) -> str:
    """~`series` samples: 40% counters, 20% gauges, 40% histogram series."""
    lines: list[str] = []
    per = 100
    n_counter = max(1, int(series * 0.4) // per)
    n_gauge = max(1, int(series * 0.2) // per)
    n_hist = max(1, int(series * 0.4) // (per // 2 * 10))
    for f in range(n_counter):
        name = f"app_requests_{f}"
        type_name = name if openmetrics else f"{name}_total"
        lines += [f"# HELP {type_name} Requests of kind {f}.", f"# TYPE {type_name} counter"]
        lines += [f'{name}_total{{method="m{i % 5}",path="/api/v1/thing/{i}"}} {i * 17 + f}'
                  for i in range(per)]
    for f in range(n_gauge):
        name = f"app_queue_depth_{f}"
        lines += [f"# HELP {name} Items waiting.", f"# TYPE {name} gauge"]
        lines += [f'{name}{{queue="q{i}",shard="{i % 7}"}} {i * 0.5}' for i in range(per)]
    bounds = ("0.005", "0.01", "0.05", "0.1", "0.5", "1.0", "5.0", "+Inf")
    for f in range(n_hist):
        name = f"app_latency_seconds_{f}"
        lines += [f"# HELP {name} Latency.", f"# TYPE {name} histogram"]
        for i in range(per // 2):
            lab = f'handler="h{i}"'
            lines += [f'{name}_bucket{{{lab},le="{b}"}} {i + k}' for k, b in enumerate(bounds)]
            lines += [f"{name}_sum{{{lab}}} {i * 1.25}", f"{name}_count{{{lab}}} {i + 7}"]
    if openmetrics:
        lines.append("# EOF")
    return "\n".join(lines) + "\n"


def timed(fn: Callable[[], object]) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--series", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--fetches", type=int, default=300)
    args = ap.parse_args()
    print(f"load average {os.getloadavg()}; {os.cpu_count()} cpus")
    print("| format | samples | body KB | path | ms | samples/s | x reference |")
    print("|---|---|---|---|---|---|---|")
    for openmetrics in (False, True):
        text = exposition(args.series, openmetrics=openmetrics)
        body = text.encode()
        parser = om_families if openmetrics else text_string_to_metric_families
        samples = sum(len(f.samples) for f in parser(text))
        times: dict[str, list[float]] = {"ref": [], "parse": [], "scrape": []}
        with (tempfile.TemporaryDirectory(prefix="bench-scrape-") as tmp,
              exposition_server() as target):
            target.set(body, openmetrics=openmetrics)
            address = target.address
            db = shoal.connect(data_dir=tmp, allowed_hosts="127.0.0.1")
            try:
                db.sql(f"CREATE TABLE m WITH (scrape_targets = '{address}')")
                binding = parse_binding("m", db.catalog.load_table("m").properties)
                with Scraper(db, binding) as scraper:
                    scraper.scrape()                      # warm: metadata table, buffers
                    for _ in range(args.repeat):          # interleaved: the same load
                        times["ref"].append(timed(
                            lambda: [s for f in parser(text) for s in f.samples]))  # noqa: B023
                        times["parse"].append(timed(
                            lambda: parse_exposition(body, TYPES[openmetrics])))  # noqa: B023
                        times["scrape"].append(timed(scraper.scrape))
            finally:
                db.close()
        ref, ours_parse, ours_scrape = (statistics.median(times[k])
                                        for k in ("ref", "parse", "scrape"))
        fmt = "OpenMetrics" if openmetrics else "text 0.0.4"
        for path, s in (("prometheus_client parse (reference)", ref),
                        ("shoal parse", ours_parse), ("shoal scrape + commit", ours_scrape)):
            print(f"| {fmt} | {samples:,} | {len(body) // 1024:,} | {path} | {s * 1000:.1f} | "
                  f"{samples / s:,.0f} | {ref / s:.2f} |")
    fetches(args.fetches)


def fetches(n: int) -> None:
    """Median microseconds per GET: plain httpx vs `OutboundClient` (see the docstring)."""
    with exposition_server() as target:
        target.set("# TYPE a gauge\na 1\n")
        port = target.address.rsplit(":", 1)[1]
        policy = LocationPolicy.from_config(Config(allowed_hosts="127.0.0.1,localhost"))
        plain = httpx.Client(follow_redirects=True, trust_env=False)
        checked = OutboundClient(policy)

        def via_plain(host: str) -> None:
            plain.get(f"http://{host}:{port}/metrics").read()

        def via_checked(host: str) -> None:
            with checked.open(f"http://{host}:{port}/metrics", timeout=10) as f:
                f.read(1 << 20)

        paths = {"httpx, 127.0.0.1": lambda: via_plain("127.0.0.1"),
                 "outbound, 127.0.0.1": lambda: via_checked("127.0.0.1"),
                 "httpx, localhost": lambda: via_plain("localhost"),
                 "outbound, localhost": lambda: via_checked("localhost")}
        times: dict[str, list[float]] = {k: [] for k in paths}
        try:
            for fn in paths.values():
                fn()                                      # warm
            for _ in range(n):
                for name, fn in paths.items():
                    times[name].append(timed(fn))
        finally:
            plain.close()
            checked.close()
    print(f"\n| fetch ({n} GETs each, interleaved) | median us per GET |\n|---|---|")
    for name, ts in times.items():
        print(f"| {name} | {statistics.median(ts) * 1e6:,.0f} |")


if __name__ == "__main__":
    main()
