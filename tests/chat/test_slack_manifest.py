"""The manifest people paste into Slack names only URLs this gateway serves."""

import json
from io import StringIO
from urllib.parse import urlparse

from django.core.management import call_command
from django.urls import resolve


def _manifest(url="https://calvin.example.com/"):
    out = StringIO()
    call_command("slack_manifest", url=url, stdout=out)
    return json.loads(out.getvalue())


def test_every_url_in_the_manifest_is_served_here(settings):
    settings.SLACK_SIGNING_SECRET = "x"
    manifest = _manifest()
    urls = [
        manifest["settings"]["event_subscriptions"]["request_url"],
        manifest["settings"]["interactivity"]["request_url"],
        *manifest["oauth_config"]["redirect_urls"],
        *(c["url"] for c in manifest["features"]["slash_commands"]),
    ]
    for url in urls:
        assert url.startswith("https://calvin.example.com/slack/"), url
        resolve(urlparse(url).path)  # raises Resolver404 for a path Calvin does not serve


# What each event subscription needs Slack to grant (Slack refuses a manifest without it).
EVENT_SCOPES = {
    "app_mention": "app_mentions:read",
    "message.im": "im:history",
    "message.channels": "channels:history",
    "message.groups": "groups:history",
}


def test_the_default_scopes_cover_every_event_and_call_calvin_makes():
    manifest = _manifest()
    scopes = set(manifest["oauth_config"]["scopes"]["bot"])
    events = manifest["settings"]["event_subscriptions"]["bot_events"]
    assert {"app_mention", "message.im", "app_uninstalled", "tokens_revoked"} <= set(events)
    for event in events:
        if event in EVENT_SCOPES:
            assert EVENT_SCOPES[event] in scopes, event
    # Posting, files, the 👀 reaction and the slash command.
    assert {"chat:write", "files:write", "reactions:write", "commands"} <= scopes


def test_the_manifest_asks_for_the_configured_scopes(settings):
    settings.SLACK_BOT_SCOPES = ["chat:write", "commands"]
    assert _manifest()["oauth_config"]["scopes"]["bot"] == ["chat:write", "commands"]
