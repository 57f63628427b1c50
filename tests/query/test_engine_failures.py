"""How an exception out of py4j is told apart: the engine gone (503, retry) or the statement
wrong (400). The race these cover (the JVM's socket closes before the process is reaped, so
`proc.poll()` still says alive) cannot be caused on demand, so the py4j errors are built here
exactly as py4j builds them; `tests/server/test_spark_restart.py` kills a real JVM."""

from __future__ import annotations

import pytest
from py4j.protocol import Py4JError, Py4JNetworkError

from shoal.errors import EngineUnavailableError, QueryError
from shoal.query.cancel import _Run


@pytest.mark.parametrize("error", [
    # GatewayClient.send_command answers proto.ERROR after a network failure it will not
    # retry; get_return_value turns that into this bare message (no Java exception, no trace).
    Py4JError("An error occurred while calling o287.load"),
    Py4JError("An error occurred while calling z:org.apache.spark.api.python.PythonRDD.x"),
    Py4JNetworkError("Answer from Java side is empty"),
    ConnectionResetError("connection reset by peer"),
])
def test_a_lost_jvm_is_engine_unavailable(error):
    assert isinstance(_Run(None).failure(error), EngineUnavailableError)


@pytest.mark.parametrize("error", [
    Py4JError("An error occurred while calling o12.sql. Trace:\npy4j.Py4JException: "
              "Method sql([class java.lang.Integer]) does not exist\n"),
    RuntimeError("[UNRESOLVED_COLUMN] A column with name `nope` cannot be resolved"),
])
def test_a_bad_statement_stays_a_query_error(error):
    failure = _Run(None).failure(error)
    assert isinstance(failure, QueryError) and not isinstance(failure, EngineUnavailableError)
