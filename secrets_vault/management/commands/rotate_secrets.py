from django.core.management.base import BaseCommand, CommandError

from secrets_vault.crypto import vault_available
from secrets_vault.services import secrets_rotate


class Command(BaseCommand):
    help = "Re-encrypt every secret under the first SP_STORE_KEY (after adding a new key in front)."

    def handle(self, *args, **options):
        if not vault_available():
            raise CommandError("SP_STORE_KEY is not set")
        self.stdout.write(f"re-encrypted {secrets_rotate()} secret(s)")
