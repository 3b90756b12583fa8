from django.contrib import admin

from calvin.admin_scope import ReadOnlyRecordAdmin, change_link, links
from tools.admin_actions import retry_tool_calls
from tools.models import CardChoice, InboxDelivery, InboxFile, Question, ToolCall


@admin.register(ToolCall)
class ToolCallAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """What agents asked and what came of it: a record, never edited here (retries are actions)."""

    workspace_path = "session__workspace"
    list_display = ["id", "server", "tool", "session", "runner", "status", "attempts", "created_at", "finished_at"]
    list_filter = ["status", "server", "tool"]
    search_fields = ["tool", "error", "session__thread__title"]
    date_hierarchy = "created_at"
    raw_id_fields = ["session", "runner"]
    readonly_fields = ["created_at", "claimed_at", "finished_at", "records"]
    actions = [retry_tool_calls]  # tools/admin_actions.py

    @admin.display(description="its session and approval")
    def records(self, obj):
        approval = getattr(obj, "approval", None)  # a reverse one-to-one: missing when none was asked
        return links(change_link(obj.session), change_link(approval, f"approval {approval.pk}") if approval else "")


@admin.register(Question)
class QuestionAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """ask_user_question's cards. Answered by a tap in the thread, never by an edit here."""

    workspace_path = "tool_call__session__workspace"
    list_display = ["id", "title", "status", "expires_at", "answered_by", "answered_at"]
    list_filter = ["status"]
    search_fields = ["title", "text"]
    raw_id_fields = ["tool_call", "answered_by"]
    readonly_fields = ["status", "answer_index", "answered_by", "answered_at"]


@admin.register(CardChoice)
class CardChoiceAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    workspace_path = "message__thread__workspace"
    list_display = ["id", "message", "member", "action_index", "created_at"]
    raw_id_fields = ["message", "member"]
    readonly_fields = ["message", "member", "action_index"]


@admin.register(InboxFile)
class InboxFileAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """Files agents sent to other agents (send_file to an agent destination): a record of what
    lands where; the sending call is its audit trail."""

    workspace_path = "workspace"
    list_display = ["id", "path", "agent", "sender_agent", "size", "created_at"]
    search_fields = ["name", "sender", "agent__name"]
    date_hierarchy = "created_at"
    raw_id_fields = ["agent", "sender_agent", "tool_call"]


@admin.register(InboxDelivery)
class InboxDeliveryAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    """Which hosts have written which inbox file into their copy of the agent's directory."""

    workspace_path = "file__workspace"
    list_display = ["id", "file", "host", "delivered_at"]
    search_fields = ["file__name", "host__name"]
    raw_id_fields = ["file", "host"]
