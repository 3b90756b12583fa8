from django.contrib import admin

from tools.admin_actions import retry_tool_calls
from tools.models import CardChoice, Question, ToolCall


@admin.register(ToolCall)
class ToolCallAdmin(admin.ModelAdmin):
    list_display = ["id", "server", "tool", "session", "runner", "status", "attempts", "created_at", "finished_at"]
    list_filter = ["status", "server", "tool"]
    search_fields = ["tool", "error", "session__thread__title"]
    date_hierarchy = "created_at"
    raw_id_fields = ["session", "runner"]
    readonly_fields = ["created_at", "claimed_at", "finished_at"]
    actions = [retry_tool_calls]  # tools/admin_actions.py


@admin.register(Question)
class QuestionAdmin(admin.ModelAdmin):
    """ask_user_question's cards. Answered by a tap in the thread, never by an edit here."""

    list_display = ["id", "title", "status", "expires_at", "answered_by", "answered_at"]
    list_filter = ["status"]
    search_fields = ["title", "text"]
    raw_id_fields = ["tool_call", "answered_by"]
    readonly_fields = ["status", "answer_index", "answered_by", "answered_at"]


@admin.register(CardChoice)
class CardChoiceAdmin(admin.ModelAdmin):
    list_display = ["id", "message", "member", "action_index", "created_at"]
    raw_id_fields = ["message", "member"]
    readonly_fields = ["message", "member", "action_index"]
