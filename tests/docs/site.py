"""The site the docs' test samples talk to: the OJS routes and the two views they post to.

README's and docs/how-to/testing.md's tests post to ``/signup/`` and
``/checkout/`` and assert what those enqueued; these views are that code.
``test`` samples run with this module as ``ROOT_URLCONF`` (test_samples.py).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.urls import include, path

import django_ojs


def signup(request: HttpRequest) -> HttpResponse:
    django_ojs.enqueue("email.send", [request.POST["email"], "Welcome"], queue="email")
    return HttpResponse(status=201)


def checkout(request: HttpRequest) -> HttpResponse:
    # The view docs/how-to/testing.md shows; shop is the tutorial's app (test_samples.py's tutorial_app).
    from shop.jobs import send_receipt

    send_receipt.enqueue(int(request.POST["order"]), "ada@example.com")
    return HttpResponse(status=201)


urlpatterns = [
    path("signup/", signup),
    path("checkout/", checkout),
    path("", include("django_ojs.urls")),
]
