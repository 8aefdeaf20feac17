"""An agent's session as the live-switch and cell-loss tests drive it: calls through the proxy's OpenAI API on one
growing conversation; and what its records must show afterwards."""

from __future__ import annotations

import asyncio


async def converse(base_url: str, key: str, name: str, turns: int, turns_done: dict[str, int], *, max_tokens: int,
                   temperature: float, tool_s: float = 0.0) -> None:
    """``turns`` calls of execution ``name``, each appending the reply to the conversation, counted in
    ``turns_done[name]`` as they return; ``tool_s``: the agent's tool time after each call."""
    import openai

    client = openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=120)
    messages = [{"role": "system", "content": "You are terse."}]
    for turn in range(turns):
        messages.append({"role": "user", "content": f"turn {turn} of {name}"})
        reply = await client.chat.completions.create(model="gyre", messages=messages, max_tokens=max_tokens,
                                                     temperature=temperature)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        turns_done[name] += 1
        if tool_s:
            await asyncio.sleep(tool_s)
    await client.close()


def assert_one_growing_path(name: str, records: list, turns: int) -> None:
    """Every call answered once and recorded once, each prompt extending the last call's prompt and response
    (nothing re-tokenised)."""
    assert len(records) == turns, f"{name} has {len(records)} records"
    assert len({r.call_id for r in records}) == turns, name
    for earlier, later in zip(records, records[1:]):
        assert later.prompt_ids[: len(earlier.prompt_ids) + len(earlier.response_ids)] == \
            earlier.prompt_ids + earlier.response_ids, name
