"""Whisper base, side by side in one run on the CPU (issue 35):

  (a) every map of a 10-second clip (encoder 1,500 x 1,500, decoder and cross-attention, every layer and head, layer
      by layer as transformers returns them), our recompute / transformers' eager forward with output_attentions:
      target <= 1.0 (explicit; the fused path, its maps rebuilt from the log-sum-exp, beside it)
  (b) the clip's transcript decoded with the caches, at least 32 pieces / transformers' generate of the same
      pieces: target <= 1.2
  (c) the peak RSS of transcribing a 30-second clip (every map kept for the page, word timestamps) in a process of
      its own, minus the loaded model's: target <= the default memory budget (MHA_COMPUTE_MB)

The clips are espeak-ng speaking English (10 s and 30 s, silence-padded to Whisper's window as always).
Run: .venv/bin/python benchmarks/bench_seq2seq.py
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks._timing import interleaved_medians  # noqa: E402
from mha_core import load_model  # noqa: E402
from mha_core.analysis.seq2seq.decode import decode  # noqa: E402
from mha_core.engine.budget import DEFAULT_BUDGET_MB  # noqa: E402
from mha_core.engine.loading.bundled import WHISPER_NAME  # noqa: E402
from mha_core.engine.seq2seq.audio import RATE, clip_of, model_log_mel, read_audio, speak  # noqa: E402
from mha_core.engine.seq2seq.forward import forward_seq2seq, target_batch  # noqa: E402
from mha_core.engine.seq2seq.frames import frames_batch  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = ("The animal didn't cross the street because it was too tired.",
             "Attention lets every word look at every other word in the sentence.",
             "Each head learns its own way of deciding which words matter.",
             "The decoder asks the encoder where to listen for the next word.")
CHILD = """
import sys, numpy as np
from mha_core import load_model
from mha_core.analysis.seq2seq.transcribe import transcribe
from mha_core.engine.seq2seq.audio import read_audio
model = load_model(sys.argv[2])
loaded = int(next(l for l in open("/proc/self/status") if l.startswith("VmRSS:")).split()[1])
heard = transcribe(model, read_audio(open(sys.argv[1], "rb").read()))
maps = [heard.result.text_maps(kind) for kind in ("encoder", "decoder", "cross")]
peak = int(next(l for l in open("/proc/self/status") if l.startswith("VmHWM:")).split()[1])
print(loaded, peak, len(heard.words))
"""


def clip_of_seconds(seconds: float) -> object:
    """espeak-ng's sentences, one after another, cut to `seconds`."""
    pieces, total = [], 0
    while total < seconds * RATE:
        piece = read_audio(speak(SENTENCES[len(pieces) % len(SENTENCES)])).samples
        pieces.append(piece)
        total += len(piece)
    samples = np.concatenate(pieces)[: int(seconds * RATE)]
    return clip_of(samples[:, None], RATE, 1, len(samples) / RATE)


def every_map(model, source, target, path):
    """Every layer's maps of the three kinds, layer by layer as transformers returns them (explicit: the kept
    probabilities; fused: each layer's rebuilt from the log-sum-exp)."""
    result = forward_seq2seq(model, source, target, path)
    stacks = (result.encoder, result.decoder)
    return ([stack.text_layer_maps(0, layer) for stack in stacks for layer in range(stack.n_layers)]
            + [result.cross.layer_maps(layer) for layer in range(result.cross.n_layers)])


def reference_maps(model, source, target):
    with torch.inference_mode():
        out = model.model(input_features=source.features, decoder_input_ids=target.input_ids, output_attentions=True)
    return out.encoder_attentions, out.decoder_attentions, out.cross_attentions


def main() -> None:
    torch.set_num_threads(max(1, torch.get_num_threads()))
    model = load_model(WHISPER_NAME)
    clip = clip_of_seconds(10.0)
    source = frames_batch(model_log_mel(model, clip))
    decoded = decode(model, source, new=200)
    target = target_batch(model, [list(decoded.ids)])
    print(f"10 s clip: {len(decoded.ids)} decoder pieces: {decoded.text!r}")
    times = interleaved_medians({
        "ours explicit": lambda: every_map(model, source, target, "explicit"),
        "ours fused": lambda: every_map(model, source, target, "fused"),
        "transformers eager": lambda: reference_maps(model, source, target),
    }, repeats=3, warmup=1)
    ref = times["transformers eager"]
    for name in ("ours explicit", "ours fused"):
        print(f"(a) every map, {name}: {times[name]:.2f} s / eager {ref:.2f} s = {times[name] / ref:.2f} (<= 1.0)")
    written = len(decoded.ids) - 4
    with torch.inference_mode():
        times = interleaved_medians({
            "ours": lambda: decode(model, source, new=200),
            "generate": lambda: model.model.generate(source.features, language="en", task="transcribe"),
        }, repeats=3, warmup=1)
    print(f"(b) {written} pieces decoded with the caches: {times['ours']:.2f} s / generate {times['generate']:.2f} s "
          f"= {times['ours'] / times['generate']:.2f} (<= 1.2)")
    long = Path("/tmp/bench_seq2seq_30s.wav")
    import soundfile

    soundfile.write(long, clip_of_seconds(30.0).samples, RATE)
    done = subprocess.run([sys.executable, "-c", CHILD, str(long), WHISPER_NAME], capture_output=True, text=True,
                          cwd=ROOT, check=True)
    loaded, peak, words = (int(v) for v in done.stdout.split()[-3:])
    growth = (peak - loaded) / 1024
    print(f"(c) 30 s clip transcribed ({words} words) with every map: peak RSS {peak / 1024:,.0f} MB, "
          f"{growth:,.0f} MB over the loaded model; budget {DEFAULT_BUDGET_MB:,} MB: "
          f"{'within' if growth <= DEFAULT_BUDGET_MB else 'OVER'}")


if __name__ == "__main__":
    main()
