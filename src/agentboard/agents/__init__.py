"""The LLM helpers: specify, decompose (and the LLM access they share)."""
