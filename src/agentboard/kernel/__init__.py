"""The kernel: the only code that changes board state.

One function per verb, one transaction per call, an event row per change. Every function takes
the :class:`~agentboard.store.Database` and the board slug first, so no call can reach another
board's rows.
"""
