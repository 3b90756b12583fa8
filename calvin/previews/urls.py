from django.urls import path

from calvin.previews import views

app_name = "previews"

urlpatterns = [
    path("previews/<str:name>/access/", views.preview_access, name="access"),
    path("previews/<int:preview_id>/take-down/", views.preview_take_down_view, name="take-down"),
    path("previews/<int:preview_id>/settings/", views.preview_settings_view, name="settings"),
]
