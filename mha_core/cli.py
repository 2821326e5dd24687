"""The command line: `python -m mha_core attention|ablate|params|roles|coref|head-distances ... --json OUT`.

Bad input exits with status 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn, TypeVar

from mha_core.analysis.shapes import ShapeError
from mha_core.engine.attention import AUTO, PATHS
from mha_core.engine.model import ModelLoadError, for_long_texts
from mha_core.engine.tokens import InputError

if TYPE_CHECKING:
    from mha_core.engine.model import LoadedModel

T = TypeVar("T")


class CliError(Exception):
    """A user-facing error raised by a subcommand."""


def positive_int(value: str) -> int:
    """argparse type: a whole number >= 1 (argparse turns the ValueError into exit 2 with one line)."""
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {number}")
    return number


def add_model_arguments(p: argparse.ArgumentParser) -> None:
    from mha_core.engine.bundled import ENCODER_NAME

    group = p.add_mutually_exclusive_group()
    group.add_argument("--model", default=None, help=f"a listed model: bundled, in $MHA_MODELS_DIR or in the Hugging "
                       f"Face cache (python -m mha_core models; default: {ENCODER_NAME})")
    group.add_argument("--model-dir", default=None, help="a local model directory (see README: supported families)")


def load_chosen_model(args: argparse.Namespace) -> LoadedModel:
    from mha_core import load_model
    from mha_core.serving.menu import available_models

    if args.model is not None:
        choices = {choice.name: choice for choice in available_models()}
        if args.model not in choices:
            raise CliError(f"{args.model!r} is not a listed model: {', '.join(choices)} (python -m mha_core models)")
        if choices[args.model].refused:
            raise CliError(choices[args.model].refused)
        return load_model(choices[args.model].path)
    return load_model(args.model_dir)


def cmd_models(args: argparse.Namespace) -> None:
    from mha_core.serving.menu import available_models

    write_json([choice.as_json() for choice in available_models()], args.json)


def write_json(data: object, out: str) -> None:
    """Write `data` to `out` ("-" for stdout) as it is made (serving.export.stream_json: a generator in it is written
    an item at a time, so an output of a gigabyte never exists in memory)."""
    from mha_core.serving.export import stream_json

    if out == "-":
        stream_json(data, sys.stdout.write)
        sys.stdout.write("\n")
        return
    try:
        with Path(out).open("w", encoding="utf-8") as file:
            stream_json(data, file.write)
    except OSError as err:
        raise CliError(f"cannot write {out}: {err.strerror}") from None


def cmd_attention(args: argparse.Namespace) -> None:
    from mha_core import run

    model = load_chosen_model(args)
    if args.pair is not None:
        write_json(pair_attention(model, args), args.json)
        return
    text = attention_text(args)
    if args.heads is None:
        if args.rows is not None:
            raise CliError("--rows takes query rows of the heads chosen with --heads L:H[,L:H...]")
        check_full_output(model, text)
        result = run(model, text, path=args.path)
        write_json({
            "tokens": list(result.tokens[0]),
            "attention": (result.text_layer_maps(0, layer) for layer in range(model.n_layers)),  # written as made
            "path": result.path,
            "backend": result.backend,
            "truncated": result.truncated[0],
            "n_tokens": result.n_tokens[0],
            "model": model.name,
        }, args.json)
        return
    write_json(chosen_attention(model, text, args), args.json)


def pair_attention(model: LoadedModel, args: argparse.Namespace) -> dict:
    """`attention --pair A B`: the usual output of the pair, with each piece's token type and segment (0: A, 1: B,
    null: a special piece)."""
    from mha_core import run

    if args.text is not None or args.text_file is not None or args.heads is not None or args.rows is not None:
        raise CliError("--pair A B takes the two texts itself, every head: no text, --text-file, --heads or --rows")
    result = run(model, args.pair[0], path=args.path, pairs=[args.pair[1]])
    n = result.lengths[0]
    return {"tokens": list(result.tokens[0]), "token_type_ids": result.batch.token_type_ids[0, :n].tolist(),
            "segments": list(result.batch.segments[0]),
            "attention": (result.text_layer_maps(0, layer) for layer in range(model.n_layers)),
            "path": result.path, "backend": result.backend, "truncated": result.truncated[0],
            "n_tokens": result.n_tokens[0], "model": model.name}


def attention_text(args: argparse.Namespace) -> str:
    """The text given as an argument or in --text-file (exactly one of them)."""
    if (args.text is None) == (args.text_file is None):
        raise CliError("give the text either as an argument or with --text-file FILE, not both or neither")
    if args.text is not None:
        return args.text
    from mha_core.analysis.corpora import CorpusFormatError, read_text

    try:
        return read_text(Path(args.text_file))  # as the page's .txt upload: a BOM dropped, at most 200,000 characters
    except CorpusFormatError as err:
        raise CliError(f"{args.text_file}: {err}") from None


def check_full_output(model: LoadedModel, text: str) -> None:
    """Every map of a text over arch.MAX_PIECES pieces is too much to write: exit 2 with its size."""
    from mha_core.analysis.long_text import count_long_pieces, is_long

    n = count_long_pieces(model, text)
    if is_long(n):
        numbers = model.n_layers * model.n_heads * n * n
        raise CliError(f"the text has {n:,} pieces: every map would be {numbers:,} numbers (about "
                       f"{numbers * 10 / 2**30:,.0f} GB of JSON); choose heads with --heads L:H[,L:H...] (and "
                       f"query rows with --rows A:B)")


MAX_WRITTEN = 120_000_000  # weights one output may hold (about a GB of JSON): one head's whole map at 8,192 pieces


def chosen_attention(model: LoadedModel, text: str, args: argparse.Namespace) -> dict:
    """The chosen heads' rows A:B over the whole text, rebuilt block by block (mha_core.analysis.long_text). Every
    argument is checked before any work: the heads (each once), the rows against the text's pieces, the size."""
    from mha_core import run
    from mha_core.analysis.long_text import chosen_rows, count_long_pieces, run_long
    from mha_core.analysis.patching import check_head

    heads = list(dict.fromkeys(check_head(model, head) for head in args.heads))  # each head once, range-checked
    n = count_long_pieces(model, text)
    start, stop = parse_rows(args.rows, n)
    weights = len(heads) * (stop - start) * n
    if weights > MAX_WRITTEN:
        raise CliError(f"{len(heads):,} head(s) × {stop - start:,} rows × {n:,} keys is {weights:,} weights, over the "
                       f"{MAX_WRITTEN:,} one output may hold: choose fewer heads or rows")
    # auto: q, k and the log-sum-exp kept (no map); a path asked for keeps what that path keeps
    result = run_long(model, text) if args.path == AUTO else run(for_long_texts(model), text, path=args.path)
    return {"model": model.name, **chosen_rows(result, heads, range(start, stop))}


def layer_heads(value: str) -> list[tuple[int, int]]:
    """argparse type: "3:1,0:5" -> [(3, 1), (0, 5)], each part read by layer_head."""
    return [layer_head(part.strip()) for part in value.split(",")]


def parse_rows(spec: str | None, n: int) -> tuple[int, int]:
    """"A:B" -> (A, B), 0-based, B exclusive, within the text's n pieces; None: every row."""
    if spec is None:
        return 0, n
    start, _, stop = spec.partition(":")
    if not (start.isdigit() and stop.isdigit()) or not int(start) < int(stop) <= n:
        raise CliError(f"--rows takes A:B with 0 <= A < B <= {n:,} (the text's pieces), not {spec!r}")
    return int(start), int(stop)


def add_attention_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("attention", help="every layer's and head's attention map for one text, or chosen heads and "
                                         "rows of a long text (up to 8,192 pieces)")
    p.add_argument("text", nargs="?", help="the text (or --text-file)")
    p.add_argument("--text-file", help="read the text from this UTF-8 file")
    p.add_argument("--pair", nargs=2, metavar=("A", "B"), help="a sentence pair (an encoder: segments A and B)")
    p.add_argument("--heads", type=layer_heads, help="only these heads, L:H[,L:H...] (0-based): needed over 1,024 "
                                                      "pieces")
    p.add_argument("--rows", help="only these query rows, A:B (0-based, B exclusive; with --heads)")
    add_model_arguments(p)
    p.add_argument("--path", choices=PATHS, default=AUTO)
    p.add_argument("--json", default="-", help="output file, '-' for stdout")
    p.set_defaults(func=cmd_attention)


class OneLineParser(argparse.ArgumentParser):
    """Bad arguments: one line on stderr and exit 2, like every other bad input (no usage block)."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message}", file=sys.stderr)
        sys.exit(2)


def cmd_ablate(args: argparse.Namespace) -> None:
    from mha_core.analysis.ablation import ablation_grid

    model = load_chosen_model(args)
    grid = ablation_grid(model, args.text, args.mode, args.measure, target=args.target, position=args.position)
    write_json(grid.as_json(model.name), args.json)


def add_ablate_parser(sub: argparse._SubParsersAction) -> None:
    from mha_core.analysis.ablation import MEASURE_HELP, MEASURES, MODES

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
    from mha_core.analysis import generate, patching, predict

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


def layer_head(value: str) -> tuple[int, int]:
    """'L:H' -> (L, H), both 0-based."""
    layer, sep, head = value.partition(":")
    if not (sep and layer.strip().isdigit() and head.strip().isdigit()):
        raise argparse.ArgumentTypeError(f"{value!r} is not LAYER:HEAD, e.g. 2:3 (0-based)")
    return int(layer), int(head)


def add_prediction_parsers(sub: argparse._SubParsersAction) -> None:
    from mha_core.analysis.patching import HEADS, WHAT
    from mha_core.analysis.predict import TOP_K

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
    models = sub.add_parser("models", help="the models this machine lists: bundled, $MHA_MODELS_DIR, HF cache")
    models.add_argument("--json", default="-", help="output file, '-' for stdout")
    models.set_defaults(func=cmd_models)
    return parser


def cmd_params(args: argparse.Namespace) -> None:
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

    from mha_core.analysis.shapes import count_shape, make_shape

    shape = make_shape(args.d_model, args.heads, args.d_k, args.d_v, args.kv_heads, not args.no_bias)
    count = count_shape(shape)
    return {"shape": asdict(shape), "kind": shape.kind, "per_matrix": count.per_matrix, "total": count.total,
            "torch_multihead_attention_total": count.torch_mha_total}


def model_json(args: argparse.Namespace) -> dict:
    from dataclasses import asdict

    from mha_core.analysis.params import head_count, model_breakdown

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


def progress_bar(desc: str) -> tuple[object, Callable[[int, int], None]]:
    """A tqdm bar on stderr and the (done, total) callback that drives it."""
    from tqdm import tqdm

    bar = tqdm(desc=desc, unit="text", file=sys.stderr, dynamic_ncols=True)

    def update(done: int, total: int) -> None:
        bar.total = total
        bar.n = done
        bar.refresh()

    return bar, update


def read_corpus(reader: Callable[[Path, int | None], T], path: str, limit: int | None) -> T:
    from mha_core.analysis.corpora import CorpusFormatError

    try:
        return reader(Path(path), limit)
    except CorpusFormatError as err:
        raise CliError(f"{path}: {err}") from None


def cmd_roles(args: argparse.Namespace) -> None:
    from mha_core.analysis.corpora import read_conllu
    from mha_core.analysis.syntax import analyse_syntax

    sentences = read_corpus(read_conllu, args.conllu, args.limit)
    model = load_chosen_model(args)
    bar, update = progress_bar("syntactic heads")
    result = analyse_syntax(model, sentences, progress=update)
    bar.close()
    write_json(result.as_json(), args.json)


def cmd_coref(args: argparse.Namespace) -> None:
    from mha_core.analysis.coref_gap import analyse_coref
    from mha_core.analysis.corpora import read_gap

    rows = read_corpus(read_gap, args.gap, args.limit)
    model = load_chosen_model(args)
    bar, update = progress_bar("coreference heads")
    result = analyse_coref(model, rows.examples, progress=update)
    bar.close()
    write_json(result.counting(rows).as_json(), args.json)


def cmd_head_distances(args: argparse.Namespace) -> None:
    from mha_core.analysis.corpora import read_conllu, read_text_lines
    from mha_core.analysis.corpus_pass import corpus_pass, selection_note

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
    roles = sub.add_parser("roles", help="Clark et al.'s syntactic-head analysis of a CoNLL-U file")
    roles.add_argument("--conllu", required=True)
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
    except (CliError, InputError, ModelLoadError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0
