# SPDX-FileCopyrightText: Copyright (c) 2026 The prorl-gym authors
# SPDX-License-Identifier: Apache-2.0
"""The base of every model a user writes as config: an unknown key is refused, named, with the nearest
valid one (`sandbox.comand_timeout_s` is an error that says "did you mean 'command_timeout_s'?", never a
setting silently ignored).

A NeMo Gym server's config also carries keys NeMo Gym itself reads from the same block (entrypoint,
domain, datasets, description, ...): `StrictServerConfig` accepts those beside the model's fields.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from functools import cache
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, model_validator


def unknown_key_message(key: str, valid: Iterable[str]) -> str:
    """'unknown key 'x'; did you mean 'y'? (valid: ...)' for one unknown key among `valid`."""
    valid = sorted(valid)
    nearest = difflib.get_close_matches(key, valid, n=1, cutoff=0.6)
    hint = f"; did you mean {nearest[0]!r}?" if nearest else ""
    return f"unknown key {key!r}{hint} (valid keys: {', '.join(valid)})"


@cache
def accepted_keys(model: type[BaseModel]) -> frozenset[str]:
    """Every name a model's fields may be written as: the field names and their aliases."""
    keys = set()
    for name, field in model.model_fields.items():
        keys.add(name)
        if field.alias:
            keys.add(field.alias)
        alias = field.validation_alias
        if isinstance(alias, str):
            keys.add(alias)
        elif isinstance(alias, AliasChoices):
            keys.update(choice for choice in alias.choices if isinstance(choice, str))
    return frozenset(keys)


class StrictConfig(BaseModel):
    """Refuses keys that are not its fields, naming each with the nearest valid one."""

    model_config = ConfigDict(extra="forbid")

    @classmethod
    def other_keys(cls) -> frozenset[str]:
        """Keys accepted (and dropped) beside the fields: someone else reads them from the same block."""
        return frozenset()

    @model_validator(mode="before")
    @classmethod
    def _refuse_unknown_keys(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        valid, others = accepted_keys(cls), cls.other_keys()
        unknown = [key for key in data if key not in valid and key not in others]
        if unknown:
            raise ValueError("; ".join(unknown_key_message(str(key), valid) for key in unknown))
        dropped = [key for key in data if key in others and key not in valid]
        return {k: v for k, v in data.items() if k not in dropped} if dropped else data


@cache
def nemo_gym_server_keys() -> frozenset[str]:
    """The keys NeMo Gym reads from a server's block itself: its run config's fields (entrypoint, domain,
    datasets, host, port, ...) and the metadata its registry and dataset uploads read (description,
    verified, value, ...). Imported when first needed: nemo_gym's config layer takes seconds to import."""
    import dataclasses

    from nemo_gym.config_types import BaseRunServerTypeConfig
    from nemo_gym.server_metadata import ServerMetadata

    return frozenset(BaseRunServerTypeConfig.model_fields) | {f.name for f in dataclasses.fields(ServerMetadata)}


class StrictServerConfig(StrictConfig):
    """A NeMo Gym server's config (mixed in before NeMo Gym's base config class): its own unknown keys are
    refused, NeMo Gym's are accepted."""

    @classmethod
    def other_keys(cls) -> frozenset[str]:
        return nemo_gym_server_keys()
