"""One line for an exception out of Spark: an executor that could not start its
Python (`Cannot run program "./shoalenv/bin/python" ...`), else the error an executor's
Python raised (the last line of the worker's traceback, e.g. `StorageError: ...
ACCESS_DENIED`), else the deepest `Caused by:` of a Java trace, else the first line. Never
the banner PySpark puts first ("An exception was thrown from the Python worker:") nor a
Java stack frame.

`engine_gone(e)` tells an exception that says the engine itself is gone (a lost gateway, a
shut-down context) from one that says the statement is wrong."""

from __future__ import annotations

import re

MAX_CHARS = 2000
_TRACEBACK = "Traceback (most recent call last):"
_JAVA_FRAME = re.compile(r"^\s*at [\w$.<>]+\(.*\)\s*$|^\s*\.\.\. \d+ more\s*$")
_STOP = ("Driver stacktrace:", "JVM stacktrace:")
_BANNERS = ("An exception was thrown from the Python worker",
            "An error occurred while calling")
_PREFIXES = ("shoal.errors.", "pyspark.errors.exceptions.base.",
             "pyspark.errors.exceptions.captured.")


def spark_message(e: BaseException) -> str:
    text = str(e).strip()
    if not text:
        return type(e).__name__
    line = (_cannot_run(text) or python_cause(text) or java_cause(text) or _first(text))
    return line[:MAX_CHARS]


def _cannot_run(text: str) -> str | None:
    """An executor that could not start its Python: the program and why."""
    match = re.search(r'Cannot run program "[^"]*"[^\n]*', text)
    return match.group(0).strip() if match else None


def python_cause(text: str) -> str | None:
    """The exception line closing the last Python traceback in `text`, if there is one."""
    at = text.rfind(_TRACEBACK)
    if at < 0:
        return None
    last: str | None = None
    for line in text[at + len(_TRACEBACK):].splitlines():
        if _JAVA_FRAME.match(line) or line.strip().startswith(_STOP):
            break
        if line.strip() and not line[:1].isspace():
            last = line.strip()
    if last is None:
        return None
    for prefix in _PREFIXES:
        if last.startswith(prefix):
            last = last[len(prefix):]
    return last


def java_cause(text: str) -> str | None:
    """The deepest `Caused by:` of a Java trace, else the exception line after py4j's
    "An error occurred while calling ..." banner."""
    causes = [ln.strip()[len("Caused by:"):].strip() for ln in text.splitlines()
              if ln.strip().startswith("Caused by:")]
    if causes:
        return causes[-1]
    lines = text.splitlines()
    if lines and lines[0].startswith("An error occurred while calling") and len(lines) > 1:
        return lines[1].lstrip(": ").strip() or None
    return None


def _first(text: str) -> str:
    for line in text.splitlines():
        if line.strip() and not line.strip().startswith(_BANNERS):
            return line.strip()
    return text.splitlines()[0].strip()


_BARE_PY4J_ERROR = re.compile(r"An error occurred while calling [\w$.:]+")
_DEAD_CONTEXT = ("SparkContext was shut down", "stopped SparkContext",
                 "SparkContext has been shutdown")


def engine_gone(e: BaseException) -> str | None:
    """Why `e` says the engine itself is gone (not the statement wrong), or None."""
    from py4j.protocol import Py4JError, Py4JJavaError, Py4JNetworkError

    if isinstance(e, (Py4JNetworkError, ConnectionError, EOFError)):
        return f"lost the connection to Spark ({type(e).__name__})"
    text = str(e)
    if (isinstance(e, Py4JError) and not isinstance(e, Py4JJavaError)
            and _BARE_PY4J_ERROR.fullmatch(text.strip())):
        # py4j's GatewayClient turns a network failure it will not retry into a bare error
        # answer: "An error occurred while calling o287.load", with neither a Java exception
        # nor a trace. The JVM may still be tearing down (not yet reaped), so `proc.poll()`
        # cannot be relied on to say so.
        return "lost the connection to Spark (no answer from the JVM)"
    if any(marker in text for marker in _DEAD_CONTEXT):
        return "the Spark context was shut down"
    return None
