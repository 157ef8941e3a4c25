"""LLM overhead: what ``agentboard.agents.llm.ask`` adds over the raw HTTP round trip.

Against the loopback OpenAI-compatible test server answering instantly, interleaved request by
request so both see the same machine:

- ``raw``: one POST of the same chat-completions body through an ``httpx.Client`` kept open
  (as ``ask`` keeps its SDK client and its connection pool per endpoint), the JSON read back;
- ``ask``: ``llm.ask(settings, "specifier", prompt)`` — the use's backend resolved, the request
  sent through the ``openai`` SDK, the typed response and the usage read.

Reports p50 / p99 of each in ms, the added latency (p50 and p99 of ask − raw) and the ratio
of the p50s. Target: ≤ 3 ms added at p50 (an LLM call itself takes seconds; the board's share
must stay noise).

    python bench/llm_overhead.py [--n 300]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx  # noqa: E402
from _shared import load_average  # noqa: E402
from fakes.fake_openai import FakeOpenAI  # noqa: E402

from agentboard import config  # noqa: E402
from agentboard.agents import llm  # noqa: E402

TARGET_ADDED_P50_MS = 3.0
PROMPT = "Rewrite this one-liner as a task: add dark mode to the settings page."


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def ask_overhead(n: int) -> dict[str, Any]:
    """The added latency of one ``ask`` over a raw POST to the same instant server."""
    with FakeOpenAI() as server:
        settings = config.Settings(home=Path(tempfile.gettempdir()), llm_base_url=server.url,
                                   llm_model="fake-model", llm_api_key="sk-bench")
        url = server.url + "/chat/completions"
        body = {"model": "fake-model", "messages": [{"role": "user", "content": PROMPT}]}
        headers = {"Authorization": "Bearer sk-bench"}

        http = httpx.Client(timeout=10)

        def raw() -> float:
            started = time.perf_counter()
            resp = http.post(url, json=body, headers=headers)
            resp.raise_for_status()
            assert resp.json()["choices"][0]["message"]["content"]
            return (time.perf_counter() - started) * 1000

        def ask() -> float:
            started = time.perf_counter()
            assert llm.ask(settings, "specifier", PROMPT).text
            return (time.perf_counter() - started) * 1000

        for _ in range(20):  # warm up: imports, the SDK's first client, the server's threads
            raw()
            ask()
        raws: list[float] = []
        asks: list[float] = []
        for i in range(n):
            if i % 2:
                raws.append(raw())
                asks.append(ask())
            else:
                asks.append(ask())
                raws.append(raw())
        requests = len(server.requests)
        http.close()
    added = [a - r for a, r in zip(asks, raws, strict=True)]
    out = {
        "n": n,
        "raw_p50_ms": round(statistics.median(raws), 3),
        "raw_p99_ms": round(percentile(raws, 0.99), 3),
        "ask_p50_ms": round(statistics.median(asks), 3),
        "ask_p99_ms": round(percentile(asks, 0.99), 3),
        "added_p50_ms": round(statistics.median(added), 3),
        "added_p99_ms": round(percentile(added, 0.99), 3),
        "ratio_p50": round(statistics.median(asks) / statistics.median(raws), 2),
        "requests_seen": requests,
        "target_added_p50_ms": TARGET_ADDED_P50_MS,
    }
    out["meets_target"] = out["added_p50_ms"] <= TARGET_ADDED_P50_MS
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300, help="measured requests of each kind")
    args = ap.parse_args(argv)
    load_start = load_average()
    result = {"ask": ask_overhead(args.n)}
    result["load_average"] = {"start": load_start, "end": load_average()}
    print(json.dumps(result))
    a = result["ask"]
    print(f"\nLLM overhead, {a['n']} requests of each kind to the instant loopback server", file=sys.stderr)
    print(f"  {'':<28}{'p50 ms':>9}{'p99 ms':>9}", file=sys.stderr)
    print(f"  {'raw httpx POST':<28}{a['raw_p50_ms']:>9.2f}{a['raw_p99_ms']:>9.2f}", file=sys.stderr)
    print(f"  {'llm.ask':<28}{a['ask_p50_ms']:>9.2f}{a['ask_p99_ms']:>9.2f}", file=sys.stderr)
    print(f"  {'added by ask':<28}{a['added_p50_ms']:>9.2f}{a['added_p99_ms']:>9.2f}"
          f"  ratio {a['ratio_p50']}  (target ≤ {TARGET_ADDED_P50_MS:g} ms added at p50: "
          f"{'OK' if a['meets_target'] else 'MISSES TARGET'})", file=sys.stderr)
    print(f"load average (1/5/15 min): {load_start} at the start, {result['load_average']['end']} at "
          "the end; numbers are only comparable on a quiet machine", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
