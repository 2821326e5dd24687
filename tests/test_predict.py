"""Issue 21: predictions, logit lens, direct logit attribution and activation patching, against transformers' own
language models (tiny random ones with the bundled word-piece tokenizer) and their invariants."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest
import torch

from mha_core import load_model
from mha_core.analysis.lm.head import token_id
from mha_core.analysis.lm.patching import COREF_MARGIN, patch_grid
from mha_core.analysis.lm.predict import attribute, logit_lens, predict
from mha_core.engine.tokens import InputError
from tests.conftest import cli
from tests.lm_models import CORRUPTED, CORRUPTED_SENTENCE, LMS, MASKED, SENTENCE, TEXT, prompt_ids, reference


@pytest.mark.parametrize("name", list(LMS))
def test_logits_equal_transformers_language_model(lm_dirs, name):
    model = load_model(lm_dirs[name])
    ours = predict(model, TEXT, position=5)
    with torch.no_grad():
        theirs = reference(lm_dirs[name])(prompt_ids(model, TEXT)).logits[0, 5]
    spread = float(theirs.max() - theirs.min())
    assert np.abs(ours.logits - theirs.numpy()).max() <= 1e-4 * spread
    assert ours.top_ids[0] == int(theirs.argmax())
    expected = torch.softmax(theirs.double(), -1)[list(ours.top_ids)].numpy()  # the top k of the softmax
    np.testing.assert_allclose(ours.top_probs, expected, atol=1e-5)
    assert sum(ours.top_probs) <= 1 + 1e-6 and list(ours.top_probs) == sorted(ours.top_probs, reverse=True)
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
    import mha_core.analysis.lm.predict as predict_module

    predict_module.LENS_BLOCK_ELEMENTS, kept = 1, predict_module.LENS_BLOCK_ELEMENTS  # one layer per block
    try:
        layer_by_layer = logit_lens(model, TEXT)
    finally:
        predict_module.LENS_BLOCK_ELEMENTS = kept
    assert (layer_by_layer.top_ids == lens.top_ids).all()
    assert np.allclose(layer_by_layer.final_probs, lens.final_probs, atol=1e-5)


def first(output: object) -> torch.Tensor:
    """A transformers layer's output: its hidden states (a tuple's first item, or the tensor itself)."""
    return output[0] if isinstance(output, tuple) else output


def run_hooked(hf: object, ids: torch.Tensor, handles: list) -> None:
    """transformers' model on `ids` with the torch hooks `handles` registered, removed afterwards."""
    try:
        with torch.no_grad():
            hf(ids)
    finally:
        for handle in handles:
            handle.remove()


def test_the_lens_inner_layers_equal_transformers_layers_through_its_norm_and_head(lm_dirs):
    """Issue 49: every layer of the lens, not only the last, against an independent reference: each decoder layer's
    output caught by a forward hook on transformers' model, then its own final norm and language-model head."""
    model = load_model(lm_dirs["llama-tied"])
    lens = logit_lens(model, TEXT)
    hf = reference(lm_dirs["llama-tied"])
    outputs = []
    handles = [layer.register_forward_hook(lambda _, __, out: outputs.append(first(out))) for layer in hf.model.layers]
    run_hooked(hf, prompt_ids(model, TEXT), handles)
    assert len(outputs) == lens.top_ids.shape[0] == 2
    for layer, states in enumerate(outputs):
        with torch.no_grad():
            best = torch.softmax(hf.lm_head(hf.model.norm(states[0])).double(), -1).max(-1)  # (T,)
        assert (lens.top_ids[layer] == best.indices.numpy()).all(), layer
        np.testing.assert_allclose(lens.top_probs[layer], best.values.numpy(), atol=1e-5)


@pytest.mark.parametrize("name", ["llama-tied", "llama-separate", "gpt2", "gemma2", "gpt_neox"])
def test_direct_attributions_add_up_to_the_logit_difference(lm_dirs, name):
    model = load_model(lm_dirs[name])
    result = attribute(model, TEXT, "animal", "street")
    assert result.heads.shape == (2, 4) and result.mlps.shape == (2,)
    assert abs(result.total - result.logit_diff) <= 1e-4 * max(1.0, abs(result.logit_diff))
    assert np.abs(result.heads).max() > 0 and abs(result.embeddings) > 0


def test_each_head_s_direct_attribution_equals_its_own_slice_through_w_o_and_the_unembedding(lm_dirs):
    """Issue 49: the split between heads, against transformers' llama: each head's slice of o_proj's input (a
    forward pre-hook), through its columns of W_O, read by the final RMSNorm frozen on the last layer's output and
    the unembedding's answer-minus-wrong direction. Swapping two heads, or two layers, would fail here."""
    model = load_model(lm_dirs["llama-tied"])
    result = attribute(model, TEXT, "animal", "street")
    hf = reference(lm_dirs["llama-tied"])
    inputs, last = {}, []
    handles = [layer.self_attn.o_proj.register_forward_pre_hook(lambda _, args, i=i: inputs.__setitem__(i, args[0]))
               for i, layer in enumerate(hf.model.layers)]
    handles.append(hf.model.layers[-1].register_forward_hook(lambda _, __, out: last.append(first(out))))
    run_hooked(hf, prompt_ids(model, TEXT), handles)
    p, head_dim, norm = result.position, hf.config.head_dim, hf.model.norm
    x = last[0][0, p].double()
    direction = (hf.lm_head.weight[token_id(model, "animal")] - hf.lm_head.weight[token_id(model, "street")]).double()
    readout = torch.rsqrt(x.pow(2).mean() + norm.variance_epsilon) * norm.weight.double() * direction
    for layer, o_proj in enumerate(block.self_attn.o_proj for block in hf.model.layers):
        for h in range(hf.config.num_attention_heads):
            part = slice(h * head_dim, (h + 1) * head_dim)
            written = o_proj.weight[:, part].double() @ inputs[layer][0, p, part].double()  # (D,)
            assert result.heads[layer, h] == pytest.approx(float(written @ readout), abs=1e-4), (layer, h)


def test_answers_must_be_one_piece(lm_dirs):
    model = load_model(lm_dirs["llama-tied"])
    assert token_id(model, "animal") == model.tokenizer.convert_tokens_to_ids("animal")
    with pytest.raises(InputError, match="2 pieces .* choose one piece"):
        token_id(model, "animal street")
    with pytest.raises(InputError, match="no language-model head"):
        predict(load_model(), TEXT)  # all-MiniLM-L6-v2: a sentence encoder


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
    model = load_model(lm_dirs["gpt2"])  # each command's numbers are the API's (tested against transformers above)
    api = predict(model, TEXT, k=3)
    assert [t["id"] for t in data["top"]] == list(api.top_ids)
    assert np.allclose([t["prob"] for t in data["top"]], api.top_probs, atol=1e-6)
    proc = cli("lens", TEXT, "--model-dir", model_dir, "--json", "-")
    lens, api = json.loads(proc.stdout), logit_lens(model, TEXT)
    assert proc.returncode == 0 and len(lens["top_id"]) == 2 and np.array_equal(lens["top_id"], api.top_ids)
    assert np.abs(np.array(lens["top_prob"]) - api.top_probs).max() <= 1e-6
    assert np.abs(np.array(lens["final_prob"]) - api.final_probs).max() <= 1e-6
    proc = cli("attribute", TEXT, "--answer", "animal", "--wrong", "street", "--model-dir", model_dir, "--json", "-")
    data, api = json.loads(proc.stdout), attribute(model, TEXT, "animal", "street")
    assert abs(sum(map(sum, data["heads"])) + sum(data["mlps"]) + data["rest"] - data["logit_diff"]) < 1e-3
    assert np.abs(np.array(data["heads"]) - api.heads).max() <= 1e-6 and np.allclose(data["mlps"], api.mlps, atol=1e-6)
    proc = cli("patch", TEXT, CORRUPTED, "--answer", "animal", "--wrong", "street", "--what", "residual",
               "--model-dir", model_dir, "--json", "-")
    patched = json.loads(proc.stdout)
    assert proc.returncode == 0 and np.array(patched["effects"]).shape == (2, len(patched["tokens"]))
    api = patch_grid(model, TEXT, CORRUPTED, "animal", "street", "residual")
    assert np.abs(np.array(patched["effects"]) - api.effects).max() <= 1e-6 and patched["clean"] == round(api.clean, 6)
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
    from mha_core.figures.charts import safe_label
    from tests.conftest import chart_json, decode, open_app
    from tests.i18n_check import assert_all_chinese

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
    lens, api = chart_json(shown["Logit lens"], "p_lens")["data"][0], logit_lens(decoder, text)  # every cell:
    assert decode(lens["z"]).shape == (30, len(top.tokens))  # each layer's top piece, its probability and the final
    assert np.abs(decode(lens["z"]) - api.top_probs).max() <= 1e-5  # answer's (the API's lens is held to
    assert np.abs(decode(lens["customdata"]) - api.final_probs).max() <= 5e-5  # transformers' layers above)
    assert [row[-1] for row in lens["text"]] == [safe_label(row[-1]) for row in api.top_pieces]
    patched = decode(chart_json(shown["Patching"], "p_patch_grid")["data"][0]["z"])
    from mha_core.serving.computed import text as computed
    from mha_core.serving.server import no_wait
    from views._state import server

    # Asked of the server by its key: the page's own grid when the page asked for exactly this (the same model, texts
    # and pieces), else computed here: a page that passed anything else draws a grid that differs.
    grid = computed.patch_grid_of(server(), decoder, text, CORRUPTED_SENTENCE + " The word 'it' refers to the",
                                  " animal", " street", "heads", None, None, no_wait)
    assert patched.shape == (30, 9) and np.allclose(patched, grid.shown, atol=1e-4)
    # The page in Chinese on SmolLM2, every tab (tests/test_i18n.py's check of every page on the decoders): it opens
    # on the same English example, so its grid, lens and attribution are the server's, computed above.
    assert_all_chinese("views/predictions.py", decoder.name)


@pytest.mark.parametrize("name", ["llama-tied", "gpt2", "gemma2", "gpt_neox"])
def test_greedy_generation_with_the_cache_equals_transformers_generate(lm_dirs, name):
    from mha_core.analysis.lm.generate import generate

    model = load_model(lm_dirs[name])
    ours = generate(model, "the animal did not cross the", new=12)
    ids = prompt_ids(model, "the animal did not cross the")
    with torch.no_grad():
        theirs = reference(lm_dirs[name]).generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=12,
                                                    do_sample=False, pad_token_id=0)
    assert [s.id for s in ours.steps] == theirs[0, ids.shape[1]:].tolist()
    assert len(ours.tokens) == ids.shape[1] + 12 and ours.stopped == "length"



def test_the_cache_changes_nothing_and_a_seed_repeats_a_sample(lm_dirs):
    from mha_core.analysis.lm.generate import generate

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


CHAT_TEMPLATE = ("{% for m in messages %}[CLS] {{ m['role'] }} : {{ m['content'] }} [SEP]{% endfor %}"
                 "{% if add_generation_prompt %}[CLS] assistant :{% endif %}")


def test_a_chat_answer_reads_the_template_as_transformers_does(lm_dirs):
    from mha_core.analysis.lm.generate import generate

    model = load_model(lm_dirs["llama-tied"])
    with pytest.raises(InputError, match="no chat template"):
        generate(model, "why ?", new=3, chat=True)
    model.tokenizer.chat_template = CHAT_TEMPLATE
    ours = generate(model, "why is the sky blue ?", new=6, chat=True)
    messages = [{"role": "user", "content": "why is the sky blue ?"}]
    ids = torch.tensor([model.tokenizer.apply_chat_template(messages, add_generation_prompt=True)["input_ids"]])
    assert (ids[0] == model.tokenizer.cls_token_id).sum() == 2  # the markers are one special piece each, not text
    with torch.no_grad():
        theirs = reference(lm_dirs["llama-tied"]).generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=6,
                                                            do_sample=False, pad_token_id=0)
    assert [s.id for s in ours.steps] == theirs[0, ids.shape[1]:].tolist()
    assert ours.prompt.endswith("[CLS] assistant :") and ours.text.startswith(ours.prompt)
    assert len(ours.tokens) == ids.shape[1] + 6


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
    no_chat = cli("generate", "x", "--chat", "--model-dir", str(lm_dirs["gpt2"]), "--json", "-")
    assert no_chat.returncode == 2 and "no chat template" in no_chat.stderr


def test_the_continue_tab_grows_the_sentence_of_every_page(decoder):
    from mha_core.analysis.lm.generate import generate
    from tests.conftest import open_app

    at = open_app("views/predictions.py", model="SmolLM2-135M-Instruct", p_tab="Continue")
    assert not at.exception and not at.error
    grown = generate(decoder, at.text_area(key="text").value + at.text_input(key="p_probe").value, 20)
    assert [row for row in at.dataframe[0].value["piece"]] == [s.piece for s in grown.steps]
    at.button(key="g_use").click().run()
    assert at.text_area(key="text").value == grown.text
    at.switch_page("views/heads.py").run()
    assert not at.exception and at.text_area(key="text").value == grown.text


def test_the_coreference_page_asks_the_decoder_and_shows_its_answer(decoder):
    from mha_core.analysis.coref.sentence import sentence_words
    from mha_core.analysis.lm.predict import probe_answers
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




def test_a_layers_effect_on_the_prediction_is_the_lens_at_its_ends(lm_dirs, mlm_dirs):
    from mha_core.analysis.lm.predict import layer_effect

    model = load_model(lm_dirs["llama-separate"])
    last = layer_effect(model, TEXT, 1, position=9)
    first = layer_effect(model, TEXT, 0, position=9)
    pred = predict(model, TEXT, position=9, k=5)
    assert last.stages == ("entering the layer", "after its attention", "leaving the layer (after its MLP)")
    assert [piece for piece, _ in last.top[-1]] == list(pred.top_pieces) and last.answer == pred.top_pieces[0]
    assert np.allclose([q for _, q in last.top[-1]], pred.top_probs, atol=1e-6)
    assert last.answer_probs[-1] == pytest.approx(pred.top_probs[0], abs=1e-6)
    assert [piece for piece, _ in first.top[-1]] == [piece for piece, _ in last.top[0]]  # leaving 0 is entering 1
    assert first.answer_probs[-1] == pytest.approx(last.answer_probs[0], abs=1e-6)
    lens = logit_lens(model, TEXT)
    assert first.answer_probs[-1] == pytest.approx(float(lens.final_probs[0, 9]), abs=1e-5)
    masked = layer_effect(load_model(mlm_dirs["bert"]), MASKED, 1)
    assert len(masked.stages) == 2 and masked.piece == "[MASK]"  # post-norm: no stream after attention alone


def test_the_walkthrough_ends_with_the_layers_effect_on_the_prediction(decoder):
    from mha_core.analysis.lm.predict import layer_effect
    from tests.conftest import open_app

    at = open_app("views/walkthrough.py", model="SmolLM2-135M-Instruct", wt_layer="29")
    assert not at.exception and any("5. What this layer does" in h.value for h in at.header)
    (table,) = [df.value for df in at.dataframe if "stage" in df.value.columns]
    query = at.selectbox(key="wt_query").value
    effect = layer_effect(decoder, at.text_area(key="text").value, 29, query)
    assert np.allclose(table.iloc[:, 1], np.round(effect.answer_probs, 6))
    assert table["most likely"].iloc[-1].startswith(effect.answer)
    encoder = open_app("views/walkthrough.py")
    assert not encoder.exception and any("no language-model head" in i.value for i in encoder.info)


def byte_level_tokenizer(normalizer: object = None) -> object:
    """A byte-level BPE with no merges: every byte of the text is a piece (the worst case of SmolLM2's tokenizer,
    which reads most Chinese characters as two or three byte pieces)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {char: i for i, char in enumerate(sorted(pre_tokenizers.ByteLevel.alphabet()))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    if normalizer is not None:
        tokenizer.normalizer = normalizer
    wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer)
    wrapped.add_special_tokens({"pad_token": "<pad>"})
    return wrapped


@pytest.mark.parametrize("bos", [None, 0])
def test_a_prediction_reads_a_text_of_byte_pieces_whole(bos, monkeypatch):
    """A text read for a prediction at its end was tokenized up to its length in characters plus 8: a byte-level
    tokenizer's Chinese sentence (three pieces a character) was cut there, silently, and the prediction, the logit
    lens and a continuation read a third of it (the Walkthrough on SmolLM2 raised on its pronoun's position)."""
    from tokenizers import normalizers

    import mha_core.engine.tokens as tokens
    from mha_core.engine.tokens import tokenize_ending

    calls = []
    real = tokens.tokenize
    monkeypatch.setattr(tokens, "tokenize", lambda *args, **kwargs: calls.append(1) or real(*args, **kwargs))
    text = "那只动物没有过马路，因为它太累了。"
    batch = tokenize_ending(byte_level_tokenizer(), text, 512, bos)
    assert len(calls) == 1  # a piece holds at least a byte: read whole the first time
    n = len(text.encode()) + (bos is not None)
    assert int(batch.attention_mask.sum()) == batch.n_tokens[0] == n == 51 + (bos is not None)
    assert batch.left_out == (0,) or not batch.left_out
    ligature = "ﷺ"  # 3 bytes, which NFKC expands to 18 characters, 33 bytes: beyond the bound in bytes
    expanded = tokenize_ending(byte_level_tokenizer(normalizers.NFKC()), ligature, 512, bos)
    pieces = len(unicodedata.normalize("NFKC", ligature).encode()) + (bos is not None)
    assert int(expanded.attention_mask.sum()) == expanded.n_tokens[0] == pieces > len(ligature.encode()) + 8


def test_the_decoder_s_chinese_sentence_is_predicted_at_its_end(decoder):
    """SmolLM2 reads a Chinese character as up to three byte pieces: the page read the sentence and its question cut
    after piece 32 of 45 (mid-sentence); and where the answer is no readable piece, its empty rank box said "'' is 0
    pieces of the vocabulary"."""
    from tests.conftest import chart_json, open_app

    text = "那只动物没有过马路，因为它太累了。"
    at = open_app("views/predictions.py", model="SmolLM2-135M-Instruct", text=text)
    assert not at.exception and not at.error
    asked = text + at.text_input(key="p_probe").value
    last = len(decoder.tokenizer(asked, add_special_tokens=False)["input_ids"]) - (decoder.bos_id is None)
    assert predict(decoder, asked).position == last > 40
    assert f"(position {last})" in chart_json(at, "p_top")["layout"]["title"]["text"]
    assert at.text_input(key="p_piece").value == "" and not at.info
