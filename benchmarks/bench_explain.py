"""Integrated Gradients' 50 steps batched through our layer loop against Captum's IntegratedGradients on
transformers' eager model (the same baseline, steps and Gauss–Legendre points), side by side in one run: seconds of
each (interleaved medians), their ratio (target <= 1) and the largest relative difference of the attributions; then
the whole explanation of a new sentence (every method and its faithfulness), seconds and peak RSS, on MiniLM's
coreference margin and SmolLM2's it -> animal vs street.
Run: .venv/bin/python benchmarks/bench_explain.py [--repeats N] [--steps N] [--models all-MiniLM-L6-v2,...]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import interleaved_medians  # noqa: E402
from mha_core import explain, load_model  # noqa: E402
from mha_core.analysis.explain.choices import METHODS  # noqa: E402
from mha_core.analysis.explain.integrated import baseline_embeddings, integrated_gradients  # noqa: E402
from mha_core.analysis.explain.targets import target_for  # noqa: E402
from mha_core.engine.loading.bundled import DECODER_NAME, ENCODER_NAME  # noqa: E402
from mha_core.engine.loading.model import bundled_dirs  # noqa: E402
from mha_core.engine.tokens import tokenize  # noqa: E402

SENTENCE = "The animal didn't cross the street because it was too tired."
QUESTION = SENTENCE + " The word 'it' refers to the"
NEW = "The trophy didn't fit into the box because it was too big."


def transformers_score(ref: torch.nn.Module, target: object) -> object:
    def score(embeds: torch.Tensor) -> torch.Tensor:
        logits = ref(inputs_embeds=embeds).logits[:, target.position]
        return logits[:, target.answer_id] - logits[:, target.wrong_id]

    return score


def ig_side_by_side(steps: int, repeats: int) -> None:
    from captum.attr import IntegratedGradients
    from transformers import AutoModelForCausalLM

    model = load_model(bundled_dirs()[DECODER_NAME])
    ref = AutoModelForCausalLM.from_pretrained(model.model_dir, attn_implementation="eager").eval()
    batch = tokenize(model.tokenizer, QUESTION, model.max_length, bos=model.bos_id)
    target = target_for(model, batch, "animal", "street")
    base = baseline_embeddings(model, batch, "pad")
    words = ref.get_input_embeddings()(batch.input_ids).detach()
    found = {}

    def ours() -> None:
        found["ours"] = integrated_gradients(model, batch, target, steps, "pad").scores

    def captum() -> None:
        attributions = IntegratedGradients(transformers_score(ref, target)).attribute(
            words, baselines=base, n_steps=steps, method="gausslegendre", internal_batch_size=steps)
        found["captum"] = attributions[0].sum(-1).detach().double().numpy()

    medians = interleaved_medians({"ours": ours, "captum": captum}, repeats, warmup=1)
    differ = np.abs(found["ours"] - found["captum"]).max() / np.abs(found["captum"]).max()
    print(f"IG {steps} steps on {model.name} ({batch.input_ids.shape[1]} pieces): ours {medians['ours']:.2f} s, "
          f"Captum {medians['captum']:.2f} s, ratio {medians['ours'] / medians['captum']:.2f}, "
          f"max relative difference {differ:.1e}", flush=True)


def whole_page(name: str) -> None:
    model = load_model(bundled_dirs()[name])
    text, answer = (NEW, (None, None)) if not model.causal else (NEW + " The word 'it' refers to the",
                                                                 ("trophy", "box"))
    started = time.perf_counter()
    found = explain(model, text, *answer, methods=METHODS)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{name}: every method and its faithfulness {seconds:.1f} s, peak RSS {peak:,.0f} MB; most faithful: "
          f"{found.most_faithful()}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--models", default=f"{ENCODER_NAME},{DECODER_NAME}")
    args = parser.parse_args()
    ig_side_by_side(args.steps, args.repeats)
    for name in args.models.split(","):
        whole_page(name)


if __name__ == "__main__":
    main()
