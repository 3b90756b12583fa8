"""Invitations: create, resend, revoke, accept (services) and the reads their pages need (selectors).

Who may invite: a workspace's owners and admins; admins invite admins and members, only an
owner invites an owner (the rule of calvin/workspaces/people.py: owners make owners). The
link is single-use and expires after INVITATION_DAYS; it is accepted by the person whose
(verified) email is the invited address, case-insensitively, and nobody else.
"""

import hashlib
import re
import secrets
import unicodedata
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone

from calvin.accounts.models import Invitation
from calvin.audit.services import audit_record
from calvin.workspaces.models import Member

INVITATION_DAYS = 7
# Each invitation and resend sends an email: a defined limit keeps the form from being a spam relay.
RESEND_EVERY = timedelta(minutes=1)
MAX_EMAIL = 254
# What secrets.token_urlsafe(32) makes; anything else in a link is no token of ours.
TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{20,100}")


class InvitationRefused(Exception):
    """Something the rules refuse; `status` is the HTTP status a page answers with."""

    def __init__(self, message: str, *, status: int = 400, code: str = "refused"):
        super().__init__(message)
        self.status = status
        self.code = code


@dataclass
class InviteOutcome:
    invitation: Invitation | None
    status: str  # "invited", "resent", "already_member"
    message: str


def token_digest(raw_token: str) -> str:
    return hashlib.sha256(raw_token.encode()).hexdigest()


def email_normalise(value: str) -> str:
    """The address as stored and compared: NFKC (full-width letters become the letters they stand
    for, as sign-up does), trimmed, lowercased; refused unless it is then one plain ASCII address.
    Other non-ASCII is refused rather than folded: a Cyrillic "а" that looks like a Latin "a" is
    another address, and an invitation names exactly the address it reaches."""
    if not isinstance(value, str):
        raise InvitationRefused("Give an email address.")
    email = unicodedata.normalize("NFKC", value).strip()
    if "\x00" in email:
        raise InvitationRefused("An email address cannot contain a NUL character.")
    if not email:
        raise InvitationRefused("Give an email address.")
    if len(email) > MAX_EMAIL:
        raise InvitationRefused(f"An email address has at most {MAX_EMAIL} characters.")
    if not email.isascii():
        raise InvitationRefused(
            "Only plain ASCII email addresses can be invited (letters that look Latin but are not, such as "
            "Cyrillic ones, make a different address); write an international domain in its xn-- form."
        )
    try:
        validate_email(email)
    except ValidationError:
        raise InvitationRefused(f"{email[:80]!r} is not one valid email address.") from None
    return email.lower()


def _new_token() -> tuple[str, str]:
    raw = secrets.token_urlsafe(32)
    return raw, token_digest(raw)


def invitation_link(*, raw_token: str, base_url: str) -> str:
    """The absolute link of the email: CALVIN_PUBLIC_URL when set, else the request's own origin
    (`base_url`, e.g. request.build_absolute_uri("/"))."""
    base = (settings.CALVIN_PUBLIC_URL or base_url).rstrip("/")
    return base + reverse("dashboard:invitation", kwargs={"token": raw_token})


def _email_on_commit(invitation: Invitation, *, raw_token: str, base_url: str) -> None:
    context = {
        "workspace": invitation.workspace.name,
        "inviter": inviter_name(invitation),
        "role": invitation.role,
        "link": invitation_link(raw_token=raw_token, base_url=base_url),
        "expires_at": invitation.expires_at,
    }
    # One line whatever the names hold: a line break in a subject is a header injection (BadHeaderError).
    subject = " ".join(render_to_string("accounts/invitation_email_subject.txt", context).split())
    body = render_to_string("accounts/invitation_email.txt", context)
    email = invitation.email
    # Robust: a mail server that is down is logged; the invitation stands and can be resent.
    transaction.on_commit(lambda: send_mail(subject, body, None, [email]), robust=True)


def inviter_name(invitation: Invitation) -> str:
    member = invitation.invited_by
    if member is None:
        return "An admin of the workspace"
    if member.user_id and member.user.email:
        label = member.display_name or member.user.get_full_name()
        return f"{label} ({member.user.email})" if label else member.user.email
    return str(member)


def _inviter_fresh(inviter: Member) -> Member:
    """The inviter's membership as it is now (a role changed since the page loaded counts)."""
    current = (
        Member.objects.select_for_update(of=("self",)).select_related("workspace", "user").filter(id=inviter.id).first()
    )
    if current is None:
        raise InvitationRefused("You are no longer a member of this workspace.", status=403)
    if not current.is_admin:
        raise InvitationRefused("Only owners and admins invite people and manage invitations.", status=403)
    return current


def _role_allowed(inviter: Member, role: str) -> None:
    if role not in Member.Role.values:
        raise InvitationRefused(f"Unknown role {str(role)[:20]!r}: choose admin or member.")
    if role == Member.Role.OWNER and inviter.role != Member.Role.OWNER:
        raise InvitationRefused("Only an owner can invite an owner.", status=403)


def _already_member(workspace_id: int, email: str) -> Member | None:
    return (
        Member.objects.filter(workspace_id=workspace_id)
        .filter(Q(user__email__iexact=email) | Q(user__username__iexact=email))
        .first()
    )


def _open_invitations(workspace_id: int):
    return Invitation.objects.filter(workspace_id=workspace_id, accepted_at__isnull=True, revoked_at__isnull=True)


@transaction.atomic
def invitation_create(*, inviter: Member, email: str, role: str, base_url: str) -> InviteOutcome:
    """Invite an address with a role. An existing member: nothing changes. An open invitation to
    the address: it is resent (new link, new expiry; the role given now)."""
    inviter = _inviter_fresh(inviter)
    _role_allowed(inviter, role)
    email = email_normalise(email)
    workspace = inviter.workspace
    member = _already_member(workspace.id, email)
    if member is not None:
        message = f"{email} is already a member of {workspace.name} (as {member.role}): nothing changed."
        return InviteOutcome(invitation=None, status="already_member", message=message)
    existing = _open_invitations(workspace.id).select_for_update().filter(email=email).first()
    if existing is not None:
        _role_allowed(inviter, existing.role)  # an admin does not rewrite an owner's invitation either
        return _resend(existing, actor=inviter, role=role, base_url=base_url)
    _daily_limit_check(workspace)
    raw, digest = _new_token()
    now = timezone.now()
    try:
        with transaction.atomic():
            invitation = Invitation.objects.create(
                workspace=workspace,
                email=email,
                role=role,
                invited_by=inviter,
                token_digest=digest,
                created_at=now,
                sent_at=now,
                expires_at=now + timedelta(days=INVITATION_DAYS),
            )
    except IntegrityError:  # invited by someone else at this very moment: theirs stands
        raise InvitationRefused(f"{email} was invited just now by someone else; see the open invitations.") from None
    audit_record(
        verb="member.invite",
        workspace=workspace,
        actor=inviter,
        target=invitation,
        changes={"email": (None, email), "role": (None, role)},
    )
    _email_on_commit(invitation, raw_token=raw, base_url=base_url)
    return InviteOutcome(invitation=invitation, status="invited", message=f"{email} is invited as {role}.")


def _daily_limit_check(workspace) -> None:
    limit = settings.CALVIN_INVITATIONS_PER_DAY
    made = Invitation.objects.filter(workspace=workspace, created_at__gt=timezone.now() - timedelta(days=1)).count()
    if made >= limit:
        raise InvitationRefused(
            f"{workspace.name} has made {made} invitations in the last 24 hours, the most a workspace may "
            f"(CALVIN_INVITATIONS_PER_DAY={limit}); try again later.",
            status=429,
        )


def _resend(invitation: Invitation, *, actor: Member, role: str, base_url: str) -> InviteOutcome:
    if invitation.sent_at > timezone.now() - RESEND_EVERY:
        raise InvitationRefused(
            f"The invitation to {invitation.email} was sent less than a minute ago; "
            "wait a moment before sending it again.",
            status=429,
        )
    before = {"role": invitation.role, "expires_at": invitation.expires_at}
    raw, digest = _new_token()
    now = timezone.now()
    invitation.token_digest = digest
    invitation.role = role
    invitation.sent_at = now
    invitation.expires_at = now + timedelta(days=INVITATION_DAYS)
    invitation.save(update_fields=["token_digest", "role", "sent_at", "expires_at"])
    changes = {"expires_at": (before["expires_at"], invitation.expires_at)}
    if before["role"] != role:
        changes["role"] = (before["role"], role)
    audit_record(
        verb="invitation.resend", workspace=invitation.workspace_id, actor=actor, target=invitation, changes=changes
    )
    _email_on_commit(invitation, raw_token=raw, base_url=base_url)
    message = (
        f"{invitation.email} was already invited: the invitation is sent again, "
        "with a new link (the old one no longer works)."
    )
    return InviteOutcome(invitation=invitation, status="resent", message=message)


def _managed(actor: Member, invitation_id: int) -> Invitation:
    """The actor's workspace's invitation, locked; another workspace's id is not found."""
    invitation = (
        Invitation.objects.select_for_update(of=("self",))
        .select_related("workspace")
        .filter(id=invitation_id, workspace_id=actor.workspace_id)
        .first()
    )
    if invitation is None:
        raise InvitationRefused("No such invitation in this workspace.", status=404, code="unknown")
    if invitation.accepted_at is not None:
        raise InvitationRefused(f"The invitation to {invitation.email} was already accepted.", status=409)
    if invitation.revoked_at is not None:
        raise InvitationRefused(f"The invitation to {invitation.email} was already revoked.", status=409)
    return invitation


@transaction.atomic
def invitation_resend(*, actor: Member, invitation_id: int, base_url: str) -> InviteOutcome:
    """A new link and a new expiry; the old link stops working."""
    actor = _inviter_fresh(actor)
    invitation = _managed(actor, invitation_id)
    _role_allowed(actor, invitation.role)
    return _resend(invitation, actor=actor, role=invitation.role, base_url=base_url)


@transaction.atomic
def invitation_revoke(*, actor: Member, invitation_id: int) -> Invitation:
    actor = _inviter_fresh(actor)
    invitation = _managed(actor, invitation_id)
    invitation.revoked_at = timezone.now()
    invitation.save(update_fields=["revoked_at"])
    audit_record(
        verb="invitation.revoke",
        workspace=invitation.workspace_id,
        actor=actor,
        target=invitation,
        changes={"revoked_at": (None, invitation.revoked_at)},
    )
    return invitation


# --- the link's side ---------------------------------------------------------------------------


def invitation_for_token(raw_token: str, *, workspace_slug: str | None = None) -> Invitation:
    """The invitation a link names, whatever its state; InvitationRefused (404) for no such link,
    and for a link used on another workspace's URL."""
    if not isinstance(raw_token, str) or not TOKEN_SHAPE.fullmatch(raw_token):
        raise InvitationRefused(_UNKNOWN, status=404, code="unknown")
    invitation = (
        Invitation.objects.select_related("workspace", "invited_by__user")
        .filter(token_digest=token_digest(raw_token))
        .first()
    )
    if invitation is None or (workspace_slug is not None and invitation.workspace.slug != workspace_slug):
        raise InvitationRefused(_UNKNOWN, status=404, code="unknown")
    return invitation


_UNKNOWN = (
    "This invitation link is not valid. It may have been mistyped, or replaced by a newer invitation "
    "(a resent invitation's old link stops working): ask for the latest email."
)


def invitation_state_problem(invitation: Invitation) -> InvitationRefused | None:
    """Why a link can no longer be used (410), or None while it can."""
    if invitation.revoked_at is not None:
        return InvitationRefused(
            f"This invitation to {invitation.workspace.name} was revoked. Ask its admins for a new one.",
            status=410,
            code="revoked",
        )
    if invitation.accepted_at is not None:
        return InvitationRefused(
            f"This invitation to {invitation.workspace.name} was already used. Each link works once.",
            status=410,
            code="used",
        )
    if invitation.is_expired:
        return InvitationRefused(
            f"This invitation to {invitation.workspace.name} expired on {invitation.expires_at:%Y-%m-%d}. "
            "Ask its admins to send it again.",
            status=410,
            code="expired",
        )
    return None


def email_of(user) -> str:
    """The person's verified address (sign-up verifies it before the account is active)."""
    if not user.is_authenticated or not user.is_active:
        return ""
    return (user.email or "").strip().lower()


def is_for(invitation: Invitation, user) -> bool:
    return bool(email_of(user)) and email_of(user) == invitation.email


@dataclass
class AcceptOutcome:
    member: Member
    joined: bool  # False: they were a member already and nothing changed


@transaction.atomic
def invitation_accept(*, raw_token: str, user, workspace_slug: str | None = None) -> AcceptOutcome:
    """Join the workspace with the invitation's role. Single-use: the invitation is claimed by a
    conditional UPDATE that must change exactly one row."""
    invitation = invitation_for_token(raw_token, workspace_slug=workspace_slug)
    problem = invitation_state_problem(invitation)
    if problem is not None:
        raise problem
    if not is_for(invitation, user):
        raise InvitationRefused(
            f"This invitation is for {invitation.email}, and you are logged in as "
            f"{email_of(user) or user.get_username()}. Log out, then open the link again as {invitation.email}.",
            status=403,
            code="other_person",
        )
    existing = Member.objects.filter(workspace_id=invitation.workspace_id, user=user).first()
    if existing is not None:
        return AcceptOutcome(member=existing, joined=False)
    now = timezone.now()
    claimed = Invitation.objects.filter(
        id=invitation.id,
        token_digest=invitation.token_digest,  # a resend since the read made this link dead
        accepted_at__isnull=True,
        revoked_at__isnull=True,
        expires_at__gt=now,
    ).update(accepted_at=now, accepted_by=user)
    if claimed != 1:  # accepted, revoked or resent in the meantime
        invitation.refresh_from_db()
        raise invitation_state_problem(invitation) or InvitationRefused(_UNKNOWN, status=404, code="unknown")
    member = Member.objects.create(workspace_id=invitation.workspace_id, user=user, role=invitation.role)
    audit_record(
        verb="member.join",
        workspace=invitation.workspace_id,
        actor=member,
        target=member,
        changes={"role": (None, member.role), "invitation": (None, invitation.id)},
    )
    return AcceptOutcome(member=member, joined=True)


def open_invitations_of(workspace_id: int):
    """The people page's list: not accepted, not revoked (expired ones too, to resend), newest first."""
    return _open_invitations(workspace_id).select_related("invited_by__user").order_by("-created_at")
