"""Issue 21: predictions, logit lens, direct logit attribution and activation patching, against transformers' own
language models (tiny random ones with the bundled word-piece tokenizer) and their invariants."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.patching import COREF_MARGIN, HEAD, HEADS, RESIDUAL, patch_grid
from mha_core.analysis.predict import attribute, logit_lens, predict, token_id
from mha_core.analysis.roles import ranked_heads
from mha_core.engine.model import bundled_model_dir
from mha_core.engine.tokens import InputError
from tests.conftest import cli

TEXT = "the animal did not cross the street because it was too tired . it refers to the"
CORRUPTED = "the animal did not cross the street because it was too wide . it refers to the"
SENTENCE = "The animal didn't cross the street because it was too tired."
CORRUPTED_SENTENCE = "The animal didn't cross the street because it was too wide."
LMS = {  # family: (config class, model class, sizes); tie_word_embeddings decides where the head lives
    "llama-tied": ("LlamaConfig", "LlamaForCausalLM", dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                                           num_key_value_heads=2, intermediate_size=64, head_dim=8,
                                                           max_position_embeddings=64, tie_word_embeddings=True)),
    "llama-separate": ("LlamaConfig", "LlamaForCausalLM", dict(hidden_size=32, num_hidden_layers=2,
                                                               num_attention_heads=4, num_key_value_heads=2,
                                                               intermediate_size=64, head_dim=8,
                                                               max_position_embeddings=64,
                                                               tie_word_embeddings=False)),
    "gpt2": ("GPT2Config", "GPT2LMHeadModel", dict(n_embd=32, n_layer=2, n_head=4, n_positions=64)),
}


@pytest.fixture(scope="session")
def lm_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    import transformers
    from transformers import AutoTokenizer

    dirs = {}
    for name, (config_name, model_name, sizes) in LMS.items():
        config = getattr(transformers, config_name)(vocab_size=30528, initializer_range=0.2, **sizes)  # effects to see
        torch.manual_seed(1)
        model = getattr(transformers, model_name)(config)
        with torch.no_grad():
            for key, p in model.named_parameters():
                if p.ndim == 1:  # random norms and biases, so a wrong readout of the final norm shows
                    p.copy_(torch.randn_like(p) * 0.2 + (1.0 if "norm" in key.lower() or "ln" in key else 0.0))
        path = tmp_path_factory.mktemp(name)
        model.save_pretrained(path, safe_serialization=True)
        AutoTokenizer.from_pretrained(bundled_model_dir(), local_files_only=True).save_pretrained(path)
        dirs[name] = path
    return dirs


def prompt_ids(model, text: str) -> torch.Tensor:
    """(1,T) the ids our run reads for `text` (the decoder's first piece included, no padding)."""
    from mha_core.engine.tokens import tokenize

    batch = tokenize(model.tokenizer, text, model.max_length, bos=model.bos_id)
    return batch.input_ids[:, :int(batch.attention_mask[0].sum())]


def reference(path: Path):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager", local_files_only=True).eval()


@pytest.mark.parametrize("name", list(LMS))
def test_logits_equal_transformers_language_model(lm_dirs, name):
    model = load_model(lm_dirs[name])
    ours = predict(model, TEXT, position=5)
    with torch.no_grad():
        theirs = reference(lm_dirs[name])(prompt_ids(model, TEXT)).logits[0, 5]
    spread = float(theirs.max() - theirs.min())
    assert np.abs(ours.logits - theirs.numpy()).max() <= 1e-4 * spread
    assert ours.top_ids[0] == int(theirs.argmax()) and abs(sum(ours.top_probs) - 1) < 1  # the top k of a softmax
    rank, prob = ours.rank_of(ours.top_ids[1])
    assert rank == 2 and prob == pytest.approx(ours.top_probs[1], abs=1e-6)



def test_the_lens_last_layer_is_the_prediction(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    lens = logit_lens(model, TEXT)
    assert lens.top_ids.shape == (2, len(lens.tokens))
    for position in (0, 7, len(lens.tokens) - 1):
        p = predict(model, TEXT, position=position, k=1)
        assert lens.top_ids[-1, position] == p.top_ids[0] and lens.top_probs[-1, position] == pytest.approx(
            p.top_probs[0], abs=1e-6)
    assert np.allclose(lens.final_probs[-1], lens.top_probs[-1])  # the last layer's answer is its own top
    import mha_core.analysis.predict as predict_module

    predict_module.LENS_BLOCK_ELEMENTS, kept = 1, predict_module.LENS_BLOCK_ELEMENTS  # one layer per block
    try:
        layer_by_layer = logit_lens(model, TEXT)
    finally:
        predict_module.LENS_BLOCK_ELEMENTS = kept
    assert (layer_by_layer.top_ids == lens.top_ids).all()
    assert np.allclose(layer_by_layer.final_probs, lens.final_probs, atol=1e-5)


@pytest.mark.parametrize("name", ["llama-tied", "llama-separate", "gpt2"])
def test_direct_attributions_add_up_to_the_logit_difference(lm_dirs, name):
    model = load_model(lm_dirs[name])
    result = attribute(model, TEXT, "animal", "street")
    assert result.heads.shape == (2, 4) and result.mlps.shape == (2,)
    assert abs(result.total - result.logit_diff) <= 1e-4 * max(1.0, abs(result.logit_diff))
    assert np.abs(result.heads).max() > 0 and abs(result.embeddings) > 0


def test_answers_must_be_one_piece(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    assert token_id(model, "animal") == model.tokenizer.convert_tokens_to_ids("animal")
    with pytest.raises(InputError, match="2 pieces .* choose one piece"):
        token_id(model, "animal street")
    with pytest.raises(InputError, match="no language-model head"):
        predict(load_model(), TEXT)  # all-MiniLM-L6-v2: a sentence encoder


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
    from mha_core.analysis.inspector import sentence_words

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


@pytest.mark.slow  # the bundled decoder
def test_the_bundled_decoder_prefers_animal_after_the_probe(decoder):
    probe = "The animal didn't cross the street because it was too tired. The word 'it' refers to the"
    top = predict(decoder, probe)
    assert top.top_ids[0] == token_id(decoder, " animal") and top.top_probs[0] > 0.3  # 0.53 when measured
    result = attribute(decoder, probe, " animal", " street")
    assert abs(result.total - result.logit_diff) <= 1e-3 and result.logit_diff > 0


def test_cli_predict_lens_attribute_patch(lm_dirs, tmp_path):
    import json

    model_dir = str(lm_dirs["gpt2"])
    out = tmp_path / "p.json"
    assert cli("predict", TEXT, "--model-dir", model_dir, "--top", "3", "--json", str(out)).returncode == 0
    data = json.loads(out.read_text())
    assert len(data["top"]) == 3 and data["position"] == len(data["tokens"]) - 1
    proc = cli("lens", TEXT, "--model-dir", model_dir, "--json", "-")
    assert proc.returncode == 0 and len(json.loads(proc.stdout)["top_id"]) == 2
    proc = cli("attribute", TEXT, "--answer", "animal", "--wrong", "street", "--model-dir", model_dir, "--json", "-")
    data = json.loads(proc.stdout)
    assert abs(sum(map(sum, data["heads"])) + sum(data["mlps"]) + data["rest"] - data["logit_diff"]) < 1e-3
    proc = cli("patch", TEXT, CORRUPTED, "--answer", "animal", "--wrong", "street", "--what", "residual",
               "--model-dir", model_dir, "--json", "-")
    patched = json.loads(proc.stdout)
    assert proc.returncode == 0 and np.array(patched["effects"]).shape == (2, len(patched["tokens"]))
    bad = cli("attribute", TEXT, "--answer", "animal street", "--model-dir", model_dir, "--json", "-")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "choose one piece" in bad.stderr
    none = cli("predict", TEXT, "--json", "-")  # the bundled encoder
    assert none.returncode == 2 and "no language-model head" in none.stderr
    margin = cli("patch", SENTENCE, CORRUPTED_SENTENCE, "--what", "head", "--head", "2:3", "--json", "-")
    data = json.loads(margin.stdout)
    assert data["metric"] == COREF_MARGIN and data["head"] == [2, 3] and len(data["effects"]) == len(data["tokens"])
    for args in (("--what", "head"), ("--what", "head", "--head", "2-3"), ("--answer", " animal")):
        bad = cli("patch", SENTENCE, CORRUPTED_SENTENCE, *args, "--json", "-")
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, args


def test_the_predictions_page_says_an_encoder_predicts_nothing():
    from tests.conftest import open_app

    at = open_app("views/predictions.py")
    assert not at.exception and any("no language-model head" in i.value for i in at.info)
    assert not at.get("plotly_chart")


def test_the_predictions_page_shows_what_mha_core_computes_on_the_decoder(decoder):
    from tests.conftest import chart_json, decode, open_app

    text = "The animal didn't cross the street because it was too tired. The word 'it' refers to the"
    shown = {}
    for tab in ("Next piece", "Logit lens", "Attribution", "Patching"):
        at = open_app("views/predictions.py", model="SmolLM2-135M-Instruct", p_tab=tab)
        assert not at.exception and not at.error and not at.warning, tab
        shown[tab] = at
    top = predict(decoder, text)
    bars = chart_json(shown["Next piece"], "p_top")["data"][0]
    assert np.allclose(decode(bars["y"]), top.top_probs, atol=1e-6)
    result = attribute(decoder, text, " animal", " street")
    assert np.allclose(decode(chart_json(shown["Attribution"], "p_dla_heads")["data"][0]["z"]), result.heads,
                       atol=1e-5)
    assert any(f"**{result.logit_diff:.3f}**" in m.value for m in shown["Attribution"].markdown)
    lens = chart_json(shown["Logit lens"], "p_lens")["data"][0]
    assert decode(lens["z"]).shape == (30, len(top.tokens))
    patched = decode(chart_json(shown["Patching"], "p_patch_grid")["data"][0]["z"])
    grid = patch_grid(decoder, text, CORRUPTED_SENTENCE + " The word 'it' refers to the", " animal", " street")
    assert patched.shape == (30, 9) and np.allclose(patched, grid.shown, atol=1e-4)


@pytest.mark.parametrize("name", ["llama-tied", "gpt2"])
def test_greedy_generation_with_the_cache_equals_transformers_generate(lm_dirs, name):
    from mha_core.analysis.generate import generate

    model = load_model(lm_dirs[name])
    ours = generate(model, "the animal did not cross the", new=12)
    ids = prompt_ids(model, "the animal did not cross the")
    with torch.no_grad():
        theirs = reference(lm_dirs[name]).generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12,
                                                    do_sample=False, pad_token_id=0)
    assert [s.id for s in ours.steps] == theirs[0, ids.shape[1]:].tolist()
    assert len(ours.tokens) == ids.shape[1] + 12 and ours.stopped == "length"



def test_the_cache_changes_nothing_and_a_seed_repeats_a_sample(lm_dirs):
    from mha_core.analysis.generate import generate

    model = load_model(lm_dirs["llama-tied"])
    cached = generate(model, TEXT, new=8, temperature=1.0, top_k=50, seed=3)
    recomputed = generate(model, TEXT, new=8, temperature=1.0, top_k=50, seed=3, use_cache=False)
    assert [s.id for s in cached.steps] == [s.id for s in recomputed.steps]
    assert np.allclose([s.prob for s in cached.steps], [s.prob for s in recomputed.steps], atol=1e-5)
    assert [s.id for s in generate(model, TEXT, new=8, temperature=1.0, top_k=50, seed=3).steps] == [
        s.id for s in cached.steps]
    assert generate(model, TEXT, new=60).stopped == "model's limit"  # 64 positions
    with pytest.raises(InputError, match="from 1 to 64"):
        generate(model, TEXT, new=0)


def test_cli_generate(lm_dirs):
    import json

    proc = cli("generate", "the animal did not cross the", "--new", "5", "--model-dir", str(lm_dirs["gpt2"]),
               "--temperature", "0.8", "--seed", "7", "--json", "-")
    data = json.loads(proc.stdout)
    assert proc.returncode == 0 and len(data["generated"]) == 5 and data["text"].startswith("the animal")
    again = json.loads(cli("generate", "the animal did not cross the", "--new", "5", "--model-dir",
                           str(lm_dirs["gpt2"]), "--temperature", "0.8", "--seed", "7", "--json", "-").stdout)
    assert again == data
    bad = cli("generate", "x", "--new", "65", "--model-dir", str(lm_dirs["gpt2"]), "--json", "-")
    assert bad.returncode == 2 and "from 1 to 64" in bad.stderr


def test_the_continue_tab_grows_the_sentence_of_every_page(decoder):
    from mha_core.analysis.generate import generate
    from tests.conftest import open_app

    at = open_app("views/predictions.py", model="SmolLM2-135M-Instruct", p_tab="Continue")
    assert not at.exception and not at.error
    grown = generate(decoder, at.text_area(key="text").value + at.text_input(key="p_probe").value, 20)
    assert [row for row in at.dataframe[0].value["piece"]] == [s.piece for s in grown.steps]
    at.button(key="g_use").click().run()
    assert at.text_area(key="text").value == grown.text
    at.switch_page("views/heads.py").run()
    assert not at.exception and at.text_area(key="text").value == grown.text


def test_the_coreference_page_runs_its_pair_as_a_patching_grid():
    from mha_core.analysis.inspector import sentence_words
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


def test_the_coreference_page_asks_the_decoder_and_shows_its_answer(decoder):
    from mha_core.analysis.inspector import sentence_words
    from mha_core.analysis.predict import probe_answers
    from tests.conftest import open_app

    text = "The animal didn't cross the street because it was too tired."
    words = sentence_words(text)
    answer = probe_answers(decoder, text, words[8], [words[1], words[6]])
    assert answer.probe.endswith("refers to the") and answer.candidates[0][2] > answer.candidates[1][2]
    assert answer.candidates[0][3] == 1  # " animal" is the model's first choice
    at = open_app("views/coreference.py", model="SmolLM2-135M-Instruct")
    assert not at.exception
    (shown,) = [df.value for df in at.dataframe if "probability" in df.value.columns]
    assert list(shown["candidate"]) == ["animal", "street"]
    assert np.allclose(shown["probability"], [round(c[2], 4) for c in answer.candidates])
    assert not any("What the model answers" in s.value for s in open_app("views/coreference.py").subheader)
