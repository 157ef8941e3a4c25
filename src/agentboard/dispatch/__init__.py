"""The dispatcher: starts ready tasks as agent processes in workspaces and watches them.

Modules: ``dispatcher`` (the public ``Dispatcher`` and its wake loop), ``planning`` (one pass:
reads, caps, which tasks to start), ``spawning`` (claim, prepare, start and record workers),
``reaping`` (exits, crashes, timeouts, stale runs, expired claims), ``runtime`` (state shared
by the pass and pool threads), ``report`` (the typed pass report); ``spawn`` (worker processes),
``adapters`` (how each agent CLI is started and read), ``workspaces`` (scratch, dir, worktree),
``targets`` (board target directories), ``liveness`` (pids and process groups), ``breaker``
(systemic failures and respawn guards), ``wake`` (event wake-up), ``gc`` (cleanup).
"""
