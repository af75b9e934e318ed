"""manage.py ojs_create_api_key NAME --scope SCOPE: print a new key once."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from ...keys import SCOPES
from ...models import ApiKey


class Command(BaseCommand):
    help = "Create an API key for the OJS HTTP API. The key is printed once and stored hashed."

    def add_arguments(self, parser):
        parser.add_argument("name", help="who or what uses the key, e.g. 'billing-service'")
        parser.add_argument("--scope", action="append", choices=SCOPES, dest="scopes",
                            help="repeatable; default: enqueue")
        parser.add_argument("--quiet", action="store_true", help="print only the key")

    def handle(self, *args, **options):
        try:
            key, secret = ApiKey.objects.issue(options["name"], options["scopes"] or ["enqueue"])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if options["quiet"]:
            self.stdout.write(secret)
            return
        self.stdout.write(f"API key {key.name!r} with scopes {', '.join(key.scopes)}:\n\n    {secret}\n")
        self.stdout.write("Store it now: it is not shown again. Send it as 'Authorization: Bearer <key>'.")
