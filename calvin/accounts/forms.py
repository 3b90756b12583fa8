"""Django's auth forms, with Calvin's address rules: sign-up, login by email or username, resend."""

from django import forms
from django.contrib.auth import get_user_model
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm, SetPasswordMixin
from django.core.validators import MaxLengthValidator

from calvin.accounts.identity import EMAIL_MAX_LENGTH, LOGIN_MAX_LENGTH, email_normalize, is_unverified

NOT_ASCII = (
    "Type the address in plain ASCII letters (an international domain in its xn-- form): look-alike letters"
    " from other alphabets are not accepted."
)


class NormalEmailField(forms.EmailField):
    """An email in its normal form (calvin/accounts/identity.py), ASCII only."""

    def __init__(self, **kwargs):
        super().__init__(max_length=EMAIL_MAX_LENGTH, **kwargs)

    def to_python(self, value):
        value = super().to_python(value)
        return email_normalize(value) if value else value

    def validate(self, value):
        super().validate(value)
        if value and not value.isascii():
            raise forms.ValidationError(NOT_ASCII, code="not_ascii")


class SignupForm(SetPasswordMixin, forms.Form):
    email = NormalEmailField(widget=forms.EmailInput(attrs={"autocomplete": "email", "autofocus": True}))
    password1, password2 = SetPasswordMixin.create_password_fields()
    next = forms.CharField(required=False, widget=forms.HiddenInput, max_length=2000)

    def clean(self):
        self.validate_passwords()
        email = self.cleaned_data.get("email") or ""
        # Django's validators, the similarity one against the account this would become.
        self.validate_password_for_user(get_user_model()(username=email, email=email))
        return self.cleaned_data


class LoginForm(AuthenticationForm):
    """Username or email (any case); an unverified account with its right password is told to
    verify (confirm_login_allowed), any wrong password gets Django's one message."""

    error_messages = {
        **AuthenticationForm.error_messages,
        "inactive": "Verify your email first: open the link we emailed you when you signed up.",
    }

    def __init__(self, request=None, *args, **kwargs):
        super().__init__(request, *args, **kwargs)
        self.fields["username"].label = "Email or username"
        self.fields["username"].max_length = LOGIN_MAX_LENGTH
        self.fields["username"].validators.append(MaxLengthValidator(LOGIN_MAX_LENGTH))
        self.fields["username"].widget.attrs["maxlength"] = LOGIN_MAX_LENGTH
        self.unverified_email = ""

    def confirm_login_allowed(self, user):
        if not user.is_active:
            self.unverified_email = user.email
        super().confirm_login_allowed(user)


class ResendVerificationForm(forms.Form):
    email = NormalEmailField()
    next = forms.CharField(required=False, widget=forms.HiddenInput, max_length=2000)


class ResetForm(PasswordResetForm):
    """Django's reset form, which also reaches accounts whose verification link was never opened:
    a person who forgot the password before verifying is not stuck (the reset link proves the
    address, so completing it verifies the account too). Deactivated accounts still get nothing."""

    def get_users(self, email):
        matching = get_user_model()._default_manager.filter(email__iexact=email)
        return (
            user
            for user in matching
            if (user.is_active or is_unverified(user))
            and user.has_usable_password()
            and email_normalize(user.email) == email_normalize(email)
        )
