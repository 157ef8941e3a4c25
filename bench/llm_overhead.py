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

Then the helpers built on it (each on a fresh triage task of a SQLite board, interleaved with
a raw POST of the same answer):

- ``specify`` / ``decompose``: the added latency of the whole verb (the task read, the prompt,
  the call, the usage event, the parse and the one-transaction write) over the raw round trip;

and auto mode: a started dispatcher on a board with ``auto_decompose`` on, 50 triage tasks and
an LLM that takes 2 s per call, while ready tasks are created one at a time and the time from
the create to the worker's ``Popen`` is measured (``bench/dispatch_latency.py``'s method), with
and without the slow LLM. Target: the dispatcher's own (p50 ≤ 50 ms, p99 ≤ 250 ms).

    python bench/llm_overhead.py [--n 300] [--helpers 40] [--ready 40]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
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


SPEC = {"title": "Add a dark mode to the settings page", "goal": "people can switch to dark colours",
        "approach": "CSS variables", "acceptance_criteria": ["the toggle works"], "out_of_scope": ["themes"]}
FANOUT = {"fanout": True, "tasks": [{"title": "design"}, {"title": "build", "parents": [0]},
                                    {"title": "test", "parents": [1]}]}
WORKER = "sh -c " + shlex.quote("echo '{\"success\": true, \"summary\": \"ok\"}' > .board/result.json")


def _home(prefix: str) -> Path:
    home = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["AGENTBOARD_HOME"] = str(home)
    os.environ.pop("AGENTBOARD_DATABASE_URL", None)
    return home


def helper_overhead(n: int) -> dict[str, Any]:
    """The added latency of ``specify`` and ``decompose`` over a raw POST answering the same text."""
    return {kind: _helper(kind, answer, n) for kind, answer in (("specify", SPEC), ("decompose", FANOUT))}


def _helper(kind: str, answer: dict[str, Any], n: int) -> dict[str, Any]:
    import agentboard
    from agentboard.agents.decompose import decompose
    from agentboard.agents.specify import specify

    home = _home(f"ab-bench-{kind}-")
    with FakeOpenAI(default=json.dumps(answer)) as server:
        ab = agentboard.connect(str(home))
        ab.settings.llm_base_url, ab.settings.llm_model, ab.settings.llm_api_key = server.url, "fake-model", "sk"
        board = ab.board()
        url = server.url + "/chat/completions"
        http = httpx.Client(timeout=10)
        body = {"model": "fake-model", "messages": [{"role": "user", "content": PROMPT}]}
        run = specify if kind == "specify" else decompose

        def raw() -> float:
            started = time.perf_counter()
            http.post(url, json=body, headers={"Authorization": "Bearer sk"}).raise_for_status()
            return (time.perf_counter() - started) * 1000

        def verb(i: int) -> float:
            t = board.create(f"idea {i}", triage=True)
            started = time.perf_counter()
            result = run(ab.db, "default", t["id"], settings=ab.settings)
            took = (time.perf_counter() - started) * 1000
            assert result.ok, result.reason
            return took

        for i in range(5):
            raw()
            verb(-1 - i)
        raws, verbs = [], []
        for i in range(n):
            raws.append(raw())
            verbs.append(verb(i))
        http.close()
        ab.close()
    added = [v - r for v, r in zip(verbs, raws, strict=True)]
    return {"n": n, "raw_p50_ms": round(statistics.median(raws), 3),
                 "verb_p50_ms": round(statistics.median(verbs), 3),
                 "verb_p99_ms": round(percentile(verbs, 0.99), 3),
                 "added_p50_ms": round(statistics.median(added), 3),
                 "added_p99_ms": round(percentile(added, 0.99), 3)}


def spawn_latency(ready: int, slow_llm: bool) -> dict[str, Any]:
    """ready→spawn p50/p99 while (``slow_llm``) auto mode works through 50 triage tasks with an
    LLM taking 2 s per call."""
    import agentboard
    from agentboard.dispatch.dispatcher import Dispatcher

    home = _home("ab-bench-auto-")
    slow = {"delay": 2.0, "text": json.dumps(FANOUT)}
    with FakeOpenAI() as server:
        server.default = slow  # type: ignore[assignment]
        ab = agentboard.connect(str(home))
        ab.settings.home = home
        ab.settings.llm_base_url, ab.settings.llm_model, ab.settings.llm_api_key = server.url, "fake-model", "sk"
        ab.settings.auto_decompose = slow_llm
        ab.add_profile("w", command=WORKER)
        for i in range(50):
            ab.board().create(f"idea {i}", triage=True)
        d = Dispatcher(ab.db, ab.settings)
        started: dict[str, float] = {}
        d.on_spawn = lambda _b, task_id, _r, _pid, at: started.__setitem__(task_id, at)
        d.start()
        other = agentboard.connect(str(home))
        board = other.board()
        lat: list[float] = []
        try:
            for i in range(ready + 3):
                t = board.create(f"task {i}", assignee="w")
                t0 = time.time()
                deadline = time.monotonic() + 30
                while t["id"] not in started and time.monotonic() < deadline:
                    time.sleep(0.0005)
                if t["id"] not in started:
                    raise SystemExit(f"task {t['id']} did not start within 30 s")
                if i >= 3:
                    lat.append((started[t["id"]] - t0) * 1000)
                time.sleep(0.05)
            asked = len(server.requests)
        finally:
            d.stop(timeout=60)
            other.close()
            ab.close()
    return {"slow_llm": slow_llm, "n": len(lat), "p50_ms": round(percentile(lat, 0.5), 2),
            "p99_ms": round(percentile(lat, 0.99), 2), "max_ms": round(max(lat), 2), "llm_calls_meanwhile": asked,
            "meets_target": percentile(lat, 0.5) <= 50 and percentile(lat, 0.99) <= 250}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=300, help="measured requests of each kind")
    ap.add_argument("--helpers", type=int, default=40, help="measured specify / decompose calls of each")
    ap.add_argument("--ready", type=int, default=40, help="ready tasks timed in each auto-mode run")
    args = ap.parse_args(argv)
    load_start = load_average()
    result: dict[str, Any] = {"ask": ask_overhead(args.n), "helpers": helper_overhead(args.helpers),
                              "auto": [spawn_latency(args.ready, False), spawn_latency(args.ready, True)]}
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
    for kind, h in result["helpers"].items():
        print(f"  {kind + ' (whole verb)':<28}{h['verb_p50_ms']:>9.2f}{h['verb_p99_ms']:>9.2f}"
              f"  added over raw: p50 {h['added_p50_ms']:.2f} ms, p99 {h['added_p99_ms']:.2f} ms", file=sys.stderr)
    for r in result["auto"]:
        label = "with a 2 s LLM, 50 triage" if r["slow_llm"] else "manual (no LLM calls)"
        print(f"  ready→spawn, {label:<26} p50 {r['p50_ms']:.1f} ms  p99 {r['p99_ms']:.1f} ms  "
              f"(LLM calls meanwhile: {r['llm_calls_meanwhile']}; target p50 ≤ 50, p99 ≤ 250: "
              f"{'OK' if r['meets_target'] else 'MISSES TARGET'})", file=sys.stderr)
    print(f"load average (1/5/15 min): {load_start} at the start, {result['load_average']['end']} at "
          "the end; numbers are only comparable on a quiet machine", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
