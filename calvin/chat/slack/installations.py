"""Slack installations: which Calvin workspace a Slack team belongs to, and its bot token.

The token is sealed by the vault, bound to the workspace and the team: a copied row does
not open elsewhere. In one-team mode (SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET) the
installation is made from the environment the first time it is needed."""

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction

from calvin.chat.models import SlackInstallation
from secrets_vault.crypto import decrypt, encrypt, vault_keys


class InstallRefused(Exception):
    """The install changes nothing; the text says why."""


@dataclass(frozen=True)
class Bot:
    """What a listener or the outbox needs to talk to one Slack team."""

    team_id: str
    workspace_id: int
    token: str
    bot_user_id: str
    bot_id: str


def _vault_name(team_id: str) -> str:
    return f"slack-bot-token:{team_id}"


def one_team_mode() -> bool:
    return bool(settings.SLACK_BOT_TOKEN and settings.SLACK_SIGNING_SECRET)


@transaction.atomic
def installation_save(
    *,
    workspace,
    team_id: str,
    bot_token: str,
    team_name: str = "",
    enterprise_id: str = "",
    app_id: str = "",
    bot_id: str = "",
    bot_user_id: str = "",
    bot_scopes: str = "",
    installer_slack_user_id: str = "",
    installed_by=None,
    from_environment: bool = False,
) -> SlackInstallation:
    """Tie `team_id` to `workspace` with its bot token; a reinstall into the same workspace
    replaces the token. A team tied to another workspace, or a workspace tied to another
    team, is refused."""
    from calvin.workspaces.models import Workspace

    taken = SlackInstallation.objects.select_for_update().filter(team_id=team_id).first()
    if taken is not None and taken.workspace_id != workspace.id:
        raise InstallRefused("this Slack workspace is already connected to another Calvin workspace")
    other = Workspace.objects.filter(slack_team_id=team_id).exclude(id=workspace.id).exists()
    if other:
        raise InstallRefused("this Slack workspace is already connected to another Calvin workspace")
    mine = SlackInstallation.objects.select_for_update().filter(workspace=workspace).first()
    if mine is not None and mine.team_id != team_id:
        raise InstallRefused(
            f"this Calvin workspace is already connected to Slack team {mine.team_name or mine.team_id};"
            " uninstall that first"
        )
    key_id, sealed = encrypt(workspace_id=workspace.id, session_id=None, name=_vault_name(team_id), value=bot_token)
    fields = {
        "team_name": team_name,
        "enterprise_id": enterprise_id or "",
        "app_id": app_id or "",
        "bot_id": bot_id or "",
        "bot_user_id": bot_user_id or "",
        "bot_scopes": bot_scopes or "",
        "bot_token_key_id": key_id,
        "bot_token_sealed": sealed,
        "installer_slack_user_id": installer_slack_user_id or "",
        "installed_by": installed_by,
        "from_environment": from_environment,
    }
    try:
        with transaction.atomic():
            installation, _ = SlackInstallation.objects.update_or_create(
                team_id=team_id, workspace=workspace, defaults=fields
            )
            Workspace.objects.filter(id=workspace.id).update(slack_team_id=team_id)
    except IntegrityError as exc:  # a concurrent install of the same team elsewhere
        raise InstallRefused("this Slack workspace is already connected to another Calvin workspace") from exc
    from calvin.audit.services import audit_record

    # A reinstall (a new bot token, never recorded) is an install too.
    audit_record(
        verb="slack.install",
        workspace=workspace,
        actor=installed_by if getattr(installed_by, "is_authenticated", False) else None,
        target=installation,
        changes={
            "slack_team_id": (mine.team_id if mine else "", team_id),
            "team_name": (mine.team_name if mine else "", team_name),
        },
        via="system" if from_environment else None,
    )
    return installation


def installation_token(installation: SlackInstallation) -> str:
    return decrypt(
        workspace_id=installation.workspace_id,
        session_id=None,
        name=_vault_name(installation.team_id),
        key_id=installation.bot_token_key_id,
        ciphertext=installation.bot_token_sealed,
    )


def bot_for_team(team_id: str) -> Bot | None:
    """The team's bot, or None when Calvin is not installed there."""
    installation = SlackInstallation.objects.filter(team_id=team_id).first()
    if installation is None and one_team_mode():
        installation = installation_from_environment(team_id=team_id)
    if installation is None:
        return None
    return Bot(
        team_id=installation.team_id,
        workspace_id=installation.workspace_id,
        token=installation_token(installation),
        bot_user_id=installation.bot_user_id,
        bot_id=installation.bot_id,
    )


def installation_from_environment(*, team_id: str | None = None) -> SlackInstallation | None:
    """One-team mode: the installation SLACK_BOT_TOKEN stands for, made on first use and
    tied to CALVIN_SLACK_WORKSPACE. Asks Slack (auth.test) which team and bot it is."""
    from calvin.chat.slack.web_api import slack_client, slack_error
    from calvin.workspaces.models import Workspace

    workspace = Workspace.objects.filter(slug=settings.CALVIN_SLACK_WORKSPACE).first()
    if workspace is None:
        return None
    try:
        me = slack_client(settings.SLACK_BOT_TOKEN).auth_test()
    except Exception as exc:
        raise slack_error(exc, doing="auth.test") from exc
    if team_id is not None and me["team_id"] != team_id:
        return None  # an event from a team this token is not for
    return installation_save(
        workspace=workspace,
        team_id=me["team_id"],
        bot_token=settings.SLACK_BOT_TOKEN,
        team_name=me.get("team") or "",
        bot_id=me.get("bot_id") or "",
        bot_user_id=me.get("user_id") or "",
        from_environment=True,
    )


@transaction.atomic
def installation_remove(*, team_id: str, actor=None, via: str | None = None) -> int | None:
    """Forget the team's installation; returns the workspace id it was tied to. `actor` and
    `via`: who removed it and from where (Slack's app_uninstalled event: None and "slack")."""
    from calvin.audit.services import audit_record
    from calvin.workspaces.models import Workspace

    installation = SlackInstallation.objects.select_for_update().filter(team_id=team_id).first()
    if installation is None:
        return None
    workspace_id = installation.workspace_id
    audit_record(
        verb="slack.uninstall",
        workspace=workspace_id,
        actor=actor,
        target=installation,
        changes={"slack_team_id": (team_id, "")},
        via=via,
    )
    installation.delete()
    Workspace.objects.filter(id=workspace_id, slack_team_id=team_id).update(slack_team_id="")
    return workspace_id


@transaction.atomic
def installations_reseal() -> int:
    """Seal every bot token again under the first SP_STORE_KEY (`manage.py rotate_secrets`,
    after a new key was put in front); returns how many changed."""
    first = vault_keys()[0].key_id
    changed = 0
    for installation in SlackInstallation.objects.select_for_update().exclude(bot_token_key_id=first):
        key_id, sealed = encrypt(
            workspace_id=installation.workspace_id,
            session_id=None,
            name=_vault_name(installation.team_id),
            value=installation_token(installation),
        )
        SlackInstallation.objects.filter(id=installation.id).update(bot_token_key_id=key_id, bot_token_sealed=sealed)
        changed += 1
    return changed


SLACK_REQUEST_PATHS = (
    ("Event Subscriptions, Request URL", "/slack/events"),
    ("Interactivity & Shortcuts, Request URL", "/slack/interactivity"),
    ("Slash command /calvin, Request URL", "/slack/commands"),
)


def slack_setup_lines(base: str) -> list[str]:
    """What `up` prints for the Slack app's settings page when Slack is configured; [] when not."""
    base = base.rstrip("/")
    if not settings.SLACK_SIGNING_SECRET and not (settings.SLACK_CLIENT_ID and settings.SLACK_CLIENT_SECRET):
        return []
    if one_team_mode():
        workspace = settings.CALVIN_SLACK_WORKSPACE
        mode = f"one team: SLACK_BOT_TOKEN's Slack workspace belongs to the Calvin workspace {workspace!r}"
    elif settings.SLACK_SIGNING_SECRET:
        mode = "Slack workspaces are connected by installing the app"
    else:
        mode = "SLACK_SIGNING_SECRET is not set: Slack's requests are refused until it is"
    lines = [f"Slack ({mode}). In the Slack app's settings:"]
    lines += [f"  {where}: {base}{path}" for where, path in SLACK_REQUEST_PATHS]
    if settings.SLACK_CLIENT_ID and settings.SLACK_CLIENT_SECRET:
        lines.append(f"  OAuth & Permissions, Redirect URL: {base}/slack/oauth_redirect")
        lines.append(f"  Install into a workspace you administer: {base}/slack/install")
    return lines
