from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "calvin.audit"
    label = "audit"
    verbose_name = "Audit log"
