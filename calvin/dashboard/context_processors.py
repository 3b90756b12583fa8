"""What every page's header needs: the workspace the page shows and the person's own workspaces."""

from django.utils.functional import SimpleLazyObject

from calvin.admin_site import may_use_admin
from calvin.dashboard.selectors import memberships_of


def _current_member(request, memberships):
    """The page's workspace: the one a view set (request.current_member, e.g. a thread's), else the
    /w/<slug>/ of the URL when the person is a member there (so every /w/<slug>/ page names it)."""
    member = getattr(request, "current_member", None)
    if member is not None:
        return member
    match = getattr(request, "resolver_match", None)
    slug = match.kwargs.get("slug") if match is not None else None
    return next((m for m in memberships if m.workspace.slug == slug), None) if slug else None


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
