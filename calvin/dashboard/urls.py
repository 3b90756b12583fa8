from django.urls import path

from calvin.accounts.invitation_views import invitation_page
from calvin.dashboard import api_tokens, chart_views, scheduled_tasks, secret_form, secrets, views, workspace_views
from calvin.dashboard import people as people_views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    # A person's workspaces (calvin/dashboard/workspace_views.py)
    path("workspaces/new/", workspace_views.workspace_new, name="workspace-new"),
    path("w/<slug:slug>/", workspace_views.workspace_home, name="workspace"),
    path("w/<slug:slug>/charts/", chart_views.workspace_charts, name="workspace-charts"),
    path("w/<slug:slug>/threads/start/", workspace_views.workspace_session_start, name="thread-start"),
    path("w/<slug:slug>/settings/", workspace_views.workspace_settings, name="workspace-settings"),
    path(
        "w/<slug:slug>/settings/approvals/",
        workspace_views.workspace_settings_approvals,
        name="workspace-settings-approvals",
    ),
    path(
        "w/<slug:slug>/settings/slack/uninstall/",
        workspace_views.workspace_slack_disconnect,
        name="workspace-slack-uninstall",
    ),
    path("threads/<int:thread_id>/", views.thread_detail, name="thread"),
    path("threads/<int:thread_id>/reply/", views.thread_reply, name="thread-reply"),
    path("threads/<int:thread_id>/stop/", views.thread_stop, name="thread-stop"),
    path("threads/<int:thread_id>/connect/", views.thread_connect, name="thread-connect"),
    path("threads/<int:thread_id>/actions/<slug:action>/<int:target_id>/", views.thread_action, name="thread-action"),
    path(
        "threads/<int:thread_id>/approvals/<int:approval_id>/allow/",
        views.thread_approval_allow,
        name="approval-allow",
    ),
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
    # A workspace's people and invitations (calvin/dashboard/people.py), an invitation's link
    path("w/<slug:slug>/people/", people_views.people_page, name="people"),
    path("w/<slug:slug>/people/invite/", people_views.people_invite, name="people-invite"),
    path("w/<slug:slug>/people/leave/", people_views.member_leave_view, name="people-leave"),
    path("w/<slug:slug>/people/<int:member_id>/role/", people_views.member_role_view, name="member-role"),
    path("w/<slug:slug>/people/<int:member_id>/remove/", people_views.member_remove_view, name="member-remove"),
    path(
        "w/<slug:slug>/people/invitations/<int:invitation_id>/resend/",
        people_views.invitation_resend_view,
        name="invitation-resend",
    ),
    path(
        "w/<slug:slug>/people/invitations/<int:invitation_id>/revoke/",
        people_views.invitation_revoke_view,
        name="invitation-revoke",
    ),
    # Scheduled tasks (calvin/dashboard/scheduled_tasks.py)
    path("w/<slug:slug>/tasks/", scheduled_tasks.scheduled_tasks_page, name="scheduled-tasks"),
    path(
        "w/<slug:slug>/tasks/<int:task_id>/<str:action>/",
        scheduled_tasks.scheduled_task_action,
        name="scheduled-task-action",
    ),
    # A person's API tokens (calvin/dashboard/api_tokens.py)
    path("w/<slug:slug>/tokens/", api_tokens.api_tokens_page, name="api-tokens"),
    path("w/<slug:slug>/tokens/<int:token_id>/revoke/", api_tokens.api_token_revoke_view, name="api-token-revoke"),
    path("invite/<str:token>/", invitation_page, name="invitation"),
    path("w/<slug:slug>/invite/<str:token>/", invitation_page, name="workspace-invitation"),
]
