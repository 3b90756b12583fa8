"""Sign-up: a new account waits inactive for its email to be verified; a taken address is told
by email, never on the page (the page is the same "check your inbox" either way)."""

from django.contrib.auth import get_user_model
from django.contrib.auth.hashers import make_password
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.template.loader import render_to_string
from django.urls import reverse

from calvin.accounts.identity import users_with_email
from calvin.accounts.links import absolute_url, with_query
from calvin.accounts.verification import verification_email_send
from calvin.audit.services import audit_record


def signup_url(*, next: str, email: str = "") -> str:  # noqa: A002 (the parameter Django's views call `next`)
    """The sign-up page's path that keeps `next` through sign-up, the verification email and the
    verify page, with the email field filled in (an invitation's link sends people here)."""
    return with_query(reverse("accounts:signup"), next=next, email=email)


@transaction.atomic
def account_signup(request, *, email: str, password: str, next_url: str = "") -> None:
    """Make an inactive account for `email` and send its verification link, or, when the address
    already has an account (in any case), email it that it does. `email` is already normalised."""
    if users_with_email(email).exists():
        make_password(password)  # as slow as a new account: the answer's timing tells nothing
        _account_exists_email_send(request, email=email, next_url=next_url)
        return
    try:
        with transaction.atomic():  # a concurrent sign-up of the same address loses on the unique username
            user = get_user_model()._default_manager.create_user(
                username=email, email=email, password=password, is_active=False
            )
    except IntegrityError:
        _account_exists_email_send(request, email=email, next_url=next_url)
        return
    audit_record(verb="account.signup", actor=user, target=user)
    verification_email_send(request, user, next_url=next_url)


def _account_exists_email_send(request, *, email: str, next_url: str) -> None:
    context = {
        "login_link": absolute_url(request, with_query(reverse("login"), next=next_url)),
        "reset_link": absolute_url(request, reverse("password_reset")),
    }
    body = render_to_string("registration/account_exists_email.txt", context)
    transaction.on_commit(lambda: send_mail("You already have a Calvin account", body, None, [email]), robust=True)
