"""Calvin's admin site: open to superusers and to each workspace's owners and admins, staff flag or not.

INSTALLED_APPS names calvin.admin_apps.CalvinAdminConfig instead of "django.contrib.admin"; its
default_site makes `admin.site` (and so every @admin.register) this site. After the admin modules
are discovered, the third-party internal tables are re-registered for superusers only.
"""

from django.contrib import admin
from django.contrib.admin.forms import AdminAuthenticationForm
from django.core.exceptions import ValidationError

NO_WORKSPACE = (
    "This account administers no workspace. The admin is for a workspace's owners and admins; "
    "ask an owner of your workspace, or use the dashboard."
)


def may_use_admin(user, workspace_ids: list[int]) -> bool:
    """Active superusers, and anyone who owns or administers a workspace; the staff flag plays no part."""
    return bool(user and user.is_active and (user.is_superuser or workspace_ids))


class WorkspaceAdminLoginForm(AdminAuthenticationForm):
    """Django's admin login asks for is_staff; here the membership role decides."""

    def confirm_login_allowed(self, user):
        from calvin.admin_scope import administered_workspace_ids

        if not user.is_active:
            raise ValidationError(self.error_messages["inactive"], code="inactive")
        if not may_use_admin(user, administered_workspace_ids(user)):
            raise ValidationError(NO_WORKSPACE, code="no_workspace")


class CalvinAdminSite(admin.AdminSite):
    site_header = "Calvin"
    site_title = "Calvin admin"
    index_title = "Your workspaces"
    login_form = WorkspaceAdminLoginForm

    def has_permission(self, request):
        from calvin.admin_scope import admin_workspace_ids

        return may_use_admin(getattr(request, "user", None), admin_workspace_ids(request))

    def index(self, request, extra_context=None):
        # The index says whose console it is: the workspaces this person runs here.
        extra = {"subtitle": self.workspaces_shown(request), **(extra_context or {})}
        return super().index(request, extra)

    def workspaces_shown(self, request) -> str:
        from calvin.admin_scope import admin_workspace_ids, is_platform_operator
        from calvin.workspaces.models import Workspace

        if is_platform_operator(request):
            return "Every workspace (you are a superuser)"
        names = Workspace.objects.filter(id__in=admin_workspace_ids(request)).order_by("name")
        return "Workspaces you administer: " + ", ".join(names.values_list("name", flat=True))

    def login(self, request, extra_context=None):
        # A logged-in person with no workspace to administer is told so, not just "not authorised".
        refused = request.user.is_authenticated and not self.has_permission(request)
        extra = {**(extra_context or {}), "no_workspace_notice": NO_WORKSPACE if refused else ""}
        return super().login(request, extra)


def restrict_internal_tables(site) -> None:
    """The scheduler's, the login throttle's and auth's own tables: superusers only. Their own
    ModelAdmins are kept (their forms and lists), with SuperuserOnlyAdmin in front."""
    from django.contrib.auth.models import Group, User
    from django.contrib.sessions.models import Session as DjangoSession

    from calvin.admin_scope import SuperuserOnlyAdmin

    internal = [User, Group, DjangoSession]
    try:
        from django_celery_beat import models as beat

        internal += [beat.PeriodicTask, beat.IntervalSchedule, beat.CrontabSchedule, beat.SolarSchedule]
        internal += [beat.ClockedSchedule]
    except ImportError:
        pass
    try:
        from axes import models as axes

        internal += [axes.AccessAttempt, axes.AccessLog, axes.AccessFailureLog]
    except ImportError:
        pass
    for model in internal:
        model_admin = site._registry.get(model)
        if model_admin is None or isinstance(model_admin, SuperuserOnlyAdmin):
            continue
        original = type(model_admin)
        restricted = type(f"SuperuserOnly{original.__name__}", (SuperuserOnlyAdmin, original), {})
        site.unregister(model)
        site.register(model, restricted)
