"""The audit log in the admin: read-only for everyone, scoped to the workspaces a person owns or
administers (events of no workspace only for superusers), and exported as the list is filtered."""

import json

from asgiref.sync import sync_to_async
from django.contrib import admin
from django.contrib.admin.options import IncorrectLookupParameters
from django.core.exceptions import PermissionDenied
from django.core.handlers.asgi import ASGIRequest
from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponseBadRequest, StreamingHttpResponse
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.http import content_disposition_header
from django.utils.safestring import mark_safe

from calvin.admin_scope import ReadOnlyRecordAdmin
from calvin.audit.export import CONTENT_TYPES, FORMATS, audit_export_chunks
from calvin.audit.models import AuditEvent

SHOWN_VALUE = 200  # characters of a before or after value shown in the list


def _shown(value) -> str:
    if value is None:
        return "(none)"
    text = value if isinstance(value, str) else json.dumps(value, cls=DjangoJSONEncoder, ensure_ascii=False)
    return text if len(text) <= SHOWN_VALUE else text[: SHOWN_VALUE - 1] + "…"


async def _streamed(chunks):
    """An async body, so uvicorn streams the export instead of Django buffering it whole; each
    chunk is read from the database on the request's own thread."""
    end = object()
    while (chunk := await sync_to_async(next, thread_sensitive=True)(chunks, end)) is not end:
        yield chunk


class WorkspaceFilter(admin.RelatedOnlyFieldListFilter):
    """The person's own workspaces; "no workspace" (platform events) only for superusers, who see those."""

    def __init__(self, field, request, *args, **kwargs):
        self.platform_operator = request.user.is_superuser
        super().__init__(field, request, *args, **kwargs)

    @property
    def include_empty_choice(self):
        return self.platform_operator and super().include_empty_choice

    def has_output(self):
        # Shown (and applied) with one workspace too: a typed id of another one then finds nothing.
        return bool(self.lookup_choices)


@admin.register(AuditEvent)
class AuditEventAdmin(ReadOnlyRecordAdmin, admin.ModelAdmin):
    workspace_path = "workspace"  # events of no workspace (vault.rotate, ...): superusers only

    list_display = ["at", "verb", "workspace", "actor", "target", "via", "changes_short"]
    list_filter = ["verb", "actor_kind", "via", ("workspace", WorkspaceFilter)]
    date_hierarchy = "at"
    search_fields = ["actor_label", "target_label"]
    fields = ["at", "verb", "workspace", "actor_kind", "actor", "target_type", "target_id", "target"]
    fields += ["via", "ip_address", "changes_table"]
    readonly_fields = fields
    actions = None  # no "delete selected": the retention sweep is the only thing that removes events
    list_per_page = 100
    show_full_result_count = False  # a count over a million rows on every page view

    class Media:
        css = {"all": ["audit/audit-admin.css"]}

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("workspace")

    @admin.display(description="actor", ordering="actor_label")
    def actor(self, obj):
        return obj.actor_label or obj.actor_kind

    @admin.display(description="target", ordering="target_label")
    def target(self, obj):
        return obj.target_label or "-"

    @admin.display(description="IP address")
    def ip_address(self, obj):
        return obj.ip or "-"

    @admin.display(description="changes")
    def changes_short(self, obj):
        pairs = ((field, _shown(b), _shown(a)) for field, (b, a) in obj.changes.items())
        return format_html_join(mark_safe("<br>"), "{}: {} → {}", pairs) or "-"

    @admin.display(description="changes (before → after)")
    def changes_table(self, obj):
        if not obj.changes:
            return "-"
        rows = format_html_join(
            "",
            "<tr><th>{}</th><td>{}</td><td>→</td><td>{}</td></tr>",
            ((field, _shown(before), _shown(after)) for field, (before, after) in obj.changes.items()),
        )
        return format_html(
            '<table class="audit-changes"><tr><th>field</th><th>before</th><th></th><th>after</th></tr>{}</table>', rows
        )

    # Export: the events of the list as it is filtered (workspace, dates, verb, search ...).

    def get_urls(self):
        export = path("export/", self.admin_site.admin_view(self.export_view), name="audit_auditevent_export")
        return [export, *super().get_urls()]

    def changelist_view(self, request, extra_context=None):
        query = request.GET.copy()
        query.pop("format", None)
        context = {"export_query": query.urlencode(), "export_formats": FORMATS, **(extra_context or {})}
        return super().changelist_view(request, extra_context=context)

    def export_view(self, request):
        if not self.has_view_permission(request):
            raise PermissionDenied
        format = request.GET.get("format", "csv")
        if format not in FORMATS:
            return HttpResponseBadRequest(f"format is one of {', '.join(FORMATS)}")
        request.GET = request.GET.copy()
        request.GET.pop("format", None)
        try:
            events = self.get_changelist_instance(request).get_queryset(request)
        except IncorrectLookupParameters:
            return HttpResponseBadRequest("those filters are not valid for the audit log")
        name = f"audit-{timezone.localdate().isoformat()}.{format}"
        chunks = audit_export_chunks(events, format=format)
        # Under ASGI a sync body would be read whole before the first byte leaves.
        body = _streamed(chunks) if isinstance(request, ASGIRequest) else chunks
        response = StreamingHttpResponse(body, content_type=CONTENT_TYPES[format])
        response["Content-Disposition"] = content_disposition_header(as_attachment=True, filename=name)
        response["X-Content-Type-Options"] = "nosniff"
        return response
