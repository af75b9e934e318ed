"""manage.py ojs_create_api_key NAME --scope SCOPE [--expires-in 90d]: print a new key once."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from ...keys import ADMIN_WARNING, SCOPES, SCOPES_EXPLAINED, parse_lifetime
from ...models import ApiKey
from ...protocol.durations import format_timestamp

DEFAULT_SCOPES = ["enqueue"]


class Command(BaseCommand):
    help = "Create an API key for the OJS HTTP API. The key is printed once and stored hashed."

    def add_arguments(self, parser):
        parser.add_argument("name", help="who or what uses the key, e.g. 'billing-service'")
        parser.add_argument("--scope", action="append", choices=SCOPES, dest="scopes",
                            help="repeatable; default: enqueue. 'admin' is never implied: name it to get it. "
                            + SCOPES_EXPLAINED)
        parser.add_argument("--expires-in", dest="expires_in", metavar="DURATION",
                            help="refuse the key after this long, e.g. 90d, 12h, P30D; default: never")
        parser.add_argument("--quiet", action="store_true", help="print only the key (warnings still go to stderr)")

    def handle(self, *args, **options):
        try:
            lifetime = None if options["expires_in"] is None else parse_lifetime(options["expires_in"])
        except ValueError as exc:
            raise CommandError(f"--expires-in: {exc}") from exc
        try:
            key, secret = ApiKey.objects.issue(options["name"], options["scopes"] or DEFAULT_SCOPES, expires_in=lifetime)
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        if "admin" in key.scopes:
            # stderr: scripts that read the key from stdout still see the warning.
            self.stderr.write(f"Warning: {ADMIN_WARNING}")
        if options["quiet"]:
            self.stdout.write(secret)
            return
        chosen = "" if options["scopes"] else " (the default; name --scope to choose)"
        ends = "never expires" if key.expires_at is None else f"expires at {format_timestamp(key.expires_at)}"
        self.stdout.write(f"API key {key.name!r} with scopes {', '.join(key.scopes)}{chosen}, {ends}:\n\n    {secret}\n")
        self.stdout.write("Store it now: it is not shown again. Send it as 'Authorization: Bearer <key>'.")
