# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""A real model served on the CPU: llama.cpp's own HTTP server (through xllamacpp) on a verified GGUF."""
