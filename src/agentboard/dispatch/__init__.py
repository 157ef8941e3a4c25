"""The dispatcher: starts ready tasks as agent processes in workspaces and watches them.

Modules: ``dispatcher`` (the pass and the loop), ``spawn`` (worker processes), ``adapters``
(how each agent CLI is started and read), ``workspaces`` (scratch, dir, worktree), ``targets``
(board target directories), ``liveness`` (pids and process groups), ``breaker`` (systemic
failures and respawn guards), ``wake`` (event wake-up), ``gc`` (cleanup).
"""
