"""A Kafka-protocol broker for tests: librdkafka's mock cluster in a helper process.

`kafka_broker()` starts `python -m tests.support.kafka` (a child process that creates a
librdkafka mock cluster through confluent-kafka's bundled librdkafka, prints its bootstrap
address and serves until its stdin closes), or, when `SHOAL_TEST_KAFKA_BOOTSTRAP` is set,
uses that real broker instead. `broker.create_topic(name, partitions)` makes a topic with
that many partitions (the mock cluster's admin API cannot: the helper calls
`rd_kafka_mock_topic_create`; a real broker gets a CreateTopics request).
"""

from __future__ import annotations

import ctypes
import glob
import os
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from tests.support.tiers import guard

ENV_BOOTSTRAP = "SHOAL_TEST_KAFKA_BOOTSTRAP"
ROOT = Path(__file__).resolve().parents[2]


@dataclass
class KafkaBroker:
    bootstrap: str
    proc: subprocess.Popen[str] | None
    _lock: threading.Lock

    def create_topic(self, name: str, partitions: int) -> None:
        if self.proc is None:
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient({"bootstrap.servers": self.bootstrap})
            for f in admin.create_topics([NewTopic(name, num_partitions=partitions,
                                                   replication_factor=1)]).values():
                f.result()
            return
        with self._lock:
            assert self.proc.stdin is not None and self.proc.stdout is not None
            self.proc.stdin.write(f"create {name} {partitions}\n")
            self.proc.stdin.flush()
            answer = self.proc.stdout.readline().strip()
        if answer != "ok 0":
            raise RuntimeError(f"mock cluster: creating topic {name}: {answer}")

    def produce(self, topic: str, records: Sequence[tuple[int, bytes, list[tuple[str, bytes]]]],
                *, key: bytes | None = None) -> None:
        """Produce `(partition, value, headers)` records in order; waits for every ack."""
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5,
                      "enable.idempotence": False, "log_level": 3})
        failed: list[str] = []

        def ack(err, _msg) -> None:  # type: ignore[no-untyped-def]
            if err is not None:
                failed.append(str(err))

        for i, (part, value, headers) in enumerate(records):
            while True:
                try:
                    p.produce(topic, value=value, partition=part, headers=headers or None,
                              key=key, on_delivery=ack)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 5000 == 0:
                p.poll(0)
        p.flush(60)
        if failed:
            raise RuntimeError(f"produce to {topic}: {failed[:3]}")


@contextmanager
def kafka_broker() -> Iterator[KafkaBroker]:
    guard("a Kafka broker", "services")
    real = os.environ.get(ENV_BOOTSTRAP)
    if real:
        yield KafkaBroker(real, None, threading.Lock())
        return
    proc = subprocess.Popen([sys.executable, "-m", "tests.support.kafka"], cwd=ROOT,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()
        if not bootstrap:
            raise RuntimeError("the mock Kafka cluster did not start")
        yield KafkaBroker(bootstrap, proc, threading.Lock())
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---- the helper process -------------------------------------------------------------------

def _serve() -> None:
    import confluent_kafka

    libdir = Path(confluent_kafka.__file__).parent.parent / "confluent_kafka.libs"
    found = glob.glob(str(libdir / "librdkafka*.so*"))
    lib = ctypes.CDLL(found[0]) if found else ctypes.CDLL("librdkafka.so.1")
    vp, cp = ctypes.c_void_p, ctypes.c_char_p
    lib.rd_kafka_conf_new.restype = vp
    lib.rd_kafka_conf_set.argtypes = [vp, cp, cp, cp, ctypes.c_size_t]
    lib.rd_kafka_new.restype = vp
    lib.rd_kafka_new.argtypes = [ctypes.c_int, vp, cp, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = vp
    lib.rd_kafka_mock_cluster_new.argtypes = [vp, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = cp
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [vp]
    lib.rd_kafka_mock_topic_create.argtypes = [vp, cp, ctypes.c_int, ctypes.c_int]
    lib.rd_kafka_mock_set_controller_id.argtypes = [vp, ctypes.c_int]
    err = ctypes.create_string_buffer(512)
    conf = lib.rd_kafka_conf_new()
    lib.rd_kafka_conf_set(conf, b"log_level", b"3", err, 512)
    rk = lib.rd_kafka_new(0, conf, err, 512)
    if not rk:
        raise SystemExit(f"rd_kafka_new: {err.value.decode()}")
    cluster = lib.rd_kafka_mock_cluster_new(rk, 1)
    lib.rd_kafka_mock_set_controller_id(cluster, 1)
    print(lib.rd_kafka_mock_cluster_bootstraps(cluster).decode(), flush=True)
    for line in sys.stdin:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "create":
            code = lib.rd_kafka_mock_topic_create(cluster, parts[1].encode(), int(parts[2]), 1)
            print(f"ok {code}", flush=True)
        else:
            print(f"unknown command {line.strip()!r}", flush=True)
    os._exit(0)  # the parent went away: the cluster goes with this process


if __name__ == "__main__":
    _serve()
