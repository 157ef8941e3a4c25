"""Agents the board itself runs: LLM access (:mod:`.llm`) and what is built on it
(:mod:`.describe`, profile descriptions)."""
