"""Translation's alignment on the bundled Gemma 3 270M (issue 46), measured on the hand-aligned newswire set
(assets/alignment/, 150 zh–en pairs with sure and possible links): heads and the link rule are chosen on its
first half (development) only; the second half is held back and only reported.

  (a) AER of the chosen heads on the development half and on the held-back half, each beside the diagonal
      baseline (target: held-back AER <= 0.45), for zh -> en and en -> zh, each pooling of a word's pieces, both ways
      of reading a word's rows and both scalings (plain, columns divided by their mean: sinks down-weighted);
  (b) aligning the 150 pairs: seconds per pair (target <= 1 s on 2 cores);
  (c) translating the it -> animal sentence (zh -> en): seconds to the first piece (what the page waits for before
      anything is written) and to the aligned translation, and what was written and linked.
Run: .venv/bin/python benchmarks/bench_translate.py
(the choice the app and the CLI read, assets/alignment/heads.json, is written by bench_align.py --write, beside the
methods that read both directions and the hidden states)
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mha_core import load_model  # noqa: E402
from mha_core.analysis.lm.generate import generate  # noqa: E402
from mha_core.analysis.translation import heads  # noqa: E402
from mha_core.analysis.translation.align import SCALINGS  # noqa: E402
from mha_core.analysis.translation.gold import halves, newswire_pairs  # noqa: E402
from mha_core.analysis.translation.prompt import prompt_for  # noqa: E402
from mha_core.analysis.translation.translate import translate  # noqa: E402
from mha_core.analysis.translation.words import split_words  # noqa: E402
from mha_core.engine.loading.bundled import GEMMA_NAME  # noqa: E402

ANIMAL = "那只动物没有过马路，因为它太累了。"


def direction(model: object, source: str, target: str) -> dict:
    development, held_back = halves(newswire_pairs(source))
    started = time.perf_counter()
    maps = heads.pair_maps(model, development + held_back, source, target)
    seconds = (time.perf_counter() - started) / (len(development) + len(held_back))
    report, choices = {}, []
    for pooling, rows in maps:
        for scaling in SCALINGS:
            dev_maps, test_maps = maps[pooling, rows][:len(development)], maps[pooling, rows][len(development):]
            choice = heads.choose(dev_maps, development, f"{source}-{target}", scaling, pooling)
            choices.append(choice)
            held = [m.scaled(scaling) for m in test_maps]
            report[f"{pooling}/{rows}/{scaling}"] = {
                "heads": choice.heads, "rule": choice.rule, "development": round(choice.combined_aer, 3),
                "held_back": round(heads.combined_aer(held, held_back, choice.heads, choice.rule), 3),
                "best_single_head": round(float(choice.aers.min()), 3),
                "diagonal_development": round(choice.diagonal_aer, 3),
                "diagonal_held_back": round(heads.diagonal_aer(held_back), 3)}
    chosen = min(choices, key=lambda c: c.combined_aer)  # as heads.development_choice picks
    return {"seconds_per_pair": round(seconds, 3), "rows": report, "chosen": chosen}


def main() -> None:
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    model = load_model(GEMMA_NAME)
    for source, target in (("zh", "en"), ("en", "zh")):
        measured = direction(model, source, target)
        print(f"{source} -> {target}: {measured['seconds_per_pair']} s a pair (target <= 1)")
        for rows, line in measured["rows"].items():
            print(f"  rows={rows}: {line}")
        chosen = measured["chosen"]
        print(f"  chosen: pooling={chosen.pooling}, rows={chosen.rows}, scaling={chosen.scaling}, rule={chosen.rule}, "
              f"heads={chosen.heads}")
    prompt = prompt_for(split_words(ANIMAL, "zh"), "zh", "en").text
    started = time.perf_counter()
    generate(model, prompt, new=1)
    first = time.perf_counter() - started
    started = time.perf_counter()
    result = translate(model, ANIMAL, "zh", "en")
    print(f"translate {ANIMAL} -> {result.translation!r}: first piece {first:.2f} s, translated and aligned in "
          f"{time.perf_counter() - started:.2f} s; links: "
          + ", ".join(f"{result.source_words[s]}->{result.target_words[t]}" for s, t in sorted(result.links)))


if __name__ == "__main__":
    main()
