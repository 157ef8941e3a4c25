"""A fleet of dispatcher hosts on one PostgreSQL: waves of script agents, a burst, a kill -9.

``--hosts`` (default 8) ``agentboard dispatcher`` processes, each a simulated host (its own
``AGENTBOARD_HOST_ID`` and home, ``max_parallel`` ``--slots``, claim TTL ``--ttl``), on a fresh
database. The agent sleeps ``--work`` seconds and writes ``.board/result.json``. Phases:

1. **steady**: ``--rate`` new tasks per second for ``--seconds``; ready → spawn latency of each
   task from its events (``created`` → ``spawned``), p50/p99, and the peak of agents running
   at once (about ``--rate`` × ``--work`` once the phase is longer than ``--work``);
2. **burst**: ``--burst`` tasks made ready at once (one transaction: their parent's
   completion); time from that completion (its event's time, taken as its transaction starts,
   so the promotion of the children counts) to the first claim of one of them (its run's start),
   and to the first and to the last ``spawned`` (a burst larger
   than ``--hosts`` × ``--slots`` waits for agents to finish: ``over_capacity``), the passes each
   dispatcher ran and the wake-ups it skipped meanwhile, per host the tasks it started and the
   claims that took them, when each share of the burst had started (``spawned_by_share_ms``) and
   each host's first and last start (``host_spans_ms``), and the CPU per task of the machine, the dispatchers and PostgreSQL
   (from the gate's start to the last spawn). Its baseline, measured in the same run just before:
   the same ``--burst`` agents started by one process with a bare ``Popen`` each
   (``baseline_raw_spawn``, ``vs_raw``);
3. **kill -9**: one host killed with its agents at work (they sleep ``--kill-work`` s); its
   agents must be gone within its guard's grace (sampled), its tasks back on the board within the
   claim TTL and completed once elsewhere.

Reported: latencies, passes run and skipped per second and CPU of each dispatcher (mean) during
the steady phase (passes from each dispatcher's ``/metrics``), peak concurrent agents, duplicates (tasks with more than one completed
run), the killed host's orphans still alive after 5 s and when its tasks started again,
threads and RSS of each dispatcher (and per agent) at peak, and the guard processes' RSS.
``VACUUM ANALYZE`` runs before each phase. Numbers from a shared machine are noisy: compare runs
of the same machine only.

    python bench/fleet.py [--hosts 8] [--slots 40] [--rate 10] [--seconds 20] [--burst 200]
                          [--phases steady,burst,kill]

``--phases`` runs some of the phases only (``--phases burst``: the burst alone, its agents left
running when the run ends, as the dispatchers' shutdown stops them).

The targets (``targets`` in the JSON, each with whether this run was at its scale and met it):
1,000 agents at once with ready → spawn p99 ≤ 250 ms at 30 new tasks/s, and a burst of 1,000
all started within 2 s, the first within 100 ms, with no duplicates. At their scale:

    python bench/fleet.py --hosts 8 --slots 160 --ttl 60 --rate 30 --work 40 --seconds 60 --burst 1000
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _shared import DEFAULT_PG, drop_pg, fresh_pg, load_average  # noqa: E402


def _agent(secs: float) -> str:
    return "sh -c " + shlex.quote(
        f"sleep {secs}; echo '{{\"success\": true, \"summary\": \"ok\"}}' > .board/result.json")


def _vacuum(url: str) -> None:
    import psycopg

    with psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def _rss_kb(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def _threads(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return 0


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used so far."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def _machine_cpu_s() -> float:
    """CPU seconds the whole machine has been busy (all cores), from ``/proc/stat``."""
    fields = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(f) for f in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _postgres_cpu_s() -> float:
    """CPU seconds used so far by the running PostgreSQL server's processes."""
    total = 0.0
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() == "postgres":
                    total += _cpu_s(int(d.name))
            except OSError:
                continue
    return total


def _cpu_split(procs: list[subprocess.Popen[bytes]]) -> tuple[float, float, float]:
    """The machine's, the dispatchers' and PostgreSQL's CPU seconds so far."""
    return _machine_cpu_s(), sum(_cpu_s(p.pid) for p in procs), _postgres_cpu_s()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _passes(port: int) -> tuple[float, float]:
    """Passes run and passes skipped so far by the dispatcher serving /metrics on ``port``."""
    import urllib.request

    ran = skipped = 0.0
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return ran, skipped
    for line in text.splitlines():
        if line.startswith("agentboard_dispatcher_pass_seconds_count"):
            ran += float(line.split()[-1])
        elif line.startswith("agentboard_dispatcher_passes_skipped_total"):
            skipped += float(line.split()[-1])
    return ran, skipped


def _pct(xs: list[float], p: float) -> float | None:
    if not xs:
        return None
    xs = sorted(xs)
    return round(xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))], 1)


def _latencies(db: Any, ids: list[str]) -> tuple[list[float], float | None, float | None]:
    """ms from each task's ``created`` to its first ``spawned`` event; and the first and last
    spawn times."""
    from agentboard.store.engine import in_list

    def _r(tx: Any) -> list[dict[str, Any]]:
        params: dict[str, Any] = {}
        return tx.all("SELECT task_id, kind, MIN(created_at) AS at FROM task_events WHERE kind IN ('created', "
                      "'spawned') AND task_id IN " + in_list("t", ids, params) + " GROUP BY task_id, kind", params)
    rows = db.read(_r)
    created = {r["task_id"]: float(r["at"]) for r in rows if r["kind"] == "created"}
    spawned = {r["task_id"]: float(r["at"]) for r in rows if r["kind"] == "spawned"}
    lat = [(spawned[t] - created[t]) * 1000 for t in spawned if t in created]
    return lat, (min(spawned.values()) if spawned else None), (max(spawned.values()) if spawned else None)


def _count(db: Any, sql: str, params: dict[str, Any] | None = None) -> int:
    return int(db.read(lambda tx: tx.scalar(sql, params or {})) or 0)


def _wait(fn: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return True
        time.sleep(0.2)
    return False


def _steady(ab: Any, board: Any, url: str, args: argparse.Namespace, procs: list[subprocess.Popen[bytes]],
            ports: list[int], sample: Any, peak: dict[str, Any], out: dict[str, Any]) -> None:
    """Phase 1: ``--rate`` new tasks per second for ``--seconds``."""
    _vacuum(url)
    ids: list[str] = []
    cpu0 = [_cpu_s(p.pid) for p in procs]
    passes0 = [_passes(port) for port in ports]
    t0 = time.monotonic()
    k = 0
    while time.monotonic() - t0 < args.seconds:
        due = int((time.monotonic() - t0) * args.rate)
        while k < due:
            ids.append(board.create(f"steady {k}", assignee="w")["id"])
            k += 1
        sample()
        time.sleep(0.05)
    span = time.monotonic() - t0
    cpu = [_cpu_s(p.pid) - c for p, c in zip(procs, cpu0, strict=True)]
    passes = [(a[0] - b[0], a[1] - b[1]) for a, b in zip([_passes(port) for port in ports], passes0, strict=True)]
    _wait(lambda: _count(ab.db, "SELECT COUNT(*) FROM tasks WHERE status = 'done'") >= len(ids), 120)
    lat, _, _ = _latencies(ab.db, ids)
    out["steady"] = {"rate_per_s": args.rate, "tasks": len(ids), "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99),
                     "peak_agents": peak["agents"],
                     # per dispatcher, while the tasks were being created
                     "passes_per_s": round(sum(p for p, _ in passes) / len(procs) / span, 1),
                     "skipped_passes_per_s": round(sum(s for _, s in passes) / len(procs) / span, 1),
                     "dispatcher_cpu_pct": round(sum(cpu) / len(procs) / span * 100, 1)}


def _raw_spawns(n: int, root: Path, work: float) -> dict[str, float]:
    """The baseline of a burst, measured in the same run: ``n`` of the same agent started by one
    process with a bare ``Popen`` each (a folder with ``.board/`` and a log file each, a session
    of its own), no database; the wall time to start them all and the machine's CPU per agent.
    They are stopped afterwards."""
    base = root / "raw"
    cmd = ["sh", "-c", f"sleep {work}; echo '{{\"success\": true}}' > .board/result.json"]
    started: list[subprocess.Popen[bytes]] = []
    m0, t0 = _machine_cpu_s(), time.perf_counter()
    for i in range(n):
        d = base / f"w{i}"
        (d / ".board").mkdir(parents=True)
        with open(d / "log", "ab", buffering=0) as log:
            started.append(subprocess.Popen(cmd, cwd=d, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                            start_new_session=True, close_fds=True))
    wall = time.perf_counter() - t0
    time.sleep(0.5)  # the last ones' own start (their exec) counted too
    cpu = _machine_cpu_s() - m0
    for p in started:
        with contextlib.suppress(OSError):
            os.killpg(p.pid, signal.SIGKILL)
    for p in started:
        p.wait()
    return {"all_started_ms": round(wall * 1000, 1), "cpu_ms_per_task": round(cpu * 1000 / max(1, n), 2)}


def _burst(ab: Any, board: Any, url: str, args: argparse.Namespace, procs: list[subprocess.Popen[bytes]],
           ports: list[int], sample: Any, out: dict[str, Any]) -> None:
    """Phase 2: ``--burst`` children made ready by their parent's completion."""
    # (beneath the fleet's folder, removed at the end: removing thousands of files just before the
    # burst would slow the file system's next creates, the burst's workspaces)
    raw = _raw_spawns(args.burst, Path(tempfile.mkdtemp(prefix="raw-", dir=ab.settings.home.parent)), args.work)
    _vacuum(url)
    # the children wait for a parent whose completion makes them all ready in one transaction
    gate = board.create("gate")["id"]  # no agent takes it until all its children exist
    held = [board.create(f"burst {i}", assignee="w", parents=[gate])["id"] for i in range(args.burst)]
    passes0 = [_passes(port) for port in ports]
    board.assign(gate, "gate")
    _wait(lambda: board.show(gate)["status"] == "running", 60)
    cpu0 = _cpu_split(procs)
    # (through the gate's links: the poll itself must not read every task of the board)
    _wait(lambda: (sample() or True) and _count(ab.db, "SELECT COUNT(*) FROM task_runs r JOIN task_links l ON "
                                                "l.child_id = r.task_id WHERE l.parent_id = :g", {"g": gate}) >= len(held), 120)
    # from the gate's start to the last spawn, over the burst's tasks: what starting one costs
    cpu = [(b - a) * 1000 / max(1, len(held)) for a, b in zip(cpu0, _cpu_split(procs), strict=True)]
    passes1 = [_passes(port) for port in ports]
    burst_passes = [a[0] - b[0] for a, b in zip(passes1, passes0, strict=True)]
    burst_skipped = [a[1] - b[1] for a, b in zip(passes1, passes0, strict=True)]
    # per host: the burst's tasks it started and the claim transactions that took them
    per_host = ab.db.read(lambda tx: tx.all(
        "SELECT r.worker_host AS host, COUNT(*) AS tasks, COUNT(DISTINCT r.claim_lock) AS claims FROM task_runs r "
        "JOIN task_links l ON l.child_id = r.task_id WHERE l.parent_id = :g GROUP BY r.worker_host ORDER BY 1", {"g": gate}))
    _, first, last = _latencies(ab.db, held)
    # when each share of the burst had started, and when each host started its last one
    timeline = ab.db.read(lambda tx: tx.all(
        "SELECT e.created_at AS at, r.worker_host AS host FROM task_events e JOIN task_links l ON "
        "l.child_id = e.task_id JOIN task_runs r ON r.id = e.run_id WHERE l.parent_id = :g AND e.kind = 'spawned' "
        "ORDER BY e.created_at", {"g": gate}))
    t_ready = float(ab.db.read(lambda tx: tx.scalar(
        "SELECT MIN(created_at) FROM task_events WHERE task_id = :t AND kind IN ('completed', 'done', "
        "'status_changed')", {"t": gate})) or 0) or float(board.show(gate).get("completed_at") or 0)
    # the first claim of a burst task (its run's start): what the wake-up and the claim take, before a spawn
    first_claim = float(ab.db.read(lambda tx: tx.scalar(
        "SELECT MIN(r.started_at) FROM task_runs r JOIN task_links l ON l.child_id = r.task_id "
        "WHERE l.parent_id = :g", {"g": gate})) or 0)
    out["burst"] = {"tasks": len(held), "first_claim_ms": round((first_claim - t_ready) * 1000, 1) if first_claim else None,
                    "first_spawn_ms": round((first - t_ready) * 1000, 1) if first else None,
                    "all_spawned_ms": round((last - t_ready) * 1000, 1) if last else None,
                    # more than the slots: the last ones wait for earlier agents to finish
                    "over_capacity": len(held) > args.hosts * args.slots,
                    # ms from the gate's completion until a share of the burst had started
                    "spawned_by_share_ms": {f"{q}%": round((float(timeline[min(len(timeline) - 1, len(timeline) * q // 100)]
                                                                   ["at"]) - t_ready) * 1000, 1)
                                            for q in (10, 25, 50, 75, 90, 99)} if timeline else {},
                    # per host: ms from the gate's completion to its first and its last start
                    "host_spans_ms": [[round((min(float(r["at"]) for r in timeline if r["host"] == h) - t_ready) * 1000),
                                       round((max(float(r["at"]) for r in timeline if r["host"] == h) - t_ready) * 1000)]
                                      for h in sorted({r["host"] for r in timeline})],
                    # passes each dispatcher ran (the gate's own included) until all had started
                    "passes_per_host": burst_passes,
                    # wake-ups each dispatcher's glance found nothing to do for
                    "skipped_per_host": burst_skipped,
                    "tasks_per_host": [int(r["tasks"]) for r in per_host],
                    "claims_per_host": [int(r["claims"]) for r in per_host],
                    # the same agents started by a bare Popen each, in this run: the floor
                    "baseline_raw_spawn": raw,
                    "vs_raw": {"all_spawned": round((last - t_ready) * 1000 / raw["all_started_ms"], 2) if last else None,
                               "cpu_per_task": round(cpu[0] / raw["cpu_ms_per_task"], 2)},
                    "cpu_ms_per_task": {"machine": round(cpu[0], 2), "dispatchers": round(cpu[1], 2),
                                        "postgres": round(cpu[2], 2),
                                        "agents_and_rest": round(cpu[0] - cpu[1] - cpu[2], 2)}}
    if "kill" in args.phases or args.phases.count("burst") > 1:  # the next phase starts on an idle board
        _wait(lambda: _count(ab.db, "SELECT COUNT(*) FROM tasks WHERE status != 'done'") == 0, 180)


def _kill(ab: Any, board: Any, url: str, args: argparse.Namespace, procs: list[subprocess.Popen[bytes]],
          running_q: str, out: dict[str, Any]) -> None:
    """Phase 3: host 0 killed with ``kill -9`` while its agents work."""
    _vacuum(url)
    victim = procs[0]
    long_ids = [board.create(f"long {i}", assignee="long")["id"] for i in range(args.hosts * 3)]
    _wait(lambda: _count(ab.db, "SELECT COUNT(*) FROM tasks WHERE status = 'running' AND worker_host = "
                                "'host-0'") > 0 and _count(ab.db, running_q) >= len(long_ids), 60)
    pids = [int(r["worker_pid"]) for r in ab.db.read(lambda tx: tx.all(
        "SELECT worker_pid FROM tasks WHERE status = 'running' AND worker_host = 'host-0' AND worker_pid IS NOT NULL"))]
    lost = {r["id"] for r in ab.db.read(lambda tx: tx.all(
        "SELECT id FROM tasks WHERE status = 'running' AND worker_host = 'host-0'"))}
    t_kill = time.time()
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    time.sleep(5)
    from agentboard.dispatch.liveness import group_has_live

    orphans = sum(1 for p in pids if group_has_live(p))
    _wait(lambda: _count(ab.db, "SELECT COUNT(*) FROM tasks WHERE status != 'done'") == 0,
          args.ttl * 3 + args.kill_work * 2 + 60)
    restarted = ab.db.read(lambda tx: tx.all(
        "SELECT task_id, MIN(started_at) AS at FROM task_runs WHERE worker_host != 'host-0' AND attempt >= 1 "
        "GROUP BY task_id"))
    back = [float(r["at"]) - t_kill for r in restarted if r["task_id"] in lost]
    out["kill"] = {"host_tasks": len(lost), "agents": len(pids), "orphans_alive_after_5s": orphans,
                   "restarted_elsewhere": len(back), "restarted_after_s_max": round(max(back), 1) if back else None,
                   "ttl_s": args.ttl}


def run(url: str, args: argparse.Namespace) -> dict[str, Any]:
    import agentboard

    root = Path(tempfile.mkdtemp(prefix="ab-bench-fleet-"))
    ab = agentboard.connect(url)
    ab.settings.home = root / "client"
    ab.add_profile("w", command=_agent(args.work))
    ab.add_profile("long", command=_agent(args.kill_work))
    ab.add_profile("gate", command=_agent(1))
    board = ab.board()
    procs: list[subprocess.Popen[bytes]] = []
    ports = [_free_port() for _ in range(args.hosts)]
    out: dict[str, Any] = {"hosts": args.hosts, "slots": args.slots, "ttl_s": args.ttl, "work_s": args.work,
                           # each worker in a cgroup of its own (the dispatchers read the same setting)
                           "worker_cgroups": bool(ab.settings.worker_cgroups)}
    for i in range(args.hosts):
        home = root / f"host{i}"
        home.mkdir()
        env = {**os.environ, "AGENTBOARD_HOME": str(home), "AGENTBOARD_DATABASE_URL": url,
               "AGENTBOARD_HOST_ID": f"host-{i}", "AGENTBOARD_MAX_PARALLEL": str(args.slots),
               "AGENTBOARD_CLAIM_TTL": str(args.ttl)}
        log = open(root / f"host{i}.log", "ab")  # noqa: SIM115 - the child's
        procs.append(subprocess.Popen([sys.executable, "-m", "agentboard", "dispatcher", "--quiet",
                                       "--metrics-port", str(ports[i])], env=env,
                                      stdout=log, stderr=log, start_new_session=True))
    running_q = "SELECT COUNT(*) FROM tasks WHERE status = 'running'"
    peak = {"agents": 0, "threads": [0] * args.hosts, "rss_kb": [0] * args.hosts}

    def sample() -> None:
        n = _count(ab.db, running_q)
        if n >= peak["agents"]:
            peak["agents"] = n
            peak["threads"] = [_threads(p.pid) for p in procs]
            peak["rss_kb"] = [_rss_kb(p.pid) for p in procs]
    try:
        # the dispatchers start (a loaded machine takes a while): each has run a pass
        if not _wait(lambda: all(_passes(port)[0] >= 1 for port in ports), 180):
            raise SystemExit("the dispatchers did not start within 180 s; see " + str(root))
        for phase in args.phases.split(","):  # in the order given; a burst may come more than once
            if phase == "steady":
                _steady(ab, board, url, args, procs, ports, sample, peak, out)
            elif phase == "burst":
                _burst(ab, board, url, args, procs, ports, sample, out)
                out.setdefault("bursts", []).append(out["burst"])
            elif phase == "kill":
                _kill(ab, board, url, args, procs, running_q, out)
            else:
                raise SystemExit(f"unknown phase {phase!r}: steady, burst or kill")
        out["duplicates"] = _count(ab.db, "SELECT COUNT(*) FROM (SELECT task_id FROM task_runs WHERE outcome = "
                                          "'completed' GROUP BY task_id HAVING COUNT(*) > 1) d")
        agents = max(1, peak["agents"])
        out["resources_at_peak"] = {
            "agents": peak["agents"], "dispatcher_threads": peak["threads"],
            "dispatcher_threads_per_agent": round(sum(peak["threads"]) / agents, 3),
            "dispatcher_rss_mb": [round(r / 1024, 1) for r in peak["rss_kb"]],
            "dispatcher_rss_kb_per_agent": round(sum(peak["rss_kb"]) / agents, 1),
        }
        guards = [int(p.read_text()) for p in root.glob("host*/run/guard-*.pid")]
        out["guard_rss_mb"] = [round(_rss_kb(g) / 1024, 1) for g in guards if _rss_kb(g)]
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        ab.close()
        _remove(root)
    return out


def _remove(root: Path) -> None:
    """Stop the agents still working beneath ``root`` (a dispatcher that stops leaves its workers
    running, by design) and remove the folder."""
    top = str(root.resolve())
    for pid in (int(p) for p in os.listdir("/proc") if p.isdigit()):
        try:
            cwd = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            continue
        if cwd == top or cwd.startswith(top + os.sep):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pg", default=DEFAULT_PG)
    ap.add_argument("--hosts", type=int, default=8)
    ap.add_argument("--slots", type=int, default=40)
    ap.add_argument("--ttl", type=int, default=20)
    ap.add_argument("--work", type=float, default=5.0)
    ap.add_argument("--kill-work", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=10.0)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--burst", type=int, default=200)
    ap.add_argument("--phases", default="steady,burst,kill", help="comma-separated: steady, burst, kill")
    args = ap.parse_args()
    load0 = load_average()
    url, name = fresh_pg(args.pg)
    try:
        res = run(url, args)
    finally:
        drop_pg(args.pg, name)
    print(json.dumps({"benchmark": "fleet", "load_average_start": load0, "load_average_end": load_average(),
                      "cpus": os.cpu_count(), **res, "targets": targets(res)}))


#: the fleet's targets: ready -> spawn p99 at a steady rate with this many agents at once, and a burst
TARGETS = {"steady_rate_per_s": 30, "steady_agents": 1000, "steady_p99_ms": 250,
           "burst_tasks": 1000, "burst_first_spawn_ms": 100, "burst_all_spawned_ms": 2000}


def targets(res: dict[str, Any]) -> dict[str, Any]:
    """Each target, whether this run was at its scale, and whether it was met (None: not measured)."""
    steady, burst = res.get("steady") or {}, res.get("burst") or {}

    def le(value: Any, limit: float) -> bool | None:
        return None if value is None else bool(value <= limit)
    first, last = burst.get("first_spawn_ms"), burst.get("all_spawned_ms")
    return {**TARGETS,
            "steady_at_scale": (steady.get("rate_per_s") or 0) >= TARGETS["steady_rate_per_s"]
            and (steady.get("peak_agents") or 0) >= TARGETS["steady_agents"],
            "steady_p99_met": le(steady.get("p99_ms"), TARGETS["steady_p99_ms"]),
            "burst_at_scale": (burst.get("tasks") or 0) >= TARGETS["burst_tasks"] and not burst.get("over_capacity"),
            "burst_first_met": le(first, TARGETS["burst_first_spawn_ms"]),
            "burst_all_met": le(last, TARGETS["burst_all_spawned_ms"]),
            "duplicates_met": res.get("duplicates") == 0}


if __name__ == "__main__":
    main()
