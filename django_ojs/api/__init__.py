"""The HTTP door: the OJS HTTP binding served by Django REST framework.

Views parse, authenticate, call the core and render; the rules live in the
core. Errors are mapped to the binding's error body in one place
(``errors.py``).
"""
