"""``manage.py ojs``: the operators' command line (reads here, moves in ``core.bulk``)."""
