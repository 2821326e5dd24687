"""Whisper base hearing Mandarin spoken by espeak-ng (issue 42, item 5): the character error rate (CER) on ten
sentences of the seeds' topics, before and after what the app does now, and what else was tried.

  shipped: the language forced to zh (the Chinese interface's default, and what the page tells Whisper for a
           sentence it speaks in Mandarin), greedy, the transcript converted to Simplified characters (OpenCC t2s)
  before:  the language detected (espeak-ng's Mandarin is heard as Thai or Cantonese), and the transcript as written
           (Traditional characters counted as errors against the Simplified reference)
  --explore: espeak-ng's speed (words a minute), an initial prompt in Simplified Chinese, beam search (5) and
           openai-whisper's temperature fallback (compression ratio 2.4, mean log-probability −1), the last three
           through transformers' generate on the same weights

CER = the edit distance between the reference's and the transcript's letters and digits (punctuation and spaces
left out) over the reference's count; above 1 where Whisper repeats itself. Run: .venv/bin/python
benchmarks/bench_mandarin.py [--explore]
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from mha_core import load_model  # noqa: E402
from mha_core.analysis.seq2seq.transcribe import simplified, transcribe  # noqa: E402
from mha_core.engine.loading.bundled import WHISPER_NAME  # noqa: E402
from mha_core.engine.loading.model import bundled_dirs  # noqa: E402
from mha_core.engine.seq2seq.audio import VOICES, model_log_mel, read_audio  # noqa: E402
from mha_core.teaching.claims import character_error_rate  # noqa: E402

SENTENCES = ("那只动物没有过马路，因为它太累了。", "注意力机制让每个词都能看到句子里的其他词。",
             "多头注意力把同一个句子分给几个头去看。", "老师在黑板上写了一个公式。",
             "今天的天气很好，我们去公园散步吧。", "机器翻译需要找到两种语言之间的对齐。",
             "每个头都学会了自己的关注方式。", "我们用一张猫的照片来看视觉模型。",
             "计算量随着句子长度的平方增长。", "学生们在手机上跟着老师的步骤学习。")
PROMPT = "以下是普通话的句子。"


def spoken(text: str, speed: int = 175) -> object:
    wav = subprocess.run(["espeak-ng", "-v", VOICES["zh"], "-s", str(speed), "--stdout", text], capture_output=True,
                         check=True).stdout
    return read_audio(wav)


def generated(model: object, clip: object, **settings: object) -> str:
    """transformers' own generate on the same weights (beam search, temperature fallback, a prompt)."""
    features = model_log_mel(model, clip)
    with torch.inference_mode():
        ids = model.model.generate(input_features=features if features.ndim == 3 else features[None],
                                   language="zh", task="transcribe", **settings)
    return model.tokenizer.decode(ids[0], skip_special_tokens=True)


def report(name: str, heard: list[str]) -> None:
    rates = [character_error_rate(s, h) for s, h in zip(SENTENCES, heard, strict=True)]
    print(f"{name:58s} CER {np.mean(rates):.3f}  (median {np.median(rates):.2f})", flush=True)


def main() -> None:
    torch.set_num_threads(2)
    model = load_model(bundled_dirs()[WHISPER_NAME])
    clips = [spoken(s) for s in SENTENCES]
    start = time.perf_counter()
    detected = [transcribe(model, c, None, timestamps=False) for c in clips]
    print("languages detected:", sorted({t.language for t in detected}))
    report("before: language detected, as written", [t.text_as_written for t in detected])
    forced = [transcribe(model, c, "zh", timestamps=False) for c in clips]
    report("language forced to zh, as written", [t.text_as_written for t in forced])
    report("shipped: language forced to zh, Simplified (OpenCC t2s)", [t.text for t in forced])
    print(f"({time.perf_counter() - start:.0f} s)")
    if "--explore" not in sys.argv:
        return
    for speed in (130, 200, 220):
        report(f"espeak-ng at {speed} words a minute (175 above), zh, Simplified",
               [transcribe(model, spoken(s, speed), "zh", timestamps=False).text for s in SENTENCES])
    fallback = dict(temperature=(0.0, 0.2, 0.4, 0.6, 0.8, 1.0), compression_ratio_threshold=2.4,
                    logprob_threshold=-1.0, do_sample=False)
    prompt = torch.tensor(model.tokenizer.get_prompt_ids(PROMPT))
    for name, settings in (("temperature fallback", fallback),
                           ("beam search 5 + fallback", {**fallback, "num_beams": 5}),
                           (f"initial prompt {PROMPT}", {"prompt_ids": prompt}),
                           ("initial prompt + fallback", {**fallback, "prompt_ids": prompt})):
        report(f"{name}, zh, Simplified", [simplified(generated(model, c, **settings)) for c in clips])


if __name__ == "__main__":
    main()
