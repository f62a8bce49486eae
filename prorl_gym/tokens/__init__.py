# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Exact tokens: chat templates and tokenizers (local files or a server's /tokenize), the parsers that
read a raw generation back into content, reasoning and tool calls, and the prompt of a multi-turn
conversation as the token ids the model produced and saw (token-in/token-out)."""
