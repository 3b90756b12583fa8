"""Slack's OAuth v2 install (`/slack/install`, `/slack/oauth_redirect`) through slack-bolt's OAuthFlow.

Bolt runs the flow: the authorize URL with the scopes and the state, the state cookie it
checks against the state at the redirect, `oauth.v2.access` (at SLACK_API_URL) and
`auth.test`. Calvin supplies what needs the person: a state kept in SlackOAuthState
(random, single use, bound to the signed-in person and the workspace they install into,
valid for 10 minutes), and the installation's handling: installation_save ties the Slack team
to that workspace with the bot token sealed by the vault, and refuses a team tied to another
workspace (nothing changes then).

Only a signed-in owner or admin of the workspace may install into it, and the same person
must come back to the redirect. No page, log line or error text carries the token.
"""

import logging
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.db import transaction
from django.http import HttpResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.utils import timezone
from slack_bolt.adapter.django.handler import to_bolt_request, to_django_response
from slack_bolt.error import BoltError
from slack_bolt.oauth import OAuthFlow
from slack_bolt.oauth.callback_options import CallbackOptions, FailureArgs, SuccessArgs
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_bolt.response import BoltResponse
from slack_sdk.oauth.installation_store import Bot as BoltBot
from slack_sdk.oauth.installation_store import InstallationStore
from slack_sdk.oauth.state_store import OAuthStateStore

from calvin.chat.models import SlackInstallation, SlackOAuthState
from calvin.chat.slack.installations import InstallRefused, installation_remove, installation_save, installation_token
from calvin.chat.slack.web_api import slack_client
from calvin.workspaces.models import Member, Workspace
from secrets_vault.crypto import VaultUnavailable, vault_available

log = logging.getLogger(__name__)

INSTALL_PATH = "/slack/install"
REDIRECT_PATH = "/slack/oauth_redirect"
# An install started must be finished within this (Bolt's default; the state cookie lives as long).
STATE_SECONDS = 10 * 60
# Unfinished states are forgotten after this.
STATE_KEPT = timedelta(days=1)
MANAGER_ROLES = (Member.Role.OWNER, Member.Role.ADMIN)
HTML = "text/html; charset=utf-8"


def oauth_configured() -> bool:
    return bool(settings.SLACK_CLIENT_ID and settings.SLACK_CLIENT_SECRET)


# -- who may install where (selectors)


def install_workspaces(user):
    """The workspaces `user` may install Slack into: those they own or administer."""
    if not user.is_authenticated:
        return Workspace.objects.none()
    return Workspace.objects.filter(members__user=user, members__role__in=MANAGER_ROLES).distinct().order_by("name")


def manages(user, workspace_id: int) -> bool:
    return install_workspaces(user).filter(id=workspace_id).exists()


# -- the state (services)


@transaction.atomic
def oauth_state_issue(*, workspace, user) -> SlackOAuthState:
    """A new state for `user` installing into `workspace`; states left unfinished long ago go."""
    SlackOAuthState.objects.filter(created_at__lt=timezone.now() - STATE_KEPT).delete()
    return SlackOAuthState.objects.create(state=secrets.token_urlsafe(32), workspace=workspace, user=user)


@dataclass(frozen=True)
class Consumed:
    state: SlackOAuthState | None
    problem: str = ""  # why not, when state is None


@transaction.atomic
def oauth_state_consume(*, state: str, user) -> Consumed:
    """Use the state once: it must be this person's, unused, younger than STATE_SECONDS, and
    they must still own or administer its workspace. A state of someone else is left as it is."""
    now = timezone.now()
    row = SlackOAuthState.objects.select_for_update().select_related("workspace").filter(state=state or "").first()
    if row is None or not user.is_authenticated or row.user_id != user.id:
        return Consumed(None, "this install was not started by you (or not from this Calvin)")
    if row.consumed_at is not None:
        return Consumed(None, "this install link was already used")
    SlackOAuthState.objects.filter(id=row.id).update(consumed_at=now)
    if row.created_at < now - timedelta(seconds=STATE_SECONDS):
        return Consumed(None, f"this install was started more than {STATE_SECONDS // 60} minutes ago and expired")
    if not manages(user, row.workspace_id):
        return Consumed(None, f"you are no longer an owner or admin of the workspace {row.workspace.name}")
    return Consumed(row)


class CalvinStateStore(OAuthStateStore):
    """Bolt's state store for one request's signed-in person."""

    def __init__(self, *, user):
        self.user = user
        self.consumed: Consumed | None = None

    @property
    def logger(self):
        return log

    def issue(self, *, workspace) -> str:
        return oauth_state_issue(workspace=workspace, user=self.user).state

    def consume(self, state: str) -> bool:
        self.consumed = oauth_state_consume(state=state, user=self.user)
        return self.consumed.state is not None


class CalvinInstallationStore(InstallationStore):
    """Bolt's view of SlackInstallation. An install is saved by CalvinOAuthFlow.store_installation,
    which knows the workspace; `save` alone cannot."""

    @property
    def logger(self):
        return log

    def save(self, installation):
        raise BoltError("a Slack install is saved with its Calvin workspace (CalvinOAuthFlow.store_installation)")

    def find_bot(self, *, enterprise_id, team_id, is_enterprise_install=False):
        row = SlackInstallation.objects.filter(team_id=team_id or "").first()
        if row is None:
            return None
        return BoltBot(
            app_id=row.app_id or None,
            enterprise_id=row.enterprise_id or None,
            team_id=row.team_id,
            team_name=row.team_name,
            bot_token=installation_token(row),
            bot_id=row.bot_id,
            bot_user_id=row.bot_user_id,
            bot_scopes=row.bot_scopes,
            installed_at=row.installed_at.timestamp(),
        )

    def delete_bot(self, *, enterprise_id, team_id):
        installation_remove(team_id=team_id or "")

    def delete_all(self, *, enterprise_id, team_id):
        installation_remove(team_id=team_id or "")


class NotStored(BoltError):
    """The install is refused; `text` says why (a page shows it). Nothing was stored."""

    def __init__(self, text: str, status: int = 409):
        super().__init__(text)
        self.text = text
        self.status = status


# -- the flow


def redirect_uri() -> str | None:
    """Sent to Slack when the gateway knows its public address (Slack checks it against the app's list)."""
    base = settings.CALVIN_PUBLIC_URL.rstrip("/")
    return f"{base}{REDIRECT_PATH}" if base else None


class CalvinOAuthFlow(OAuthFlow):
    """Bolt's OAuthFlow for one request of one signed-in person (`http_request`)."""

    def __init__(self, *, http_request):
        self.http_request = http_request
        self.state_store = CalvinStateStore(user=http_request.user)
        super().__init__(
            client=slack_client(),
            logger=log,
            settings=OAuthSettings(
                client_id=settings.SLACK_CLIENT_ID,
                client_secret=settings.SLACK_CLIENT_SECRET,
                scopes=list(settings.SLACK_BOT_SCOPES),
                user_scopes=[],
                redirect_uri=redirect_uri(),
                install_path=INSTALL_PATH,
                redirect_uri_path=REDIRECT_PATH,
                authorization_url=settings.SLACK_AUTHORIZE_URL,
                callback_options=CallbackOptions(success=self._succeeded, failure=self._failed),
                installation_store=CalvinInstallationStore(),
                installation_store_bot_only=True,
                state_store=self.state_store,
                state_expiration_seconds=STATE_SECONDS,
                logger=log,
            ),
        )

    # -- /slack/install

    def issue_new_state(self, request) -> str:
        return self.state_store.issue(workspace=request.context["calvin_workspace"])

    def build_install_page_html(self, url: str, request) -> str:
        workspace = request.context["calvin_workspace"]
        current = SlackInstallation.objects.filter(workspace=workspace).first()
        return _html(self.http_request, "slack/install.html", {"workspace": workspace, "url": url, "current": current})

    # -- /slack/oauth_redirect

    def store_installation(self, request, installation) -> None:
        workspace = self.state_store.consumed.state.workspace
        if installation.is_enterprise_install or not installation.team_id:
            raise NotStored(
                "this was an organisation-wide (Enterprise Grid) install; Calvin is installed into one Slack"
                " workspace at a time: install it into a workspace of the organisation"
            )
        if not installation.bot_token:
            raise NotStored("Slack returned no bot token for this install (the app asked for no bot scopes)")
        if installation.bot_refresh_token:
            raise NotStored(
                "this Slack app has token rotation turned on, and Calvin keeps the app's long-lived bot token:"
                " turn token rotation off in the app's settings (OAuth & Permissions) and install again"
            )
        try:
            saved = installation_save(
                workspace=workspace,
                team_id=installation.team_id,
                bot_token=installation.bot_token,
                team_name=installation.team_name or "",
                enterprise_id=installation.enterprise_id or "",
                app_id=installation.app_id or "",
                bot_id=installation.bot_id or "",
                bot_user_id=installation.bot_user_id or "",
                bot_scopes=",".join(installation.bot_scopes or []),
                installer_slack_user_id=installation.user_id or "",
                installed_by=self.http_request.user,
            )
        except InstallRefused as exc:
            log.info(
                "Slack install of team %s into workspace %s refused: %s", installation.team_id, workspace.slug, exc
            )
            raise NotStored(str(exc)) from None
        except VaultUnavailable:
            raise NotStored(
                "this gateway has no SP_STORE_KEY, so it cannot keep the bot token sealed: nothing was stored", 503
            ) from None
        log.info(
            "Slack team %s connected to workspace %s by %s",
            saved.team_id,
            workspace.slug,
            self.http_request.user.get_username(),
        )
        request.context["calvin_installation"] = saved

    def _succeeded(self, args: SuccessArgs) -> BoltResponse:
        saved = args.request.context["calvin_installation"]
        return self._page(
            200,
            "slack/installed.html",
            {"ok": True, "installation": saved, "workspace": saved.workspace},
        )

    def _failed(self, args: FailureArgs) -> BoltResponse:
        consumed = self.state_store.consumed
        workspace = consumed.state.workspace if consumed and consumed.state else None
        status = args.suggested_status_code
        if isinstance(args.error, NotStored):
            reason, status = args.error.text, args.error.status
        elif args.reason == "invalid_state":
            reason = (consumed.problem if consumed else "") or "this install is no longer valid"
        else:
            reason = FAILURES.get(args.reason) or f"Slack answered {args.reason}"
        log.info("Slack install failed: %s", args.reason)
        return self._page(status, "slack/installed.html", {"ok": False, "reason": reason, "workspace": workspace})

    def _page(self, status: int, template: str, context: dict) -> BoltResponse:
        body = _html(self.http_request, template, context)
        deletion = self.settings.state_utils.build_set_cookie_for_deletion()
        return BoltResponse(status=status, body=body, headers={"Content-Type": HTML, "Set-Cookie": [deletion]})


FAILURES = {
    "access_denied": "the install was cancelled in Slack",
    "invalid_browser": (
        "this browser did not start the install (its install cookie is missing): start again from the install page"
        " in the same browser"
    ),
    "missing_code": "Slack's redirect carried no code",
    "invalid_code": (
        "Slack refused the install's code (it was already used, it expired, or this gateway's"
        " SLACK_CLIENT_ID / SLACK_CLIENT_SECRET are not the app's)"
    ),
    "storage_error": "the install could not be stored",
}


def _html(http_request, template: str, context: dict) -> str:
    return render_to_string(template, context, request=http_request)


# -- the two endpoints (the views call these)


def _page_response(request, status: int, **context) -> HttpResponse:
    return render(request, "slack/install.html", context, status=status)


def oauth_install_response(request) -> HttpResponse:
    """GET /slack/install[?workspace=<slug>]: the install page with Slack's authorize link and the state cookie."""
    if not oauth_configured():
        return _page_response(request, 404, problem="Slack installs are not configured on this gateway.")
    if not request.user.is_authenticated:
        return redirect_to_login(request.get_full_path())
    if not vault_available():
        return _page_response(
            request, 503, problem="This gateway has no SP_STORE_KEY, so it cannot keep a Slack bot token."
        )
    mine = install_workspaces(request.user)
    slug = request.GET.get("workspace")
    if slug:
        workspace = mine.filter(slug=slug).first()
        if workspace is None:
            problem = f"Slack can be installed only into a workspace you own or administer, and {slug!r} is not one."
            return _page_response(request, 403, problem=problem)
    else:
        choices = list(mine)
        if not choices:
            problem = "Slack can be installed only by an owner or admin of a workspace, and you are neither anywhere."
            return _page_response(request, 403, problem=problem)
        if len(choices) > 1:
            return _page_response(request, 200, choices=choices)
        workspace = choices[0]
    flow = CalvinOAuthFlow(http_request=request)
    bolt_request = to_bolt_request(request)
    bolt_request.context["calvin_workspace"] = workspace
    return to_django_response(flow.handle_installation(bolt_request))


def oauth_redirect_response(request) -> HttpResponse:
    """GET /slack/oauth_redirect?code=…&state=…: Slack sends the installer back here."""
    if not oauth_configured():
        return _page_response(request, 404, problem="Slack installs are not configured on this gateway.")
    if not request.user.is_authenticated:
        # Back here after signing in: the state waits (until it expires) for its own person.
        return redirect_to_login(request.get_full_path())
    flow = CalvinOAuthFlow(http_request=request)
    return to_django_response(flow.handle_callback(to_bolt_request(request)))
