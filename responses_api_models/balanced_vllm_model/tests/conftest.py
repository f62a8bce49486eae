"""pytest's importlib mode creates the `responses_api_models` namespace from this repo's folder
alone; NeMo Gym's built-in model servers (vllm_model, our base class) live in the same
namespace in site-packages. ng_run (plain imports) sees both; make pytest see both too."""

import responses_api_models
from nemo_gym import PARENT_DIR

_BUILTIN = str(PARENT_DIR / "responses_api_models")
if _BUILTIN not in list(responses_api_models.__path__):
    responses_api_models.__path__.append(_BUILTIN)
