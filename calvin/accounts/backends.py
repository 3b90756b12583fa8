"""Log in by username or by email, in any case (AUTHENTICATION_BACKENDS, after django-axes')."""

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend

from calvin.accounts.identity import is_unverified, user_for_login


class EmailOrUsernameBackend(ModelBackend):
    def authenticate(self, request, username=None, password=None, **kwargs):
        if username is None or password is None:
            return None
        user = user_for_login(username)
        if user is None:
            get_user_model()().set_password(password)  # as long as a real check: no timing tell
            return None
        if not user.check_password(password):
            return None
        # An unverified account with its right password is returned so the login form can say
        # "verify your email first" (AuthenticationForm.confirm_login_allowed refuses it);
        # get_user() still refuses every inactive account, so no session of one works.
        if user.is_active or is_unverified(user):
            return user
        return None
