from django.contrib import admin, messages

from sessions.models import Message, Reaction, Runner, RunnerCount, Session, Thread, Turn
from sessions.services import runner_revoke


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
    search_fields = ["host", "token_hint"]
    # The digest is not a secret, but nothing here should suggest a token can be recovered.
    exclude = ["token_digest"]
    readonly_fields = ["session", "generation", "token_hint", "created_at", "revoked_at", "last_seen_at"]
    inlines = [RunnerCountInline]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False  # tokens are issued by `manage.py issue_token`, which shows them once

    @admin.action(description="Revoke the selected runners' tokens")
    def revoke(self, request, queryset):
        revoked = sum(runner_revoke(runner=r) for r in queryset)
        self.message_user(request, f"Revoked {revoked} token(s).", messages.SUCCESS)


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
    search_fields = ["tool", "runner__host"]
    readonly_fields = ["runner", "tool", "used"]

    def has_add_permission(self, request):
        return False  # counts are taken by tool calls, never typed in


@admin.register(Reaction)
class ReactionAdmin(admin.ModelAdmin):
    list_display = ["message", "emoji", "agent", "member", "created_at"]
    search_fields = ["emoji"]
    raw_id_fields = ["message", "agent", "member"]
