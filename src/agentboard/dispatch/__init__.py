"""The dispatcher: starts ready tasks as agent processes in workspaces and watches them.

Each module's part is listed once, in docs/ARCHITECTURE.md § dispatch/ (a test keeps that list
complete).
"""
