# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Token-in/token-out for every family make setup lays out, with its real tokenizer and template: a tool
call, its result, an answer, a user turn, parallel calls and their results, a call cut by max_tokens; in
each way a model's sampling departs from the canonical text. Every prompt extends the ids before it, every
generated id is the sampled one, and the calls the agent gets are the ones vLLM's parser of the family
gives for that text.

The "model" writes each turn as the template writes it (what the family was trained on), tokenized, then
varied; the model server's own code makes the prompts (TokenInTokenOut.prompt) and reads the turns back
(TokenInTokenOut.reply, what follows the completion route's answer).
"""

from __future__ import annotations

import asyncio
import json
import shutil

import pytest

from prorl_gym.tokens.families import FAMILIES, TEMPLATES, directory
from responses_api_models.balanced_vllm_model.tito import TokenInTokenOut, TokenModeSettings

try:
    for _name in FAMILIES:
        directory(_name)
except FileNotFoundError as exc:  # make setup lays them out; elsewhere the reason is given
    pytest.skip(str(exc), allow_module_level=True)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Run {key}.",
            "parameters": {"type": "object", "properties": {key: {"type": "string"}}, "required": [key]},
        },
    }
    for name, key in (("python", "code"), ("bash", "cmd"))
]
CASES = ("control", "split", "leading_newline", "other_end", "stop_string", "compact_json")
JSON_CALLS = {"llama3", "deepseek_v31", "gpt_oss"}  # families whose calls carry JSON text (compact_json applies)
# Another end id the model may close a turn with (its generation_config.json lists it); gpt-oss: an answer only.
OTHER_END = {
    "llama3": "<|eom_id|>",
    "qwen3_coder": "<|endoftext|>",
    "qwen3_5": "<|endoftext|>",
    "qwen3": "<|endoftext|>",
    "gpt_oss": "<|return|>",
}
# What vLLM's parser of each family gives as the arguments of python(code="print('é')") (as the template writes it).
ARGUMENTS = {
    "hermes": '{"code": "print(\'é\')"}',  # json.dumps(..., ensure_ascii=False)
    "qwen3_coder": '{"code": "print(\'é\')"}',
    "llama3_json": '{"code": "print(\'é\')"}',
    "deepseek_v31": '{"code": "print(\'é\')"}',  # as written by the model
    "openai": '{"code": "print(\'\\u00e9\')"}',  # json.dumps(json.loads(...)): ASCII-escaped
}


def call(name: str, arguments: dict, id_: str = "x") -> dict:
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


class Model:
    """Samples what the template writes for an assistant turn, varied by `case`; the ids it sampled."""

    def __init__(self, tito: TokenInTokenOut, case: str, family: str):
        self.tito, self.case, self.family = tito, case, family
        self.tokenizer = tito._local.tokenizer
        self.sampled: list[list[int]] = []

    def turn(self, before: list[dict], message: dict, cut_at: str | None = None) -> tuple[list[int], str, str]:
        """(ids, text, finish) of `message` generated after the conversation `before`."""
        tok = self.tokenizer
        prompt = tok.render(before, TOOLS, True)
        whole = tok.render([*before, message], TOOLS, False)
        assert whole.startswith(prompt), "the template writes a turn after its own generation prompt"
        text = whole[len(prompt) :]
        end_at = min((text.find(tok.token(e)), e) for e in self.tito._local.ends if text.find(tok.token(e)) >= 0)
        text, end = text[: end_at[0]], end_at[1]
        if cut_at is not None:  # max_tokens reached inside the call's value
            ids = tok.encode(text[: text.index(cut_at) + len(cut_at)])
            self.sampled.append(ids)
            return ids, tok.decode(ids), "length"
        if self.case == "compact_json":  # JSON without spaces (the template prints it with)
            text = text.replace('": ', '":').replace('", "', '","')
        ids = tok.encode(text)
        if self.case == "split":
            ids = _split(tok, ids)
        if self.case == "leading_newline":
            ids = tok.encode("\n") + ids
        if self.case == "other_end" and (self.family != "gpt_oss" or not message.get("tool_calls")):
            end = tok.token_id(OTHER_END[self.family])
        if self.case != "stop_string":  # a stop string: the generation ends without an end token
            ids = [*ids, end]
        self.sampled.append(ids)
        return ids, tok.decode(ids), "stop"


def _split(tok, ids: list[int]) -> list[int]:
    """The longest plain token sampled as two tokens that spell it (a non-canonical split)."""
    for index in sorted(range(len(ids)), key=lambda i: -len(tok.decode([ids[i]]))):
        piece = tok.decode([ids[index]])
        if tok.is_special(ids[index]) or len(piece) < 2:
            continue
        head, tail = tok.encode(piece[:1]), tok.encode(piece[1:])
        if head + tail != [ids[index]] and tok.decode(head + tail) == piece:
            return ids[:index] + head + tail + ids[index + 1 :]
    raise AssertionError("no token to split")


async def rollout(name: str, case: str) -> tuple[Model, list[dict], list[list[int]], list[dict]]:
    family = FAMILIES[name]
    settings = TokenModeSettings(
        token_mode="tito", tokenizer=name, tool_parser=family.tool_parser, reasoning_parser=family.reasoning_parser
    )
    tito = TokenInTokenOut(settings, "model", converter_reasoning=True)  # proves parser and bridge: it starts
    model = Model(tito, case, name)
    one_call = tito._local.checked.one_call
    messages = [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "What is 6*7?"}]
    prompts, replies, wholes = [], [], []

    async def step(canonical: dict, cut_at: str | None = None) -> dict:
        body = {"messages": messages, "tools": TOOLS}
        prompt = await tito.prompt(None, body)
        prompts.append(prompt.ids)
        wholes.append(model.tokenizer.render(_as_history(messages), TOOLS, True))
        ids, text, finish = model.turn(_as_history(messages), canonical, cut_at)
        reply = tito.reply(body, prompt, ids, [0.0] * len(ids), text, finish, tito._local.ends)
        replies.append(reply)
        messages.append(reply["choices"][0]["message"])
        return reply

    first = await step({"role": "assistant", "content": None, "tool_calls": [call("python", {"code": "print('é')"})]})
    calls = first["choices"][0]["message"]["tool_calls"]
    messages.append({"role": "tool", "tool_call_id": calls[0]["id"], "name": "python", "content": "é"})
    await step({"role": "assistant", "content": "It is 42."})
    messages.append({"role": "user", "content": "And the files here?"})
    pair = [call("bash", {"cmd": "ls"}), call("python", {"code": "1"})]
    if family.tool_parser == "openai":  # harmony: a call ends the generation (<|call|> stops it)
        pair = pair[:1]
    parallel = {"role": "assistant", "content": None, "tool_calls": pair[:1] if one_call else pair}
    reply = await step(parallel)
    for made in reply["choices"][0]["message"]["tool_calls"]:
        messages.append(
            {"role": "tool", "tool_call_id": made["id"], "name": made["function"]["name"], "content": "a.py"}
        )
    messages.append({"role": "user", "content": "Now print 6*7."})  # a user turn right after tool results
    await step({"role": "assistant", "content": None, "tool_calls": [call("python", {"code": "print(6*7)"})]}, "6*")
    return model, replies, prompts, wholes


def _as_history(messages: list[dict]) -> list[dict]:
    """The conversation as the template renders it whole (the model's view of its own earlier turns)."""
    keep = ("role", "content", "tool_calls", "tool_call_id", "name")
    history = []
    for m in messages:
        m = {k: v for k, v in m.items() if k in keep and v is not None}
        if m["role"] == "assistant" and "<think>" in (m.get("content") or ""):
            m["content"] = m["content"].split("</think>", 1)[-1]
        history.append(m)
    return history


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("name", sorted(FAMILIES))
async def test_every_prompt_extends_the_ids_and_calls_read_as_vllm(name, case):
    if name == "qwen3" and case != "control":
        pytest.skip("Qwen3's drift cases run through the model server (test_tito.py)")
    if case == "other_end" and name not in OTHER_END:
        pytest.skip(f"{name} ends a turn with one id only")
    if case == "compact_json" and name not in JSON_CALLS:
        pytest.skip(f"{name} writes no JSON in its calls")
    model, replies, prompts, wholes = await rollout(name, case)
    tok, ends = model.tokenizer, model.tito._local.ends
    parser = FAMILIES[name].tool_parser
    generated = [r["choices"][0]["message"]["generation_token_ids"] for r in replies]
    assert generated == model.sampled  # the ids the model sampled, never a re-encoding of the text
    for before, ids, after, whole in zip(prompts, generated, prompts[1:], wholes[1:]):
        assert after[: len(before) + len(ids)] == before + ids  # contiguous
        bridge = after[len(before) + len(ids) :]
        if case == "stop_string":  # the template's end token, appended once
            assert bridge[0] in ends
            bridge = bridge[1:]
        assert bridge[0] not in ends  # nothing invented after an end the model emitted
        assert whole.endswith(tok.decode(bridge))  # the new messages as the whole render writes them
    first, answer, parallel, cut = (r["choices"][0] for r in replies)
    assert first["finish_reason"] == "tool_calls"
    (made,) = first["message"]["tool_calls"]
    arguments = ARGUMENTS[parser]
    if case == "compact_json" and parser == "deepseek_v31":  # vLLM's deepseek parsers keep the arguments as written
        arguments = arguments.replace('": ', '":')
    assert (made["function"]["name"], made["function"]["arguments"]) == ("python", arguments)
    assert answer["finish_reason"] == "stop" and answer["message"]["content"].rstrip().endswith("It is 42.")
    names = [c["function"]["name"] for c in parallel["message"]["tool_calls"]]
    expected = {"llama3_json": ["bash"], "openai": ["bash"]}.get(parser, ["bash", "python"])
    assert names == expected
    assert [json.loads(c["function"]["arguments"]) for c in parallel["message"]["tool_calls"]][:1] == [{"cmd": "ls"}]
    assert cut["finish_reason"] == "length" and cut["message"]["tool_calls"] is None  # not executed
    assert replies[-1]["prorl_cut"].startswith("max_tokens reached inside a tool call")
    ids_form = model.tito.id_form
    assert all(len(c["id"]) == (9 if ids_form == "alnum9" else 29) for c in first["message"]["tool_calls"])


def model_server(**settings):
    from prorl_gym.testing import build_server
    from responses_api_models.balanced_vllm_model.app import BalancedVLLMModel

    base = dict(base_url=["http://127.0.0.1:9/v1"], api_key="x", model="m", return_token_id_information=True)
    base["uses_reasoning_parser"] = True
    return build_server(BalancedVLLMModel, "policy_model", **base, token_mode="tito", **settings)


def test_the_model_server_refuses_a_parser_that_does_not_read_the_templates_calls():
    with pytest.raises(ValueError, match="fits tool_parser 'qwen3_coder'"):  # ParserMismatch, in pydantic's error
        model_server(tokenizer="qwen3_5", tool_parser="hermes")  # Qwen3.5 writes XML calls
    assert model_server(tokenizer="qwen3_5", tool_parser="qwen3_coder").config.tokenizer == "qwen3_5"


def test_the_model_server_refuses_a_template_whose_bridge_differs(tmp_path):
    """Mistral Nemo's template (here on Llama's vocabulary: its own tokenizer is not on PyPI) writes the
    tools before the last user turn: extended prompts would not be what the template renders."""
    for name in ("tokenizer.json", "generation_config.json"):
        shutil.copyfile(directory("llama3") / name, tmp_path / name)
    config = json.loads((directory("llama3") / "tokenizer_config.json").read_text())
    config["chat_template"] = (TEMPLATES / "mistralai-Mistral-Nemo-Instruct-2407.jinja").read_text()
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="conversation's start differently"):  # BridgeMismatch, in pydantic's
        model_server(tokenizer=str(tmp_path), tool_parser="mistral")


@pytest.fixture(scope="module")
def llama_policy(tmp_path_factory):
    """One scripted policy answering as vLLM serving Llama 3.x would, for the tests below (each runs its own
    model server on it)."""
    from responses_api_models.balanced_vllm_model.tests.harness import Policies

    policies = Policies(tmp_path_factory.mktemp("llama-policy"))
    try:
        (policy,) = asyncio.run(policies.start(1, args=("--tokenizer", "llama3")))
        yield policy
    finally:
        policies.stop_all()


async def test_llama_through_the_model_server(llama_policy):
    """The real model server in tito against the scripted policy answering as vLLM serving Llama 3.x would."""
    from prorl_gym.tokens.contiguity import token_ids_contiguous
    from responses_api_models.balanced_vllm_model.tests.harness import ROWS, Rollout, serve_model

    settings = dict(token_mode="tito", tokenizer="llama3", tool_parser="llama3_json", reasoning_parser="none")
    async with serve_model([llama_policy.url], uses_reasoning_parser=True, **settings) as server:
        rollout = Rollout(server)
        turns = [await rollout.turn(), await rollout.turn()]
    assert [t.status for t in turns] == [200, 200], turns
    items = [o for t in turns for o in t.body["output"]]
    assert [o["type"] for o in items] == ["function_call", "message"]
    assert json.loads(items[0]["arguments"]) and items[0]["name"] == "python"
    assert token_ids_contiguous(items) is True
    assert [t.body["metadata"]["prorl_prompt"] for t in turns] == ["rendered", "extended"]
    assert items[-1]["content"][0]["text"].endswith("\\boxed{" + ROWS[0]["expected_answer"] + "}.")


async def test_endpoint_tokens_ask_without_special_tokens(llama_policy):
    """vLLM's /tokenize adds BOS to a prompt unless told not to (the scripted policy does the same with
    Llama's tokenizer): end tokens asked without special tokens are single ids, so the turn is served."""
    from responses_api_models.balanced_vllm_model.tests.harness import Rollout, serve_model

    ends = ["<|eot_id|>", "<|eom_id|>", "<|end_of_text|>"]
    settings = dict(token_mode="tito", tokenizer="endpoint", end_tokens=ends, tool_parser="llama3_json")
    policy = llama_policy
    async with serve_model([policy.url], uses_reasoning_parser=True, reasoning_parser="none", **settings) as server:
        async with server.http.post(policy.url.removesuffix("/v1") + "/tokenize", json={"prompt": "<|eot_id|>"}) as r:
            assert len((await r.json())["tokens"]) == 2  # BOS added by default, as vLLM does
        turn = await Rollout(server).turn()
    assert turn.status == 200, turn.body
    assert [o["type"] for o in turn.body["output"]] == ["function_call"]
