"""The demo's deterministic script agents (no network, no LLM).

``researcher.py`` writes notes on its topic and reports with ``agentboard complete``;
``writer.py`` reads its parents' hand-offs and writes the final briefing.
"""

from pathlib import Path

HERE = Path(__file__).parent
