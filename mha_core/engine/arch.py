"""What differs between attention families, read from config.json. The one layer loop (forward.py) reads
only this description, and nothing else in mha_core or the pages branches on a family's name (the bundled-model
loaders aside): the weights are read by `layout`, the language-model head by `unembedding` and `masked_head`,
Whisper is `audio` (its encoder) and `task_prompt` (its decoder); tests/test_families.py checks it.

| family        | norm      | placement            | positions              | attention                      | MLP     |
|---------------|-----------|----------------------|------------------------|--------------------------------|---------|
| bert          | layer     | post                 | learned (+ types)      | MHA, biases                    | plain   |
| roberta, xlm-roberta | layer | post           | learned from pad + 1   | MHA, biases                    | plain   |
| distilbert    | layer     | post                 | learned                | MHA, biases                    | plain   |
| gpt2          | layer     | pre                  | learned                | MHA, fused c_attn              | plain   |
| opt           | layer     | pre or post          | learned from 2         | MHA, biases                    | ReLU    |
| bloom         | layer     | pre, norm after emb. | ALiBi (bias per head)  | MHA, fused, per head           | plain   |
| gpt_neox      | layer     | parallel             | partial RoPE           | MHA, fused, per head           | plain   |
| llama, mistral | rms      | pre                  | RoPE                   | GQA (Mistral: window)          | gated   |
| qwen2         | rms       | pre                  | RoPE                   | GQA, q/k/v biases              | gated   |
| qwen3         | rms       | pre                  | RoPE                   | GQA, QK-norm                   | gated   |
| phi3          | rms       | pre                  | RoPE (partial)         | GQA, fused, window             | gated*  |
| gemma2        | rms (1+w) | pre and post         | RoPE                   | GQA, local/global, soft-cap    | GeGLU   |
| gemma3_text   | rms (1+w) | pre and post         | RoPE, local base       | MQA, local/global, QK-norm     | GeGLU   |
* gate and up fused in one matrix. All decoders are causal. The encoders read a token-type embedding
(segment 0) where they have one.

Encoder–decoders (describe_stacks: one description per stack; the decoder's layers add cross-attention, Q from
the decoder, K and V from the encoder's output):

| family            | norm  | placement | positions                                  | MLP              |
|-------------------|-------|-----------|--------------------------------------------|------------------|
| t5, mt5           | rms   | pre       | relative bias in buckets (first layer's)   | ReLU / gated GELU|
| umt5              | rms   | pre       | relative bias in buckets (each layer's own)| gated GELU       |
| bart              | layer | post      | learned from 2, norm after the embeddings  | plain            |
| mbart             | layer | pre       | learned from 2, norm after the embeddings  | plain            |
| marian            | layer | post      | sinusoidal, embeddings × √d_model          | plain            |
| m2m_100 (NLLB)    | layer | pre       | sinusoidal from pad + 1, × √d_model        | plain            |
| whisper           | layer | pre       | encoder: 2 convolutions on log-mels, sinusoidal; decoder: learned | plain |
T5's scores are not scaled by 1/√d_k (its initialisation absorbs it).

Vision Transformers (describe_vision: an image's patches become tokens; vision/weights.py reads them):

| family                 | tokens before the patches     | norm placement | layer scale | MLP            | final norm |
|------------------------|-------------------------------|----------------|-------------|----------------|------------|
| vit                    | [CLS]                         | pre            | no          | GELU           | yes        |
| deit                   | [CLS], [DIST] (distillation)  | pre            | no          | GELU           | yes        |
| dinov2                 | [CLS]                         | pre            | λ per sub-layer | GELU or SwiGLU | yes    |
| dinov2_with_registers  | [CLS], registers              | pre            | λ per sub-layer | GELU or SwiGLU | yes    |
| clip_vision_model      | [CLS]; a norm after the embeddings (pre_layrnorm) | pre | no | quick GELU | no  |
A `clip` checkpoint is read as its vision tower. The patch embedding (a convolution, stride = patch size), the
class token, registers and the position embeddings (interpolated for another resolution) are transformers' own
embedding module, called as is: the recompute starts at the first layer's input.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum, auto
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transformers import PretrainedConfig

ENCODERS = ("bert", "roberta", "xlm-roberta", "distilbert")
DECODERS = ("gpt2", "opt", "bloom", "gpt_neox", "llama", "mistral", "qwen2", "qwen3", "phi3", "gemma2", "gemma3_text")
T5_LIKE = ("t5", "mt5", "umt5")
BART_LIKE = ("bart", "mbart", "marian", "m2m_100", "whisper")  # one layer layout (self_attn, encoder_attn, fc1/2)
ENCODER_DECODERS = T5_LIKE + BART_LIKE
VISION = ("vit", "deit", "dinov2", "dinov2_with_registers", "clip_vision_model", "clip")  # describe_vision
DINO = ("dinov2", "dinov2_with_registers")
SUPPORTED_MODEL_TYPES = ENCODERS + DECODERS + ENCODER_DECODERS + VISION
PRE_NORM_SEQ2SEQ = ("t5", "mt5", "umt5", "mbart", "m2m_100", "whisper")
GEMMA = ("gemma2", "gemma3_text")
ROTARY = ("llama", "mistral", "qwen2", "qwen3", "phi3", "gpt_neox", *GEMMA)
RMS_NORM = ("llama", "mistral", "qwen2", "qwen3", "phi3", *GEMMA)
GATED_MLP = RMS_NORM
QK_NORM = ("qwen3", "gemma3_text")
SPEECH = ("whisper",)  # encoder–decoders that hear audio (transformers' speech-to-text class loads them)
DEFAULT_SIDE = 224  # pixels a side an image is read at when the model folder's processor does not say
MAX_SIDE = 518  # the largest side an image is read at (DINOv2: 37 × 37 = 1,369 patches of 14 px)
MAX_PIECES = 1024  # longest text recomputed with every map (a decoder's 8,192-token window would need GBs of maps)
LONG_MAX_PIECES = 8192  # longest text recomputed for chosen heads and rows (q, k and the log-sum-exp kept)


class Layout(Enum):
    """Which transformers module layout a family's weights are read from (weights.py, seq2seq/weights.py): the
    modules' names and how q, k and v are stored."""

    BERT = auto()  # BertLayer: attention.self.query/key/value, intermediate, output (BERT, RoBERTa, XLM-RoBERTa)
    DISTILBERT = auto()  # q_lin/k_lin/v_lin, ffn.lin1/lin2
    GPT2 = auto()  # one Conv1D c_attn for q, k and v
    OPT = auto()  # self_attn.q/k/v/out_proj, fc1/fc2
    BLOOM = auto()  # self_attention.query_key_value per head, word_embeddings_layernorm
    GPT_NEOX = auto()  # attention.query_key_value per head, embed_in
    LLAMA = auto()  # self_attn.q/k/v/o_proj, mlp.gate/up/down_proj (Llama, Mistral, Qwen, Gemma)
    PHI3 = auto()  # self_attn.qkv_proj, mlp.gate_up_proj
    T5 = auto()  # blocks of layer[0] self-attention, layer[1] cross-attention, then the feed-forward
    BART = auto()  # self_attn, encoder_attn, fc1/fc2 (BART, mBART, Marian, M2M100, Whisper)
    VISION = auto()  # vision/weights.py reads each vision family's modules


LAYOUTS = {"bert": Layout.BERT, "roberta": Layout.BERT, "xlm-roberta": Layout.BERT, "distilbert": Layout.DISTILBERT,
           "gpt2": Layout.GPT2, "opt": Layout.OPT, "bloom": Layout.BLOOM, "gpt_neox": Layout.GPT_NEOX,
           "phi3": Layout.PHI3, **dict.fromkeys(T5_LIKE, Layout.T5), **dict.fromkeys(BART_LIKE, Layout.BART)}


@dataclass(frozen=True)
class MaskedHead:
    """Where an encoder's ...ForMaskedLM checkpoint keeps its head (tensor names), and the head's activation."""

    dense: str
    norm: str
    decoder: str
    bias: str
    activation: str  # a key of ACT2FN, after the dense layer


MASKED_HEADS = {  # family: (dense, norm, decoder, bias) tensor names of its ...ForMaskedLM checkpoints
    "bert": ("cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm", "cls.predictions.decoder",
             "cls.predictions.bias"),
    "roberta": ("lm_head.dense", "lm_head.layer_norm", "lm_head.decoder", "lm_head.bias"),
    "xlm-roberta": ("lm_head.dense", "lm_head.layer_norm", "lm_head.decoder", "lm_head.bias"),
    "distilbert": ("vocab_transform", "vocab_layer_norm", "vocab_projector", "vocab_projector.bias"),
}


def masked_head(config: PretrainedConfig) -> MaskedHead | None:
    """An encoder family's masked-LM head: its tensors' names and activation (DistilBERT's config names it
    `activation`, BERT's `hidden_act`; RoBERTa's head is GELU whatever the layers use)."""
    names = MASKED_HEADS.get(config.model_type)
    if names is None:
        return None
    activation = {"distilbert": getattr(config, "activation", None), "bert": getattr(config, "hidden_act", "gelu")}
    return MaskedHead(*names, activation=activation.get(config.model_type) or "gelu")


@dataclass(frozen=True)
class Architecture:
    family: str  # config.model_type
    causal: bool  # decoders: a query sees only itself and earlier tokens
    norm: str  # "layer" (LayerNorm) or "rms" (RMSNorm)
    pre_norm: bool  # norm before each sub-layer (x + f(norm(x))), else after the residual (norm(x + f(x)))
    rotary: bool  # RoPE rotates q and k; else learned absolute position embeddings are added
    position_offset: int  # the first position id (RoBERTa: padding_idx + 1)
    token_types: bool  # a token-type (segment) embedding is added (segment 0)
    gated_mlp: bool  # down(act(gate(x)) * up(x)), else out(act(in(x)))
    activation: str  # a key of transformers.activations.ACT2FN
    n_layers: int
    n_heads: int  # query heads
    n_kv_heads: int  # key/value heads (< n_heads: grouped-query attention)
    d_model: int
    head_dim: int
    max_length: int  # word pieces recomputed at most (specials included)
    long_max_length: int  # the same where only chosen heads and rows are read (up to LONG_MAX_PIECES)
    norm_eps: float
    windows: tuple[int | None, ...]  # per layer: keys this far back or further are not seen (None: all are)
    rope_kinds: tuple[str | None, ...] = ()  # per layer: the RoPE table (Gemma 3: local and global bases)
    qk_norm: bool = False  # each head's q and k RMS-normed before RoPE (Qwen3, Gemma 3)
    sandwich: bool = False  # a norm after each sub-layer too: x + post(f(pre(x))) (Gemma)
    parallel: bool = False  # x + attn(norm1 x) + mlp(norm2 x) (GPT-NeoX)
    embed_scale: float = 1.0  # embeddings times this (Gemma: √d_model)
    scale: float | None = None  # the scores' factor; None: 1/√head_dim
    attn_softcap: float | None = None  # Gemma 2: scores -> tanh(s / c) · c; no fused kernel does it
    final_softcap: float | None = None  # Gemma 2: logits -> tanh(l / c) · c
    alibi: bool = False  # BLOOM: a linear bias per head on the keys' positions, no position embedding
    cross: bool = False  # an encoder–decoder's decoder: each layer attends to the encoder's output too
    relative_bias: bool = False  # T5: a learned bias per head on the keys' relative positions, in buckets
    audio: bool = False  # Whisper's encoder: frames of a log-mel spectrogram in, through two convolutions
    image: bool = False  # a Vision Transformer: an image's patches in (describe_vision)
    layer_scale: bool = False  # DINOv2: each sub-layer's output times a learned λ (D,) before the residual
    patch_size: int = 0  # pixels a side of one patch
    image_size: int = 0  # pixels a side the model was trained at
    n_prefix: int = 0  # tokens before the patches: [CLS], DeiT's [DIST], DINOv2's registers
    layout: Layout = Layout.VISION  # the transformers modules its weights are read from
    norm_offset: float = 0.0  # Gemma: its RMSNorms scale by (1 + weight)
    task_prompt: bool = False  # Whisper's decoder: its prompt names the language and task, and a transcript's text
    #                            is read with the space it starts with (seq2seq/forward.py: decoder_prefix)
    unembedding: str = "lm_head.weight"  # a decoder's own unembedding where untied (GPT-NeoX: embed_out.weight)
    masked_head: MaskedHead | None = None  # an encoder's masked-LM head, where its family has one
    asks_interpolation: bool = False  # ViT, DeiT, CLIP: their embedding module interpolates the positions to another
    #                                   resolution only when asked (DINOv2's always does)

    @property
    def grouped(self) -> bool:
        return self.n_kv_heads < self.n_heads

    @property
    def sliding_window(self) -> int | None:
        """The window of the windowed layers (one size per model), None when every layer sees every key."""
        return next((w for w in self.windows if w is not None), None)

    @property
    def fused_exact(self) -> bool:
        """Whether a fused kernel computes this model's attention (Gemma 2's soft-capping: no kernel does)."""
        return self.attn_softcap is None


def projects_embeddings(config: dict) -> bool:
    """Whether a config.json (a dict, read without transformers) projects its word embeddings to another width
    than the stream's (OPT-350m's word_embed_proj_dim, with project_in/out): a step the layer loop does not take."""
    width = config.get("hidden_size")
    return config.get("model_type") == "opt" and config.get("word_embed_proj_dim", width) != width


def first(config: PretrainedConfig, *names: str, default: Any = None) -> Any:
    """The first of `names` that the config has and is not None (families name the same size differently)."""
    for name in names:
        value = getattr(config, name, None)
        if value is not None:
            return value
    return default


def layer_windows(config: PretrainedConfig, n_layers: int) -> tuple[int | None, ...]:
    """Per layer, its sliding window: from `layer_types` (Gemma, Qwen), else one window for every layer (Mistral,
    Phi-3), else none."""
    window = getattr(config, "sliding_window", None)
    types = getattr(config, "layer_types", None)
    if types:
        return tuple(int(window) if kind == "sliding_attention" and window else None for kind in types[:n_layers])
    return (int(window) if window else None,) * n_layers


def rotary_kinds(config: PretrainedConfig, n_layers: int) -> tuple[str | None, ...]:
    """Per layer, the RoPE table transformers builds for it: Gemma 3 keeps one per layer type, others one."""
    if config.model_type == "gemma3_text":
        return tuple(config.layer_types[:n_layers])
    return (None,) * n_layers


def describe(config: PretrainedConfig) -> Architecture:
    """The description of a transformers config of a supported family (model_type checked before)."""
    family = config.model_type
    d_model = int(first(config, "hidden_size", "n_embd", "dim"))
    n_heads = int(first(config, "num_attention_heads", "n_head", "n_heads"))
    n_layers = int(first(config, "num_hidden_layers", "n_layer", "n_layers"))
    positions = int(first(config, "max_position_embeddings", "n_positions", default=MAX_PIECES))
    offset = int(config.pad_token_id) + 1 if family in ("roberta", "xlm-roberta") else 2 if family == "opt" else 0
    head_dim = int(first(config, "head_dim", default=d_model // n_heads))
    gemma = family in GEMMA
    return Architecture(
        family=family, causal=family in DECODERS, norm="rms" if family in RMS_NORM else "layer",
        pre_norm=family in DECODERS and (family != "opt" or bool(config.do_layer_norm_before)),
        rotary=family in ROTARY, position_offset=offset, token_types=family in ("bert", "roberta", "xlm-roberta"),
        gated_mlp=family in GATED_MLP, activation=activation_of(config),
        n_layers=n_layers, n_heads=n_heads, n_kv_heads=int(first(config, "num_key_value_heads", default=n_heads)),
        d_model=d_model, head_dim=head_dim,
        max_length=min(positions - (offset if family != "opt" else 0), MAX_PIECES),
        long_max_length=min(positions - (offset if family != "opt" else 0), LONG_MAX_PIECES),
        norm_eps=float(first(config, "layer_norm_eps", "layer_norm_epsilon", "rms_norm_eps", default=1e-12)),
        windows=layer_windows(config, n_layers), rope_kinds=rotary_kinds(config, n_layers),
        qk_norm=family in QK_NORM, sandwich=gemma,
        parallel=family == "gpt_neox" and bool(getattr(config, "use_parallel_residual", True)),
        embed_scale=d_model**0.5 if gemma else 1.0,
        scale=float(config.query_pre_attn_scalar) ** -0.5 if gemma else None,
        attn_softcap=getattr(config, "attn_logit_softcapping", None) if gemma else None,
        final_softcap=getattr(config, "final_logit_softcapping", None) if gemma else None,
        alibi=family == "bloom", layout=LAYOUTS.get(family, Layout.LLAMA), norm_offset=1.0 if gemma else 0.0,
        unembedding="embed_out.weight" if family == "gpt_neox" else "lm_head.weight", masked_head=masked_head(config),
    )


def activation_of(config: PretrainedConfig) -> str:
    """The MLP's activation, a key of ACT2FN. BLOOM's own GELU is the tanh approximation (gelu_new)."""
    if config.model_type == "bloom":
        return "gelu_new"
    return str(first(config, "hidden_activation", "hidden_act", "activation_function", "activation", default="gelu"))


def describe_stacks(config: PretrainedConfig) -> tuple[Architecture, Architecture]:
    """An encoder–decoder's two stacks: (encoder, decoder). The decoder is causal and cross-attends."""
    family = config.model_type
    t5 = family in T5_LIKE
    d_model = int(config.d_model)
    pad = int(config.pad_token_id) if config.pad_token_id is not None else 0
    offset = 2 if family in ("bart", "mbart") else pad + 1 if family == "m2m_100" else 0
    scale = 1.0 if t5 else None

    def stack(decoder: bool) -> Architecture:
        side = "decoder" if decoder else "encoder"
        n_layers = int(first(config, f"{side}_layers", *(("num_decoder_layers",) if decoder else ()), "num_layers"))
        n_heads = int(first(config, f"{side}_attention_heads", "num_heads"))
        positions = int(first(config, "max_target_positions" if decoder else "max_source_positions",
                              "max_position_embeddings", "n_positions", default=512))
        max_length = min(positions, MAX_PIECES) if not (family in SPEECH and not decoder) else positions
        return Architecture(
            family=family, causal=decoder, norm="rms" if t5 else "layer", pre_norm=family in PRE_NORM_SEQ2SEQ,
            rotary=False, position_offset=offset, token_types=False,
            gated_mlp=t5 and bool(getattr(config, "is_gated_act", False)), activation=seq2seq_activation(config),
            n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_heads, d_model=d_model,
            head_dim=int(first(config, "d_kv", default=d_model // n_heads)),
            max_length=max_length, long_max_length=min(positions, LONG_MAX_PIECES),
            norm_eps=float(first(config, "layer_norm_epsilon", default=1e-5)), windows=(None,) * n_layers,
            rope_kinds=(None,) * n_layers, scale=scale, cross=decoder, relative_bias=t5,
            audio=family in SPEECH and not decoder, layout=LAYOUTS[family], task_prompt=family in SPEECH and decoder,
        )

    return stack(False), stack(True)


def seq2seq_activation(config: PretrainedConfig) -> str:
    """The MLP's activation: T5's dense_act_fn (relu, or gelu_new in the gated v1.1 and mT5), else the config's."""
    return str(first(config, "dense_act_fn", "activation_function", default="gelu"))


def vision_config(config: object) -> object:
    """The config of the vision stack: a `clip` checkpoint's vision_config, else the config itself."""
    return config.vision_config if config.model_type == "clip" else config


def prefix_names(config: object) -> tuple[str, ...]:
    """The tokens before the patches, in order: [CLS], DeiT's distillation token, DINOv2's registers."""
    registers = int(getattr(config, "num_register_tokens", 0) or 0) if config.model_type in DINO else 0
    return ("[CLS]", *(("[DIST]",) if config.model_type == "deit" else ()), *(f"[REG {i}]" for i in range(registers)))


def describe_vision(config: object) -> Architecture:
    """The description of a vision stack (model_type checked before)."""
    family, vision = config.model_type, vision_config(config)
    d_model, n_heads = int(vision.hidden_size), int(vision.num_attention_heads)
    n_layers = int(vision.num_hidden_layers)
    patch, side = int(vision.patch_size), int(first(vision, "image_size", default=DEFAULT_SIDE))
    prefix = len(prefix_names(config if family != "clip" else vision))
    most = prefix + (max(side, MAX_SIDE) // patch) ** 2
    swiglu = bool(getattr(vision, "use_swiglu_ffn", False))
    return Architecture(
        family=family, causal=False, norm="layer", pre_norm=True, rotary=False, position_offset=0,
        token_types=False, gated_mlp=swiglu, activation="silu" if swiglu else str(vision.hidden_act),
        n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_heads, d_model=d_model, head_dim=d_model // n_heads,
        max_length=min(most, LONG_MAX_PIECES), long_max_length=min(most, LONG_MAX_PIECES),
        norm_eps=float(first(vision, "layer_norm_eps", default=1e-12)), windows=(None,) * n_layers,
        rope_kinds=(None,) * n_layers, image=True, layer_scale=family in DINO, patch_size=patch, image_size=side,
        n_prefix=prefix, asks_interpolation=family not in DINO,
    )
