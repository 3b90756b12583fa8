"""The Slack app manifest for this gateway: paste it at api.slack.com/apps ("From a manifest")
and the app's request URLs, events, scopes and slash command match what Calvin serves."""

from django.conf import settings

BOT_EVENTS = [
    "app_mention",
    "message.im",
    "message.channels",
    "message.groups",
    "app_uninstalled",
    "tokens_revoked",
]


def slack_manifest(*, base_url: str, name: str = "Calvin") -> dict:
    base = base_url.rstrip("/")
    return {
        "display_information": {
            "name": name,
            "description": "AI coding agents in your threads",
        },
        "features": {
            "app_home": {"messages_tab_enabled": True, "messages_tab_read_only_enabled": False},
            "bot_user": {"display_name": name, "always_online": True},
            "slash_commands": [
                {
                    "command": "/calvin",
                    "url": f"{base}/slack/commands",
                    "description": "The session of this thread or channel: status, stop, mode",
                    "usage_hint": "status | stop | mode <permission mode> | help",
                    "should_escape": False,
                }
            ],
        },
        "oauth_config": {
            "redirect_urls": [f"{base}/slack/oauth_redirect"],
            "scopes": {"bot": list(settings.SLACK_BOT_SCOPES)},
        },
        "settings": {
            "event_subscriptions": {"request_url": f"{base}/slack/events", "bot_events": BOT_EVENTS},
            "interactivity": {"is_enabled": True, "request_url": f"{base}/slack/interactivity"},
            "org_deploy_enabled": False,
            "socket_mode_enabled": False,
            "token_rotation_enabled": False,
        },
    }
