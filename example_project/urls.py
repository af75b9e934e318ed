from django.conf import settings
from django.contrib import admin
from django.contrib.staticfiles.views import serve
from django.urls import include, path, re_path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("", include("django_ojs.urls")),
]

if settings.SERVE_STATIC:
    # The admin's CSS and scripts, straight from the apps (settings.SERVE_STATIC says when).
    urlpatterns.insert(0, re_path(r"^static/(?P<path>.*)$", serve, {"insecure": True}))
