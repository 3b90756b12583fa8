"""Who a typed login or sign-up address means: one normal form for emails and one lookup.

An email is normalised with NFKC (compatibility forms such as full-width letters become the
letters they stand for; the verification link goes to the normalised address, so nobody gains
an account by typing a variant of someone else's), then lowercased. Only ASCII addresses are
taken: a Cyrillic "а" in "аnn@example.com" is another letter, not a variant, and refusing
non-ASCII addresses keeps such look-alikes from ever becoming accounts (an international
domain is typed in its xn-- form).
"""

import unicodedata

from django.contrib.auth import get_user_model
from django.db.models import Q

# Django's username holds the lowercased email: an email longer than the username cannot sign up.
EMAIL_MAX_LENGTH = 150
# What a login form accepts as a username or an email (longer input is refused, never looked up).
LOGIN_MAX_LENGTH = 254


def email_normalize(raw: str) -> str:
    return unicodedata.normalize("NFKC", raw).strip().lower()


def users_with_email(email: str):
    """Accounts an address belongs to, in any case: as a username (sign-ups) or as an email."""
    return get_user_model()._default_manager.filter(Q(username__iexact=email) | Q(email__iexact=email))


def user_for_login(identifier: str):
    """The one account a login's username field names: the exact username first (the admin `up`
    makes is "admin"), else one username or email in any case; None when none or several match."""
    if not identifier:
        return None
    users = get_user_model()._default_manager
    try:
        return users.get_by_natural_key(identifier)
    except users.model.DoesNotExist:
        pass
    matches = list(users_with_email(identifier)[:2])
    return matches[0] if len(matches) == 1 else None


def is_unverified(user) -> bool:
    """Signed up, link not yet opened: inactive and never logged in. An account an admin
    deactivated after it was used is not "unverified": a new link must not reactivate it."""
    return not user.is_active and user.last_login is None


def axes_username(request, credentials=None) -> str:
    """The username django-axes counts failures under (AXES_USERNAME_CALLABLE): the normal form,
    so "Ann@Example.com" and "ann@example.com" share one counter."""
    raw = credentials.get("username") if credentials else request.POST.get("username")
    return email_normalize(raw or "")[:LOGIN_MAX_LENGTH]
