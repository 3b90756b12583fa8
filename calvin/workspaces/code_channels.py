"""Binding a Slack channel or a web space to one of the workspace's repositories (a code channel),
changing and removing the binding: by the workspace's owners and admins (or a superuser), each
audited (code_channel.create / .change / .delete). The admin's form (calvin/workspaces/admin.py)
calls these; the rules are the model's (CodeChannel.clean, its constraints), checked again here
so that no caller can bind another workspace's repository or a malformed channel."""

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from calvin.audit.services import audit_record
from calvin.workspaces import code_channel_rules
from calvin.workspaces.models import CodeChannel, Member, Repository

OTHER_WORKSPACE = "Choose a repository of this code channel's own workspace."
NOT_A_MANAGER = "Only the workspace's owners and admins bind its code channels."
TAKEN = "This channel was bound by someone else just now: reload and look again."


class CodeChannelRefused(Exception):
    """Nothing changed; the text says why, `field` which form field it is about (or None)."""

    def __init__(self, text: str, *, field: str | None = None):
        super().__init__(text)
        self.field = field


def _refuse_unless_manager(actor, workspace_id: int) -> None:
    """A superuser, or an owner or admin of the workspace as the database has them now (a Member
    or a User; a role taken away since the page loaded counts)."""
    managers = Member.objects.filter(workspace_id=workspace_id, role__in=[Member.Role.OWNER, Member.Role.ADMIN])
    if isinstance(actor, Member):
        allowed = managers.filter(pk=actor.pk).exists()
    else:
        active = actor is not None and getattr(actor, "is_active", False)
        allowed = active and (actor.is_superuser or managers.filter(user_id=actor.pk).exists())
    if not allowed:
        raise CodeChannelRefused(NOT_A_MANAGER)


def _checked(binding: CodeChannel) -> None:
    """The channel's shape first (its message is the one an admin needs), then every rule of the model."""
    problem = code_channel_rules.channel_problem(binding.kind, binding.channel)
    if problem:
        raise CodeChannelRefused(problem, field="channel" if binding.kind in CodeChannel.Kind.values else "kind")
    repository = Repository.objects.filter(id=binding.repository_id).only("workspace_id").first()
    if repository is None or repository.workspace_id != binding.workspace_id:
        raise CodeChannelRefused(OTHER_WORKSPACE, field="repository")
    try:
        binding.full_clean()
    except ValidationError as invalid:
        fields = invalid.message_dict if hasattr(invalid, "error_dict") else {None: invalid.messages}
        field, texts = next(iter(fields.items()))
        raise CodeChannelRefused(" ".join(texts), field=None if field == "__all__" else field) from None


def _saved(binding: CodeChannel) -> None:
    try:
        with transaction.atomic():
            binding.save()
    except IntegrityError:  # the same channel bound by another request since the check
        raise CodeChannelRefused(TAKEN, field="channel") from None


def _shown(binding: CodeChannel) -> dict:
    return {"kind": binding.kind, "channel": binding.channel, "repository": binding.repository.full_name}


@transaction.atomic
def code_channel_create(*, workspace, kind: str, channel: str, repository: Repository, actor) -> CodeChannel:
    _refuse_unless_manager(actor, workspace.id)
    binding = CodeChannel(workspace=workspace, kind=kind, channel=channel, repository_id=repository.id)
    _checked(binding)
    _saved(binding)
    after = _shown(binding)
    audit_record(
        verb="code_channel.create",
        workspace=workspace,
        actor=actor,
        target=binding,
        changes={key: (None, value) for key, value in after.items()},
    )
    return binding


@transaction.atomic
def code_channel_change(*, code_channel: CodeChannel, kind: str, channel: str, repository: Repository, actor) -> bool:
    """The binding's new channel or repository (its workspace stays); False when nothing changed."""
    stored = CodeChannel.objects.select_for_update().select_related("repository").filter(pk=code_channel.pk).first()
    if stored is None:
        raise CodeChannelRefused("This code channel no longer exists.")
    _refuse_unless_manager(actor, stored.workspace_id)
    before = _shown(stored)
    stored.kind, stored.channel, stored.repository_id = kind, channel, repository.id
    _checked(stored)
    stored.repository = Repository.objects.get(id=repository.id)
    after = _shown(stored)
    changes = {key: (before[key], after[key]) for key in after if before[key] != after[key]}
    if not changes:
        return False
    _saved(stored)
    audit_record(verb="code_channel.change", workspace=stored.workspace_id, actor=actor, target=stored, changes=changes)
    return True


@transaction.atomic
def code_channel_delete(*, code_channel: CodeChannel, actor) -> bool:
    """Unbind; threads already started there keep their checkouts. False when it was gone already."""
    stored = CodeChannel.objects.select_for_update().select_related("repository").filter(pk=code_channel.pk).first()
    if stored is None:
        return False
    _refuse_unless_manager(actor, stored.workspace_id)
    before = _shown(stored)
    audit_record(
        verb="code_channel.delete",
        workspace=stored.workspace_id,
        actor=actor,
        target=stored,
        changes={key: (value, None) for key, value in before.items()},
    )
    stored.delete()
    return True
