"""The byte-decoding functions (`shoal.query.byte_functions`) as Spark SQL functions:
vectorised (Arrow) UDFs registered in a session by `register_functions`. Spark does not
check the arity of Python UDFs, so the one-argument form reaches the UDF as is and takes
the default order."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import pyarrow as pa

from shoal.query.byte_functions import DECODINGS, DEFAULT_ORDER, Decoding, ProcessingLog, decode

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _udf_body(spec: Decoding, log: ProcessingLog) -> Callable[..., pa.Array]:
    # The type hints are what Spark reads to pick a scalar Arrow UDF; `*order` admits both
    # the one- and the two-argument call.
    def body(values: pa.Array, *order: pa.Array) -> pa.Array:
        if len(order) > 1:
            raise TypeError(f"{spec.function}() takes 1 or 2 arguments, got {1 + len(order)}")
        return decode(spec, values, order[0] if order else DEFAULT_ORDER, log)

    body.__name__ = spec.function
    return body


def register_functions(spark: SparkSession, processing_log_path: str | None = None) -> None:
    """Register the byte functions in `spark` as vectorised (Arrow) SQL functions."""
    from pyspark.sql.functions import arrow_udf

    log = ProcessingLog(processing_log_path)
    for spec in DECODINGS:
        # pyspark's overloads type `f` by arity; ours is built per spec, hence Callable[..., Any]
        udf = arrow_udf(_udf_body(spec, log), spec.spark_type)  # type: ignore[call-overload]
        spark.udf.register(spec.function, udf)
