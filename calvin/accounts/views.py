"""Thin adapters over the sign-up and verification services, and Django's auth views with
Calvin's templates, links and audit rows."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.db import transaction
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods, require_POST

from calvin.accounts.forms import LoginForm, ResendVerificationForm, ResetForm, SignupForm
from calvin.accounts.identity import is_unverified
from calvin.accounts.links import absolute_url, safe_next, with_query
from calvin.accounts.signup import account_signup, signup_url
from calvin.accounts.verification import (
    account_email_allowed,
    account_verify,
    unverified_user_for_link,
    verification_resend,
)
from calvin.audit.services import audit_record

BACKEND = "calvin.accounts.backends.EmailOrUsernameBackend"


@sensitive_post_parameters("password1", "password2")
@require_http_methods(["GET", "HEAD", "POST"])
def signup(request):
    if request.user.is_authenticated:
        return redirect(safe_next(request, request.GET.get("next")) or "dashboard:home")
    if request.method == "POST":
        form = SignupForm(request.POST)
        if form.is_valid() and not account_email_allowed(
            email=form.cleaned_data["email"], client_address=request.META.get("REMOTE_ADDR")
        ):
            form.add_error(None, "An email went to this address a moment ago, or many from here: wait, then try again.")
        if form.is_valid():
            account_signup(
                request,
                email=form.cleaned_data["email"],
                password=form.cleaned_data["password1"],
                next_url=safe_next(request, form.cleaned_data["next"]),
            )
            return redirect("accounts:signup-done")
    else:
        form = SignupForm(
            initial={"email": request.GET.get("email", ""), "next": safe_next(request, request.GET.get("next"))}
        )
    return render(request, "registration/signup.html", {"form": form})


def signup_done(request):
    days = max(1, settings.PASSWORD_RESET_TIMEOUT // 86400)  # how long a verification link works
    return render(request, "registration/signup_done.html", {"days": days})


@never_cache
@require_http_methods(["GET", "HEAD", "POST"])
def verify(request, uidb64: str, token: str):
    """GET shows a button, POST activates and logs in: a link opened by a mail scanner changes
    nothing, and another site cannot log a visitor into an account of its own (login CSRF)."""
    next_url = safe_next(request, request.GET.get("next"))
    user = unverified_user_for_link(uidb64, token)
    if user is None:
        return render(request, "registration/verify_invalid.html", {"next": next_url}, status=400)
    if request.method != "POST":
        return render(request, "registration/verify.html", {"email": user.email, "next": next_url})
    account_verify(user=user)
    login(request, user, backend=BACKEND)
    messages.success(request, "Your email is verified: welcome to Calvin.")
    return redirect(next_url or "dashboard:home")


@require_POST
def verify_resend(request):
    form = ResendVerificationForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Enter a valid email address to send the link to.")
        return redirect("login")
    email = form.cleaned_data["email"]
    if not account_email_allowed(email=email, client_address=request.META.get("REMOTE_ADDR")):
        messages.error(request, "A link was sent a moment ago: wait a minute, then ask again.")
        return redirect(with_query(reverse("login"), next=safe_next(request, form.cleaned_data["next"])))
    verification_resend(request, email=email, next_url=safe_next(request, form.cleaned_data["next"]))
    return redirect("accounts:signup-done")


class LoginView(auth_views.LoginView):
    authentication_form = LoginForm

    def get_context_data(self, **kwargs):
        context = super().get_context_data(**kwargs)
        context["signup_link"] = signup_url(next=self.get_redirect_url())
        return context


class PasswordChangeView(auth_views.PasswordChangeView):
    def form_valid(self, form):
        with transaction.atomic():
            response = super().form_valid(form)
            audit_record(verb="account.password_change", actor=self.request.user, target=self.request.user)
        return response


class PasswordResetView(auth_views.PasswordResetView):
    form_class = ResetForm
    email_template_name = "registration/password_reset_email.txt"
    subject_template_name = "registration/password_reset_subject.txt"

    def form_valid(self, form):
        # The link's origin: CALVIN_PUBLIC_URL when set (behind a proxy), else this request's.
        self.extra_email_context = {"base_url": absolute_url(self.request, "/").rstrip("/")}
        return super().form_valid(form)


class PasswordResetConfirmView(auth_views.PasswordResetConfirmView):
    def form_valid(self, form):
        with transaction.atomic():
            unverified = is_unverified(form.user)
            response = super().form_valid(form)
            audit_record(verb="account.password_reset", actor=form.user, target=form.user)
            if unverified:  # the reset link was opened from the address: it is verified
                account_verify(user=form.user)
        return response


password_change_done = auth_views.PasswordChangeDoneView.as_view()
password_reset_done = auth_views.PasswordResetDoneView.as_view()
password_reset_complete = auth_views.PasswordResetCompleteView.as_view()
logout = auth_views.LogoutView.as_view()
