"""`agentboard profiles check NAME --turn`: one real turn of the profile's CLI against its endpoint."""

from __future__ import annotations

from .conftest import Board, Model


def _turn(board: Board, name: str) -> tuple[int, dict]:
    proc = board("profiles", "check", name, "--turn", "--json", check=False)
    report = __import__("json").loads(proc.stdout)
    (item,) = [i for i in report["checks"] if i["name"] == "turn"]
    return proc.returncode, item


def test_a_turn_check_reports_the_model_its_reply_and_usage_of_a_claude_profile(board: Board, model: Model) -> None:
    model.script({"text": "OK"}, usage={"input_tokens": 321, "output_tokens": 2})
    name = board.claude(model)

    code, item = _turn(board, name)

    assert code == 0 and item["ok"] and not item["warn"], item
    assert "replied 'OK'" in item["detail"] and "321 input / 2 output tokens" in item["detail"], item
    assert "$" in item["detail"]  # Claude Code reports what the turn cost
    (asked,) = model.requests()
    assert "Reply with OK" in str(asked["body"]["messages"])


def test_a_turn_check_of_a_codex_profile_with_a_refused_key_fails_with_the_login_command(
        board: Board, model: Model) -> None:
    model.script({"status": 401})
    name = board.codex(model)

    code, item = _turn(board, name)

    assert code == 1 and not item["ok"], item
    assert "could not sign in" in item["detail"] and "codex login" in item["fix"]


def test_a_turn_check_of_a_codex_profile_reports_its_usage(board: Board, model: Model) -> None:
    model.script({"text": "OK"}, usage={"input_tokens": 77, "output_tokens": 1})
    name = board.codex(model)

    code, item = _turn(board, name)

    assert code == 0 and item["ok"], item
    assert "77 input / 1 output tokens" in item["detail"]


def test_a_turn_check_of_a_gemini_profile_with_only_its_endpoint_reports_the_reply_and_the_model_that_answered(
        board: Board, model: Model) -> None:
    model.script({"text": "OK"}, usage={"input_tokens": 55, "output_tokens": 1})
    name = board.gemini(model)

    code, item = _turn(board, name)

    assert code == 0 and item["ok"], item
    assert "replied 'OK'" in item["detail"] and "output tokens" in item["detail"], item
    # Gemini CLI's init event names its router ("auto"); the model that answered is the server's
    assert "scripted replied" in item["detail"] and "auto replied" not in item["detail"], item


def test_a_turn_check_of_an_opencode_profile_with_only_its_provider_reports_the_reply(
        board: Board, model: Model) -> None:
    model.script({"text": "OK"}, usage={"input_tokens": 66, "output_tokens": 1})
    name = board.opencode(model)

    code, item = _turn(board, name)

    assert code == 0 and item["ok"], item
    assert "replied 'OK'" in item["detail"] and "66 input / 1 output tokens" in item["detail"], item
