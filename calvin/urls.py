from django.conf import settings
from django.contrib import admin
from django.urls import include, path, re_path

from calvin import health
from calvin.api.main import api
from calvin.dashboard.views import favicon
from calvin.static_files import static_serve
from tools import inbox_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/", api.urls),
    path("accounts/", include("calvin.accounts.auth_urls")),  # Django's auth views, by their own names
    # Probes for load balancers and orchestrators (calvin/health.py): no login, nothing secret.
    path("healthz", health.liveness, name="healthz"),
    path("readyz", health.readiness, name="readyz"),
    # Browsers ask for /favicon.ico whatever the page links: send them to the SVG, not a 404.
    path("favicon.ico", favicon, name="favicon"),
    # Host daemons fetch agents' inbox files here, with their host token (tools/inbox_views.py).
    path("hosts/inbox-files/<int:file_id>/", inbox_views.inbox_file_download, name="inbox_file_download"),
    path(
        "hosts/inbox-files/<int:file_id>/delivered/",
        inbox_views.inbox_file_delivered_view,
        name="inbox_file_delivered",
    ),
    path("accounts/", include("calvin.accounts.urls")),
    path("", include("calvin.chat.slack.urls")),
    path("", include("calvin.dashboard.urls")),
    path("", include("calvin.previews.urls")),
]

if settings.CALVIN_SERVE_STATIC:
    # The embedded install has no separate static server; a deployment may use a CDN instead.
    urlpatterns.append(re_path(r"^static/(?P<path>.*)$", static_serve, {"insecure": True}))
