# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from prorl_gym.tokens.contiguity import token_ids_contiguous
from prorl_gym.wire.resources import ENVIRONMENT_RESTARTED
from responses_api_models.scripted_policy.app import create_app
from responses_api_models.scripted_policy.chat_template import encode, render
from responses_api_models.scripted_policy.replay import FINAL_ANSWER, ScriptedPolicy

ROWS = [
    json.loads(line)
    for line in (Path(__file__).resolve().parents[3] / "resources_servers/math/data/example.jsonl").open()
]
TOOLS = [{"type": "function", "function": {"name": "python", "parameters": {"type": "object"}}}]


@pytest.fixture
def client():
    return TestClient(create_app(ScriptedPolicy(ROWS)))


def chat(client, messages, **extra):
    body = {
        "model": "scripted-gold",
        "messages": messages,
        "tools": TOOLS,
        "logprobs": True,
        "top_logprobs": 0,
        "return_tokens_as_token_ids": True,
    } | extra
    response = client.post("/v1/chat/completions", json=body)
    assert response.status_code == 200
    return response.json()["choices"][0]


def start(row):
    return [dict(m) for m in row["responses_create_params"]["input"]]


def test_gold_script_calls_python_then_boxes_the_answer(client):
    row = ROWS[0]
    messages = start(row)
    first = chat(client, messages)
    assert first["finish_reason"] == "tool_calls"
    call = first["message"]["tool_calls"][0]
    assert call["function"]["name"] == "python" and json.loads(call["function"]["arguments"])["code"]
    messages += [first["message"], {"role": "tool", "tool_call_id": call["id"], "content": "out"}]
    second = chat(client, messages)
    assert second["finish_reason"] == "stop"
    assert second["message"]["content"] == f"The answer is \\boxed{{{row['expected_answer']}}}."


def test_a_step_whose_environment_was_restarted_under_it_is_done_again(client):
    # A kernel killed during the call may have lost its effect (a gold answer written from Python):
    # the gold policy repeats the step, as a model reading the answer would, instead of going on.
    messages = start(ROWS[0])
    first = chat(client, messages)
    call = first["message"]["tool_calls"][0]
    restarted = f"[{ENVIRONMENT_RESTARTED}]"
    messages += [first["message"], {"role": "tool", "tool_call_id": call["id"], "content": restarted}]
    again = chat(client, messages)
    assert again["message"]["tool_calls"][0]["function"] == call["function"]
    messages += [again["message"], {"role": "tool", "tool_call_id": call["id"], "content": "out"}]
    assert chat(client, messages)["finish_reason"] == "stop"


@pytest.mark.parametrize("mode", ["gold", "wrong", "malformed"])
def test_token_ids_follow_vllm_and_stay_contiguous(client, mode):
    """Replays what NeMo Gym's vllm_model does: /tokenize for prompt ids, logprobs for generation ids."""
    messages, items = start(ROWS[1]), []
    for _ in range(6):
        prompt = client.post("/tokenize", json={"messages": messages, "tools": TOOLS}).json()["tokens"]
        choice = chat(client, messages, metadata={"scripted_mode": mode})
        generation = [int(t["token"].removeprefix("token_id:")) for t in choice["logprobs"]["content"]]
        items.append({"prompt_token_ids": prompt, "generation_token_ids": generation})
        message = choice["message"]
        messages.append(message)
        if not message["tool_calls"]:
            break
        messages += [{"role": "tool", "tool_call_id": c["id"], "content": "result"} for c in message["tool_calls"]]
    assert token_ids_contiguous(items) is True
    assert len(items) == {"gold": 2, "wrong": 2, "malformed": 4}[mode]


def test_wrong_and_malformed_modes(client):
    row = ROWS[0]
    wrong = chat(client, start(row) + [{"role": "assistant", "content": "x"}], model="scripted-wrong")
    assert "\\boxed{0}" in wrong["message"]["content"]
    bad = chat(client, start(row), model="scripted-malformed")["message"]["tool_calls"][0]["function"]["arguments"]
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad)


def test_max_tokens_cuts_the_generation(client):
    choice = chat(client, start(ROWS[0]), max_tokens=5)
    assert choice["finish_reason"] == "length" and len(choice["logprobs"]["content"]) == 5


def test_unknown_task_gets_an_answer_that_says_so(client):
    choice = chat(client, [{"role": "user", "content": "never seen"}])
    assert "no recorded actions" in choice["message"]["content"]


def test_bad_request_is_a_400(client):
    assert client.post("/v1/chat/completions", json={"messages": []}).status_code == 400


def test_template_is_prefix_stable():
    messages = [{"role": "user", "content": "hi"}]
    longer = messages + [{"role": "assistant", "content": "yo"}, {"role": "user", "content": "more"}]
    assert encode(render(longer))[: len(encode(render(messages)))] == encode(render(messages))


def test_latency_per_request_from_metadata():
    policy = ScriptedPolicy(ROWS, latency_s=0.3)
    assert policy.latency_for({"metadata": {"scripted_latency_ms": "2000"}}) == 2.0
    assert policy.latency_for({"metadata": {"scripted_latency_ms": "not a number"}}) == 0.3
    assert policy.latency_for({}) == 0.3


def test_return_token_ids_gives_the_ids_tokenize_and_logprobs_give(client):
    """As vLLM >= 0.10.2: with return_token_ids, the prompt's ids are those /tokenize returns for the
    same request, and the generation's those its logprobs name."""
    messages = start(ROWS[2])
    prompt = client.post("/tokenize", json={"messages": messages, "tools": TOOLS}).json()["tokens"]
    response = client.post(
        "/v1/chat/completions",
        json={"model": "scripted-gold", "messages": messages, "tools": TOOLS, "logprobs": True}
        | {"return_tokens_as_token_ids": True, "return_token_ids": True},
    ).json()
    (choice,) = response["choices"]
    assert response["prompt_token_ids"] == prompt
    assert choice["token_ids"] == [int(t["token"].removeprefix("token_id:")) for t in choice["logprobs"]["content"]]


def test_a_tool_alias_plays_the_recorded_actions_under_another_stacks_tool_name():
    client = TestClient(create_app(ScriptedPolicy(ROWS, tool_aliases={"python": "execute_python"})))
    call = chat(client, start(ROWS[0]))["message"]["tool_calls"][0]["function"]
    assert call["name"] == "execute_python" and json.loads(call["arguments"])["code"]


def test_a_task_wrapped_in_a_harness_prompt_is_found_and_submitted_as_the_prompt_says():
    swe = [
        json.loads(line)
        for line in (Path(__file__).resolve().parents[3] / "resources_servers/swe/data/example.jsonl").open()
    ]
    policy = ScriptedPolicy(swe[:2])
    task = swe[1]["responses_create_params"]["input"][-1]["content"]
    wrapped = f"Please solve this issue: {task}\n\nSubmit with `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`."
    steps = [policy.step_for(wrapped, turn, "gold") for turn in range(4)]
    assert steps[0].tool_calls[0]["name"] == "bash" and "pytest" in steps[0].tool_calls[0]["arguments"]
    assert "git apply" in steps[1].tool_calls[0]["arguments"]  # this task's own gold patch
    assert steps[3].tool_calls == [
        {"name": "bash", "arguments": '{"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"}'}
    ]
    unwrapped = policy.step_for(swe[1]["responses_create_params"]["input"][-1]["content"], 3, "gold")
    assert unwrapped.tool_calls[0]["name"] == "submit"  # no instruction to follow: its own submit tool


def test_a_harness_with_its_own_tool_names_and_no_submit_gets_them_and_a_last_answer():
    """Claude Code offers `Bash` (and more) and ends on an answer without a tool call."""
    swe = [
        json.loads(line)
        for line in (Path(__file__).resolve().parents[3] / "resources_servers/swe/data/example.jsonl").open()
    ]
    policy = ScriptedPolicy(swe[:1])
    task = f"<system-reminder>ok</system-reminder>\n{swe[0]['responses_create_params']['input'][-1]['content']}"
    tools = {"Bash", "Edit", "Read", "Agent"}
    steps = [policy.step_for(task, turn, "gold", tools) for turn in range(4)]
    assert [c["name"] for s in steps[:3] for c in s.tool_calls] == ["Bash"] * 3
    assert steps[3].tool_calls == [] and steps[3].content == FINAL_ANSWER
    with_submit = policy.step_for(task, 3, "gold", tools | {"submit"})
    assert with_submit.tool_calls[0]["name"] == "submit"  # offered: its own


def test_the_tools_a_rendered_prompt_offers_are_read_from_its_tokens():
    from prorl_gym.tokens.tokenizer import TokenizerNotFound, qwen3
    from responses_api_models.scripted_policy.real_tokens import RealTokens

    try:
        tokenizer = qwen3()
    except TokenizerNotFound as exc:
        pytest.skip(str(exc))
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object"}}} for n in ("Bash", "Read")]
    prompt = tokenizer.encode(tokenizer.render([{"role": "user", "content": "hi <tools></tools>"}], tools))
    assert RealTokens(tokenizer).conversation_of(prompt).tools == {"Bash", "Read"}
    assert (
        RealTokens(tokenizer)
        .conversation_of(tokenizer.encode(tokenizer.render([{"role": "user", "content": "hi"}])))
        .tools
        == set()
    )


def test_the_coin_mode_alternates_gold_and_wrong_per_conversation_and_keeps_its_draw(client):
    body = {"metadata": {"scripted_mode": "coin"}}
    first, second = (chat(client, start(ROWS[0]), **body)["message"] for _ in range(2))
    assert "[sample: gold]" in first["content"] and "[sample: wrong]" in second["content"]
    # a later turn of the second conversation goes on as drawn: its answer is the wrong one
    history = start(ROWS[0]) + [second] + [{"role": "tool", "tool_call_id": "c", "content": "42"}]
    later = chat(client, history, **body)["message"]
    wrong = chat(client, start(ROWS[0]) + [second, history[-1]], metadata={"scripted_mode": "wrong"})["message"]
    assert later["content"] == wrong["content"]


def test_slow_conversations_are_drawn_per_stream_said_in_the_first_reply_and_kept(client):
    policy = ScriptedPolicy(ROWS)
    slow = {"p": 0.5, "factor": 20, "seed": 7}
    messages = start(ROWS[0])

    def draws(stream: str) -> list[float | None]:
        body = {"metadata": {"scripted_slow": json.dumps(slow | {"stream": stream})}}
        return [policy.slow_factor(body, messages) for _ in range(16)]

    a, b = draws("wait"), draws("evict")
    assert a == b and set(a) == {None, 20.0}  # each stream meets the same slow conversations: some, not all
    # "first": the first conversation of a prompt is slow; said in its first reply, read back at its later turns
    body = {"metadata": {"scripted_slow": json.dumps({"first": 1, "factor": 3})}}
    first = chat(client, messages, **body)["message"]
    assert "[pace: slow]" in first["content"]
    history = messages + [first, {"role": "tool", "tool_call_id": "c", "content": "42"}]
    assert policy.slow_factor(body, history) == 3.0
    assert "[pace: slow]" not in (chat(client, messages, **body)["message"]["content"] or "")  # the second is not


def test_stats_count_the_generations_in_flight_over_time(client):
    before = client.get("/stats").json()
    chat(client, start(ROWS[0]), metadata={"scripted_latency_ms": "50"})
    after = client.get("/stats").json()
    assert after["peak_generating"] == 1 and after["generating"] == 0
    assert after["generating_s"] - before["generating_s"] >= 0.05  # one generation of at least 50 ms
    assert after["aborted"] == 0
