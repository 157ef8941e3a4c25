"""The workers a pass starts together each get their cgroup: the threads that prepare them
probe the host's cgroups at once, and none is told there are none while another is still
looking (a worker without its cgroup leaves what it detached running after its run)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agentboard.cgroups import WorkerCgroups


@pytest.mark.parametrize("attempt", range(5))
def test_workers_prepared_at_once_on_a_fresh_host_each_get_their_cgroup(tmp_path: Path, attempt: int) -> None:
    host = f"at-once-{attempt}"
    looked = WorkerCgroups(tmp_path / "probe", host)
    if looked.probe() is None:
        pytest.skip(f"no cgroups for workers on this host: {looked.why}")
    looked.close()
    cgroups = WorkerCgroups(tmp_path / "home", host)  # a fresh process's: not probed yet
    start = threading.Barrier(8)
    got: dict[int, Path | None] = {}

    def prepare(run_id: int) -> None:
        start.wait()
        got[run_id] = cgroups.prepare(run_id)

    threads = [threading.Thread(target=prepare, args=(r,)) for r in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        assert all(folder is not None and folder.is_dir() for folder in got.values()), got
    finally:
        for run_id in got:
            cgroups.end(run_id, grace=0)
        cgroups.close()
