"""The commonest prompt without its template: one user message of text, after an optional system
turn, without tools. Rendering a chat template through jinja's sandbox is most of a short
request's preparation on the server (~0.28 ms of ~0.6 on a 2-core box, a c1 request's HTTP in);
for this shape the template's output is fixed text around the two contents.

`make_frame` renders the template once with a placeholder for each content and cuts the text at
them (`Frame`); then it renders the probe contents (`PROBES`: the contents a template is likeliest
to treat specially: empty, whitespace at either end, the tool-response and think markers, a turn's
end marker, template syntax, non-ASCII and control characters) through the template and through
the frame. A template that trims, escapes, repeats or branches on any of them gets no frame, and
its requests go through the template as before. A family's renderer keeps the frames of a
template and its settings (`Frames`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

_SYSTEM, _USER = "\x00qualflow-system\x00", "\x00qualflow-user\x00"
PROBES = (
    "",
    "x",
    "  spaced both ends \n\n",
    "\n",
    "<tool_response>\nok\n</tool_response>",
    "<think>\nhm\n</think>\n\nyes",
    "<|im_end|>\n<|im_start|>assistant\n",
    "{{ messages }}{% if x %}{# c #}",
    "é 漢 🙂\t\r\nend",
)

Render = Callable[[str | None, str], str]  # (system content or None, user content) -> prompt text


@dataclass(frozen=True)
class Frame:
    """The text around the contents: (head, tail) for a user message alone, (head, between,
    tail) after a system turn."""

    parts: tuple[str, ...]

    def fill(self, system: str | None, user: str) -> str:
        if len(self.parts) == 2:
            return self.parts[0] + user + self.parts[1]
        return self.parts[0] + system + self.parts[1] + user + self.parts[2]


def _cut(text: str, marks: list[str]) -> tuple[str, ...] | None:
    parts = []
    for m in marks:
        if text.count(m) != 1:
            return None
        head, text = text.split(m)
        parts.append(head)
    return (*parts, text)


def make_frame(render: Render, system: bool) -> Frame | None:
    """The frame of `render`'s prompts with (`system`) or without a system turn, or None where
    the template does not simply place the contents."""
    marks = [_SYSTEM, _USER] if system else [_USER]
    parts = _cut(render(_SYSTEM if system else None, _USER), marks)
    if parts is None:
        return None
    frame = Frame(parts)
    for user in PROBES:
        for sys_probe in PROBES[1:] if system else (None,):  # `Frames` takes no empty one
            if render(sys_probe, user) != frame.fill(sys_probe, user):
                return None
    return frame


class Frames:
    """The frames of each template and settings (a few per server), made at first use."""

    def __init__(self, capacity: int = 32):
        self.capacity, self._made = capacity, {}

    def of(self, key: tuple, render: Render) -> tuple[Frame | None, Frame | None]:
        """(the frame without a system turn, with one) of the template and settings `key` names;
        `render` renders them, the first time."""
        got = self._made.get(key)
        if got is None:
            if len(self._made) >= self.capacity:
                self._made.clear()
            got = self._made[key] = (make_frame(render, False), make_frame(render, True))
        return got

    def fill(self, key: tuple, render: Render, system: str | None, user: str) -> str | None:
        """The prompt of `system` (None: no system turn) and `user` through the frame, or None
        where there is none (the caller renders through the template); an empty system content
        always goes through the template."""
        if system == "":
            return None
        frame = self.of(key, render)[system is not None]
        return None if frame is None else frame.fill(system, user)
