"""prorl-gym: rollout-as-a-service for multi-turn LLM agents on NeMo Gym."""
