from django.urls import path

from calvin.dashboard.consumers import ThreadConsumer, WorkspaceConsumer

websocket_urlpatterns = [
    path("ws/threads/<int:thread_id>/", ThreadConsumer.as_asgi()),
    path("ws/workspaces/<int:workspace_id>/", WorkspaceConsumer.as_asgi()),
]
