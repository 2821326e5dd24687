"""Tiny random models of every supported family, built from their transformers configs (for tests)."""

from __future__ import annotations

from pathlib import Path

import torch

from mha_core.engine.model import bundled_model_dir

SIZES = {"vocab_size": 30528}  # a few rows beyond the word pieces: tokenizers may add a special token
CONFIGS = {
    "bert": ("BertConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                max_position_embeddings=64)),
    "roberta": ("RobertaConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, max_position_embeddings=66, pad_token_id=0)),
    "xlm-roberta": ("XLMRobertaConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                             intermediate_size=64, max_position_embeddings=66, pad_token_id=0)),
    "distilbert": ("DistilBertConfig", dict(dim=32, hidden_dim=64, n_layers=2, n_heads=4,
                                            max_position_embeddings=64)),
    "gpt2": ("GPT2Config", dict(n_embd=32, n_layer=2, n_head=4, n_positions=64)),
    "llama": ("LlamaConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, head_dim=8)),
    "qwen2": ("Qwen2Config", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=1,
                                  intermediate_size=64, max_position_embeddings=64)),
    "mistral": ("MistralConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=64, max_position_embeddings=64,
                                      head_dim=8, sliding_window=6)),
    "qwen3": ("Qwen3Config", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                  intermediate_size=64, max_position_embeddings=64, head_dim=8)),
    "phi3": ("Phi3Config", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                intermediate_size=64, max_position_embeddings=64, sliding_window=6, pad_token_id=0,
                                bos_token_id=101, eos_token_id=102, partial_rotary_factor=0.5)),
    "gemma2": ("Gemma2Config", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                                    intermediate_size=64, head_dim=8, max_position_embeddings=64, sliding_window=4,
                                    query_pre_attn_scalar=16, attn_logit_softcapping=2.0, final_logit_softcapping=3.0,
                                    pad_token_id=0, bos_token_id=101, eos_token_id=102)),
    "gemma3_text": ("Gemma3TextConfig", dict(hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                             num_key_value_heads=1, intermediate_size=64, head_dim=8,
                                             max_position_embeddings=64, sliding_window=4, query_pre_attn_scalar=16,
                                             layer_types=["sliding_attention", "full_attention", "sliding_attention"],
                                             pad_token_id=0, bos_token_id=101, eos_token_id=102)),
    "gpt_neox": ("GPTNeoXConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                                       max_position_embeddings=64, rotary_pct=0.5, bos_token_id=101,
                                       eos_token_id=102)),
    "bloom": ("BloomConfig", dict(hidden_size=32, n_layer=2, n_head=4, bos_token_id=101, eos_token_id=102,
                                  pad_token_id=0)),
    "opt": ("OPTConfig", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, ffn_dim=64,
                              max_position_embeddings=64, word_embed_proj_dim=32, pad_token_id=0, bos_token_id=101,
                              eos_token_id=102)),
}


def make_tiny(family: str, path: Path, **overrides: object) -> Path:
    """A random model of `family` saved as safetensors, with the bundled word-piece tokenizer; `overrides` change
    its config (OPT's norm placement, say)."""
    import transformers
    from transformers import AutoModel, AutoTokenizer

    name, sizes = CONFIGS[family]
    config = getattr(transformers, name)(**SIZES, **{**sizes, **overrides})
    torch.manual_seed(0)
    model = AutoModel.from_config(config, attn_implementation="eager")
    with torch.no_grad():  # random norms and biases, so a wrong placement or a dropped bias shows
        for name_, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in name_.lower() and "weight" in name_ else 0.0))
    model.save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True).save_pretrained(path)
    return path
