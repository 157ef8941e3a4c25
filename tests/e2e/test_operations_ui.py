"""Operator features in a real browser: attachments in the drawer, tasks from a template."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("browser-operations-ui")]

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture skips (or fails under CI) with the reason
    expect = None  # type: ignore[assignment]

T = 10_000

DROP = """([zone, name, text]) => {
  const dt = new DataTransfer();
  dt.items.add(new File([text], name, { type: "text/plain" }));
  zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
  zone.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
}"""


def test_a_file_dropped_on_the_drawer_is_attached_and_can_be_removed(page: Any, kernel: Any, tmp_path: Path) -> None:
    title = f"Needs files {uuid.uuid4().hex[:6]}"
    t = kernel.board().create(title, body="attach the log")
    page.reload()
    page.locator(".card", has=page.locator(".card-title", has_text=title)).click()
    drawer = page.locator("#drawer")
    expect(drawer.locator(".dropzone")).to_be_visible(timeout=T)
    zone = drawer.locator(".dropzone").element_handle()
    page.evaluate(DROP, [zone, "build.log", "line one\nline two\n"])
    expect(drawer.locator(".attachment-name", has_text="build.log")).to_be_visible(timeout=T)
    files = kernel.board().attachments(t["id"])
    assert [f["name"] for f in files] == ["build.log"]
    assert Path(files[0]["path"]).read_text() == "line one\nline two\n"
    # the picker attaches too
    other = tmp_path / "notes.txt"
    other.write_text("notes")
    drawer.locator(".attachment-picker").set_input_files(str(other))
    expect(drawer.locator(".attachment-name", has_text="notes.txt")).to_be_visible(timeout=T)
    page.screenshot(path=str(Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
                              / "drawer_attachments.png"))
    drawer.locator(".attachment", has_text="build.log").locator(".attachment-remove").click()
    page.locator(".modal-ok").click()
    expect(drawer.locator(".attachment-name", has_text="build.log")).to_have_count(0, timeout=T)
    assert [f["name"] for f in kernel.board().attachments(t["id"])] == ["notes.txt"]
    assert not Path(files[0]["path"]).exists()


def test_the_template_menu_creates_a_linked_graph_from_filled_placeholders(page: Any, server: Any, kernel: Any) -> None:
    folder = server.home / "templates"
    folder.mkdir(parents=True, exist_ok=True)
    tag = uuid.uuid4().hex[:6]
    (folder / "release.toml").write_text(
        'description = "a release"\n[vars]\nowner = "coder"\n'
        '[[task]]\nkey = "plan"\ntitle = "Plan {version}"\nassignee = "{owner}"\n'
        '[[task]]\nkey = "build"\ntitle = "Build {version}"\nparents = ["plan"]\nassignee = "coder"\n'
        '[[task]]\ntitle = "Announce {version}"\nparents = ["build"]\nassignee = "writer"\n')
    page.locator(".from-template").click()
    modal = page.locator(".template-modal")
    expect(modal.locator(".template-tasks li")).to_have_count(3, timeout=T)
    expect(modal.locator("input[name='owner']")).to_have_value("coder")
    modal.locator("input[name='version']").fill(f"v{tag}")
    page.screenshot(path=str(Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
                              / "template_menu.png"))
    modal.locator(".modal-ok").click()
    expect(page.locator(".card-title", has_text=f"Plan v{tag}")).to_be_visible(timeout=T)
    expect(page.locator(".template-modal")).to_have_count(0)
    made = {t["title"]: t for t in kernel.board().list() if tag in t["title"]}
    assert set(made) == {f"Plan v{tag}", f"Build v{tag}", f"Announce v{tag}"}
    assert made[f"Plan v{tag}"]["status"] == "ready"
    assert made[f"Announce v{tag}"]["status"] == "todo"
