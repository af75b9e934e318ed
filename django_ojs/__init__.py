"""django-ojs: an Open Job Spec server and Python worker for Django projects."""

__version__ = "0.1.0"
