"""The command line: `python -m mha_core attention|ablate|translate|align|params|roles|index|search|prepare|…
--json OUT`, and `app`, the web app.

Bad input exits with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn, TypeVar

from mha_core.cli.app import add_app_parser
from mha_core.cli.attention import add_attention_parser
from mha_core.cli.common import (
    CliError,
    add_model_arguments,
    layer_head,
    load_chosen_model,
    positive_int,
    progress_bar,
    write_json,
)
from mha_core.cli.efficiency import add_efficiency_parser
from mha_core.cli.explain import add_explain_parser
from mha_core.cli.index import add_index_parsers
from mha_core.cli.prepare import add_prepare_parser
from mha_core.cli.seq2seq import add_transcribe_parser
from mha_core.cli.translation import add_translation_parsers
from mha_core.cli.vision import positive_side
from mha_core.messages import Explained

T = TypeVar("T")


def cmd_models(args: argparse.Namespace) -> None:
    from mha_core.serving.menu import available_models

    write_json([choice.as_json() for choice in available_models()], args.json)


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr and exit 2, like every other bad input (no usage block)."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def cmd_ablate(args: argparse.Namespace) -> None:
    from mha_core.analysis.lm.ablation import ablation_grid

    model = load_chosen_model(args)
    grid = ablation_grid(model, args.text, args.mode, args.measure, target=args.target, position=args.position)
    write_json(grid.as_json(model.name), args.json)


def add_ablate_parser(sub: argparse._SubParsersAction) -> None:
    from mha_core.analysis.lm.choices import MEASURE_HELP, MEASURES, MODES

    p = sub.add_parser("ablate", help="the effect of removing each head alone on the model's output")
    p.add_argument("text")
    add_model_arguments(p)
    p.add_argument("--mode", choices=MODES, default="zero")
    p.add_argument("--measure", choices=MEASURES, default=None,
                   help="; ".join(f"{m}: {MEASURE_HELP[m]}" for m in MEASURES).replace("%", "%%")
                   + " (default: embedding for encoders, loss for decoders)")
    p.add_argument("--target", default=None, help="the token whose log-probability the target measure follows")
    p.add_argument("--position", type=int, default=None, help="the position it follows (default: the last)")
    p.add_argument("--json", default="-", help="output file, '-' for stdout")
    p.set_defaults(func=cmd_ablate)


def cmd_predictions(args: argparse.Namespace) -> None:
    """predict, lens, attribute, patch, generate: what the model predicts and which heads write it (issue 21)."""
    from mha_core.analysis.lm import generate, patching, predict

    model = load_chosen_model(args)
    if args.command == "predict":
        result = predict.predict(model, args.text, args.position, args.top)
    elif args.command == "lens":
        result = predict.logit_lens(model, args.text)
    elif args.command == "attribute":
        result = predict.attribute(model, args.text, args.answer, args.wrong, args.position)
    elif args.command == "generate":
        result = generate.generate(model, args.text, args.new, args.temperature, args.top_k, args.seed,
                                   chat=args.chat)
    else:
        result = patching.patch_grid(model, args.text, args.corrupted, args.answer, args.wrong, args.what, args.head)
    write_json(result.as_json(model.name), args.json)


def add_prediction_parsers(sub: argparse._SubParsersAction) -> None:
    from mha_core.analysis.lm.choices import HEADS, TOP_K, WHAT

    one_piece = "one piece of the model's vocabulary, with its leading space where the tokenizer marks one"
    parsers = {
        "predict": sub.add_parser("predict", help="the most likely next pieces after a position"),
        "lens": sub.add_parser("lens", help="the logit lens: every layer's top next piece at every position"),
        "attribute": sub.add_parser("attribute", help="direct logit attribution of every head and MLP"),
        "patch": sub.add_parser("patch", help="activation patching of a corrupted text with a clean one"),
        "generate": sub.add_parser("generate", help="continue the text, one piece at a time (key/value cache)"),
    }
    for name, p in parsers.items():
        p.add_argument("text", help="the (clean) text")
        if name == "patch":
            p.add_argument("corrupted", help="the corrupted text, with as many pieces as the clean one")
        add_model_arguments(p)
        if name in ("predict", "attribute"):
            p.add_argument("--position", type=int, default=None, help="0-based piece (default: the last)")
        if name == "attribute":
            p.add_argument("--answer", required=True, help=one_piece)
            p.add_argument("--wrong", default=None, help=one_piece)
        if name == "patch":
            no_head = "; a model without a language-model head takes neither: it reads the coreference margin"
            p.add_argument("--answer", default=None, help=one_piece + no_head)
            p.add_argument("--wrong", default=None, help=one_piece + no_head)
        p.add_argument("--json", default="-", help="output file, '-' for stdout")
        p.set_defaults(func=cmd_predictions)
    parsers["predict"].add_argument("--top", type=positive_int, default=TOP_K)
    parsers["patch"].add_argument("--what", choices=WHAT, default=HEADS,
                                  help="heads: every head; residual: every layer and position; head: --head's "
                                       "output, position by position")
    parsers["patch"].add_argument("--head", type=layer_head, default=None, help="L:H, 0-based, for --what head")
    parsers["generate"].add_argument("--new", type=positive_int, default=32, help="new pieces, at most 64")
    parsers["generate"].add_argument("--temperature", type=float, default=0.0, help="0: the most likely piece")
    parsers["generate"].add_argument("--top-k", type=positive_int, default=None)
    parsers["generate"].add_argument("--seed", type=int, default=0, help="the same seed gives the same text")
    parsers["generate"].add_argument("--chat", action="store_true",
                                     help="answer TEXT as a user's message in the tokenizer's chat template")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="python -m mha_core", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    add_attention_parser(sub)
    add_ablate_parser(sub)
    add_prediction_parsers(sub)
    add_params_parser(sub)
    add_corpus_parsers(sub)
    add_transcribe_parser(sub)
    add_translation_parsers(sub)
    add_efficiency_parser(sub)
    add_explain_parser(sub)
    add_index_parsers(sub)
    add_prepare_parser(sub)
    add_app_parser(sub)
    models = sub.add_parser("models", help="the models this machine lists: bundled, $MHA_MODELS_DIR, HF cache")
    models.add_argument("--json", default="-", help="output file, '-' for stdout")
    models.set_defaults(func=cmd_models)
    return parser


def cmd_params(args: argparse.Namespace) -> None:
    from mha_core.analysis.params.shapes import ShapeError

    calculator = (args.d_model, args.heads, args.kv_heads, args.d_k, args.d_v)
    if any(v is not None for v in calculator) or args.no_bias:
        if args.d_model is None or args.heads is None:
            raise CliError("the calculator needs both --d-model and --heads")
        try:
            write_json(shape_json(args), args.json)
        except ShapeError as err:
            raise CliError(str(err)) from None
        return
    write_json(model_json(args), args.json)


def shape_json(args: argparse.Namespace) -> dict:
    from dataclasses import asdict

    from mha_core.analysis.params.shapes import count_shape, make_shape

    shape = make_shape(args.d_model, args.heads, args.d_k, args.d_v, args.kv_heads, not args.no_bias)
    count = count_shape(shape)
    return {"shape": asdict(shape), "kind": shape.kind, "per_matrix": count.per_matrix, "total": count.total,
            "torch_multihead_attention_total": count.torch_mha_total}


def model_json(args: argparse.Namespace) -> dict:
    from dataclasses import asdict

    from mha_core.analysis.params.counts import head_count, model_breakdown

    model = load_chosen_model(args)
    breakdown = model_breakdown(model)
    layers = [{"layer": i, "params": {r.part: r.count for r in breakdown.rows if r.group == f"layer {i}"},
               "total": breakdown.group_total(f"layer {i}")} for i in range(model.n_layers)]
    return {
        "model": model.name, "layers": layers,
        "embeddings": {r.part: r.count for r in breakdown.rows if r.group == "embeddings"},
        "pooler": {r.part: r.count for r in breakdown.rows if r.group == "pooler"},
        "total": breakdown.total, "attention_total": breakdown.attention_total,
        "per_head": asdict(head_count(model)),
    }


def read_corpus(reader: Callable[[Path, int | None], T], path: str, limit: int | None) -> T:
    from mha_core.analysis.corpus.readers import CorpusFormatError

    try:
        return reader(Path(path), limit)
    except CorpusFormatError as err:
        raise CliError(f"{path}: {err}") from None


def cmd_roles(args: argparse.Namespace) -> None:
    from mha_core.analysis.corpus.readers import read_conllu
    from mha_core.analysis.corpus.syntax import analyse_syntax

    if args.images is not None:
        from mha_core.cli.vision import image_roles

        write_json(image_roles(load_chosen_model(args), args), args.json)
        return
    sentences = read_corpus(read_conllu, args.conllu, args.limit)
    model = load_chosen_model(args)
    bar, update = progress_bar("syntactic heads")
    result = analyse_syntax(model, sentences, progress=update)
    bar.close()
    write_json(result.as_json(), args.json)


def cmd_coref(args: argparse.Namespace) -> None:
    from mha_core.analysis.coref.gap import analyse_coref
    from mha_core.analysis.corpus.readers import read_gap

    rows = read_corpus(read_gap, args.gap, args.limit)
    model = load_chosen_model(args)
    bar, update = progress_bar("coreference heads")
    result = analyse_coref(model, rows.examples, progress=update)
    bar.close()
    write_json(result.counting(rows).as_json(), args.json)


def cmd_head_distances(args: argparse.Namespace) -> None:
    from mha_core.analysis.corpus.passes import corpus_pass, selection_note
    from mha_core.analysis.corpus.readers import read_conllu, read_text_lines

    if args.conllu is not None:  # each sentence as typed: its `# text` line
        texts = [sentence.text for sentence in read_corpus(read_conllu, args.conllu, args.limit)]
    else:
        texts = read_corpus(read_text_lines, args.text_file, args.limit)
    model = load_chosen_model(args)
    bar, update = progress_bar("head distances")
    result = corpus_pass(model, texts, update, keep_vectors=False, with_roles=False)
    bar.close()
    selection = result.selection
    if selection.left_out:
        print(selection_note(selection, "line" if args.text_file else "sentence"), file=sys.stderr)
    write_json({"sentences": len(result.texts), "heads": [list(h) for h in result.heads],
                "left_out": {"unreadable": list(selection.unreadable), "too_long": list(selection.too_long),
                             "beyond_cap": selection.beyond_cap},
                "distance": result.distance.round(8).tolist(), "query_rows": result.rows, "model": model.name},
               args.json)


def add_corpus_parsers(sub: argparse._SubParsersAction) -> None:
    roles = sub.add_parser("roles", help="Clark et al.'s syntactic-head analysis of a CoNLL-U file, or a Vision "
                           "Transformer's heads over a folder of images")
    corpus = roles.add_mutually_exclusive_group(required=True)
    corpus.add_argument("--conllu", help="a CoNLL-U file (a text model)")
    corpus.add_argument("--images", help="a folder of PNG, JPEG or WebP images (a Vision Transformer)")
    roles.add_argument("--size", type=positive_side, default=None,
                       help="with --images: square each image to this many pixels a side (default: prepared as the "
                            "model's image processor prepares it)")
    coref = sub.add_parser("coref", help="coreference heads on a GAP TSV file")
    coref.add_argument("--gap", required=True)
    distances = sub.add_parser("head-distances", help="mean Jensen-Shannon divergence between every pair of heads "
                               "over a corpus (Clark et al. 2019)")
    source = distances.add_mutually_exclusive_group(required=True)
    source.add_argument("--conllu", help="a CoNLL-U file (each sentence's # text line)")
    source.add_argument("--text-file", help="plain text, one sentence per line")
    for p, func in ((roles, cmd_roles), (coref, cmd_coref), (distances, cmd_head_distances)):
        add_model_arguments(p)
        p.add_argument("--limit", type=positive_int, default=None, help="use only the first N sentences / examples")
        p.add_argument("--json", default="-")
        p.set_defaults(func=func)


def add_params_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("params", help="parameter counts of the model, or of any attention shape")
    add_model_arguments(p)
    p.add_argument("--d-model", type=int, default=None, help="calculator: model width")
    p.add_argument("--heads", type=int, default=None, help="calculator: number of query heads")
    p.add_argument("--kv-heads", type=int, default=None, help="calculator: key/value heads (GQA/MQA)")
    p.add_argument("--d-k", type=int, default=None)
    p.add_argument("--d-v", type=int, default=None)
    p.add_argument("--no-bias", action="store_true")
    p.add_argument("--json", default="-")
    p.set_defaults(func=cmd_params)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        args.func(args)
        sys.stdout.flush()  # a reader that stopped early is found here, not at the interpreter's exit
    except BrokenPipeError:  # `... --json - | head`: the reader has what it wanted; no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # what is left in the buffer goes nowhere
        return 1
    except (CliError, Explained) as err:  # the project's errors: each one sentence
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
