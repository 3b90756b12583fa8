from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("secrets_vault", "0001_initial")]

    operations = [
        migrations.RenameField("secret", "created_by", "set_by"),
        migrations.RenameField("secret", "created_at", "set_at"),
    ]
