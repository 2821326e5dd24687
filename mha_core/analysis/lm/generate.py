"""Continue a text, one piece at a time, with the key/value cache (engine/cache.py): each step runs only the new
piece through the layers; every layer's keys (after RoPE) and values of the earlier pieces are kept and reused.
`fwd_hooks` (hooks.py's names) run in every forward of the generation: a head zeroed at blocks.{l}.attn.hook_z
writes what the model writes without it. The sampling loop here (`sampled`) serves encoder–decoders too
(analysis/seq2seq/decode.py).

Shapes: L layers, G key/value heads, P pieces so far, D d_model, Dh head dim, V vocabulary.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from mha_core.analysis.lm.head import check_next_piece_head, lm_logits
from mha_core.analysis.lm.predict import pieces_of
from mha_core.engine.cache import prefill, prefill_after_start, step
from mha_core.engine.drawable import Drawable
from mha_core.engine.hooked import checked_hooks
from mha_core.engine.hooks import NO_HOOKS, HookFn, Hooks, NameFilter
from mha_core.engine.loading.model import LoadedModel
from mha_core.engine.tokens import InputError, TokenBatch, ids_batch, tokenize_ending
from mha_core.messages import N_

MAX_NEW = 64
ALTERNATIVES = 5


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
            "new_pieces_out_of_range",
            N_("Generate from 1 to {max_new} new pieces, not {new}."),
            max_new=max_new,
            new=new,
        )
    if not 0 <= temperature <= 10:
        raise InputError(
            "temperature_out_of_range",
            N_("The temperature must be from 0 (always the most likely piece) to 10, not {temperature}."),
            temperature=temperature,
        )
    if top_k is not None and top_k < 1:
        raise InputError("top_k_out_of_range", N_("Top-k must be at least 1, not {top_k}."), top_k=top_k)
    if seed not in SEEDS:
        raise InputError("seed_out_of_range", N_("The seed must be a whole number from 0 to 2⁶⁴ − 1, not {seed}."),
                         seed=seed)


@dataclass(frozen=True)
class Sampling:
    """How the next pieces are chosen (check_settings says what is allowed)."""

    new: int  # at most this many new pieces
    temperature: float  # 0: the most likely piece
    top_k: int | None  # sample among the k most likely only
    seed: int  # the same seed, the same pieces


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


Advance = Callable[[list[int]], Tensor]  # the pieces so far, the newest last -> the logits (V,) of the next
GivesUp = Callable[[Sequence[Step]], str | None]  # the steps so far -> why the output has failed (it stops), or None


def sampled(model: LoadedModel, ids: list[int], logits: Tensor, advance: Advance, settings: Sampling,
            ends: Collection[int | None], limit: int, gives_up: GivesUp | None = None) -> tuple[tuple[Step, ...], str]:
    """The one sampling loop of decoders and encoder–decoders: from the first step's `logits` (V,), choose a piece
    (choose), append it to `ids`, stop at one of `ends` (the end piece, a line's end), after settings.new pieces, at
    `limit` pieces or where `gives_up` names a reason, else `advance` (the key/value cache's step) to the next
    logits. Returns the steps and why it stopped."""
    generator, steps, stopped = torch.Generator().manual_seed(settings.seed), [], N_("length")
    for _ in range(settings.new):
        token = choose(logits, settings.temperature, settings.top_k, generator)
        steps.append(step_of(model, logits, token))
        ids.append(token)
        if token in ends:
            stopped = N_("end of text")
            break
        if len(ids) >= limit:
            stopped = N_("model's limit")
            break
        failed = gives_up(steps) if gives_up is not None else None
        if failed is not None:
            stopped = failed
            break
        logits = advance(ids)
    return tuple(steps), stopped


def uncached_last(model: LoadedModel, ids: list[int], hooks: Hooks = NO_HOOKS) -> Tensor:
    """The whole text recomputed (no cache): the last piece's final state (1,D)."""
    specials = set(model.tokenizer.all_special_ids)
    return prefill(model, ids_batch(model.tokenizer, [ids], [[i in specials for i in ids]]), hooks=hooks)[0]


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
            "no_chat_template", N_("{name}'s tokenizer has no chat template: generate without it."), name=model.name
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
            "chat_prompt_too_long",
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
    stop_pieces: Sequence[int] = (),
    start: str = "",
    fwd_hooks: Sequence[tuple[NameFilter, HookFn]] = (),
) -> Generation:
    """Continue `text` by up to `new` pieces (greedy at temperature 0; sampled otherwise, the same seed giving the
    same text); stops at the tokenizer's end-of-text piece or the model's limit. A text over the model's limit is
    read from its end (its first pieces left out and counted), leaving room for the new pieces. `chat`: answer
    `text` as a user's message in the tokenizer's chat template (Instruct models) instead of continuing it.
    `stop_pieces`: pieces that end the text as the end piece does (a translation's line end). `start`: a text that
    many prompts begin with (a few-shot prompt's examples): its pieces' keys and values are computed once.
    `fwd_hooks`: (name or name filter, fn(tensor, hook)) pairs run in every forward, as run_with_hooks runs them."""
    check_next_piece_head(model)
    check_settings(new, temperature, top_k, seed)
    hooks = checked_hooks(model, fwd_hooks)
    room = model.max_length - new  # a long text keeps its end, with room for the new pieces
    prompt, batch = chat_prompt(model, text) if chat else (text, tokenize_ending(model.tokenizer, text, room,
                                                                                 model.bos_id))
    ids = batch.input_ids[0, : int(batch.attention_mask[0].sum())].tolist()
    last, cache = prefill_after_start(model, batch, start, hooks)
    caches = [cache]

    def advance(grown: list[int]) -> Tensor:
        if use_cache:
            last, caches[0] = step(model, grown[-1], len(grown), caches[0], hooks=hooks)
        else:
            last = uncached_last(model, grown, hooks)
        return lm_logits(model, last)[0]  # (V,)

    steps, stopped = sampled(model, ids, lm_logits(model, last)[0], advance,
                             Sampling(new, temperature, top_k, seed), {model.tokenizer.eos_token_id, *stop_pieces},
                             model.max_length)
    continuation = model.tokenizer.decode([s.id for s in steps], skip_special_tokens=True)
    left_out = batch.left_out[0] if batch.left_out else 0
    return Generation(prompt, prompt + continuation, pieces_of(model, ids), tuple(steps), stopped, left_out)
