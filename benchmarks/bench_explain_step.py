"""The lesson's step "Is attention the explanation?" on a sentence the server has not seen: seconds (wall and CPU)
and peak RSS for the chosen head's attention, input × gradient and occlusion with the step's claims, on each bundled
text model, the English class's sentence and the Chinese one (the target: a few seconds on 2 cores, the lesson is
used live). Run with 2 threads, as a class's laptop: .venv/bin/python benchmarks/bench_explain_step.py
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mha_core import load_model  # noqa: E402
from mha_core.engine.loading.bundled import DECODER_NAME, ENCODER_NAME, GEMMA_NAME  # noqa: E402
from mha_core.engine.loading.model import bundled_dirs  # noqa: E402
from mha_core.teaching.examples import TRANSLATED  # noqa: E402
from mha_core.teaching.explain_step import attention_beside, explanation_claims  # noqa: E402

NEW = {"en": "The trophy didn't fit into the suitcase because it was too big.",
       "zh": "玛丽把书给了约翰，因为她已经读过了。"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--models", default=",".join((ENCODER_NAME, DECODER_NAME, GEMMA_NAME)))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    for name in args.models.split(","):
        model = load_model(bundled_dirs()[name])
        attention_beside(model, "The cat chased the dog because it was bored.")  # one-off costs
        for language in ("en", "zh"):
            for text in (TRANSLATED[language], NEW[language]):
                wall, cpu = time.perf_counter(), time.process_time()
                found = attention_beside(model, text)
                explanation_claims(found)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
                print(f"{name:24} {language} {len(found.words):3} words  {wall:5.2f} s wall  {cpu:5.2f} s CPU  "
                      f"peak RSS {peak:.0f} MB  head L{found.head[0]} H{found.head[1]}  {text[:30]}")


if __name__ == "__main__":
    main()
