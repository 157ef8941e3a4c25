def test_fresh_home_has_default_board(ab):
    boards = ab.boards()
    assert [b["slug"] for b in boards] == ["default"]


def test_create_claim_complete_promotes_child(board):
    parent = board.create("research", assignee="r1")
    child = board.create("write", assignee="w", parents=[parent["id"]])
    assert (parent["status"], child["status"]) == ("ready", "todo")
    run = board.claim(parent["id"])
    done = board.complete(parent["id"], summary="found it", run_id=run["run_id"])
    assert done["status"] == "done"
    assert board.show(child["id"])["status"] == "ready"
