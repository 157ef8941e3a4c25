"""The added cost of budget accounting per kernel transition.

Two homes in the same run, the same workload: tasks claimed by the dispatcher's batch claim
(where the budget gate runs) and completed with a usage report (where the run's usage is written
to the ledger and the budgets are checked). Home A has no budgets; home B has a board, a profile
and a goal budget (high limits, so every task still runs). The two are measured in alternating
rounds, so drift of the shared disk falls on both. Prints one JSON line on stdout and a table on
stderr; the ratio B / A is the cost of budgets per transition.

    python bench/budgets.py --n 600
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from _shared import load_average  # noqa: E402


def setup(root: Path, with_budgets: bool, n: int):  # type: ignore[no-untyped-def]
    import agentboard
    from agentboard.kernel import budgets

    client = agentboard.connect(str(root))
    client.add_profile("w", command="true")
    b = client.board()
    gid = b.goal("bench")["id"]
    ids = [b.create(f"t{i}", assignee="w", goal=gid)["id"] for i in range(n)]
    if with_budgets:
        big = budgets.Limits.build(max_cost=1e9, max_tokens=10**15, max_runs=10**9)
        budgets.set_budget(client.db, "board", "default", big)
        budgets.set_budget(client.db, "profile", "w", budgets.Limits.build(max_cost=1e9, per="month"))
        budgets.set_budget(client.db, "goal", gid, big)
    return client, ids


def round_(client, ids: list[str]) -> float:  # type: ignore[no-untyped-def]
    from agentboard.kernel import dispatching as kd
    from agentboard.kernel import runs

    t0 = time.perf_counter()
    for tid in ids:
        (c,) = kd.claim_batch(client.db, "default", [tid], host="bench")
        runs.complete(client.db, "default", tid, summary="ok", run_id=int(c["run_id"]),
                      usage={"input_tokens": 1000, "output_tokens": 200, "cost_usd": 0.01})
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--n", type=int, default=600, help="tasks per home (two transactions each)")
    ap.add_argument("--rounds", type=int, default=6)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        a, ids_a = setup(Path(tmp) / "plain", False, args.n)
        b, ids_b = setup(Path(tmp) / "budgets", True, args.n)
        per = args.n // args.rounds
        ta = tb = 0.0
        for r in range(args.rounds):
            chunk = slice(r * per, (r + 1) * per)
            if r % 2 == 0:
                ta += round_(a, ids_a[chunk])
                tb += round_(b, ids_b[chunk])
            else:
                tb += round_(b, ids_b[chunk])
                ta += round_(a, ids_a[chunk])
        done = per * args.rounds
        from agentboard.kernel import budgets
        spent = budgets.show(b.db, scope="board", ref="default")[0]["spent"]
        assert int(spent["runs"]) == done, spent
        a.close()
        b.close()
    out = {
        "bench": "budgets", "transitions": 2 * done,
        "no_budgets_ms_per_transition": round(ta / (2 * done) * 1000, 3),
        "budgets_ms_per_transition": round(tb / (2 * done) * 1000, 3),
        "ratio": round(tb / ta, 3), "load": load_average(),
    }
    print(json.dumps(out))
    sys.stderr.write(
        f"{2 * done} transitions each (claim + complete with usage)\n"
        f"  no budgets: {out['no_budgets_ms_per_transition']:.3f} ms/transition\n"
        f"  3 budgets:  {out['budgets_ms_per_transition']:.3f} ms/transition\n"
        f"  ratio:      {out['ratio']:.3f}\n")


if __name__ == "__main__":
    main()
