"""`python -m mha_core attention`: every map of a text or a sentence pair, or chosen heads and rows of a long text."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from mha_core.cli.common import (
    CliError,
    add_model_arguments,
    attention_text,
    check_every_map,
    every_map,
    layer_heads,
    load_chosen_model,
    parse_rows,
    unique_heads,
    write_json,
)
from mha_core.cli.seq2seq import add_seq2seq_arguments
from mha_core.cli.vision import add_image_arguments
from mha_core.engine.paths import AUTO, PATHS

if TYPE_CHECKING:
    from mha_core.engine.loading.model import LoadedModel


def cmd_attention(args: argparse.Namespace) -> None:
    model = load_chosen_model(args)  # a name it does not list is refused first, before torch is imported
    from mha_core.engine.forward import run

    if model.arch.image:
        from mha_core.cli.vision import image_attention

        write_json(image_attention(model, args), args.json)
        return
    if args.image is not None:
        raise CliError(f"--image is for Vision Transformers (ViT, DeiT, DINOv2, CLIP); {model.name} {reads(model)}")
    if model.encoder_decoder:
        from mha_core.cli.seq2seq import seq2seq_attention

        write_json(seq2seq_attention(model, args), args.json)
        return
    if args.target is not None or args.audio is not None or args.new is not None:
        kind = "a decoder (to continue a text: generate --new N)" if model.causal else "an encoder"
        raise CliError(f"--target, --audio and --new are for encoder–decoders (T5, BART, Marian, Whisper); "
                       f"{model.name} is {kind}")
    if args.pair is not None:
        write_json(pair_attention(model, args), args.json)
        return
    text = attention_text(args)
    if args.heads is None:
        if args.rows is not None:
            raise CliError("--rows takes query rows of the heads chosen with --heads L:H[,L:H...]")
        check_full_output(model, text)
        write_json(every_map(model, run(model, text, path=args.path)), args.json)
        return
    write_json(chosen_attention(model, text, args), args.json)


def reads(model: LoadedModel) -> str:
    """What a model takes in, as the end of a sentence: "reads text", "hears audio", "reads images"."""
    return "hears audio" if model.arch.audio else "reads images" if model.arch.image else "reads text"


def pair_attention(model: LoadedModel, args: argparse.Namespace) -> dict:
    """`attention --pair A B`: the usual output of the pair, with each piece's token type and segment (0: A, 1: B,
    null: a special piece) and each head's share of attention crossing between the texts (analysis.pairs)."""
    from mha_core.analysis.heads.pairs import pair_shares
    from mha_core.engine.forward import run

    if args.text is not None or args.text_file is not None or args.heads is not None or args.rows is not None:
        raise CliError("--pair A B takes the two texts itself, every head: no text, --text-file, --heads or --rows")
    result = run(model, args.pair[0], path=args.path, pairs=[args.pair[1]])
    n = result.lengths[0]
    shares = pair_shares(result).as_json(model.name)
    return every_map(model, result, token_type_ids=result.batch.token_type_ids[0, :n].tolist(),
                     segments=list(result.batch.segments[0]),
                     pair_shares={name: shares[name] for name in ("a_to_b", "b_to_a", "to_specials")})


def check_full_output(model: LoadedModel, text: str) -> None:
    """Every map of a text over arch.MAX_PIECES pieces is too much to write: exit 2 with its size."""
    from mha_core.analysis.long.text import count_long_pieces

    check_every_map(model, count_long_pieces(model, text), "the text", "(and query rows with --rows A:B)")


MAX_WRITTEN = 120_000_000  # weights one output may hold (about a GB of JSON): one head's whole map at 8,192 pieces


def chosen_attention(model: LoadedModel, text: str, args: argparse.Namespace) -> dict:
    """The chosen heads' rows A:B over the whole text, rebuilt block by block (mha_core.analysis.long.text). Every
    argument is checked before any work: the heads (each once), the rows against the text's pieces, the size."""
    from mha_core.analysis.long.text import chosen_rows, count_long_pieces, run_long
    from mha_core.engine.forward import run
    from mha_core.engine.loading.model import for_long_texts

    heads = unique_heads(model, args.heads)
    n = count_long_pieces(model, text)
    start, stop = parse_rows(args.rows, n)
    weights = len(heads) * (stop - start) * n
    if weights > MAX_WRITTEN:
        raise CliError(f"{len(heads):,} head(s) × {stop - start:,} rows × {n:,} keys is {weights:,} weights, over the "
                       f"{MAX_WRITTEN:,} one output may hold: choose fewer heads or rows")
    # auto: q, k and the log-sum-exp kept (no map); a path asked for keeps what that path keeps
    result = run_long(model, text) if args.path == AUTO else run(for_long_texts(model), text, path=args.path)
    return {"model": model.name, **chosen_rows(result, heads, range(start, stop))}


def add_attention_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("attention", help="every layer's and head's attention map for one text, or chosen heads and "
                                         "rows of a long text (up to 8,192 pieces)")
    p.add_argument("text", nargs="?", help="the text (or --text-file)")
    p.add_argument("--text-file", help="read the text from this UTF-8 file")
    p.add_argument("--pair", nargs=2, metavar=("A", "B"), help="a sentence pair (an encoder: segments A and B), cut "
                   "together to the model's window (at most 1,024 pieces; the output then says truncated)")
    p.add_argument("--heads", type=layer_heads, help="only these heads, L:H[,L:H...] (0-based): needed over 1,024 "
                                                      "pieces")
    p.add_argument("--rows", help="only these query rows, A:B (0-based, B exclusive; with --heads)")
    add_seq2seq_arguments(p)
    add_image_arguments(p)
    add_model_arguments(p)
    p.add_argument("--path", choices=PATHS, default=AUTO)
    p.add_argument("--json", default="-", help="output file, '-' for stdout")
    p.set_defaults(func=cmd_attention)
