"""Errors at the HTTP edge: every failure is ``{"code", "message"}`` with a 4xx/5xx.

Codes come from ``connector.errors`` (each class knows its HTTP status);
FastAPI's own errors (validation, unknown route, wrong method, bad JSON) get
the same body, so a client parses one shape whatever went wrong.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from connector.errors import PyMQError

__all__ = ["error_response", "install_error_handlers", "validation_message"]

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "BAD_REQUEST",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "MESSAGE_SIZE_EXCEEDED",
    415: "UNSUPPORTED_MEDIA_TYPE",
}


def error_response(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse({"code": code, "message": message}, status_code=status)


def validation_message(errors: Sequence[Any]) -> str:
    """pydantic's error list as one readable line (the first three problems)."""
    parts = []
    for err in list(errors)[:3]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "request"
        parts.append(f"{where}: {err.get('msg', 'invalid')}")
    return "; ".join(parts) or "invalid request"


async def _pymq_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, PyMQError)
    return JSONResponse(exc.to_dict(), status_code=exc.http_status)


async def _validation_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    return error_response(400, "BAD_REQUEST", validation_message(exc.errors()))


async def _http_error(_request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "HTTP_ERROR")
    return error_response(exc.status_code, code, str(exc.detail))


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(500, "SYSTEM_ERROR", f"{type(exc).__name__}: internal error")


def install_error_handlers(app: FastAPI) -> None:
    app.add_exception_handler(PyMQError, _pymq_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
