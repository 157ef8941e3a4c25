"""Notifications: subscriptions delivered through Apprise by a notifier that follows the event log.

Each module's part is listed once, in docs/ARCHITECTURE.md § notify/.
"""
