"""Notifications: subscriptions delivered through Apprise by a notifier that follows the event log.

- ``targets`` — checking an Apprise URL and the masked form shown back;
- ``messages`` — the text of one event and of a digest;
- ``send`` — one delivery through Apprise, its error text when it fails;
- ``subscriptions`` — what the CLI, REST and the dashboard call: add (the URL checked), test;
- ``notifier`` — the loop inside ``serve`` and ``dispatcher``.
"""
