"""The checked frame of a one-user-message prompt (families/prompt_frame.py): made for the embedded
default's template and equal to the template's own rendering on any text; refused for templates
that trim, repeat or branch on the content; and what render_text uses instead of the template."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from qualflow.families.prompt_frame import Frames, make_frame
from qualflow.families.qwen3 import prompting

SETTINGS = ({}, {"enable_thinking": False}, {"enable_thinking": True})


@pytest.fixture(scope="module")
def template(embedded_dir):
    return json.loads((embedded_dir / "tokenizer_config.json").read_text())["chat_template"]


def through_template(template: str, system: str | None, user: str, **kw) -> str:
    head = [] if system is None else [{"role": "system", "content": system}]
    turns = [*head, {"role": "user", "content": user}]
    return prompting._compile(template).render(messages=turns, add_generation_prompt=True, **kw)


def renderer(template: str, **kw):
    return lambda system, user: through_template(template, system, user, **kw)


def test_the_embedded_template_has_both_frames(template):
    for kw in SETTINGS:
        bare, with_system = (
            make_frame(renderer(template, **kw), False),
            make_frame(renderer(template, **kw), True),
        )
        assert bare is not None and with_system is not None
        assert bare.fill(None, "Hi") == through_template(template, None, "Hi", **kw)
        assert with_system.fill("Be brief.", "Hi") == through_template(
            template, "Be brief.", "Hi", **kw
        )


TEXT = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(user=TEXT, system=st.none() | TEXT.filter(bool), thinking=st.sampled_from(SETTINGS))
def test_render_text_equals_the_template_on_any_text(template, user, system, thinking):
    ours = prompting.render_text(template, system, [{"role": "user", "content": user}], **thinking)
    assert ours == through_template(template, system, user, **thinking)


def test_render_text_skips_the_template_for_one_user_message(template, monkeypatch):
    """Once the frames are made, a one-user-message prompt never renders the template; tools, an
    empty system content and a longer conversation still do."""
    user = [{"role": "user", "content": "What is 2+2?"}]
    want = through_template(template, "Be brief.", "What is 2+2?", enable_thinking=False)
    prompting.render_text(template, "Be brief.", user, enable_thinking=False)  # frames made
    prompting.render_text(template, None, user, enable_thinking=False)
    renders = []
    real = prompting._compile(template)

    class Counting:
        def render(self, **kw):
            renders.append(kw)
            return real.render(**kw)

    monkeypatch.setattr(prompting, "_compile", lambda t: Counting())
    assert prompting.render_text(template, "Be brief.", user, enable_thinking=False) == want
    assert prompting.render_text(template, None, user, enable_thinking=False).endswith(
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    )
    assert renders == []
    empty_system = [{"role": "system", "content": ""}, *user]
    prompting.render_text(template, None, empty_system, enable_thinking=False)
    two = [*user, {"role": "assistant", "content": "4"}, {"role": "user", "content": "Sure?"}]
    prompting.render_text(template, None, two, enable_thinking=False)
    tool = {"type": "function", "name": "f", "parameters": {"type": "object"}}
    prompting.render_text(template, None, user, [tool], enable_thinking=False)
    assert len(renders) == 3


@pytest.mark.parametrize(
    "user_turn",
    [
        "{{ m.content | trim }}",  # trims
        "{{ m.content }}{{ m.content }}",  # repeats
        "{% if m.content.startswith('<think>') %}T{% endif %}{{ m.content }}",  # branches
        "{{ m.content | replace('<|im_end|>', '') }}",  # rewrites a marker
        "{{ m.content | e }}",  # escapes
    ],
)
def test_a_template_that_touches_the_content_gets_no_frame(user_turn):
    template = "{% for m in messages %}<{{ m.role }}>" + user_turn + "</>{% endfor %}<assistant>"
    render = renderer(template)
    assert make_frame(render, False) is None and make_frame(render, True) is None
    frames = Frames()
    assert frames.fill(("t",), render, None, "  x  ") is None


def test_a_plain_template_gets_frames_and_they_fill():
    template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}</>{% endfor %}<assistant>"
    frames = Frames(capacity=1)
    render = renderer(template)
    assert frames.fill(("t",), render, None, " a ") == "<user> a </><assistant>"
    assert frames.fill(("t",), render, "s", "u") == "<system>s</><user>u</><assistant>"
    assert frames.fill(("t",), render, "", "u") is None  # an empty system turn: the template's
    assert frames.fill(("u",), render, None, "b") == "<user>b</><assistant>"  # capacity 1: remade
