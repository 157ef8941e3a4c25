"""``/kanban …`` text read into a :class:`Command`: the same grammar on every platform.

Adding a command: a :class:`Spec` in :data:`COMMANDS` (its usage line and what it reads after
the verb) and its handler in :data:`agentboard.chat.actions.HANDLERS`; ``help`` lists
:data:`COMMANDS` by itself.
"""

from __future__ import annotations

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


#: quotes that group words, by family: a group opened by one closes with any of its family
#: (phones and macOS type “…” and ‘…’ for "…" and '…')
DOUBLE_QUOTES, SINGLE_QUOTES = '"\u201c\u201d\u201e', "'\u2018\u2019\u201a"
QUOTES = DOUBLE_QUOTES + SINGLE_QUOTES


def words(text: str) -> list[tuple[str, bool]]:
    """``text`` as words, each with whether it was quoted. A quote opens a group only at the
    start of a word and closes it where the next quote of its family is not followed by a
    letter or digit (what follows it up to a space stays in the word, ``"title",``); a quote
    inside a word is text (``Don't``, ``users'``). A single quote left open is text (an
    apostrophe, ``'tis``); a double quote left open is :class:`InvalidInput`. A backslash
    before a quote makes it text."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        if text[i].isspace():
            i += 1
            continue
        word: list[str] = []
        quoted = False
        family = DOUBLE_QUOTES if text[i] in DOUBLE_QUOTES else SINGLE_QUOTES if text[i] in SINGLE_QUOTES else ""
        if family:
            group, end = _group(text, i + 1, family)
            if end is not None:
                word.append(group)
                quoted, i = True, end
            elif family == DOUBLE_QUOTES:
                raise InvalidInput("unbalanced quotes")
        while i < n and not text[i].isspace():
            if text[i] == "\\" and i + 1 < n and text[i + 1] in QUOTES:
                i += 1
            word.append(text[i])
            i += 1
        out.append(("".join(word), quoted))
    return out


def _group(text: str, i: int, family: str) -> tuple[str, int | None]:
    """The quoted text from ``i`` to its closing quote, and the index after it (``None``: no
    closing quote)."""
    chars: list[str] = []
    n = len(text)
    while i < n:
        char = text[i]
        if char == "\\" and i + 1 < n and text[i + 1] in QUOTES:
            chars.append(text[i + 1])
            i += 2
            continue
        if char in family and (i + 1 == n or not text[i + 1].isalnum()):
            return "".join(chars), i + 1
        chars.append(char)
        i += 1
    return "".join(chars), None


def _create(rest: str, spec: Spec) -> Command:
    try:
        items = words(rest)
    except InvalidInput:
        raise InvalidInput(f"unbalanced quotes; usage: /kanban {spec.usage}") from None
    title: list[str] = []
    profile = goal = None
    i = 0
    while i < len(items):
        word, quoted = items[i]
        if quoted:
            title.append(word)
        elif word.startswith("@") and len(word) > 1 and profile is None:
            profile = word[1:]
        elif word == "--goal":
            if i + 1 >= len(items):
                raise InvalidInput(f"--goal needs a goal id; usage: /kanban {spec.usage}")
            goal = items[i + 1][0]
            i += 1
        elif word.startswith("--goal="):
            goal = word.split("=", 1)[1]
        else:
            title.append(word)
        i += 1
    title = [word for word in title if word.strip()]
    if not title:
        raise InvalidInput(f"a task needs a title; usage: /kanban {spec.usage}")
    return Command("create", title=" ".join(title), profile=profile, goal=goal or None)
