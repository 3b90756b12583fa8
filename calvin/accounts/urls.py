from django.urls import path

from calvin.accounts import views

app_name = "accounts"

urlpatterns: list = [
    path("signup/", views.signup, name="signup"),
    path("signup/done/", views.signup_done, name="signup-done"),
    path("verify/resend/", views.verify_resend, name="verify-resend"),
    path("verify/<uidb64>/<token>/", views.verify, name="verify"),
]
