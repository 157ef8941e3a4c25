"""GET /api/insights names each group as `stats --by` does: `label` is the key, or for the
empty key "(by hand)" per profile (a person's closing) and "(no model)" per model (the runs of
profiles that name no model)."""

from __future__ import annotations

from .conftest import Api


def _labels(api: Api, by: str) -> dict[str, str]:
    got = api.as_admin.get("/api/insights", params={"by": by})
    assert got.status_code == 200, got.text
    return {g["key"]: g["label"] for g in got.json()["groups"]}


def test_the_empty_key_reads_by_hand_per_profile_and_no_model_per_model(api: Api) -> None:
    b = api.ab.board()
    api.ab.add_profile("alpha", command="true", model_name="m-a")
    api.ab.add_profile("plain", command="true")
    t = b.create("worked", assignee="plain")["id"]
    b.complete(t, run_id=b.claim(t)["run_id"])
    b.complete(b.create("closed by hand", assignee="alpha")["id"])
    assert _labels(api, "profile") == {"plain": "plain", "": "(by hand)"}
    assert _labels(api, "model") == {"": "(no model)"}
