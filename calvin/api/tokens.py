"""Making, revoking and reading people's API tokens (services; the dashboard's page calls them)."""

from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from calvin.api.models import ApiToken
from calvin.audit.services import audit_record
from sessions.tokens import token_digest, token_new

PREFIX = "cpt_"  # a person's API token; a runner's is sessions.tokens.PREFIX
LAST_USED_EVERY = timedelta(minutes=1)  # last_used_at is written at most this often per token
MAX_LIVE_PER_MEMBER = 20


class TokenRefused(Exception):
    pass


@transaction.atomic
def api_token_create(*, member, name: str, expires_at=None) -> tuple[ApiToken, str]:
    """A new token for `member`; the token itself is returned once and never stored."""
    name = " ".join(name.split())[:100]
    if not name:
        raise TokenRefused("give the token a name, so you can tell it apart later")
    if expires_at is not None and expires_at <= timezone.now():
        raise TokenRefused("the expiry must be in the future")
    live = ApiToken.objects.filter(member=member, revoked_at__isnull=True).exclude(expires_at__lte=timezone.now())
    if live.count() >= MAX_LIVE_PER_MEMBER:
        raise TokenRefused(f"you have {MAX_LIVE_PER_MEMBER} live tokens already: revoke one first")
    token = token_new(PREFIX)
    row = ApiToken.objects.create(
        member=member, name=name, digest=token_digest(token), hint=token[:10], expires_at=expires_at
    )
    audit_record(
        verb="api_token.create",
        workspace=member.workspace_id,
        actor=member,
        target=row,
        changes={"name": ("", name), "expires_at": (None, expires_at.isoformat() if expires_at else None)},
    )
    return row, token


@transaction.atomic
def api_token_revoke(*, token_id: int, member) -> bool:
    """Revoke a token: `member` (a Member) revokes their own, an owner or admin any of their
    workspace's; a superuser (a User) any. False when there is no such live token for them."""
    from calvin.workspaces.models import Member

    tokens = ApiToken.objects.filter(id=token_id, revoked_at__isnull=True)
    if isinstance(member, Member):
        tokens = tokens.filter(member__workspace_id=member.workspace_id)
        if not member.is_admin:
            tokens = tokens.filter(member=member)
    elif not getattr(member, "is_superuser", False):
        return False
    row = tokens.select_for_update().select_related("member").first()
    if row is None:
        return False
    now = timezone.now()
    ApiToken.objects.filter(id=row.id).update(revoked_at=now)
    audit_record(
        verb="api_token.revoke",
        workspace=row.member.workspace_id,
        actor=member,
        target=row,
        changes={"revoked_at": (None, now.isoformat())},
    )
    return True


def api_token_live(token: str) -> ApiToken | None:
    """The live token (with its member and user) this text is, else None."""
    now = timezone.now()
    row = (
        ApiToken.objects.select_related("member__user")
        .filter(digest=token_digest(token), revoked_at__isnull=True)
        .first()
    )
    if row is None or not row.is_live(now) or row.member.user_id is None or not row.member.user.is_active:
        return None
    if row.last_used_at is None or row.last_used_at < now - LAST_USED_EVERY:
        ApiToken.objects.filter(id=row.id).update(last_used_at=now)
    return row


def api_tokens_of(member):
    return ApiToken.objects.filter(member=member).order_by("-created_at")
