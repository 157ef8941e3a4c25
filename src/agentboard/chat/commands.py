"""``/kanban …`` text read into a :class:`Command`: the same grammar on every platform.

Adding a command: a :class:`Spec` in :data:`COMMANDS` (its usage line and what it reads after
the verb) and its handler in :data:`agentboard.chat.actions.HANDLERS`; ``help`` lists
:data:`COMMANDS` by itself.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from ..domain.errors import InvalidInput


@dataclass(frozen=True)
class Spec:
    """A command: ``usage`` as ``help`` shows it, ``summary``, and what follows the verb —
    ``id`` (a task id), ``text`` (free text, required when ``text_required``), ``status`` (an
    optional status), ``create`` (a title, ``@profile``, ``--goal G``)."""

    usage: str
    summary: str
    takes_id: bool = False
    text: str | None = None  # the name of the free text after the id, if any
    text_required: bool = False
    status: bool = False
    create: bool = False
    number: bool = False  # a whole number after the id (``pick ID N``)
    writes: bool = True


COMMANDS: dict[str, Spec] = {
    "create": Spec('create "title" [@profile] [--goal G]', "add a task", create=True),
    "list": Spec("list [status]", "tasks on the board (newest first, at most 15)", status=True, writes=False),
    "show": Spec("show ID", "a task: status, assignee, result", takes_id=True, writes=False),
    "comment": Spec("comment ID text", "comment on a task", takes_id=True, text="text", text_required=True),
    "block": Spec("block ID reason", "block a task", takes_id=True, text="reason", text_required=True),
    "unblock": Spec("unblock ID", "unblock a task", takes_id=True),
    "approve": Spec("approve ID", "approve a task in review (done, its branch integrated)", takes_id=True),
    "reject": Spec("reject ID reason", "reject a task in review (blocked)", takes_id=True, text="reason",
                   text_required=True),
    "pick": Spec("pick ID N", "pick attempt N as the winner of a race (its branch integrated)", takes_id=True,
                 number=True),
    "dispatch": Spec("dispatch", "run one dispatcher pass now (admins)"),
    "help": Spec("help", "these commands", writes=False),
}

#: the words a chat message may start with before the command (``/kanban``, ``kanban``)
PREFIXES = ("/kanban", "kanban")
TEXT_MAX = 4000


@dataclass(frozen=True)
class Command:
    verb: str
    task_id: str | None = None
    text: str | None = None
    status: str | None = None
    title: str | None = None
    profile: str | None = None
    goal: str | None = None
    n: int | None = None

    @property
    def spec(self) -> Spec:
        return COMMANDS[self.verb]


def strip_prefix(text: str) -> str:
    """``text`` without a leading ``/kanban`` (or ``/kanban@bot``, Telegram's form in groups)."""
    out = (text or "").strip()
    head, _, rest = out.partition(" ")
    if head.split("@", 1)[0].lower() in PREFIXES:
        return rest.strip()
    return out


def usage() -> str:
    return "\n".join(f"/kanban {s.usage} — {s.summary}" for s in COMMANDS.values())


def parse(text: str) -> Command:
    """Read ``/kanban …`` (the prefix optional). Empty text is ``help``; anything unknown is
    :class:`InvalidInput` with the usage."""
    body = strip_prefix(text)
    if len(body) > TEXT_MAX:
        raise InvalidInput(f"the command is longer than {TEXT_MAX} characters")
    if not body:
        return Command("help")
    verb, _, rest = body.partition(" ")
    verb = verb.lower()
    rest = rest.strip()
    spec = COMMANDS.get(verb)
    if spec is None:
        raise InvalidInput(f"unknown command {verb!r}; try /kanban help")
    if spec.create:
        return _create(rest, spec)
    if spec.status:
        return Command(verb, status=rest.split()[0].lower() if rest else None)
    if not spec.takes_id:
        if rest:
            raise InvalidInput(f"usage: /kanban {spec.usage}")
        return Command(verb)
    task_id, _, after = rest.partition(" ")
    after = after.strip()
    if spec.number:
        if not task_id or not after.isdigit() or int(after) < 1:
            raise InvalidInput(f"usage: /kanban {spec.usage} (N: the attempt's number, 1 or more)")
        return Command(verb, task_id=task_id.strip(), n=int(after))
    if not task_id or (spec.text is None and after) or (spec.text_required and not after):
        raise InvalidInput(f"usage: /kanban {spec.usage}")
    return Command(verb, task_id=task_id.strip(), text=after or None)


def _create(rest: str, spec: Spec) -> Command:
    try:
        words = shlex.split(rest)
    except ValueError:
        raise InvalidInput(f'unbalanced quotes; usage: /kanban {spec.usage}') from None
    title: list[str] = []
    profile = goal = None
    i = 0
    while i < len(words):
        word = words[i]
        if word.startswith("@") and len(word) > 1 and profile is None:
            profile = word[1:]
        elif word == "--goal":
            if i + 1 >= len(words):
                raise InvalidInput(f"--goal needs a goal id; usage: /kanban {spec.usage}")
            goal = words[i + 1]
            i += 1
        elif word.startswith("--goal="):
            goal = word.split("=", 1)[1]
        else:
            title.append(word)
        i += 1
    if not title:
        raise InvalidInput(f"a task needs a title; usage: /kanban {spec.usage}")
    return Command("create", title=" ".join(title), profile=profile, goal=goal or None)
