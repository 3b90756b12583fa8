from types import SimpleNamespace

from django.contrib import admin
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils.html import format_html

from approvals.models import PendingApproval
from calvin.admin_scope import (
    ReadOnlyRecordAdmin,
    WorkspaceScopedAdmin,
    change_link,
    changelist_link,
    is_platform_operator,
    links,
)
from sessions.admin_actions import reset_host_tokens, revoke_hosts, revoke_runners, stop_sessions
from sessions.hosts import host_create, host_delete, host_is_live
from sessions.models import Host, Message, Reaction, Runner, RunnerCount, Session, Thread, Turn
from tools.models import ToolCall


@admin.register(Host)
class HostAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    """Hosts are made here: the token is shown once, on the page after saving, and stored as a digest.
    A workspace's owners and admins make hosts for their workspace only; a host with no workspace
    serves every tenant, so only a superuser makes (or sees) one."""

    tenant_permissions = {"view", "add", "change", "delete"}

    list_display = ["name", "workspace", "live", "capacity", "sandbox_shown", "version", "last_heartbeat_at"]
    list_display += ["revoked_at"]
    list_filter = ["workspace", "sandbox"]
    search_fields = ["name", "token_hint"]
    fields = ["name", "workspace", "token_hint", "capacity", "version", "sandbox_shown", "connected_at"]
    fields += ["last_heartbeat_at", "revoked_at", "created_at"]
    readonly_fields = [f for f in fields if f not in ("name", "workspace")]
    actions = [revoke_hosts, reset_host_tokens]  # sessions/admin_actions.py

    class Media:
        css = {"all": ["sessions/hosts-admin.css"]}  # .no-sandbox in red

    @admin.display(boolean=True, description="connected")
    def live(self, obj):
        return host_is_live(obj)

    @admin.display(description="sandbox", ordering="sandbox")
    def sandbox_shown(self, obj):
        """A host that runs agents without bubblewrap (CALVIN_ALLOW_UNSANDBOXED) stands out."""
        if obj.sandbox == "none":
            return format_html('<strong class="no-sandbox">{}</strong>', "no sandbox")
        return obj.sandbox or "-"  # "-": it has not registered yet

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        if "workspace" in form.base_fields and not is_platform_operator(request):
            form.base_fields["workspace"].required = True
        return form

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        host, token = host_create(name=obj.name, workspace=obj.workspace, actor=request.user)
        obj.pk, obj.token_digest, obj.token_hint = host.pk, host.token_digest, host.token_hint
        request._new_host_token = token  # for response_add's page: never through Django's messages

    def response_add(self, request, obj, post_url_continue=None):
        """The new token on a page of its own, uncached (messages would keep it in a cookie)."""
        token = getattr(request, "_new_host_token", None)
        if token is None:
            return super().response_add(request, obj, post_url_continue)
        context = {
            **self.admin_site.each_context(request),
            "title": f"Host {obj.name} made",
            "opts": self.opts,
            "action": SimpleNamespace(description=f"Add host {obj.name}"),
            "outcomes": [
                (
                    f"Host {obj.name} made. Its token, shown this once: {token}  — start the host with "
                    f"CALVIN_HOST_TOKEN={token} python manage.py host --gateway <this gateway's URL>",
                    True,
                )
            ],
        }
        response = TemplateResponse(request, "admin/action_done.html", context)
        response["Cache-Control"] = "no-store"
        return response

    def delete_model(self, request, obj):
        host_delete(host_id=obj.id, actor=request.user)  # its running turns run elsewhere, not left "running"

    def delete_queryset(self, request, queryset):
        for host_id in queryset.values_list("id", flat=True):
            host_delete(host_id=host_id, actor=request.user)


@admin.register(Thread)
class ThreadAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    list_display = ["__str__", "workspace", "channel_kind", "channel_id", "thread_ts", "started_by", "created_at"]
    list_display += ["page"]
    list_filter = ["channel_kind", "workspace"]
    search_fields = ["title", "channel_id", "thread_ts"]
    date_hierarchy = "created_at"
    readonly_fields = ["page"]

    @admin.display(description="thread page")
    def page(self, obj):
        return thread_page_link(obj.pk)


def thread_page_link(thread_id) -> str:
    return format_html('<a href="{}">thread page</a>', reverse("dashboard:thread", args=[thread_id]))


@admin.register(Session)
class SessionAdmin(WorkspaceScopedAdmin, admin.ModelAdmin):
    """Owners and admins look at their sessions and stop them (an action); the records a session
    leaves (turns, tool calls, approvals, runners) are a link away, each list filtered to it."""

    list_display = ["id", "thread", "workspace", "agent", "owner", "status", "permission_mode", "created_at"]
    list_display += ["page"]
    readonly_fields = ["records", "usage"]
    list_filter = ["status", "permission_mode", "workspace"]
    search_fields = ["thread__title", "directory", "branch"]
    raw_id_fields = ["thread", "parent", "owner", "agent"]
    actions = [stop_sessions]

    @admin.display(description="thread page")
    def page(self, obj):
        return thread_page_link(obj.thread_id)

    @admin.display(description="usage")
    def usage(self, obj):
        if obj.pk is None:
            return "-"
        from sessions.admin_usage import usage_table
        from sessions.usage import session_usage

        return usage_table(session_usage(session_id=obj.pk))

    @admin.display(description="its records")
    def records(self, obj):
        if obj.pk is None:
            return "-"
        return links(
            thread_page_link(obj.thread_id),
            changelist_link(Turn, "turns", session__id__exact=obj.pk),
            changelist_link(ToolCall, "tool calls", session__id__exact=obj.pk),
            changelist_link(PendingApproval, "approvals", session__id__exact=obj.pk),
            changelist_link(Runner, "runners", session__id__exact=obj.pk),
        )


@admin.register(Turn)
class TurnAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    workspace_path = "session__workspace"
    list_display = ["id", "session_shown", "status", "runner", "attempts", "created_at", "finished_at"]
    list_filter = ["status"]
    search_fields = ["session__thread__title"]
    raw_id_fields = ["session", "prompt", "runner"]

    @admin.display(description="session", ordering="session")
    def session_shown(self, obj):
        return change_link(obj.session)


class RunnerCountInline(ReadOnlyRecordAdmin, admin.TabularInline):
    model = RunnerCount
    workspace_path = "runner__session__workspace"
    extra = 0
    readonly_fields = ["tool", "used"]
    can_delete = False


@admin.register(Runner)
class RunnerAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """Runners' history; tokens are issued by `manage.py issue_token`, which shows them once."""

    workspace_path = "session__workspace"
    list_display = [
        "__str__",
        "session",
        "host",
        "generation",
        "token_hint",
        "created_at",
        "revoked_at",
        "last_seen_at",
    ]
    list_filter = ["host", "revoked_at"]
    list_select_related = ["host"]
    search_fields = ["host__name", "token_hint"]
    # The digest is not a secret, but nothing here should suggest a token can be recovered.
    exclude = ["token_digest"]
    readonly_fields = ["session", "host", "generation", "token_hint", "created_at", "revoked_at", "last_seen_at"]
    readonly_fields += ["records"]
    inlines = [RunnerCountInline]
    actions = [revoke_runners]

    @admin.display(description="its records")
    def records(self, obj):
        return links(
            change_link(obj.session),
            changelist_link(Turn, "turns", runner__id__exact=obj.pk),
            changelist_link(ToolCall, "tool calls", runner__id__exact=obj.pk),
        )


@admin.register(Message)
class MessageAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    workspace_path = "thread__workspace"
    list_display = ["id", "thread", "kind", "author", "member", "short_text", "created_at"]
    list_filter = ["kind", "author"]
    search_fields = ["text", "file_name"]
    raw_id_fields = ["thread", "member", "sender_agent", "tool_call"]

    @admin.display(description="text")
    def short_text(self, obj):
        return obj.text[:80]


@admin.register(RunnerCount)
class RunnerCountAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """Counts are taken by tool calls, never typed in."""

    workspace_path = "runner__session__workspace"
    list_display = ["runner", "tool", "used"]
    list_filter = ["tool"]
    search_fields = ["tool", "runner__host__name"]
    readonly_fields = ["runner", "tool", "used"]


@admin.register(Reaction)
class ReactionAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    workspace_path = "message__thread__workspace"
    list_display = ["message", "emoji", "agent", "member", "created_at"]
    search_fields = ["emoji"]
    raw_id_fields = ["message", "agent", "member"]
