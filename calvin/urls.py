from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.views import serve as serve_static
from django.urls import include, path, re_path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/", include("calvin.accounts.urls")),
    path("", include("calvin.chat.slack.urls")),
    path("", include("calvin.dashboard.urls")),
]

if settings.CALVIN_SERVE_STATIC:
    # The embedded install has no separate static server; a deployment may use a CDN instead.
    urlpatterns.append(re_path(r"^static/(?P<path>.*)$", serve_static, {"insecure": True}))
