"""`explain TEXT --model M [--answer WORD --wrong WORD] --methods attention,rollout,gradxattn,ig,occlusion --json
OUT`: attention beside gradient attributions and occlusion for one target, each measured for faithfulness (issue 81);
`explain --dataset corpus|gap --model M --json OUT`: the faithfulness table over data.
"""

from __future__ import annotations

import argparse

from mha_core.cli.common import (
    CliError,
    add_model_arguments,
    layer_head,
    load_chosen_model,
    positive_int,
    progress_bar,
    write_json,
)


def method_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def cmd_explain(args: argparse.Namespace) -> None:
    from mha_core.analysis.explain.choices import METHODS
    from mha_core.analysis.explain.explain import explain

    if (args.text is None) == (args.dataset is None):
        raise CliError("give TEXT or --dataset corpus|gap")
    model = load_chosen_model(args)
    if args.dataset is not None:
        from mha_core.analysis.explain.dataset import dataset_table

        bar, update = progress_bar(f"explaining {args.dataset} texts")
        try:
            table = dataset_table(model, args.dataset, args.limit, args.gap_file, args.steps, args.methods or METHODS,
                                  args.seed, update)
        finally:
            bar.close()
        write_json(table.as_json(), args.json)
        return
    found = explain(model, args.text, args.answer, args.wrong, args.methods, args.steps, args.baseline, args.head,
                    curves=args.curves, block=args.block)
    write_json(found.as_json(), args.json)


def add_explain_parser(sub: argparse._SubParsersAction) -> None:
    from mha_core.analysis.explain.choices import BASELINES, CURVES, DEFAULT_STEPS, MAX_STEPS, METHODS, SHORT

    p = sub.add_parser("explain", help="attention beside gradient attributions and occlusion for one target, each "
                       "measured for faithfulness (comprehensiveness, sufficiency)")
    p.add_argument("text", nargs="?", default=None, help="the text; for a Vision Transformer (DINOv2, ViT) an image "
                   "file, explained by the cosine of its final [CLS] to its own, patch by patch")
    add_model_arguments(p)
    p.add_argument("--answer", default=None, help="the word whose piece the decoder (or a masked-LM head) should "
                   "predict; default: the model's own prediction (an encoder without such a head: the "
                   "coreference margin of the text's first pronoun)")
    p.add_argument("--wrong", default=None, help="a wrong word: the target is then logit(answer) - logit(wrong)")
    p.add_argument("--methods", type=method_list, default=None,
                   help=f"comma-separated, from {','.join(METHODS)} (--dataset: default all; an image: attention, "
                   "rollout, inputxgrad, gradxattn, ig, occlusion)")
    p.add_argument("--steps", type=int, default=DEFAULT_STEPS, help=f"Integrated Gradients' steps (1 to {MAX_STEPS})")
    p.add_argument("--baseline", choices=BASELINES, default=BASELINES[0],
                   help="Integrated Gradients' baseline: zero or the padding piece's embedding (special pieces keep "
                   "their own)")
    p.add_argument("--head", type=layer_head, default=None,
                   help="LAYER,HEAD for attention_head (default: the head whose output matters most to the target)")
    p.add_argument("--block", type=positive_int, default=None, help="an image's occlusion: blocks of this many "
                   "patches a side (default: the smallest that runs at most 64 copies)")
    p.add_argument("--curves", choices=CURVES, default=SHORT,
                   help="the deletion and insertion curves at every number of words removed (full), or at 0, 1, 2, 3, "
                   "5 and all (short: the runs comprehensiveness and sufficiency need, and one)")
    p.add_argument("--dataset", choices=("corpus", "gap"), default=None,
                   help="instead of TEXT: the faithfulness table over the bundled corpus or a GAP file (decoders)")
    p.add_argument("--limit", type=positive_int, default=20,
                   help="for --dataset: explain texts until this many are explained (those whose target cannot be "
                   "read are counted as skipped)")
    p.add_argument("--seed", type=int, default=0, help="for --dataset: the seed of the sample's order")
    p.add_argument("--gap-file", default=None, help="for --dataset gap: a GAP TSV file")
    p.add_argument("--json", default="-", help="output file, '-' for stdout")
    p.set_defaults(func=cmd_explain)
