"""Continue a text, one piece at a time, with a key/value cache (issue 21, section 5): each step runs only the new
piece through the layers; every layer's keys (after RoPE) and values of the earlier pieces are kept and reused.

Shapes: L layers, G key/value heads, P pieces so far, D d_model, Dh head dim, V vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from mha_core.analysis.lm_head import check_next_piece_head, lm_logits
from mha_core.analysis.predict import pieces_of
from mha_core.engine.attention import EXPLICIT
from mha_core.engine.drawable import Drawable
from mha_core.engine.forward import embed, final_norm, layer_outputs, per_layer, position_ids, prepare, scores_bias
from mha_core.engine.model import LoadedModel
from mha_core.engine.tokens import InputError, TokenBatch, ids_batch, tokenize_ending
from mha_core.i18n import N_

MAX_NEW = 64
ALTERNATIVES = 5
Cache = list[tuple[Tensor, Tensor]]  # L x (keys (1,G,P,Dh) after RoPE, values (1,G,P,Dh))


@dataclass(frozen=True)
class Step:
    piece: str  # the chosen piece, readable
    id: int
    prob: float  # its probability (at temperature 1, before any top-k cut)
    alternatives: tuple[tuple[str, float], ...]  # the ALTERNATIVES most likely pieces at this step


@dataclass(frozen=True)
class Generation(Drawable):
    prompt: str
    text: str  # the prompt and its continuation
    tokens: tuple[str, ...]  # every piece of the grown text (the decoder's first piece included)
    steps: tuple[Step, ...]
    stopped: str  # why it stopped: "length", "end of text" or "model's limit"
    left_out: int = 0  # pieces of a prompt over the model's limit left out before the ones read

    @property
    def continuation(self) -> str:
        return self.text[len(self.prompt):]

    def as_json(self, model_name: str) -> dict:
        return {"model": model_name, "text": self.text, "tokens": list(self.tokens), "stopped": self.stopped,
                "left_out": self.left_out,
                "generated": [{"token": s.piece, "id": s.id, "prob": round(s.prob, 6)} for s in self.steps]}


MIN_TEMPERATURE = 1e-4  # below this, sampling is the most likely piece (its limit at 0): no overflow, no NaN
SEEDS = range(2**64)  # what torch's generator takes


def check_settings(new: int, temperature: float, top_k: int | None, seed: int = 0, max_new: int = MAX_NEW) -> None:
    """Refuse, in one sentence, a length (1 .. `max_new` new pieces), temperature, top-k or seed out of range."""
    if not 1 <= new <= max_new:
        raise InputError(
            "generate_from_new_pieces",
            N_("Generate from 1 to {max_new} new pieces, not {new}."),
            max_new=max_new,
            new=new,
        )
    if not 0 <= temperature <= 10:
        raise InputError(
            "temperature_must_be_from",
            N_("The temperature must be from 0 (always the most likely piece) to 10, not {temperature}."),
            temperature=temperature,
        )
    if top_k is not None and top_k < 1:
        raise InputError("top_k_must_be", N_("Top-k must be at least 1, not {top_k}."), top_k=top_k)
    if seed not in SEEDS:
        raise InputError("seed_out_of_range", N_("The seed must be a whole number from 0 to 2⁶⁴ − 1, not {seed}."),
                         seed=seed)


def choose(logits: Tensor, temperature: float, top_k: int | None, generator: torch.Generator) -> int:
    """Greedy at temperature 0 (and below MIN_TEMPERATURE, where sampling is greedy to float precision); else a
    sample from softmax(logits / temperature), cut to the top k."""
    if temperature < MIN_TEMPERATURE:
        return int(logits.argmax())
    scaled = logits.float() / temperature
    if top_k is not None:
        cut = scaled.topk(min(top_k, len(scaled))).values[-1]
        scaled = scaled.masked_fill(scaled < cut, float("-inf"))
    return int(torch.multinomial(scaled.softmax(-1), 1, generator=generator))


def step_of(model: LoadedModel, logits: Tensor, token: int) -> Step:
    """The chosen piece with its probability and the ALTERNATIVES most likely ones, from the step's logits (V,)."""
    probs = logits.float().softmax(-1)
    top = probs.topk(ALTERNATIVES)
    return Step(pieces_of(model, [token])[0], token, float(probs[token]),
                tuple(zip(pieces_of(model, top.indices.tolist()), top.values.tolist(), strict=True)))


def first_pass(model: LoadedModel, batch: TokenBatch) -> tuple[Tensor, Cache]:
    """The prompt through every layer: the last piece's output (1,D) and each layer's keys and values."""
    x, bias, rope = prepare(model, batch)
    cache, out = [], x
    for out, attn in layer_outputs(model, x, bias, rope, EXPLICIT):  # noqa: B007 -- out is the last layer's
        cache.append((attn.k, attn.v))
    return out[:, -1], cache


def cached_step(model: LoadedModel, token: int, length: int, cache: Cache) -> tuple[Tensor, Cache]:
    """One new piece at position `length - 1` (length: pieces so far, the new one included) through every layer,
    reading the earlier pieces from the cache."""
    arch, mask = model.arch, torch.ones(1, length, dtype=torch.long, device=model.device)
    positions = position_ids(mask, arch)[:, -1:]  # (1,1)
    x = embed(model.embeddings, torch.tensor([[token]], device=model.device), positions)  # (1,1,D)

    def last_row(window: int | None) -> Tensor | None:  # the newest piece sees every earlier one, but beyond a
        if window is None and not arch.alibi:  # window, and ALiBi biases every key
            return None
        return scores_bias(model, mask, x.dtype, window)[:, :, -1:, :]  # (1,1|H,1,P)

    bias = per_layer(arch.windows, last_row)
    rope = per_layer(arch.rope_kinds, lambda kind: model.rotary(x, positions, kind)) if arch.rotary else None
    new_cache, out = [], x
    for out, attn in layer_outputs(model, x, bias, rope, EXPLICIT, past=cache):  # noqa: B007
        new_cache.append((attn.k, attn.v))
    return out[:, -1], new_cache


def uncached_last(model: LoadedModel, ids: list[int], special: list[bool]) -> Tensor:
    """The whole text recomputed (no cache): the last piece's last-layer output (1,D)."""
    return first_pass(model, ids_batch(model.tokenizer, [ids], [special]))[0]


def has_chat_template(model: LoadedModel) -> bool:
    return getattr(model.tokenizer, "chat_template", None) is not None


def encoded(tokenizer: object, text: str, as_text: bool) -> list[int]:
    """Pieces of a part of a chat prompt: the template's own (its markers single special pieces) or the user's text
    (`as_text`: a typed <|im_start|> is the pieces of its characters, never a control piece)."""
    return list(tokenizer(text, add_special_tokens=False, split_special_tokens=as_text)["input_ids"]) if text else []


def chat_prompt(model: LoadedModel, text: str) -> tuple[str, TokenBatch]:
    """`text` as a user's message in the tokenizer's chat template, ready for the assistant's answer: the template's
    text and its pieces. Only the template's markers (<|im_start|>, …) are special pieces: the user's text is
    tokenized apart, so that what a visitor types can never open a turn of its own."""
    tokenizer = model.tokenizer
    if not has_chat_template(model):
        raise InputError(
            "s_tokenizer_has_no", N_("{name}'s tokenizer has no chat template: generate without it."), name=model.name
        )
    marker = "\u2063mha-user-text\u2063"  # where the user's text goes: it is tokenized apart, its markers as text
    template = tokenizer.apply_chat_template([{"role": "user", "content": marker}], tokenize=False,
                                             add_generation_prompt=True)
    before, found, after = template.partition(marker)
    if not found:
        raise InputError("chat_template_unusable", N_("{name}'s chat template does not carry the message as it is: "
                                                      "generate without it."), name=model.name)
    prompt = before + text + after
    ids = [*encoded(tokenizer, before, as_text=False), *encoded(tokenizer, text, as_text=True),
           *encoded(tokenizer, after, as_text=False)]
    if len(ids) >= model.max_length:
        raise InputError(
            "chat_prompt_has_pieces",
            N_("The chat prompt has {ids:,} pieces; {name} reads at most {max_length:,}."),
            ids=len(ids),
            name=model.name,
            max_length=model.max_length,
        )
    specials = set(tokenizer.all_special_ids)
    return prompt, ids_batch(tokenizer, [ids], [[i in specials for i in ids]])


@torch.inference_mode()
def generate(
    model: LoadedModel,
    text: str,
    new: int = 32,
    temperature: float = 0.0,
    top_k: int | None = None,
    seed: int = 0,
    use_cache: bool = True,
    chat: bool = False,
) -> Generation:
    """Continue `text` by up to `new` pieces (greedy at temperature 0; sampled otherwise, the same seed giving the
    same text); stops at the tokenizer's end-of-text piece or the model's limit. A text over the model's limit is
    read from its end (its first pieces left out and counted), leaving room for the new pieces. `chat`: answer
    `text` as a user's message in the tokenizer's chat template (Instruct models) instead of continuing it."""
    check_next_piece_head(model)
    check_settings(new, temperature, top_k, seed)
    room = model.max_length - new  # a long text keeps its end, with room for the new pieces
    prompt, batch = chat_prompt(model, text) if chat else (text, tokenize_ending(model.tokenizer, text, room,
                                                                                 model.bos_id))
    ids = batch.input_ids[0, : int(batch.attention_mask[0].sum())].tolist()
    special = [w is None for w in batch.word_ids[0][: len(ids)]]
    generator, steps, stopped = torch.Generator().manual_seed(seed), [], N_("length")
    last, cache = first_pass(model, batch)
    for _ in range(new):
        logits = lm_logits(model, final_norm(model, last))[0]  # (V,)
        token = choose(logits, temperature, top_k, generator)
        steps.append(step_of(model, logits, token))
        ids.append(token)
        special.append(False)
        if token == model.tokenizer.eos_token_id:
            stopped = N_("end of text")
            break
        if len(ids) >= model.max_length:
            stopped = N_("model's limit")
            break
        last, cache = (
            cached_step(model, token, len(ids), cache) if use_cache else (uncached_last(model, ids, special), cache)
        )
    continuation = model.tokenizer.decode([s.id for s in steps], skip_special_tokens=True)
    left_out = batch.left_out[0] if batch.left_out else 0
    return Generation(prompt, prompt + continuation, pieces_of(model, ids), tuple(steps), stopped, left_out)
