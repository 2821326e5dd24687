"""Tiny random models of every supported family, built from their transformers configs (for tests)."""

from __future__ import annotations

from pathlib import Path

import torch

from mha_core.engine.loading.model import bundled_model_dir

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


def make_tiny(family: str, path: Path, lm: bool = False, **overrides: object) -> Path:
    """A random model of `family` saved as safetensors, with the bundled word-piece tokenizer; `overrides` change
    its config (OPT's norm placement, say). `lm`: a decoder saved with its language-model head (...ForCausalLM)."""
    import transformers
    from transformers import AutoModel, AutoModelForCausalLM, AutoTokenizer

    name, sizes = CONFIGS[family]
    config = getattr(transformers, name)(**SIZES, **{**sizes, **overrides})
    torch.manual_seed(0)
    model = (AutoModelForCausalLM if lm else AutoModel).from_config(config, attn_implementation="eager")
    with torch.no_grad():  # random norms and biases, so a wrong placement or a dropped bias shows
        for name_, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in name_.lower() and "weight" in name_ else 0.0))
    model.save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True).save_pretrained(path)
    return path


SEQ2SEQ_IDS = dict(pad_token_id=0, decoder_start_token_id=101, bos_token_id=101, eos_token_id=102)  # word pieces'
T5_SIZES = dict(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, relative_attention_num_buckets=8,
                relative_attention_max_distance=20)
BART_SIZES = dict(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                  encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
SEQ2SEQ_CONFIGS = {  # T5 with a decoder deeper than its encoder: each stack's layers are read apart
    "t5": ("T5Config", dict(T5_SIZES, num_decoder_layers=3)),
    "mt5": ("MT5Config", T5_SIZES),
    "umt5": ("UMT5Config", T5_SIZES),
    "bart": ("BartConfig", BART_SIZES),
    "mbart": ("MBartConfig", BART_SIZES),
    "marian": ("MarianConfig", dict(BART_SIZES, scale_embedding=True)),
    "m2m_100": ("M2M100Config", dict(BART_SIZES, scale_embedding=True)),
    "whisper": ("WhisperConfig", dict(BART_SIZES, max_source_positions=50, max_target_positions=32, num_mel_bins=8)),
}


def make_tiny_seq2seq(family: str, path: Path, **overrides: object) -> Path:
    """A random encoder–decoder of `family` (with its output layer) saved as safetensors, with the bundled
    word-piece tokenizer (Whisper's source is audio: 8 mel bins, 100 frames); `overrides` change its config."""
    import transformers
    from transformers import AutoTokenizer

    name, sizes = SEQ2SEQ_CONFIGS[family]
    config = getattr(transformers, name)(**{**SIZES, **SEQ2SEQ_IDS, **sizes, **overrides})
    torch.manual_seed(0)
    auto = transformers.AutoModelForSpeechSeq2Seq if family == "whisper" else transformers.AutoModelForSeq2SeqLM
    model = auto.from_config(config, attn_implementation="eager")
    with torch.no_grad():  # random norms and biases, so a wrong placement or a dropped bias shows
        for name_, p in model.named_parameters():
            if p.ndim == 1 and "logits" not in name_:
                p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in name_.lower() and "weight" in name_ else 0.0))
    model.save_pretrained(path, safe_serialization=True)
    AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True).save_pretrained(path)
    return path


VISION_SIZES = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                "image_size": 32, "patch_size": 8, "num_channels": 3}
VISION_CONFIGS = {  # family -> (transformers config class, sizes); CLIP both as its vision tower and whole
    "vit": ("ViTConfig", VISION_SIZES),
    "deit": ("DeiTConfig", VISION_SIZES),
    "dinov2": ("Dinov2Config", {**VISION_SIZES, "mlp_ratio": 2, "layerscale_value": 0.5}),
    "dinov2_swiglu": ("Dinov2Config", {**VISION_SIZES, "mlp_ratio": 2, "use_swiglu_ffn": True}),
    "dinov2_with_registers": ("Dinov2WithRegistersConfig", {**VISION_SIZES, "mlp_ratio": 2, "num_register_tokens": 4}),
    "clip_vision_model": ("CLIPVisionConfig", VISION_SIZES),
    "clip": ("CLIPConfig", {"vision_config": VISION_SIZES, "text_config": {
        "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 64,
        "vocab_size": 99}, "projection_dim": 16}),
}


def make_tiny_vision(family: str, path: Path, **overrides: object) -> Path:
    """A random Vision Transformer of `family` (32 px images in 8 px patches: 16 patches) saved as safetensors, no
    image processor (images are prepared by mha_core's default); norms, biases and layer scales random. `overrides`:
    config fields (initializer_range=0.2: weights large enough that [CLS] depends on the patches)."""
    import transformers

    name, sizes = VISION_CONFIGS[family]
    config = getattr(transformers, name)(**sizes, **overrides)
    torch.manual_seed(0)
    model = transformers.AutoModel.from_config(config, attn_implementation="eager")
    with torch.no_grad():
        for name_, p in model.named_parameters():
            if p.ndim == 1:
                p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in name_.lower() and "weight" in name_ else 0.0))
    model.save_pretrained(path, safe_serialization=True)
    return path
