"""Integrated Gradients' 50 steps batched through our layer loop against Captum's IntegratedGradients on
transformers' eager model (the same baseline, steps and Gauss–Legendre points), side by side in one run: seconds of
each (interleaved medians, wall and this process's CPU), their ratio (target <= 1) and the largest relative
difference of the attributions; then the whole Explanations page's work for a new sentence (every method and its
faithfulness, as the page asks serving for it), each model in a process of its own: seconds (wall and CPU), the
copies of the sentence run, and the process's peak RSS while it works (VmHWM, reset once the model is loaded)
beside its peak before, on MiniLM's coreference margin and SmolLM2's it -> trophy vs box.
The machine's load average is printed beside the figures: on a shared machine, compare runs made together.
Run: .venv/bin/python benchmarks/bench_explain.py [--repeats N] [--steps N] [--threads N] [--models M,...]
     [--skip-ig]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
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


def load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


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

    candidates = {"ours": ours, "captum": captum}
    wall = interleaved_medians(candidates, repeats, warmup=1)
    cpu = interleaved_medians(candidates, repeats, warmup=0, clock=time.process_time)
    differ = np.abs(found["ours"] - found["captum"]).max() / np.abs(found["captum"]).max()
    print(f"IG {steps} steps on {model.name} ({batch.input_ids.shape[1]} pieces, {torch.get_num_threads()} "
          f"thread(s), load {load_average()}): wall ours {wall['ours']:.2f} s, Captum {wall['captum']:.2f} s, ratio "
          f"{wall['ours'] / wall['captum']:.2f}; CPU ours {cpu['ours']:.2f} s, Captum {cpu['captum']:.2f} s, ratio "
          f"{cpu['ours'] / cpu['captum']:.2f}; max relative difference {differ:.1e}", flush=True)


def peak_mb() -> float:
    return int(Path("/proc/self/status").read_text().split("VmHWM:")[1].split()[0]) / 1024


def page_work(name: str) -> dict:
    """(In a process of its own) the page's explanation of the new sentence: seconds, copies run, peak RSS."""
    from mha_core.analysis.explain import faithfulness

    model = load_model(bundled_dirs()[name])
    text, answer = (NEW, (None, None)) if not model.causal else (NEW + " The word 'it' refers to the",
                                                                 ("trophy", "box"))
    copies, edited = [], faithfulness.edited_scores

    def counted(model: object, batch: object, target: object, kept: list, *rest: object) -> np.ndarray:
        copies.append(len(kept))
        return edited(model, batch, target, kept, *rest)

    faithfulness.edited_scores = counted  # every copy is run through it, in its module
    loaded = peak_mb()
    Path("/proc/self/clear_refs").write_text("5")  # VmHWM from here on: the peak while the page's work runs
    started, cpu = time.perf_counter(), time.process_time()
    found = explain(model, text, *answer, methods=METHODS)
    return {"model": name, "seconds": time.perf_counter() - started, "cpu_seconds": time.process_time() - cpu,
            "copies": sum(copies), "peak_mb": peak_mb(),
            "loaded_mb": loaded, "most_faithful": found.most_faithful(),
            "ig_seconds": found.methods["ig"].seconds, "threads": torch.get_num_threads()}


def whole_page(name: str, threads: int | None) -> None:
    command = [sys.executable, __file__, "--page", name, *(["--threads", str(threads)] if threads else [])]
    run = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
    shown = json.loads(run.stdout.strip().splitlines()[-1])
    print(f"{name}: the page's work for a new sentence {shown['seconds']:.1f} s, CPU {shown['cpu_seconds']:.1f} s "
          f"({shown['copies']} copies of the "
          f"sentence run, Integrated Gradients {shown['ig_seconds']:.1f} s; {shown['threads']} thread(s), load "
          f"{load_average()}), peak RSS {shown['peak_mb']:,.0f} MB while it works (before, the model "
          f"loaded: {shown['loaded_mb']:,.0f} MB); most faithful: {shown['most_faithful']}", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--models", default=f"{ENCODER_NAME},{DECODER_NAME}")
    parser.add_argument("--skip-ig", action="store_true", help="only the pages")
    parser.add_argument("--page", default=None, help=argparse.SUPPRESS)  # the child process of whole_page
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.page:
        print(json.dumps(page_work(args.page)))
        return
    if not args.skip_ig:
        ig_side_by_side(args.steps, args.repeats)
    for name in args.models.split(","):
        whole_page(name, args.threads)


if __name__ == "__main__":
    main()
