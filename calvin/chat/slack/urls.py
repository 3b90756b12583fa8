from django.urls import path

from calvin.chat.slack import views

app_name = "slack"
urlpatterns = [
    path("slack/events", views.slack_inbound, name="events"),
    path("slack/interactivity", views.slack_inbound, name="interactivity"),
    path("slack/commands", views.slack_inbound, name="commands"),
    path("slack/install", views.slack_install, name="install"),
    path("slack/oauth_redirect", views.slack_oauth_redirect, name="oauth-redirect"),
]
