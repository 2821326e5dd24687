"""Syntactic-head analysis of UD EWT dev: our batched recompute vs Clark's per-sentence pipeline.

Side by side in one run, the scoring included on both sides:
  ours:      mha_core.analysis.corpus.syntax.analyse_syntax (padded, length-sorted batches, explicit path)
  reference: one transformers eager forward with output_attentions=True per sentence, then the
             same word-level scoring (how Clark et al.'s scripts extract attention)
Target (issue 5): ours at least 2x faster. Run: .venv/bin/python benchmarks/bench_roles.py [--limit N]

--induction: the induction probe (32 repeated random sequences of 20-50 tokens) on each bundled text model, in
batches of similar length (INDUCTION_BATCH_PIECES) against one padded batch of all 32, side by side.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from mha_core import load_model  # noqa: E402
from mha_core.analysis.corpus.readers import read_conllu  # noqa: E402
from mha_core.analysis.corpus.syntax import SyntaxAccumulator, analyse_syntax, predict_heads  # noqa: E402
from mha_core.engine.words import merge_pieces, word_groups  # noqa: E402

UD_DEV = ROOT.parent / "shared" / "data" / "ud-ewt" / "en_ewt-ud-dev.conllu"


def per_sentence_reference(model, sentences):
    acc = SyntaxAccumulator(model.n_layers, model.n_heads)
    for sentence in sentences:
        enc = model.tokenizer(list(sentence.words), is_split_into_words=True, return_tensors="pt",
                              truncation=True, max_length=model.max_length, split_special_tokens=True)
        with torch.inference_mode():
            out = model.model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                              output_attentions=True)
        maps = torch.stack(out.attentions)[:, 0]  # (L,H,T,T)
        acc.add(sentence, predict_heads(merge_pieces(maps, word_groups(enc.word_ids(0), len(sentence.words)))))
    return acc.result(skipped=0)


def bench_induction() -> None:
    from functools import partial
    from unittest import mock

    from benchmarks._timing import interleaved_medians
    from mha_core.analysis.heads import induction
    from mha_core.engine.loading import bundled
    from mha_core.engine.loading.model import bundled_dirs

    def one_batch(model: object) -> object:
        with mock.patch.object(induction, "INDUCTION_BATCH_PIECES", 10**9):
            return induction.induction_scores(model)

    for name in (bundled.ENCODER_NAME, *(bundle.name for bundle in bundled.TEXT_BUNDLES)):
        model = load_model(bundled_dirs()[name])
        ids, _, _ = induction.repeated_sequences(model, induction.INDUCTION_SEQUENCES, induction.INDUCTION_SEED)
        padded = len(ids) * max(map(len, ids))
        med = interleaved_medians({"one": partial(one_batch, model),
                                   "length": partial(induction.induction_scores, model)}, 3, 1)
        print(f"{name}: induction probe, {sum(map(len, ids))} pieces ({padded} padded in one batch): one batch "
              f"{med['one']:.2f} s, length batches {med['length']:.2f} s, ratio {med['length'] / med['one']:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--conllu", default=str(UD_DEV))
    parser.add_argument("--induction", action="store_true", help="time the induction probe's batches instead")
    args = parser.parse_args()
    if args.induction:
        bench_induction()
        return
    model = load_model()
    sentences = read_conllu(Path(args.conllu), limit=args.limit)
    analyse_syntax(model, sentences[:20])  # warm both paths up alike
    per_sentence_reference(model, sentences[:20])
    times = {}
    for name, fn in (("ours", lambda: analyse_syntax(model, sentences)),
                     ("reference", lambda: per_sentence_reference(model, sentences)),
                     ("ours again", lambda: analyse_syntax(model, sentences))):
        start = time.perf_counter()
        result = fn()
        times[name] = time.perf_counter() - start
        best = result.relations["all"].best()
        print(f"{name:>10}: {times[name]:.1f} s for {result.sentences} sentences; 'all' best {best}")
    ours = (times["ours"] + times["ours again"]) / 2  # before and after the reference, to even out drift
    print(f"speed-up: {times['reference'] / ours:.2f}x (target >= 2); torch threads {torch.get_num_threads()}")


if __name__ == "__main__":
    main()
