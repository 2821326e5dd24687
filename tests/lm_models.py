"""Tiny random language models (issue 21) saved with the bundled word-piece tokenizer: causal LMs (Llama with a
tied and a separate head, GPT-2) and encoders with their masked-LM heads (BERT, RoBERTa, DistilBERT). The
fixtures lm_dirs and mlm_dirs (tests/conftest.py) build them once per test process."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from mha_core.engine.loading.model import bundled_model_dir

TEXT = "the animal did not cross the street because it was too tired . it refers to the"
CORRUPTED = "the animal did not cross the street because it was too wide . it refers to the"
SENTENCE = "The animal didn't cross the street because it was too tired."
CORRUPTED_SENTENCE = "The animal didn't cross the street because it was too wide."
LMS = {  # family: (config class, model class, sizes); tie_word_embeddings decides where the head lives
    "llama-tied": ("LlamaConfig", "LlamaForCausalLM", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                           num_key_value_heads=2, intermediate_size=64, head_dim=8,
                                                           max_position_embeddings=64, tie_word_embeddings=True)),
    "llama-separate": ("LlamaConfig", "LlamaForCausalLM", dict(hidden_size=32, num_hidden_layers=2,
                                                               num_attention_heads=4, num_key_value_heads=2,
                                                               intermediate_size=64, head_dim=8,
                                                               max_position_embeddings=64,
                                                               tie_word_embeddings=False)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=32, n_layer=2, n_head=4, n_positions=64)),
    "gemma2": ("Gemma2Config", "Gemma2ForCausalLM", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                         num_key_value_heads=2, intermediate_size=64, head_dim=8,
                                                         max_position_embeddings=64, sliding_window=4,
                                                         query_pre_attn_scalar=16, attn_logit_softcapping=2.0,
                                                         final_logit_softcapping=3.0, pad_token_id=0)),
    "gpt_neox": ("GPTNeoXConfig", "GPTNeoXForCausalLM", dict(hidden_size=32, num_hidden_layers=2,
                                                             num_attention_heads=4, intermediate_size=64,
                                                             max_position_embeddings=64, tie_word_embeddings=False)),
}


MLMS = {  # encoders saved with their masked-LM heads (tied to the input embeddings, as transformers saves them)
    "bert": ("BertConfig", "BertForMaskedLM", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                   intermediate_size=64, max_position_embeddings=64)),
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                            intermediate_size=64, max_position_embeddings=70,
                                                            pad_token_id=0)),
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM", dict(dim=32, n_layers=2, n_heads=4, hidden_dim=64,
                                                                     max_position_embeddings=64)),
}
MASKED = "the animal did not cross the street because it was too tired . it refers to the [MASK] ."


def build_lms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import transformers
    from transformers import AutoTokenizer

    dirs = {}
    for name, (config_name, model_name, sizes) in LMS.items():
        config = getattr(transformers, config_name)(vocab_size=30528, initializer_range=0.2, **sizes)  # effects to see
        torch.manual_seed(1)
        model = getattr(transformers, model_name)(config)
        with torch.no_grad():
            for key, p in model.named_parameters():
                if p.ndim == 1:  # random norms and biases, so a wrong readout of the final norm shows
                    p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in key.lower() or "ln" in key else 0.0))
        path = tmp_path_factory.mktemp(name)
        model.save_pretrained(path, safe_serialization=True)
        AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True).save_pretrained(path)
        dirs[name] = path
    return dirs


def build_mlms(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import transformers
    from transformers import AutoTokenizer

    dirs = {}
    for name, (config_name, model_name, sizes) in MLMS.items():
        torch.manual_seed(2)
        model = getattr(transformers, model_name)(getattr(transformers, config_name)(
            vocab_size=30522, initializer_range=0.2, **sizes))
        with torch.no_grad():
            for key, p in model.named_parameters():
                if p.ndim == 1:  # random norms and biases: the head's own norm and bias must be read
                    p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in key.lower() else 0.0))
        path = tmp_path_factory.mktemp(name)
        model.save_pretrained(path, safe_serialization=True)
        AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True).save_pretrained(path)
        dirs[name] = path
    return dirs


def prompt_ids(model, text: str) -> torch.Tensor:
    """(1,T) the ids our run reads for `text` (the decoder's first piece included, no padding)."""
    from mha_core.engine.tokens import tokenize

    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id)
    return batch.input_ids[:, :int(batch.attention_mask[0].sum())]


def reference(path: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", local_files_only=True).eval()


