"""Links to Calvin's own pages that agents and people are given (a web thread's URL)."""

from django.conf import settings
from django.urls import reverse

# Where a gateway without CALVIN_PUBLIC_URL is reached: `up`'s default address.
LOCAL_BASE = "http://localhost:8000"


def public_base() -> str:
    return (settings.CALVIN_PUBLIC_URL or LOCAL_BASE).rstrip("/")


def thread_url(thread_id: int) -> str:
    """<CALVIN_PUBLIC_URL>/threads/<id>/: the web thread's page."""
    return public_base() + reverse("dashboard:thread", args=[thread_id])
