from django.contrib import admin

from tools.models import ToolCall


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ["id", "tool", "session", "runner", "status", "attempts", "created_at", "finished_at"]
    list_filter = ["status", "tool"]
    search_fields = ["tool", "error", "session__thread__title"]
    date_hierarchy = "created_at"
    raw_id_fields = ["session", "runner"]
    readonly_fields = ["created_at", "claimed_at", "finished_at"]
