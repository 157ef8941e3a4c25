"""The Grafana dashboard and docs/metrics.md against the metrics the code exposes."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from agentboard.observe import metrics
from agentboard.store.engine import Database

DOCS = Path(__file__).resolve().parent.parent / "docs"
#: PromQL words that are not metric names (the names of functions are followed by "(")
KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset", "inf", "nan"}


def exposed_names(db: Database) -> set[str]:
    """Every series name a scrape can show: counters with ``_total``, histograms with their
    ``_bucket``, ``_sum`` and ``_count``."""
    names: set[str] = set()
    for name, kind in metrics.metric_families(db).items():
        if kind == "counter":
            names.add(name + "_total")
        elif kind == "histogram":
            names.update(name + s for s in ("_bucket", "_sum", "_count"))
        elif kind == "summary":
            names.update((name, name + "_sum", name + "_count"))
        else:
            names.add(name)
    return names


def metric_names_in(expr: str) -> set[str]:
    text = re.sub(r'"(?:[^"\\]|\\.)*"', "", expr)  # label values, strings
    text = re.sub(r"\{[^}]*\}", "", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", "", text)  # range selectors
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    found = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word, rest = m.group(0), text[m.end():].lstrip()
        if rest.startswith("(") or word.lower() in KEYWORDS:
            continue
        if m.start() > 0 and (text[m.start() - 1].isdigit() or text[m.start() - 1] == "."):
            continue  # the unit of a number (5m) or an exponent
        found.add(word)
    return found


def queries(dashboard: dict[str, Any]) -> list[str]:
    return [t["expr"] for p in dashboard["panels"] for t in p.get("targets", []) if t.get("expr")]


def test_every_query_of_the_grafana_dashboard_names_a_metric_that_exists(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    exposed = exposed_names(db)
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    exprs = queries(dashboard)
    assert len(exprs) >= 10
    for expr in exprs:
        names = metric_names_in(expr)
        assert names, f"no metric in {expr!r}"
        assert names <= exposed, f"{expr!r} names {sorted(names - exposed)}, not exposed by agentboard"
    used = set().union(*(metric_names_in(e) for e in exprs))
    for needed in ("agentboard_runs_total", "agentboard_ready_to_spawn_seconds_bucket", "agentboard_cost_usd_total",
                   "agentboard_tasks"):
        assert needed in used  # throughput and failures, latency, spend, queue depth


def test_the_name_reader_finds_names_and_skips_functions_labels_and_ranges() -> None:
    assert metric_names_in('histogram_quantile(0.95, sum by (le, host) (rate(a_b_bucket{x="y z"}[5m])))') \
        == {"a_b_bucket"}
    assert metric_names_in("time() - max by (host) (seen_seconds) > 1e3 and on(host) other") == {"seen_seconds", "other"}


def test_every_agentboard_metric_is_documented_in_the_metrics_reference(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'x.db'}")
    doc = (DOCS / "metrics.md").read_text()
    ours = {n for n in metrics.metric_families(db) if n.startswith("agentboard_")}
    assert len(ours) >= 20
    missing = sorted(n for n in ours if f"`{n}" not in doc)
    assert not missing, f"docs/metrics.md does not describe {missing}"
