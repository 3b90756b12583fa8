from django.urls import path

from calvin.dashboard import secret_form, secrets, views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("threads/start/", views.thread_start, name="thread-start"),
    path("threads/<int:thread_id>/", views.thread_detail, name="thread"),
    path("threads/<int:thread_id>/reply/", views.thread_reply, name="thread-reply"),
    path("threads/<int:thread_id>/stop/", views.thread_stop, name="thread-stop"),
    path("threads/<int:thread_id>/actions/<slug:action>/<int:target_id>/", views.thread_action, name="thread-action"),
    path("threads/<int:thread_id>/files/<int:message_id>/", views.message_file, name="message-file"),
    # request_secret's private form (calvin/dashboard/secret_form.py)
    path("threads/<int:thread_id>/secrets/<int:request_id>/", secret_form.secret_form, name="secret-form"),
    # Workspace- and agent-level secrets people manage (calvin/dashboard/secrets.py)
    path("workspaces/<int:workspace_id>/secrets/", secrets.secret_list, name="secrets"),
    path("workspaces/<int:workspace_id>/secrets/new/", secrets.secret_new, name="secret-new"),
    path(
        "workspaces/<int:workspace_id>/secrets/<int:secret_id>/replace/",
        secrets.secret_replace_value,
        name="secret-replace",
    ),
    path("workspaces/<int:workspace_id>/secrets/<int:secret_id>/delete/", secrets.secret_delete, name="secret-delete"),
]
