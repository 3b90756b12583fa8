"""What every page's header needs: the workspace the page shows and the person's own workspaces."""

from django.utils.functional import SimpleLazyObject

from calvin.admin_site import may_use_admin
from calvin.dashboard.selectors import memberships_of
from sessions.models import Thread


def _current_member(request, memberships):
    """The page's workspace: the one a view set (request.current_member, e.g. a thread's), else the
    one its URL names (/w/<slug>/, /workspaces/<id>/, /threads/<id>/...) when the person is a member there."""
    member = getattr(request, "current_member", None)
    if member is not None:
        return member
    match = getattr(request, "resolver_match", None)
    kwargs = match.kwargs if match is not None else {}
    if "slug" in kwargs:
        return next((m for m in memberships if m.workspace.slug == kwargs["slug"]), None)
    workspace_id = kwargs.get("workspace_id")
    if workspace_id is None and "thread_id" in kwargs:
        workspace_id = Thread.objects.filter(id=kwargs["thread_id"]).values_list("workspace_id", flat=True).first()
    return next((m for m in memberships if m.workspace_id == workspace_id), None)


def workspaces(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    # Lazy: a page that shows no header (an error page, a JSON answer) runs no query.
    memberships = SimpleLazyObject(lambda: list(memberships_of(user)))
    return {
        "my_memberships": memberships,
        "current_member": SimpleLazyObject(lambda: _current_member(request, memberships)),
        # The admin's own rule (calvin.admin_site): superusers, and owners and admins of a workspace.
        "may_use_admin": lambda: may_use_admin(user, [m.workspace_id for m in memberships if m.is_admin]),
    }
