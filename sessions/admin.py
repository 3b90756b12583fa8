from django.contrib import admin, messages
from django.utils.html import format_html

from sessions.admin_actions import reset_host_tokens, revoke_hosts, revoke_runners, stop_sessions
from sessions.hosts import host_create, host_delete, host_is_live
from sessions.models import Host, Message, Reaction, Runner, RunnerCount, Session, Thread, Turn


@admin.register(Host)
class HostAdmin(admin.ModelAdmin):
    """Hosts are made here: the token is shown once, on the page after saving, and stored as a digest."""

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

    def save_model(self, request, obj, form, change):
        if change:
            return super().save_model(request, obj, form, change)
        host, token = host_create(name=obj.name, workspace=obj.workspace)
        obj.pk, obj.token_digest, obj.token_hint = host.pk, host.token_digest, host.token_hint
        self.message_user(
            request,
            f"Host {host.name} made. Its token, shown this once: {token}  — start the host with "
            f"CALVIN_HOST_TOKEN={token} python manage.py host --gateway <this gateway's URL>",
            messages.WARNING,
        )

    def delete_model(self, request, obj):
        host_delete(host_id=obj.id)  # its running turns run elsewhere, not left "running"

    def delete_queryset(self, request, queryset):
        for host_id in queryset.values_list("id", flat=True):
            host_delete(host_id=host_id)



@admin.register(Thread)
class ThreadAdmin(admin.ModelAdmin):
    list_display = ["__str__", "workspace", "channel_kind", "channel_id", "thread_ts", "started_by", "created_at"]
    list_filter = ["channel_kind", "workspace"]
    search_fields = ["title", "channel_id", "thread_ts"]
    date_hierarchy = "created_at"


@admin.register(Session)
class SessionAdmin(admin.ModelAdmin):
    list_display = ["id", "thread", "workspace", "agent", "owner", "status", "permission_mode", "created_at"]
    list_filter = ["status", "permission_mode", "workspace"]
    search_fields = ["thread__title", "directory", "branch"]
    raw_id_fields = ["thread", "parent", "owner", "agent"]
    actions = [stop_sessions]


@admin.register(Turn)
class TurnAdmin(admin.ModelAdmin):
    list_display = ["id", "session", "status", "runner", "attempts", "created_at", "finished_at"]
    list_filter = ["status"]
    search_fields = ["session__thread__title"]
    raw_id_fields = ["session", "prompt", "runner"]


class RunnerCountInline(admin.TabularInline):
    model = RunnerCount
    extra = 0
    readonly_fields = ["tool", "used"]
    can_delete = False


@admin.register(Runner)
class RunnerAdmin(admin.ModelAdmin):
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
    inlines = [RunnerCountInline]
    actions = [revoke_runners]

    def has_add_permission(self, request):
        return False  # tokens are issued by `manage.py issue_token`, which shows them once


@admin.register(Message)
class MessageAdmin(admin.ModelAdmin):
    list_display = ["id", "thread", "kind", "author", "member", "short_text", "created_at"]
    list_filter = ["kind", "author"]
    search_fields = ["text", "file_name"]
    raw_id_fields = ["thread", "member", "sender_agent", "tool_call"]

    @admin.display(description="text")
    def short_text(self, obj):
        return obj.text[:80]


@admin.register(RunnerCount)
class RunnerCountAdmin(admin.ModelAdmin):
    list_display = ["runner", "tool", "used"]
    list_filter = ["tool"]
    search_fields = ["tool", "runner__host__name"]
    readonly_fields = ["runner", "tool", "used"]

    def has_add_permission(self, request):
        return False  # counts are taken by tool calls, never typed in


@admin.register(Reaction)
class ReactionAdmin(admin.ModelAdmin):
    list_display = ["message", "emoji", "agent", "member", "created_at"]
    search_fields = ["emoji"]
    raw_id_fields = ["message", "agent", "member"]
