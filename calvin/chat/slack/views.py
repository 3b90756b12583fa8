"""Slack's HTTP endpoints: thin, handed to slack-bolt's Django adapter."""

from django.conf import settings
from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from slack_bolt.adapter.django import SlackRequestHandler

from calvin.chat.slack.bolt_app import bolt_app


@csrf_exempt  # Slack signs its requests; Bolt verifies the signature and the timestamp
@require_POST
def slack_inbound(request):
    if not settings.SLACK_SIGNING_SECRET:
        return HttpResponse("Slack is not configured on this gateway (no SLACK_SIGNING_SECRET)", status=404)
    return SlackRequestHandler(bolt_app()).handle(request)
