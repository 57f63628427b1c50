"""10,000 spans from 8 concurrent SDK exporters (4 OTLP/HTTP, 4 OTLP/gRPC) arrive exactly once.

Every exporter has its own TracerProvider and BatchSpanProcessor in its own thread. Some
exports are refused with backpressure before anything is written (every 6th call): the
exporters retry them (429 + Retry-After / RESOURCE_EXHAUSTED + RetryInfo), and still every
span lands once and only once.
"""

from __future__ import annotations

import json
import threading
from collections import Counter

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from shoal.errors import BackpressureError
from tests.frontends.otlp_sdk import resource, span_exporter

EXPORTERS = 8
SPANS_PER_EXPORTER = 1_250


class EveryNthRefused:
    def __init__(self, inner, every: int) -> None:
        self.inner, self.every = inner, every
        self.catalog = inner.catalog
        self.calls = self.refused = 0
        self.lock = threading.Lock()

    def ingest_arrow(self, *args, **kwargs):
        with self.lock:
            self.calls += 1
            refuse = self.calls % self.every == 0
            self.refused += refuse
        if refuse:
            raise BackpressureError("staging buffer full; retry later", retry_after_s=0.1)
        return self.inner.ingest_arrow(*args, **kwargs)


def test_10000_spans_from_8_concurrent_exporters_exactly_once(otlp_server, monkeypatch):
    sink = otlp_server.app.state.otlp_sink
    flaky = EveryNthRefused(sink.write_path, every=6)
    monkeypatch.setattr(sink, "write_path", flaky)
    errors: list[BaseException] = []
    start = threading.Barrier(EXPORTERS)

    def run(n: int) -> None:
        try:
            transport = "http" if n % 2 == 0 else "grpc"
            provider = TracerProvider(resource=resource(f"svc-{n}"))
            provider.add_span_processor(BatchSpanProcessor(
                span_exporter(otlp_server, transport), max_queue_size=SPANS_PER_EXPORTER,
                max_export_batch_size=250, schedule_delay_millis=50))
            tracer = provider.get_tracer("load")
            start.wait()
            for i in range(SPANS_PER_EXPORTER):
                tracer.start_span("work", attributes={"exporter": n, "i": i}).end()
            assert provider.force_flush(60_000)
            provider.shutdown()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(EXPORTERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert flaky.refused >= 3          # retries really happened

    data = otlp_server.rows("otel_spans")
    assert data.num_rows == EXPORTERS * SPANS_PER_EXPORTER
    keys = Counter((a["exporter"], a["i"]) for a in map(json.loads,
                                                         data.column("attributes").to_pylist()))
    assert set(keys.values()) == {1}
    assert set(keys) == {(n, i) for n in range(EXPORTERS) for i in range(SPANS_PER_EXPORTER)}
    assert len(set(data.column("span_id").to_pylist())) == data.num_rows
    services = Counter(data.column("service_name").to_pylist())
    assert services == {f"svc-{n}": SPANS_PER_EXPORTER for n in range(EXPORTERS)}
