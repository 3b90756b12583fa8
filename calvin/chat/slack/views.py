"""Slack's HTTP endpoints: thin, handed to slack-bolt (its Django adapter and its OAuthFlow)."""

import logging

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET, require_POST
from slack_bolt.adapter.django import SlackRequestHandler

from calvin.chat.slack import oauth
from calvin.chat.slack.bolt_app import bolt_app
from calvin.chat.slack.request_checks import body_problem, signature_valid

log = logging.getLogger(__name__)


@csrf_exempt  # Slack signs its requests: the signature and its timestamp are checked here and by Bolt
@require_POST
def slack_inbound(request):
    secret = settings.SLACK_SIGNING_SECRET
    if not secret:
        return HttpResponse("Slack is not configured on this gateway (no SLACK_SIGNING_SECRET)", status=404)
    if not signature_valid(secret=secret, body=request.body, headers=request.headers):
        # Never the body: a replayed secret form would carry its value.
        log.warning("refused a request to %s: invalid Slack signature or timestamp", request.path)
        return HttpResponse("invalid request signature or timestamp", status=401)
    problem = body_problem(body=request.body, content_type=request.content_type or "")
    if problem:
        return HttpResponse(f"Calvin cannot take this request: {problem}", status=400)
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
