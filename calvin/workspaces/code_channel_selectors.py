"""Reads of code channels: which binding a thread's channel is in, a workspace's web spaces.
Every read is scoped to the workspace, and to a repository of that same workspace: another
workspace's binding or repository never applies, whatever a row says."""

from calvin.workspaces import code_channel_rules
from calvin.workspaces.models import CodeChannel


def _bindings(workspace_id: int):
    return CodeChannel.objects.filter(workspace_id=workspace_id, repository__workspace_id=workspace_id).select_related(
        "repository"
    )


def code_channel_of_thread(*, workspace_id: int, channel_kind: str, channel_id: str) -> CodeChannel | None:
    """The code channel a thread of the workspace lives in: a Slack thread in a bound channel, a web
    thread started in a space (its channel id `space:<name>`); None for any other thread."""
    if channel_kind == code_channel_rules.SLACK:
        if code_channel_rules.slack_channel_problem(channel_id):
            return None  # a DM (D…) or anything else: never a code channel
        return _bindings(workspace_id).filter(kind=CodeChannel.Kind.SLACK, channel=channel_id).first()
    if channel_kind == code_channel_rules.WEB:
        space = code_channel_rules.space_of_channel_id(channel_id)
        if space is None:
            return None
        return _bindings(workspace_id).filter(kind=CodeChannel.Kind.WEB, channel=space).first()
    return None


def web_spaces_of(*, workspace_id: int) -> list[CodeChannel]:
    """The workspace's web spaces, by name: where the dashboard may start a thread."""
    return list(_bindings(workspace_id).filter(kind=CodeChannel.Kind.WEB).order_by("channel"))
