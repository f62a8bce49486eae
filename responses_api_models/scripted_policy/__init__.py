"""The scripted policy: a STAND-IN for a GPU-served model (vLLM), for demos, tests and benchmarks."""
