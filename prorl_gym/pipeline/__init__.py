"""The rollout pipeline: stages with their own worker pools, limits, typed failures."""
