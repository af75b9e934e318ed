"""The example project's URLs plus ``/bench/bare``: the HTTP floor, a Django view that only answers JSON.

It names the process that served it, so the load can spread its
keep-alive connections evenly over gunicorn's workers.
"""

import os

from django.http import JsonResponse
from django.urls import path

from example_project.urls import urlpatterns as example_urlpatterns


def bare(request):
    return JsonResponse({"ok": True, "pid": os.getpid()})


urlpatterns = [path("bench/bare", bare), *example_urlpatterns]
