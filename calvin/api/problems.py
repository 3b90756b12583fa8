"""Errors as RFC 9457 problem details: a stable `code`, a human `detail`, never HTML.

Handlers for what django-ninja raises, and a middleware for what answers under /api/ without
reaching a handler (a path that matches nothing, a method the path does not take)."""

import logging

from django.http import HttpResponse, JsonResponse

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/problem+json"
TITLES = {
    400: "Bad request",
    401: "Not authenticated",
    403: "Not allowed",
    404: "Not found",
    405: "Method not allowed",
    409: "Conflict",
    413: "Too large",
    422: "Invalid request",
    429: "Too many requests",
    500: "Server error",
}
CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "too_large",
    422: "invalid",
    429: "rate_limited",
    500: "server_error",
}


class Problem(Exception):
    """Raised by an endpoint: answered as a problem with this status, code and detail."""

    def __init__(self, status: int, detail: str, *, code: str = "", **extra):
        super().__init__(detail)
        self.status, self.detail, self.code, self.extra = status, detail, code or CODES.get(status, "error"), extra


def problem_response(status: int, detail: str, *, code: str = "", headers=None, **extra) -> HttpResponse:
    body = {
        "type": f"urn:calvin:problem:{code or CODES.get(status, 'error')}",
        "title": TITLES.get(status, "Error"),
        "status": status,
        "detail": detail,
        "code": code or CODES.get(status, "error"),
        **extra,
    }
    response = JsonResponse(body, status=status, content_type=CONTENT_TYPE)
    for name, value in (headers or {}).items():
        response[name] = value
    return response


def validation_detail(errors: list[dict]) -> tuple[str, list[dict]]:
    """One sentence for people, and the errors (where, what) for programs."""
    shown = []
    for error in errors[:20]:
        where = ".".join(str(part) for part in error.get("loc", ()) if part not in ("body", "query", "path"))
        shown.append({"field": where or "(request)", "message": str(error.get("msg", "invalid"))[:300]})
    first = shown[0] if shown else {"field": "(request)", "message": "invalid"}
    more = f" (and {len(shown) - 1} more)" if len(shown) > 1 else ""
    return f"{first['field']}: {first['message']}{more}", shown


def install_handlers(api) -> None:
    from django.http import Http404
    from ninja.errors import AuthenticationError, HttpError, ValidationError

    @api.exception_handler(Problem)
    def _problem(request, exc: Problem):
        return problem_response(exc.status, exc.detail, code=exc.code, **exc.extra)

    @api.exception_handler(ValidationError)
    def _invalid(request, exc: ValidationError):
        detail, errors = validation_detail(exc.errors)
        return problem_response(422, detail, errors=errors)

    @api.exception_handler(AuthenticationError)
    def _unauthenticated(request, exc):
        return problem_response(
            401,
            "send a token: Authorization: Bearer <a runner's token or a person's API token>;"
            " an unknown, revoked or expired one is refused",
            headers={"WWW-Authenticate": 'Bearer realm="calvin"'},
        )

    @api.exception_handler(Http404)
    def _missing(request, exc):
        return problem_response(404, str(exc) if str(exc) else "no such thing in your workspace")

    @api.exception_handler(HttpError)
    def _http(request, exc: HttpError):
        return problem_response(exc.status_code, str(exc))

    @api.exception_handler(Exception)
    def _crash(request, exc):
        log.exception("the API failed on %s %s", request.method, request.path)
        return problem_response(500, "Calvin failed on this request; it is logged. Try again, or tell your admin.")


class ApiProblemsMiddleware:
    """Under /api/: an error answered by Django or by the router itself (404, 405, a CSRF
    refusal, an oversized body) becomes a problem too, so a client never parses HTML."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if not request.path.startswith("/api/") or response.status_code < 400:
            return response
        if response.get("Content-Type", "").split(";")[0] in (CONTENT_TYPE, "application/json"):
            return response
        status = response.status_code
        detail = {
            404: f"there is no {request.path} in the API: see /api/v1/docs",
            405: f"{request.path} does not take {request.method}",
        }.get(status, TITLES.get(status, "error"))
        headers = {"Allow": response["Allow"]} if response.has_header("Allow") else None
        return problem_response(status, detail, headers=headers)
