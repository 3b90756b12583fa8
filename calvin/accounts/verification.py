"""Email verification: a single-use, expiring link that activates a signed-up account.

The token is Django's PasswordResetTokenGenerator with its own salt and hash value: it covers
is_active and last_login, so it stops working once the account is active or has logged in, and
it expires after PASSWORD_RESET_TIMEOUT (3 days by default), as a reset link does.
"""

import hashlib

from django.contrib.auth import get_user_model
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core.cache import cache
from django.core.mail import send_mail
from django.db import transaction
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_decode, urlsafe_base64_encode

from calvin.accounts.identity import is_unverified, users_with_email
from calvin.accounts.links import absolute_url, with_query
from calvin.audit.services import audit_record

# Emails sign-up and "send the link again" send: one per address per minute, and so many per
# client address an hour (nobody mails a stranger's inbox full through Calvin).
EMAIL_EVERY_SECONDS = 60
EMAILS_PER_CLIENT_HOUR = 20


class EmailVerificationTokenGenerator(PasswordResetTokenGenerator):
    key_salt = "calvin.accounts.verification.EmailVerificationTokenGenerator"

    def _make_hash_value(self, user, timestamp):
        login_timestamp = "" if user.last_login is None else user.last_login.replace(microsecond=0, tzinfo=None)
        return f"{user.pk}{user.is_active}{user.password}{login_timestamp}{user.email}{timestamp}"


verification_tokens = EmailVerificationTokenGenerator()


def verification_link(request, user, *, next_url: str = "") -> str:
    path = reverse(
        "accounts:verify",
        kwargs={"uidb64": urlsafe_base64_encode(force_bytes(user.pk)), "token": verification_tokens.make_token(user)},
    )
    return absolute_url(request, with_query(path, next=next_url))


def verification_email_send(request, user, *, next_url: str = "") -> None:
    """The verification email, sent once the transaction that made the account commits."""
    context = {"link": verification_link(request, user, next_url=next_url), "email": user.email}
    body = render_to_string("registration/verification_email.txt", context)
    transaction.on_commit(lambda: send_mail("Verify your email for Calvin", body, None, [user.email]), robust=True)


def unverified_user_for_link(uidb64: str, token: str):
    """The account a verification link names, when its token is valid and the account still unverified."""
    try:
        user_id = urlsafe_base64_decode(uidb64).decode()
        user = get_user_model()._default_manager.get(pk=int(user_id))
    except (TypeError, ValueError, OverflowError, UnicodeDecodeError, get_user_model().DoesNotExist):
        return None
    if not is_unverified(user) or not verification_tokens.check_token(user, token):
        return None
    return user


@transaction.atomic
def account_verify(*, user) -> None:
    """Activate an account whose verification link was opened (the caller logs it in)."""
    user = get_user_model()._default_manager.select_for_update().get(pk=user.pk)
    user.is_active = True
    user.save(update_fields=["is_active"])
    audit_record(verb="account.verify", actor=user, target=user, changes={"is_active": (False, True)})


def account_email_allowed(*, email: str, client_address: str | None) -> bool:
    """Rate limit of sign-up and "send the link again" emails, counted before any lookup, so it
    answers the same whether or not the address has an account."""
    digest = hashlib.sha256(email.encode()).hexdigest()
    if not cache.add(f"verify-resend:email:{digest}", 1, EMAIL_EVERY_SECONDS):
        return False
    key = f"verify-resend:ip:{client_address}"
    cache.add(key, 0, 3600)
    return cache.incr(key) <= EMAILS_PER_CLIENT_HOUR


@transaction.atomic
def verification_resend(request, *, email: str, next_url: str = "") -> None:
    """A new link for an unverified account of this address; nothing for any other address."""
    for user in users_with_email(email):
        if is_unverified(user):
            verification_email_send(request, user, next_url=next_url)
