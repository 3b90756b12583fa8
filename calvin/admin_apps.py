"""django.contrib.admin's AppConfig with Calvin's site (calvin.admin_site): imported before models load."""

from django.contrib.admin.apps import AdminConfig


class CalvinAdminConfig(AdminConfig):
    default_site = "calvin.admin_site.CalvinAdminSite"

    def ready(self):
        super().ready()  # autodiscover: every app's admin.py
        from django.contrib import admin

        from calvin.admin_site import restrict_internal_tables

        restrict_internal_tables(admin.site)
