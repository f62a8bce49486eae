# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""Fetch and verify local models' weights (make setup), or check what is in the cache.

python -m prorl_gym.local_models fetch [NAME ...] [--force]   default: every model of the catalog
python -m prorl_gym.local_models check [NAME ...]             verified as fetched? (exit 1 if not)
python -m prorl_gym.local_models list
"""

from __future__ import annotations

import argparse
import sys

from prorl_gym.errors import ProrlError
from prorl_gym.local_models.catalog import MODELS, local_model
from prorl_gym.local_models.fetch import cache_dir, fetch, verified


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m prorl_gym.local_models", description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=("fetch", "check", "list"))
    parser.add_argument("names", nargs="*", help=f"models (default: all): {', '.join(MODELS)}")
    parser.add_argument("--force", action="store_true", help="fetch: download and verify again")
    args = parser.parse_args(argv)
    if args.command == "list":
        for model in MODELS.values():
            print(f"{model.name}\t{model.size:,} bytes\tsha256 {model.sha256}\n  {model.provenance}")
        return 0
    try:
        models = [local_model(name) for name in args.names] if args.names else list(MODELS.values())
        for model in models:
            path = fetch(model, force=args.force) if args.command == "fetch" else verified(model)
            print(f"[{model.name}] {path}")
    except ProrlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"cache: {cache_dir()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
