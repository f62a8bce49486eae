"""NeMo Gym vllm_model over several policy endpoints: least-in-flight, sticky sessions, health checks."""
