"""Durable jobs: a job's last checkpoint (ojs-progress §6.4), how many durable steps it recorded,
and the steps themselves, one per name per job."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('django_ojs', '0021_notify_settled'),
    ]

    operations = [
        migrations.AddField(
            model_name='job',
            name='checkpoint',
            field=models.JSONField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name='job',
            name='step_count',
            field=models.PositiveIntegerField(db_default=0, default=0),
        ),
        migrations.CreateModel(
            name='JobStep',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=255)),
                ('attempt', models.PositiveIntegerField()),
                ('result', models.JSONField(blank=True, null=True)),
                ('recorded_at', models.DateTimeField()),
                ('job', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='steps', to='django_ojs.job')),
            ],
            options={
                'ordering': ['id'],
                'constraints': [models.UniqueConstraint(fields=('job', 'name'), name='ojs_job_step_name')],
            },
        ),
    ]
