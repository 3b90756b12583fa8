"""The HTTP side of ncl: one request to the API, its answer as JSON, or an NclError with the exit code.

Redirects are not followed (the bearer token would travel to wherever a 3xx points), answers
are read up to a cap, and a POST carries one Idempotency-Key that its single retry reuses, so
a connection lost after the gateway acted never acts twice.
"""

import http.client
import json
import urllib.error
import urllib.parse
import urllib.request
import uuid

from ncl import FAILED, NOT_FOUND, REFUSED, UNREACHABLE, USAGE

API_PATH = "/api/v1"
MAX_ANSWER = 32 * 1024 * 1024
USER_AGENT = "ncl/1"
# Malformed input is a usage error; the rest are the gateway saying no.
EXIT_FOR_STATUS = {400: USAGE, 422: USAGE, 404: NOT_FOUND, 401: REFUSED, 403: REFUSED, 409: REFUSED, 413: USAGE}
GATEWAY_DOWN = {502, 503, 504}


class NclError(Exception):
    def __init__(self, message: str, exit_code: int, body: dict | None = None):
        super().__init__(message)
        self.exit_code, self.body = exit_code, body


def api_base(url: str) -> str:
    """The API's root from what a person writes: the gateway's address, with or without /api/v1."""
    parts = urllib.parse.urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise NclError(f"--url / CALVIN_URL must be an http(s) address of the gateway, not {url[:80]!r}", USAGE)
    if parts.username or parts.password or parts.query or parts.fragment:
        raise NclError("--url / CALVIN_URL: give the gateway's address only (no user, query or fragment)", USAGE)
    path = parts.path.rstrip("/")
    if path.endswith(API_PATH):
        path = path[: -len(API_PATH)]
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path + API_PATH, "", ""))


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None  # answered as the 3xx itself, below


class Gateway:
    def __init__(self, base: str, token: str, *, timeout: float = 30.0):
        self.base, self.token, self.timeout = base, token, timeout
        self._opener = urllib.request.build_opener(_NoRedirects())

    def get(self, path: str, params: dict | None = None) -> tuple[int, dict]:
        query = {name: value for name, value in (params or {}).items() if value is not None}
        return self._send("GET", path + ("?" + urllib.parse.urlencode(query) if query else ""), None)

    def write(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict]:
        return self._send(method, path, body)

    def _send(self, method: str, path: str, body: dict | None) -> tuple[int, dict]:
        headers = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", "User-Agent": USER_AGENT}
        data = None
        if method != "GET":
            headers["Idempotency-Key"] = f"ncl-{uuid.uuid4()}"
            headers["Content-Type"] = "application/json"
            data = json.dumps(body or {}).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method, headers=headers)
        for attempt in (1, 2):
            try:
                return self._answer(self._opener.open(request, timeout=self.timeout))
            except urllib.error.HTTPError as answer:
                return self._answer(answer)
            except (ConnectionResetError, http.client.RemoteDisconnected) as exc:
                # The same request again (a POST with its Idempotency-Key): it acts at most once.
                if attempt == 2:
                    raise NclError(
                        f"the gateway at {self.base} dropped the connection twice: {exc}", UNREACHABLE
                    ) from None
            except (TimeoutError, urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                raise NclError(f"cannot reach the gateway at {self.base}: {reason}", UNREACHABLE) from None
        raise AssertionError("unreachable")

    def _answer(self, response) -> tuple[int, dict]:
        status = response.status
        with response:
            raw = response.read(MAX_ANSWER + 1)
        if len(raw) > MAX_ANSWER:
            raise NclError(f"the gateway's answer is larger than {MAX_ANSWER >> 20} MB", FAILED)
        body = _json_of(raw, response.headers.get("Content-Type", ""))
        if 300 <= status < 400:
            where = response.headers.get("Location", "")
            raise NclError(
                f"the gateway redirected to {where[:200]!r}: is the URL right? (ncl does not follow)", UNREACHABLE
            )
        if status < 300 and body is None:
            raise NclError(
                f"{self.base} answered {status} with something that is not the API's JSON: is the URL right?",
                UNREACHABLE,
            )
        if status < 300:
            return status, body
        detail = (body or {}).get("detail") or f"HTTP {status}"
        code = (body or {}).get("code") or ""
        if status in GATEWAY_DOWN:
            raise NclError(f"the gateway is not answering ({status}): {detail}", UNREACHABLE, body)
        if status == 429:
            raise NclError(f"too many requests: {detail}", REFUSED, body)
        exit_code = EXIT_FOR_STATUS.get(status, FAILED)
        raise NclError(f"{detail} ({code})" if code else detail, exit_code, body)


def _json_of(raw: bytes, content_type: str) -> dict | None:
    if "json" not in content_type:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
