"""An encoder–decoder on the command line: `attention SOURCE [--target TARGET]` (or `--audio FILE` for Whisper)
writes the three kinds of maps; `transcribe --audio FILE [--timestamps]` writes what Whisper heard and when."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from mha_core.cli.common import CliError, add_model_arguments, load_chosen_model, positive_int, write_json
from mha_core.engine.loading.bundled import WHISPER_NAME

if TYPE_CHECKING:
    from mha_core.engine.loading.model import LoadedModel


def map_lists(maps: object, rows: int, cols: int) -> object:
    """(L,H,≥rows,≥cols) -> each layer's [H][rows][cols], written layer by layer."""
    return (maps[layer, :, :rows, :cols] for layer in range(maps.shape[0]))


def seq2seq_attention(model: LoadedModel, args: argparse.Namespace) -> dict:
    """`attention` on an encoder–decoder: the source's pieces (Whisper: its positions, labelled by time), the
    decoder's input pieces (its start piece first; without --target, the model's own greedy output), and every
    layer's encoder, decoder and cross-attention maps."""
    from mha_core.analysis.seq2seq.decode import decode
    from mha_core.engine.seq2seq.forward import encode, forward_seq2seq, target_batch, text_targets
    from mha_core.engine.seq2seq.frames import clip_positions
    from mha_core.engine.tokens import tokenize

    if args.heads is not None or args.rows is not None or args.pair is not None:
        raise CliError("an encoder–decoder writes every head of its three kinds of maps: no --heads, --rows or --pair")
    clip, source = audio_source(model, args) if model.arch.audio else (None, None)
    if source is None:
        from mha_core.cli.common import attention_text

        source = tokenize(model.tokenizer, attention_text(args), model.max_length)
    encoded = encode(model, source, args.path)
    if args.target is not None:
        targets = text_targets(model, [args.target], args.language or "en")
    else:
        targets = target_batch(model, [list(decode(model, source, new=64 if args.new is None else args.new,
                                                   encoded=encoded).ids)])
    result = forward_seq2seq(model, source, targets, args.path, encoded)
    s = result.encoder.lengths[0] if clip is None else clip_positions(clip.seconds, result.encoder.lengths[0])
    t, whole = result.decoder.lengths[0], result.decoder.n_tokens[0]
    if result.decoder.truncated[0]:
        print(f"note: the target has {whole:,} pieces; the decoder reads its first {t:,} (its window)",
              file=sys.stderr)
    return {"model": model.name, "source_tokens": list(result.source_tokens[0][:s]),
            "target_tokens": list(result.target_tokens[0]), "target_ids": result.target_ids(0),
            "encoder": map_lists(result.text_maps("encoder"), s, s),
            "decoder": map_lists(result.text_maps("decoder"), t, t),
            "cross": map_lists(result.text_maps("cross"), t, result.encoder.lengths[0]),
            "path": result.encoder.path, "backend": result.encoder.backend,
            "target_truncated": result.decoder.truncated[0], "target_pieces": whole,
            **({} if clip is None else {"seconds": round(clip.seconds, 3), "encoder_positions": s,
                                        "note": "encoder maps cover the clip's positions (20 ms each), not the "
                                                "silence that pads Whisper's 30-second window; cross-attention "
                                                "rows cover the whole window"})}


def audio_source(model: LoadedModel, args: argparse.Namespace) -> tuple[object, object]:
    """Whisper's source: the --audio file's clip and its frames batch."""
    from mha_core.engine.seq2seq.audio import model_log_mel, read_audio
    from mha_core.engine.seq2seq.frames import frames_batch

    if args.audio is None or args.text is not None:
        raise CliError(f"{model.name} hears audio: give --audio FILE (WAV, FLAC, OGG or MP3), not a text")
    clip = read_audio(Path(args.audio))
    return clip, frames_batch(model_log_mel(model, clip))


def cmd_transcribe(args: argparse.Namespace) -> None:
    from mha_core.analysis.seq2seq.transcribe import transcribe
    from mha_core.engine.seq2seq.audio import read_audio

    model = load_chosen_model(args)
    if not model.arch.audio:
        raise CliError(f"{model.name} does not hear audio: choose a Whisper model (--model whisper-base)")
    clip = read_audio(Path(args.audio))
    result = transcribe(model, clip, language=args.language, timestamps=args.timestamps, task=args.task)
    out = result.as_json(model.name)
    out["seconds"], out["cut"] = round(clip.seconds, 3), clip.cut
    if not args.timestamps:
        out.pop("words")
    write_json(out, args.json)


def add_seq2seq_arguments(p: argparse.ArgumentParser) -> None:
    """attention's options for an encoder–decoder."""
    p.add_argument("--target", help="an encoder–decoder's target text (default: the model's own greedy output)")
    p.add_argument("--audio", help="Whisper: the audio file (WAV, FLAC, OGG or MP3; the first 30 s are read)")
    p.add_argument("--language", help="Whisper: the spoken language's code, such as en or zh (default: detected)")
    p.add_argument("--new", type=positive_int, default=None, help="an encoder–decoder's own output: at most this "
                   "many pieces (default 64)")


def add_transcribe_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("transcribe", help="Whisper: what an audio file says, its language, and when each word is said")
    p.add_argument("--audio", required=True, help="WAV, FLAC, OGG or MP3; the first 30 s are read")
    p.add_argument("--language", default=None, help="the spoken language's code (default: detected)")
    p.add_argument("--timestamps", action="store_true", help="each word's start and end, from the alignment heads")
    p.add_argument("--task", choices=("transcribe", "translate"), default="transcribe",
                   help="translate: Whisper writes what is said in English (its words aligned with the speech)")
    add_model_arguments(p, default=WHISPER_NAME)  # the bundled model that hears
    p.add_argument("--json", default="-", help="output file, '-' for stdout")
    p.set_defaults(func=cmd_transcribe)
