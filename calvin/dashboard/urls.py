from django.urls import path

from calvin.dashboard import views

app_name = "dashboard"

urlpatterns = [
    path("", views.home, name="home"),
    path("threads/start/", views.thread_start, name="thread-start"),
    path("threads/<int:thread_id>/", views.thread_detail, name="thread"),
    path("threads/<int:thread_id>/reply/", views.thread_reply, name="thread-reply"),
    path("threads/<int:thread_id>/actions/<slug:action>/<int:target_id>/", views.thread_action, name="thread-action"),
    path("threads/<int:thread_id>/files/<int:message_id>/", views.message_file, name="message-file"),
]
