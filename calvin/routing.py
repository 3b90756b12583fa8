from django.urls import path

from calvin.dashboard.consumers import ThreadConsumer

websocket_urlpatterns = [
    path("ws/threads/<int:thread_id>/", ThreadConsumer.as_asgi()),
]
