"""How `stats --by` names the empty key: per profile, tasks a person closed without a run read
"(by hand)"; per model, the runs of profiles that name no model read "(no model)" — not "(by
hand)", which would mix an agent's runs with a person's closing."""

from __future__ import annotations

from .conftest import task_id


def _history(cli) -> None:  # type: ignore[no-untyped-def]
    cli("profiles", "add", "alpha", "--command", "true", "--model", "m-a")
    cli("profiles", "add", "plain", "--command", "true")  # names no model
    for title, who in (("one", "alpha"), ("two", "plain"), ("three", "plain")):
        t = task_id(cli("create", title, "--assignee", who, "--json"))
        cli("claim", t)
        cli("complete", t)
    cli("complete", task_id(cli("create", "closed by hand", "--assignee", "alpha", "--json")))


def _rows(out: str, first: str) -> list[str]:
    return [line for line in out.splitlines() if line.split() and line.split()[0] == first]


def test_runs_of_a_profile_without_a_model_read_no_model_and_a_persons_closing_reads_by_hand(cli) -> None:
    _history(cli)
    models = cli("stats", "--by", "model").out
    assert "(by hand)" not in models
    [no_model] = _rows(models, "(no")
    assert no_model.split()[2:4] == ["2", "3"]
    data = cli("stats", "--by", "model", "--json").json()
    assert {g["key"]: g["label"] for g in data["groups"]} == {"": "(no model)", "m-a": "m-a"}

    profiles = cli("stats", "--by", "profile").out
    assert "(no model)" not in profiles
    [by_hand] = _rows(profiles, "(by")
    assert by_hand.split()[2:4] == ["0", "1"]  # no run, one task done
    data = cli("stats", "--by", "profile", "--json").json()
    assert {g["key"]: g["label"] for g in data["groups"]} == {"": "(by hand)", "alpha": "alpha", "plain": "plain"}
