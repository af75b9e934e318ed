"""The chaos run's handlers and the table where each of their executions is recorded.

Installed only in the settings of the processes a chaos or outage run starts
(``tests.chaos.settings``); its table is made by ``migrate --run-syncdb``.
"""
