"""`Idempotency-Key` on POST: the first request with a key does the change and its answer is
kept; a retry with the same key and body gets that answer again and changes nothing more; the
same key with another body is refused. Keys are per token and kept for a day."""

import hashlib
import json
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.http import JsonResponse
from django.utils import timezone

from calvin.api.models import IdempotentRequest
from calvin.api.problems import CONTENT_TYPE, Problem, problem_response

KEEP = timedelta(days=1)
IN_PROGRESS = 0  # the status of a key whose first request has not answered yet
MAX_KEY = 200


def _digest(request) -> str:
    return hashlib.sha256(b"%s %s\n%s" % (request.method.encode(), request.path.encode(), request.body)).hexdigest()


def _answer(status: int, body: dict) -> JsonResponse:
    content_type = CONTENT_TYPE if status >= 400 else "application/json"
    return JsonResponse(body, status=status, content_type=content_type)


def idempotent(request, principal, change) -> JsonResponse:
    """Run `change()` -> (status, body) once per key; without a key, every time."""
    key = request.headers.get("Idempotency-Key")
    if key is None:
        return _run(change)
    if not key.strip() or len(key) > MAX_KEY or not key.isprintable():
        return problem_response(422, f"Idempotency-Key: 1 to {MAX_KEY} printable characters", code="invalid")
    digest, owner = _digest(request), principal.key
    IdempotentRequest.objects.filter(principal=owner, created_at__lt=timezone.now() - KEEP).delete()
    try:
        with transaction.atomic():
            row = IdempotentRequest.objects.create(
                principal=owner, key=key, request_digest=digest, status=IN_PROGRESS, body={}
            )
    except IntegrityError:
        kept = IdempotentRequest.objects.get(principal=owner, key=key)
        if kept.request_digest != digest:
            return problem_response(
                422,
                "this Idempotency-Key was used with another request: use a new key for a new request",
                code="idempotency_key_reused",
            )
        if kept.status == IN_PROGRESS:
            running = "the first request with this Idempotency-Key is still running"
            return problem_response(409, running, code="in_progress")
        response = _answer(kept.status, kept.body)
        response["Idempotent-Replayed"] = "true"
        return response
    response = _run(change)
    if response.status_code >= 500:
        row.delete()  # nothing was decided: a retry may go again
    else:
        kept = {"status": response.status_code, "body": json.loads(response.content)}
        IdempotentRequest.objects.filter(id=row.id).update(**kept)
    return response


def _run(change) -> JsonResponse:
    try:
        status, body = change()
    except Problem as exc:
        return problem_response(exc.status, exc.detail, code=exc.code, **exc.extra)
    return _answer(status, body)
