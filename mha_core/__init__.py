"""mha_core: recompute multi-head attention of a transformer (BERT-style encoders, GPT-2 and Llama-style
decoders) from its weights.

Pure computation: nothing here imports streamlit.
"""

from mha_core.analysis.coref import CorefResult, analyse_coref
from mha_core.analysis.params import count_parameters
from mha_core.analysis.roles import HeadRoles, head_roles
from mha_core.analysis.syntax import SyntaxResult, analyse_corpus, analyse_syntax
from mha_core.engine.attention import AUTO, EXPLICIT, FUSED, PATHS, ProjectionWeights, multi_head_attention
from mha_core.engine.forward import run
from mha_core.engine.model import LoadedModel, ModelLoadError, bundled_dirs, bundled_model_dir, load_model
from mha_core.engine.result import AttentionResult
from mha_core.engine.tokens import InputError

__all__ = [
    "AUTO", "EXPLICIT", "FUSED", "PATHS", "AttentionResult", "CorefResult", "HeadRoles", "InputError",
    "LoadedModel", "ModelLoadError", "ProjectionWeights", "SyntaxResult", "analyse_coref", "analyse_corpus",
    "analyse_syntax", "bundled_dirs", "bundled_model_dir", "count_parameters", "head_roles", "load_model",
    "multi_head_attention", "run",
]
