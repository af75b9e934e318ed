"""An API key's end: ``ApiKey.expires_at``.

Nullable, and empty for every key made before: those never expire until an
operator replaces them (docs/how-to/upgrading.md).
"""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("django_ojs", "0031_workflow_node_open_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="expires_at",
            field=models.DateTimeField(
                blank=True, help_text="From this moment the key is refused (401); empty: it never expires.", null=True
            ),
        ),
    ]
