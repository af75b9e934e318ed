"""Handlers for the admin's browser tests, run by a real ``manage.py ojs_worker`` process.

Installed only by ``tests.admin.worker_settings``, the settings that process is given.
"""
