"""Slack's HTTP endpoints: thin, handed to slack-bolt (its Django adapter and its OAuthFlow)."""

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from slack_bolt.adapter.django import SlackRequestHandler

from calvin.chat.slack import oauth
from calvin.chat.slack.bolt_app import bolt_app


@csrf_exempt  # Slack signs its requests; Bolt verifies the signature and the timestamp
@require_POST
def slack_inbound(request):
    if not settings.SLACK_SIGNING_SECRET:
        return HttpResponse("Slack is not configured on this gateway (no SLACK_SIGNING_SECRET)", status=404)
    return SlackRequestHandler(bolt_app()).handle(request)


@never_cache
@require_GET
def slack_install(request):
    """The OAuth install's start (calvin.chat.slack.oauth): a signed-in owner or admin only."""
    return oauth.oauth_install_response(request)


@never_cache
@require_GET
def slack_oauth_redirect(request):
    """Where Slack sends the installer back with a code and the state."""
    return oauth.oauth_redirect_response(request)
