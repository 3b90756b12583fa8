from django.contrib import admin

from secrets_vault.models import Secret


@admin.register(Secret)
class SecretAdmin(admin.ModelAdmin):
    list_display = ["name", "workspace", "session", "as_file", "key_id", "created_by", "created_at"]
    list_filter = ["as_file", "workspace"]
    search_fields = ["name"]
    # Values are never shown: the ciphertext is not even on the form.
    exclude = ["ciphertext"]
    readonly_fields = ["workspace", "session", "name", "key_id", "created_by", "created_at"]

    def has_add_permission(self, request):
        return False
