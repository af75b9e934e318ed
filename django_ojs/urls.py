"""Include in a project's URLconf at the root: ``path("", include("django_ojs.urls"))``.

The binding fixes the paths (``/ojs/manifest``, ``/ojs/v1/...``), so the
include must not add a prefix.
"""

from django.urls import include, path

urlpatterns = [path("ojs/", include("django_ojs.api.urls"))]
