"""django-axes' database handler with two more limits (AXES_HANDLER).

axes counts failures per (username, address) pair (AXES_LOCKOUT_PARAMETERS) against one
AXES_FAILURE_LIMIT; its lists of alternatives would share that one limit. Over the same
AccessAttempt rows, a username that failed CALVIN_LOGIN_USERNAME_FAILURE_LIMIT times from
any addresses, or an address that failed CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT times for any
usernames, is locked out as a pair at its limit would be. A success resets only its own
pair's rows (AXES_RESET_ON_SUCCESS over the pair), so logging in to one's own account does
not clear what an address spent on others.
"""

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username, get_failure_limit
from axes.models import AccessAttempt
from django.conf import settings
from django.db.models import Sum


def recent_failures(request, **match) -> int:
    """Failures within the cool-off (always set here), as axes counts its own, of the attempts matching `match`."""
    attempts = AccessAttempt.objects.filter(attempt_time__gte=get_cool_off_threshold(request), **match)
    return attempts.aggregate(failures=Sum("failures_since_start"))["failures"] or 0


def username_or_address_over_limit(request, credentials=None) -> bool:
    username = get_client_username(request, credentials)
    if username and recent_failures(request, username=username) >= settings.CALVIN_LOGIN_USERNAME_FAILURE_LIMIT:
        return True
    address = request.axes_ip_address
    return bool(address) and recent_failures(request, ip_address=address) >= settings.CALVIN_LOGIN_ADDRESS_FAILURE_LIMIT


class LoginThrottleHandler(AxesDatabaseHandler):
    def get_failures(self, request, credentials=None) -> int:
        # axes decides both "refuse before checking the password" and "this failure locks out"
        # by comparing this one number with the pair's limit: a username or an address over
        # its own limit counts as the pair's limit reached.
        failures = super().get_failures(request, credentials)
        if username_or_address_over_limit(request, credentials):
            return max(failures, get_failure_limit(request, credentials))
        return failures
