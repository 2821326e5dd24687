"""Issue 21 §4: activation patching on a minimal pair, against hooks on transformers' own models and its
invariants, with the logit difference or (no language-model head) the coreference margin."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.heads.roles import ranked_heads
from mha_core.analysis.lm.head import token_id
from mha_core.analysis.lm.patching import COREF_MARGIN, HEAD, HEADS, RESIDUAL, patch_grid
from mha_core.engine.tokens import InputError
from tests.lm_models import CORRUPTED, CORRUPTED_SENTENCE, SENTENCE, TEXT, prompt_ids, reference


def test_residual_patching_at_the_changed_piece_gives_back_the_clean_run(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    grid = patch_grid(model, TEXT, CORRUPTED, "animal", "street", what=RESIDUAL)
    changed = [i for i, (a, b) in enumerate(zip(TEXT.split(), CORRUPTED.split(), strict=True)) if a != b]
    t = changed[0] + 1  # the decoder's first piece is prepended ([CLS] here)
    assert grid.effects.shape == (2, len(grid.tokens))
    assert grid.effects[0, t] == pytest.approx(grid.clean, abs=1e-4)  # the only difference, put back at the start
    assert np.allclose(grid.effects[:, :t], grid.corrupted, atol=1e-4)  # same pieces: nothing to put back
    assert grid.recovered[0, t] == pytest.approx(1.0, abs=1e-3)


def test_head_patching_equals_a_hook_on_transformers_own_model(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    grid = patch_grid(model, TEXT, CORRUPTED, "animal", "street", what=HEADS)
    ref = reference(lm_dirs["llama-tied"])
    ids = {text: prompt_ids(model, text) for text in (TEXT, CORRUPTED)}
    a, b = token_id(model, "animal"), token_id(model, "street")
    clean_inputs = {}
    hooks = [layer.self_attn.o_proj.register_forward_pre_hook(
        lambda module, args, layer=i: clean_inputs.__setitem__(layer, args[0].clone()))
        for i, layer in enumerate(ref.model.layers)]
    with torch.no_grad():
        ref(ids[TEXT])
    for hook in hooks:
        hook.remove()
    dh = model.head_dim
    for layer, head in ((0, 1), (1, 3)):
        def put_back(module, args, layer=layer, head=head):
            patched = args[0].clone()
            patched[..., head * dh:(head + 1) * dh] = clean_inputs[layer][..., head * dh:(head + 1) * dh]
            return (patched,)

        hook = ref.model.layers[layer].self_attn.o_proj.register_forward_pre_hook(put_back)
        with torch.no_grad():
            logits = ref(ids[CORRUPTED]).logits[0, -1]
        hook.remove()
        assert grid.effects[layer, head] == pytest.approx(float(logits[a] - logits[b]), abs=1e-4)



def test_one_head_patched_position_by_position_equals_a_hook_on_transformers_own_model(lm_dirs):
    model = load_model(lm_dirs["gpt2"])
    layer, head = 0, 2  # in the first layer: the positions it is put back at reach the last one through layer 1
    grid = patch_grid(model, TEXT, CORRUPTED, "animal", "street", what=HEAD, head=(layer, head))
    ref = reference(lm_dirs["gpt2"])
    ids = {text: prompt_ids(model, text) for text in (TEXT, CORRUPTED)}
    proj = ref.transformer.h[layer].attn.c_proj
    kept = {}
    hook = proj.register_forward_pre_hook(lambda module, args: kept.__setitem__("clean", args[0].clone()))
    with torch.no_grad():
        ref(ids[TEXT])
    hook.remove()
    cols = slice(head * model.head_dim, (head + 1) * model.head_dim)
    a, b = token_id(model, "animal"), token_id(model, "street")
    assert grid.effects.shape == (len(grid.tokens),) and grid.head == (layer, head)
    for t in (0, 13, 15, len(grid.tokens) - 1):  # 13: 'tired' / 'wide'
        def put_back(module, args, t=t):
            patched = args[0].clone()
            patched[:, t, cols] = kept["clean"][:, t, cols]
            return (patched,)

        hook = proj.register_forward_pre_hook(put_back)
        with torch.no_grad():
            logits = ref(ids[CORRUPTED]).logits[0, -1]
        hook.remove()
        assert grid.effects[t] == pytest.approx(float(logits[a] - logits[b]), abs=1e-4)
    with pytest.raises(InputError, match="no layer 2, head 0"):
        patch_grid(model, TEXT, CORRUPTED, "animal", "street", what=HEAD, head=(2, 0))


def test_an_encoder_without_a_head_is_patched_by_the_coreference_margin():
    from mha_core.analysis.coref.sentence import sentence_words

    model = load_model()  # all-MiniLM-L6-v2
    grid = patch_grid(model, SENTENCE, CORRUPTED_SENTENCE, what=RESIDUAL)
    changed = grid.tokens.index("wide")  # the corrupted text's pieces
    assert grid.metric == COREF_MARGIN and (grid.answer, grid.wrong, grid.pronoun) == ("animal", "street", "it")
    assert grid.effects[0, changed] == pytest.approx(grid.clean, abs=1e-5)  # the only change, put back at the start
    others = np.delete(grid.effects[0], changed)
    assert np.allclose(others, grid.corrupted, atol=1e-5) and abs(grid.clean - grid.corrupted) > 1e-3
    heads = patch_grid(model, SENTENCE, CORRUPTED_SENTENCE)
    assert np.allclose(heads.effects[-1], heads.corrupted, atol=1e-6)  # the last layer's outputs move no map
    words = sentence_words(SENTENCE)
    swapped = patch_grid(model, SENTENCE, CORRUPTED_SENTENCE, what=RESIDUAL, coref=(words[8], words[6], words[1]))
    assert (swapped.answer, swapped.wrong) == ("street", "animal")
    if swapped.probe_head == grid.probe_head:  # the same head: the margin's sign flips
        assert swapped.clean == pytest.approx(-grid.clean, abs=1e-6)
    with pytest.raises(InputError, match="takes no answer"):
        patch_grid(model, SENTENCE, CORRUPTED_SENTENCE, " animal", " street")


def test_patching_refuses_pairs_of_different_lengths(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    with pytest.raises(InputError, match="same number"):
        patch_grid(model, TEXT, TEXT + " again", "animal", "street")


def test_the_coreference_page_runs_its_pair_as_a_patching_grid():
    from mha_core.analysis.coref.sentence import sentence_words
    from tests.conftest import chart_json, decode, open_app

    at = open_app("views/coreference.py")  # all-MiniLM-L6-v2: the pronoun's margin, no language-model head
    assert not at.exception and any("Which heads cause" in s.value for s in at.subheader)
    words = sentence_words(SENTENCE)
    grid = patch_grid(load_model(), SENTENCE, CORRUPTED_SENTENCE, coref=(words[8], words[1], words[6]))
    shown = decode(chart_json(at, "c_patch_grid")["data"][0]["z"])
    assert np.allclose(shown, grid.shown, atol=1e-5) and grid.decisive
    assert any(grid.described(6) == m.value.replace("\\", "") for m in at.markdown)  # literal() escapes
    at.radio(key="c_patch_what").set_value(HEAD).run()
    top = at.selectbox(key="c_patch_head").value
    assert top == ranked_heads(grid.shown, 1)[0]
    one = patch_grid(load_model(), SENTENCE, CORRUPTED_SENTENCE, what=HEAD, head=top, coref=(words[8], words[1],
                                                                                             words[6]))
    assert np.allclose(decode(chart_json(at, "c_patch_grid")["data"][0]["z"])[0], one.shown, atol=1e-5)


TYPED = "The cat did not jump over the fence because it was too tired."  # no example: its pair is tired -> wide


def test_a_typed_pair_is_patched_when_its_visitor_asks_and_an_example_s_at_once():
    """Thirty students typing three sentences each at once queued ninety grids of about half a core-second each that
    most never scrolled to (bench_classroom --at-once on Coreference): a typed pair's grid waits for its toggle; an
    offered example with its own partner is patched at once (the test above), once per server for everyone."""
    from mha_core.analysis.coref.sentence import sentence_words
    from mha_core.teaching.examples import EXAMPLES, focus, patched_unasked
    from tests.conftest import chart_json, decode, open_app

    model = load_model()
    example = next(e for e in EXAMPLES if e.offered(model.name) and e.pair)
    assert patched_unasked(example.text, focus(example.text, model.name).pair, model.name)
    assert not patched_unasked(example.text, example.text, model.name)  # its pair edited
    pair = focus(TYPED, model.name).pair
    assert pair == TYPED.replace("tired", "wide") and not patched_unasked(TYPED, pair, model.name)
    at = open_app("views/coreference.py")
    at.text_area(key="text").input(TYPED).run()
    assert not at.exception and at.toggle(key="c_patch_run").value is False
    with pytest.raises(AssertionError, match="no chart"):
        chart_json(at, "c_patch_grid")
    at.toggle(key="c_patch_run").set_value(True).run()
    words = sentence_words(TYPED)
    it, cat, fence = (next(w for w in words if w.text == text) for text in ("it", "cat", "fence"))
    grid = patch_grid(model, TYPED, pair, coref=(it, cat, fence))
    assert np.allclose(decode(chart_json(at, "c_patch_grid")["data"][0]["z"]), grid.shown, atol=1e-5)
