"""Print a new key for SP_STORE_KEY: 32 random bytes, urlsafe base64.

It runs where the gateway refuses to start (hosted, DATABASE_URL set, no key): the settings
let exactly this command through, since it is how an operator makes the missing key.
"""

from django.core.management.base import BaseCommand

from secrets_vault.crypto import new_key

ROTATION_HINT = (
    "Set SP_STORE_KEY to this key for every gateway process (web, worker, beat) and keep a copy with the"
    " database backups: secrets encrypted with a lost key are lost.\n"
    "To rotate: put the new key first (SP_STORE_KEY=<new>,<old>; the first encrypts, all decrypt),"
    " restart, run `python manage.py rotate_secrets`, then drop the old key."
)


class Command(BaseCommand):
    help = "Print a new key for SP_STORE_KEY (the key only, on stdout; how to use it, on stderr)."
    requires_system_checks = []  # nothing here depends on the project being deployable

    def handle(self, *args, **options):
        self.stdout.write(new_key())
        self.stderr.write(ROTATION_HINT, style_func=str)  # advice, not an error: not in red
