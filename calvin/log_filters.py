"""Logging filters that keep the console readable: a person's ordinary refusal is one line.

Django logs every 4xx answer on `django.request` with the exception that caused it, so a
PermissionDenied or an Http404 (a stranger's guess at a thread id, a browser's favicon probe)
printed a whole traceback in `up`'s log, where an operator looks for real errors.
"""

import logging


class ClientErrorsWithoutTraceback(logging.Filter):
    """Keeps the one line of a 4xx answer ("Forbidden (Permission denied): /threads/7/"), drops
    its traceback; 5xx records pass untouched (their traceback is the point)."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if isinstance(status, int) and 400 <= status < 500:
            record.exc_info = None
            record.exc_text = None
            record.stack_info = None
        return True
