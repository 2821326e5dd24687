"""`index` builds a corpus index (in this process, or on Ray with --ray) and `search` searches one (issue 37)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mha_core.cli.common import (
    CliError,
    add_model_arguments,
    layer_heads,
    load_chosen_model,
    positive_int,
    write_json,
)

SUMMARY_KEYS = ("model", "layers", "corpus", "sentences", "pieces", "search", "left_out", "bytes", "bytes_per_piece",
                "built")


def layer_list(value: str) -> list[int]:
    """argparse type: "0,3,5" -> [0, 3, 5]."""
    parts = [part.strip() for part in value.split(",")]
    if not all(part.isdigit() for part in parts):
        raise argparse.ArgumentTypeError(f"{value!r} is not a list of layers, e.g. 0,3,5")
    return [int(part) for part in parts]


def add_index_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("index", help="index every piece of a corpus by its hidden states and heads' outputs")
    source = p.add_mutually_exclusive_group(required=True)
    source.add_argument("--conllu", help="a CoNLL-U file (words, parts of speech, relations)")
    source.add_argument("--text-file", help="plain text, one sentence per line")
    source.add_argument("--bundled", action="store_true", help="the app's own corpus (default --out: the app's cache, "
                        "where the app finds it)")
    add_model_arguments(p)
    p.add_argument("--layers", type=layer_list, default=None, help="0 = the embeddings ... L = the last layer's output "
                   "(default: 7 spread over the depth)")
    p.add_argument("--out", default=None, help="the index's folder (new, empty, or a stopped build to resume)")
    p.add_argument("--ray", nargs="?", const="local", default=None, metavar="ADDRESS",
                   help="run the model pass on Ray Data: a local Ray using every core, or a running cluster's address")
    p.add_argument("--workers", type=positive_int, default=None, help="with --ray: model replicas (default: every "
                   "core)")
    p.add_argument("--parse", action="store_true", help="with --text-file: words, parts of speech and relations from "
                   "spaCy's English parser")
    p.add_argument("--limit", type=positive_int, default=None, help="only the first N sentences")
    p.add_argument("--shard-pieces", type=positive_int, default=None, help="pieces a shard holds at most")
    p.add_argument("--json", default="-", help="where index.json's summary goes ('-': stdout)")
    p.set_defaults(func=cmd_index)
    s = sub.add_parser("search", help="the pieces of an index nearest to one piece of a sentence")
    s.add_argument("--index", required=True, help="an index folder (python -m mha_core index)")
    s.add_argument("--text", required=True)
    s.add_argument("--token", type=int, required=True, help="the piece, 0-based, the model's special pieces counted")
    s.add_argument("--layer", type=int, required=True, help="hidden_states[L]; with --heads, layer L's heads")
    s.add_argument("--heads", type=layer_heads, default=None, help="search by these heads' outputs, L:H[,L:H...]")
    s.add_argument("--top", type=positive_int, default=10)
    add_model_arguments(s)
    s.add_argument("--json", default="-")
    s.set_defaults(func=cmd_search)


def corpus_of(args: argparse.Namespace) -> tuple:
    from mha_core.analysis.index.build import bundled_sentences, conllu_corpus, text_corpus

    if args.parse and not args.text_file:
        raise CliError("--parse reads a --text-file with spaCy; CoNLL-U and the bundled corpus are already parsed")
    if args.bundled:
        return bundled_sentences()
    if args.conllu:
        return conllu_corpus(Path(args.conllu), args.limit)
    return text_corpus(Path(args.text_file), args.limit, args.parse)


def stderr_progress(stage: str, done: int, total: int) -> None:
    what = "shards" if stage == "shards" else "vector indexes"
    end = "\n" if done == total else "\r"
    print(f"{what}: {done}/{total}", end=end, file=sys.stderr, flush=True)


def cmd_index(args: argparse.Namespace) -> None:
    from mha_core.analysis.index.build import build_index
    from mha_core.analysis.index.passes import SHARD_PIECES
    from mha_core.analysis.index.store import read_manifest
    from mha_core.serving.computed.index import build_bundled, spread_layers

    if args.workers and args.ray is None:
        raise CliError("--workers sets Ray's model replicas: add --ray")
    if args.out is None and not args.bundled:
        raise CliError("give the index's folder with --out DIR")
    if args.out is None and (args.layers or args.ray or args.shard_pieces):
        raise CliError("--bundled without --out builds the app's own copy (its layers, in this process): give --out "
                       "DIR for --layers, --ray or --shard-pieces")
    model = load_chosen_model(args)
    if args.out is None:  # the app's own copy, as the app builds it (kept where it is there already)
        out = build_bundled(model, stderr_progress)
    else:
        out = args.out
        build_index(model, corpus_of(args), args.layers or spread_layers(model.n_layers), out, args.ray,
                    args.workers, args.shard_pieces or SHARD_PIECES, stderr_progress)
    manifest = read_manifest(Path(out)).data
    write_json({"folder": str(out), **{key: manifest[key] for key in SUMMARY_KEYS}}, args.json)


def cmd_search(args: argparse.Namespace) -> None:
    from mha_core.analysis.index.search import search_text
    from mha_core.analysis.index.store import OpenIndex

    index = OpenIndex(args.index)
    heads = tuple(args.heads or ())
    layers = {layer for layer, _ in heads}
    if layers - {args.layer}:
        raise CliError(f"--heads names heads of layer {', '.join(map(str, sorted(layers)))} and --layer is "
                       f"{args.layer}: a search reads the heads of its own layer")
    if args.model is None and args.model_dir is None:
        args.model = index.manifest.model  # the index's own model
    model = load_chosen_model(args)
    found = search_text(index, model, args.text, args.token, args.layer, tuple(h for _, h in heads), args.top)
    write_json(found.as_json(), args.json)
