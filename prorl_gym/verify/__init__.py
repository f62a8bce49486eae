"""Shared answer checking: answer extraction, math equivalence, and an isolated worker pool."""
