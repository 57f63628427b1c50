"""The HTTP edge's error mapping: exception class -> status, one JSON shape (docs/http-api.md).

Every error response of the server is

    {"error": {"code": "<snake_case>", "message": "...", "details": [{"line", "field", "message"}]}}

The status comes from `STATUS_BY_CLASS`, looked up along the exception's MRO, so the most
specific class listed wins and a new subclass inherits its parent's status. Nothing else in
the server picks a status for an error: handlers raise `ShoalError`s and this module maps
them. FastAPI's validation errors and Starlette's HTTP exceptions (unknown route, wrong
method, body limit) are reshaped into the same document.

The errors defined here belong to the HTTP edge only (auth, readiness, request framing);
domain errors live in `shoal.errors`. Each sits under the branch of that tree whose status it
refines, so the same error caught outside HTTP (the CLI, a pipeline) classifies the same way.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from shoal.errors import (BackpressureError, BadJsonError, ConflictError,
                          IdempotencyKeyConflictError, IncompatibleSchemaChangeError,
                          InternalError, InvalidSchemaError, KqlSemanticError, KqlSyntaxError,
                          NotAllowedError, NotFoundError, PayloadError, PayloadTooLargeError,
                          QueryError,
                          RequestError, SchemaConflictError, ShoalError, UnavailableError)
from shoal.errors import ColumnExistsError, ProtectedColumnError

log = logging.getLogger("shoal.server")

Detail = dict[str, Any]   # {"line": int | None, "field": str | None, "message": str}
# (a query error also has "column": where in the statement it went wrong)


class UnauthorizedError(RequestError):
    """No bearer token, or one the server does not know (401 + WWW-Authenticate)."""

    code = "unauthorized"

    def __init__(self, message: str, *, token_given: bool) -> None:
        self.token_given = token_given
        super().__init__(message)


class ForbiddenError(NotAllowedError):
    """A known token without the scope the route needs (403)."""

    code = "forbidden"

    def __init__(self, scope: str, *, also: Sequence[str] = ()) -> None:
        self.scope = scope
        names = " or ".join(f'"{s}"' for s in (scope, *also))
        super().__init__(f"this token lacks the {names} scope")


class NotReadyError(UnavailableError):
    """The server cannot take work now (starting, draining, catalog down): 503 + Retry-After."""

    code = "not_ready"

    def __init__(self, message: str, *, retry_after_s: float = 1.0) -> None:
        self.retry_after_s = retry_after_s
        super().__init__(message)


class BadRequestError(RequestError):
    """A request the server cannot read: bad parameters, framing or encoding (400)."""

    code = "bad_request"

    def __init__(self, message: str, *, code: str | None = None,
                 details: Sequence[Detail] = ()) -> None:
        if code is not None:
            self.code = code
        self.details = list(details)
        super().__init__(message)


class RequestTimeoutError(RequestError):
    """The client did not send its body within the server's `body_timeout_s` (408)."""

    code = "request_timeout"

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        super().__init__(f"the request body did not arrive within {seconds:g} s")


class TooManyQueriesError(UnavailableError):
    """Every query slot of the server is taken (`query_concurrency`), or the caller already
    holds as many as one client may (`per_client`, `query_concurrency_per_client`):
    429 + Retry-After."""

    code = "too_many_queries"

    def __init__(self, limit: int, *, retry_after_s: float = 1.0,
                 per_client: int | None = None) -> None:
        self.limit = limit
        self.per_client = per_client
        self.retry_after_s = retry_after_s
        if per_client is None:
            message = (f"the server already runs {limit} queries, its limit "
                       "(query_concurrency); retry shortly")
        else:
            message = (f"this client already runs {per_client} queries, the most one client "
                       f"may run at once (query_concurrency_per_client; {limit} in all, "
                       "query_concurrency); retry shortly")
        super().__init__(message)


class UnsupportedCallError(RequestError):
    """A protocol call or message the server does not implement (a Flight SQL command,
    action or DoPut it has no use for)."""

    code = "unsupported"


class StreamIdleError(RequestError):
    """A streamed answer (a Flight SQL DoGet) whose client took nothing for
    `flight_idle_timeout_s`: its query was stopped and its slot freed."""

    code = "stream_idle_timeout"

    def __init__(self, idle_s: float) -> None:
        self.idle_s = idle_s
        super().__init__(f"the client read nothing from this stream for {idle_s:g} s "
                         "(flight_idle_timeout_s, SHOAL_FLIGHT_IDLE_TIMEOUT_S): its query "
                         "was cancelled and its query slot freed")


class UnsupportedMediaTypeError(RequestError):
    """A body in a Content-Type or Content-Encoding the route does not take (415)."""

    code = "unsupported_media_type"


class UnsupportedEncodingError(UnsupportedMediaTypeError):
    code = "unsupported_encoding"

    def __init__(self, encoding: str) -> None:
        self.encoding = encoding
        super().__init__(f'unsupported Content-Encoding "{encoding}" (expected gzip or identity)')


# Statuses by branch of the error tree (`shoal.errors`); the most specific class listed wins.
STATUS_BY_CLASS: dict[type[BaseException], int] = {
    RequestError: 400,
    UnauthorizedError: 401,
    NotAllowedError: 403,
    NotFoundError: 404,
    RequestTimeoutError: 408,
    ConflictError: 409,
    PayloadTooLargeError: 413,
    UnsupportedMediaTypeError: 415,
    UnavailableError: 503,
    BackpressureError: 429,
    TooManyQueriesError: 429,
    InternalError: 500,
    ShoalError: 500,
}

_CODE_BY_STATUS = {400: "bad_request", 401: "unauthorized", 403: "forbidden",
                   404: "not_found", 405: "method_not_allowed", 413: "payload_too_large",
                   415: "unsupported_media_type", 429: "too_many_requests",
                   503: "not_ready"}


def status_for(exc: BaseException) -> int:
    for cls in type(exc).__mro__:
        status = STATUS_BY_CLASS.get(cls)
        if status is not None:
            return status
    return 500


def retry_after(seconds: float) -> str:
    """A `Retry-After` value: whole seconds, at least 1."""
    return str(max(1, math.ceil(seconds)))


def error_document(code: str, message: str, details: Sequence[Detail] = ()) -> dict[str, Any]:
    return {"error": {"code": code, "message": message, "details": list(details)}}


def details_for(exc: ShoalError) -> list[Detail]:
    if isinstance(exc, PayloadError):
        details: list[Detail] = [e.to_json() for e in exc.errors]
        if exc.truncated:  # the last detail says how many lines the list leaves out
            details.append({"line": None, "field": None, "message": exc.summary()})
        return details
    if isinstance(exc, BadRequestError):
        return exc.details
    if isinstance(exc, BadJsonError):
        return [{"line": None, "field": exc.field, "message": str(exc)}]
    if isinstance(exc, IdempotencyKeyConflictError):
        return [{"line": None, "field": "X-Idempotency-Key", "message": str(exc)}]
    line = getattr(exc, "line", None)
    if isinstance(exc, QueryError) and line is not None:
        # where in the statement: the console marks it; `field` names the language
        field = "kql" if isinstance(exc, (KqlSyntaxError, KqlSemanticError)) else "sql"
        return [{"line": line, "column": getattr(exc, "column", None), "field": field,
                 "message": str(exc)}]
    column = getattr(exc, "column", None)
    if isinstance(exc, (InvalidSchemaError, IncompatibleSchemaChangeError,
                        SchemaConflictError, ColumnExistsError,
                        ProtectedColumnError)) and column is not None:
        return [{"line": None, "field": column, "message": str(exc)}]
    return []


def headers_for(exc: ShoalError) -> dict[str, str]:
    if isinstance(exc, UnavailableError):
        return {"Retry-After": retry_after(getattr(exc, "retry_after_s", 1.0))}
    if isinstance(exc, RequestTimeoutError):
        return {"Connection": "close"}     # the rest of the body is never read
    if isinstance(exc, UnauthorizedError):
        value = 'Bearer realm="shoal"'
        if exc.token_given:
            value += ', error="invalid_token"'
        return {"WWW-Authenticate": value}
    if isinstance(exc, ForbiddenError):
        return {"WWW-Authenticate":
                f'Bearer realm="shoal", error="insufficient_scope", scope="{exc.scope}"'}
    return {}


def error_response(exc: ShoalError) -> JSONResponse:
    status = status_for(exc)
    if status >= 500 and not isinstance(exc, UnavailableError):
        log.error("request failed: %s", exc, exc_info=exc)
    return JSONResponse(error_document(exc.code, str(exc), details_for(exc)),
                        status_code=status, headers=headers_for(exc))


def _validation_details(exc: RequestValidationError) -> list[Detail]:
    out: list[Detail] = []
    for err in exc.errors():
        loc = [str(p) for p in err.get("loc", ())]
        out.append({"line": None, "field": ".".join(loc) or None,
                    "message": str(err.get("msg", "invalid value"))})
    return out


async def _on_shoal_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, ShoalError)
    return error_response(exc)


async def _on_validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    details = _validation_details(exc)
    head = details[0] if details else {"field": None, "message": "invalid request"}
    where = f"{head['field']}: " if head["field"] else ""
    return JSONResponse(error_document("bad_request", f"{where}{head['message']}", details),
                        status_code=400)


async def _on_http_exception(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _CODE_BY_STATUS.get(exc.status_code, f"http_{exc.status_code}")
    message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
    return JSONResponse(error_document(code, message), status_code=exc.status_code,
                        headers=dict(exc.headers or {}))


async def _on_unexpected(_request: Request, _exc: Exception) -> JSONResponse:
    # Starlette re-raises after this response is sent, so the server logs the traceback.
    return JSONResponse(error_document("internal_error", "internal server error"),
                        status_code=500)


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ShoalError, _on_shoal_error)
    app.add_exception_handler(RequestValidationError, _on_validation_error)
    app.add_exception_handler(StarletteHTTPException, _on_http_exception)
    app.add_exception_handler(Exception, _on_unexpected)
