"""Images reach the model in the OpenAI chat format, through the real client, and cost a fixed estimate."""

from __future__ import annotations

import base64

from orchestrator.llm.factory import open_model
from orchestrator.llm.interface import ImagePart, Message
from orchestrator.llm.scenario import IMAGE_TOKENS, estimate_prompt_tokens
from orchestrator.llm.scenario_server import start_scenario_server

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 30_000).decode()


def test_a_user_message_with_an_image_is_sent_as_text_then_image_parts(write_scenario, fast_settings, monkeypatch):
    path = write_scenario(
        "goal: g\nsteps:\n  - expect: {contains: ['data:image/png;base64,', 'page 1 of the deck']}\n"
        "    reply: {content: seen}\n"
    )
    with start_scenario_server(path) as server:
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        with open_model("openai:vision-model", fast_settings) as model:
            message = Message(
                role="user", content="page 1 of the deck", images=(ImagePart(url=f"data:image/png;base64,{PNG}"),)
            )
            response = model.complete([Message(role="system", content="look"), message])
    assert response.content == "seen"
    sent = server.requests[0]["messages"][1]["content"]
    assert sent == [
        {"type": "text", "text": "page 1 of the deck"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}", "detail": "auto"}},
    ]
    assert response.usage.prompt_tokens < 200 + IMAGE_TOKENS  # the 40 KB of base64 are not counted as text


def test_a_message_without_images_keeps_its_plain_text_content():
    assert Message(role="user", content="hi").to_openai() == {"role": "user", "content": "hi"}


def test_an_image_costs_the_same_estimate_whatever_its_size():
    def with_image(size: int) -> list[dict]:
        url = "data:image/png;base64," + "A" * size
        return [Message(role="user", content="x", images=(ImagePart(url=url),)).to_openai()]

    assert estimate_prompt_tokens(with_image(10), []) == estimate_prompt_tokens(with_image(4_000_000), [])
    assert estimate_prompt_tokens(with_image(10), []) >= IMAGE_TOKENS
