"""mha_core: recompute multi-head attention of a transformer (BERT-style encoders, GPT-2 and Llama-style
decoders) from its weights.

Pure computation: nothing here imports streamlit. The package is in layers (docs: the layout): engine <- analysis <-
figures | teaching <- serving <- cli. The public names below are imported on first use (PEP 562), so that a
module of one layer (the heavy-work queue, say) can be imported without torch and transformers.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

_PUBLIC = {  # the public API (docs/researchers/notebook.md): every analysis the app and the CLI have, and their results
    "mha_core.analysis.lm.ablation": ("AblationGrid", "ablate_heads", "ablation_grid"),
    "mha_core.analysis.efficiency.cost": ("AttentionCost", "attention_cost"),
    "mha_core.analysis.efficiency.fidelity": ("PatternedRun", "with_pattern"),
    "mha_core.analysis.efficiency.patterns": ("Pattern", "allowed_keys", "parse_pattern"),
    "mha_core.analysis.explain.explain": ("Explanation", "explain", "faithfulness"),
    "mha_core.analysis.heads.contrib": ("ValueWeighted", "rollout_of", "value_weighted"),
    "mha_core.analysis.coref.gap": ("CorefResult", "analyse_coref"),
    "mha_core.analysis.corpus.readers": ("bundled_corpus", "read_conllu", "read_gap"),
    "mha_core.analysis.corpus.passes": ("CorpusPass", "corpus_pass"),
    "mha_core.analysis.heads.display": ("AttentionView", "attention_view"),
    "mha_core.analysis.lm.generate": ("Generation", "generate"),
    "mha_core.analysis.heads.induction": ("InductionScores", "induction_scores"),
    "mha_core.analysis.index.build": ("build_index", "bundled_sentences", "conllu_corpus", "text_corpus"),
    "mha_core.analysis.index.search": ("SearchResult", "search_text"),
    "mha_core.analysis.index.store": ("OpenIndex",),
    "mha_core.analysis.coref.sentence": ("AntecedentScores", "antecedent_scores", "sentence_words"),
    "mha_core.analysis.long.roles": ("needle_probe", "sink_growth"),
    "mha_core.analysis.long.text": ("head_summaries", "run_long"),
    "mha_core.analysis.heads.pairs": ("PairShares", "pair_shares"),
    "mha_core.analysis.params.counts": ("count_parameters", "model_breakdown"),
    "mha_core.analysis.lm.patching": ("PatchGrid", "patch_grid"),
    "mha_core.analysis.lm.predict": ("Attribution", "LogitLens", "Prediction", "attribute", "logit_lens", "predict",
                                  "probe_answers"),
    "mha_core.analysis.heads.roles": ("HeadRoles", "head_roles", "ranked_heads"),
    "mha_core.analysis.seq2seq.decode": ("Decoded", "decode"),
    "mha_core.analysis.corpus.syntax": ("SyntaxResult", "analyse_corpus", "analyse_syntax"),
    "mha_core.analysis.seq2seq.transcribe": ("Transcript", "transcribe"),
    "mha_core.analysis.translation.translate": ("Translation", "align", "translate"),
    "mha_core.analysis.translation.heads": ("HeadChoice", "development_choice"),
    "mha_core.engine.seq2seq.audio": ("Clip", "read_audio", "speak"),
    "mha_core.engine.seq2seq.cross": ("CrossAttention",),
    "mha_core.engine.seq2seq.forward": ("Seq2SeqResult", "run_seq2seq"),
    "mha_core.engine.attention": ("AUTO", "EXPLICIT", "FUSED", "PATHS", "ProjectionWeights", "multi_head_attention"),
    "mha_core.engine.forward": ("run",),
    "mha_core.engine.hooked": ("ActivationCache", "act_name", "hook_names", "run_with_cache", "run_with_hooks"),
    "mha_core.engine.hooks": ("HookPoint",),
    "mha_core.engine.vision.images": ("prepare_images", "read_image", "run_images"),
    "mha_core.engine.loading.model": ("LoadedModel", "ModelLoadError", "bundled_dirs", "bundled_model_dir",
                                      "load_model"),
    "mha_core.engine.result": ("AttentionResult",),
    "mha_core.engine.tokens": ("InputError",),
    "mha_core.teaching.walkthrough": ("walkthrough",),
}
_MODULE_OF = {name: module for module, names in _PUBLIC.items() for name in names}
__all__ = sorted(_MODULE_OF)


def __getattr__(name: str) -> Any:
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'mha_core' has no attribute {name!r}")
    value = getattr(importlib.import_module(_MODULE_OF[name]), name)
    importlib.import_module("mha_core.figures.notebook")  # results draw themselves (engine.drawable's registry)
    if inspect.isfunction(value):  # every public function checks its arguments against its type hints
        from mha_core.engine.arguments import checked

        value = checked(value)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

