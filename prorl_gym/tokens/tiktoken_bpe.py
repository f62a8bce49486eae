# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A tiktoken vocabulary (`*.tiktoken`: base64 token, rank per line) as a `tokenizers` byte-level BPE.

tiktoken merges the pair whose merged token has the lowest rank; a BPE whose merges are listed in the
order of their merged token's rank does the same. Each merge is the split of a token into two tokens
that exist (every one, lowest ranks first, as transformers' TikTokenConverter lists them). The result is
checked against tiktoken itself (tests/tokens/test_families.py) on text of every kind.
"""

from __future__ import annotations

import base64
from functools import cache
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers


@cache
def _byte_chars() -> dict[int, str]:
    """GPT-2's printable stand-in for every byte (the alphabet of byte-level BPE vocabularies)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for byte in range(256):
        if byte in printable:
            chars[byte] = chr(byte)
        else:
            chars[byte] = chr(256 + extra)
            extra += 1
    return chars


def read_ranks(path: Path) -> dict[bytes, int]:
    ranks = {}
    for line in path.read_bytes().splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def to_tokenizer(ranks: dict[bytes, int], pattern: str, special: dict[str, int], nfc: bool = False) -> Tokenizer:
    """`nfc`: the text is NFC-normalized first (Qwen's tokenizers do; tiktoken itself does not)."""
    chars = _byte_chars()

    def text(token: bytes) -> str:
        return "".join(chars[b] for b in token)

    vocab = {text(token): rank for token, rank in ranks.items()} | special  # specials keep their own ids
    merges = []
    for token, rank in ranks.items():
        if len(token) < 2:
            continue
        pairs = [(token[:i], token[i:]) for i in range(1, len(token)) if token[:i] in ranks and token[i:] in ranks]
        pairs.sort(key=lambda pair: (ranks[pair[0]], ranks[pair[1]]))
        merges.extend((rank, text(left), text(right)) for left, right in pairs)
    merges.sort(key=lambda merge: merge[0])
    tokenizer = Tokenizer(models.BPE(vocab, [(left, right) for _, left, right in merges], fuse_unk=False))
    if nfc:
        tokenizer.normalizer = normalizers.NFC()
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([AddedToken(token, special=True, normalized=False) for token in special])
    if wrong := {t: tokenizer.token_to_id(t) for t, i in special.items() if tokenizer.token_to_id(t) != i}:
        raise ValueError(f"special tokens with ids not their own: {wrong}")
    return tokenizer
