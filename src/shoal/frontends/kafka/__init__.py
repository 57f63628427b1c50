"""Kafka frontend (docs/kafka.md): a Spark Structured Streaming query from Kafka into a table.

- `source.py`: the Python streaming DataSource `shoal_kafka` over confluent-kafka;
- `sink.py`: one micro-batch through coercion, header/pseudo-columns and rejects into ONE
  catalog commit carrying the per-partition offsets (exactly-once);
- `pipeline.py`: the streaming query, its binding to a table, progress and until-idle stop;
- `kind.py`: Kafka bindings as a kind run by the binding supervisor (`frontends.supervisor`).
"""

from shoal.frontends.kafka.pipeline import (KafkaBinding, KafkaPipeline, PipelineProgress,
                                            resolve_binding)
from shoal.frontends.kafka.sink import (PSEUDO_COLUMNS, BatchResult, ConcurrentPipelineError,
                                        KafkaSink, source_name)

__all__ = ["PSEUDO_COLUMNS", "BatchResult", "ConcurrentPipelineError", "KafkaBinding",
           "KafkaPipeline", "KafkaSink", "PipelineProgress", "resolve_binding", "source_name"]
