"""`efficiency TEXT --pattern SPEC --json OUT`: what a sparse or linear pattern changes in a model's attention and
answers; `efficiency --bench --lengths 2048,8192 --json OUT`: one layer's attention of the model timed (and its peak
memory measured) by the explicit, fused, window and linear kernels."""

from __future__ import annotations

import argparse

from mha_core.cli.common import CliError, add_model_arguments, load_chosen_model, progress_bar, write_json


def lengths_list(text: str) -> list[int]:
    try:
        lengths = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: lengths are whole numbers separated by commas") from None
    if not lengths or min(lengths) < 2:
        raise argparse.ArgumentTypeError(f"{text!r}: give at least one length of 2 pieces or more")
    return lengths


def layers_list(text: str) -> list[int]:
    try:
        return [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: layers are numbers separated by commas (0-based)") from None


def cmd_efficiency(args: argparse.Namespace) -> None:
    model = load_chosen_model(args)
    if args.bench:
        from mha_core.analysis.efficiency.cost import KERNELS, attention_cost, check_cost_inputs, model_shape

        kernels = args.kernels.split(",") if args.kernels else list(KERNELS)
        check_cost_inputs(args.lengths, kernels, *model_shape(model), args.window)  # before the bar: one line
        bar, update = progress_bar("lengths timed, then each kernel's peak memory")
        try:
            cost = attention_cost(args.lengths, *model_shape(model), kernels=kernels, window=args.window,
                                  progress=update)
        finally:
            bar.close()
        write_json({"model": model.name, **cost.as_json()}, args.json)
        return
    if args.text is None or args.pattern is None:
        raise CliError("give TEXT and --pattern (or --bench --lengths)")
    from mha_core.analysis.efficiency.fidelity import with_pattern

    write_json(with_pattern(model, args.text, args.pattern, args.layers).as_json(), args.json)


def add_efficiency_parser(sub: argparse._SubParsersAction) -> None:
    from mha_core.analysis.efficiency.choices import SPEC_HELP, WINDOW

    p = sub.add_parser("efficiency", help="what a sparse or linear attention pattern changes (TEXT --pattern), or "
                       "the measured cost of attention's kernels (--bench)")
    p.add_argument("text", nargs="?", default=None)
    add_model_arguments(p)
    p.add_argument("--pattern", default=None, help=SPEC_HELP)
    p.add_argument("--layers", type=layers_list, default=None, help="the layers the pattern applies to (default all)")
    p.add_argument("--bench", action="store_true", help="time one layer's attention by each kernel")
    p.add_argument("--lengths", type=lengths_list, default=[2048, 8192], help="for --bench: pieces, comma-separated")
    p.add_argument("--kernels", default=None, help="for --bench: explicit,fused,window,linear (default all)")
    p.add_argument("--window", type=int, default=WINDOW, help="for --bench: the window kernel's W")
    p.add_argument("--json", default="-", help="output file, '-' for stdout")
    p.set_defaults(func=cmd_efficiency)
