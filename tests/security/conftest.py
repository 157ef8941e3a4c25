"""Regression tests for attacks on agentboard's trust boundaries: one test per attack, named
after it. Shared fixtures come from tests/conftest.py (``home``, ``backend``, ``ab``)."""
