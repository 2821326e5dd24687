"""A GGUF file parsed once while it is converted (mha_core/engine/loading/gguf_once.py): the plain-array reader reads
the same fields and tensors as gguf's own, and transformers' parses within the block share one."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint

from mha_core.engine.loading.gguf_once import PlainArrayReader, one_parse_per_file

PIECES = ["a", "b", "c", "ab", "<s>", "猫", "\u00a0"]


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer Llama GGUF: scalars, string and number arrays, a float and a quantised tensor."""
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_block_count(1)
    writer.add_context_length(32)
    writer.add_embedding_length(32)
    writer.add_feed_forward_length(64)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list(PIECES)
    writer.add_token_merges(["a b"])
    writer.add_token_types([1, 1, 1, 1, 3, 1, 1])
    weights = np.random.default_rng(0).standard_normal((7, 32)).astype(np.float32)
    writer.add_tensor("token_embd.weight", weights)
    quantised = gguf.quants.quantize(weights, gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("output.weight", quantised, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_plain_reader_reads_what_gguf_s_reader_reads(tiny_gguf):
    theirs, ours = gguf.GGUFReader(tiny_gguf), PlainArrayReader(tiny_gguf)
    assert type(ours.data) is np.ndarray and isinstance(theirs.data, np.memmap)
    assert list(ours.fields) == list(theirs.fields)
    for name, field in theirs.fields.items():
        mine = ours.fields[name]
        assert (mine.types, mine.data, mine.offset) == (field.types, field.data, field.offset), name
        assert all(np.array_equal(a, b) for a, b in zip(mine.parts, field.parts, strict=True)), name
    assert [str(bytes(ours.fields["tokenizer.ggml.tokens"].parts[i]), "utf-8")
            for i in ours.fields["tokenizer.ggml.tokens"].data] == PIECES
    for mine, tensor in zip(ours.tensors, theirs.tensors, strict=True):
        assert (mine.name, mine.tensor_type, list(mine.shape)) == (tensor.name, tensor.tensor_type, list(tensor.shape))
        assert np.array_equal(gguf.quants.dequantize(mine.data, mine.tensor_type),
                              gguf.quants.dequantize(tensor.data, tensor.tensor_type))


def test_transformers_parses_a_file_once_within_the_block(tiny_gguf):
    original = gguf.GGUFReader
    with one_parse_per_file() as parsed:
        tokenizer_side = load_gguf_checkpoint(str(tiny_gguf))
        config_side = load_gguf_checkpoint(str(tiny_gguf))
        assert len(parsed) == 1 and isinstance(next(iter(parsed.values())), PlainArrayReader)
    assert gguf.GGUFReader is original  # restored after the block
    outside = load_gguf_checkpoint(str(tiny_gguf))
    assert tokenizer_side["config"] == config_side["config"] == outside["config"]
    assert tokenizer_side["tokenizer"]["tokens"] == outside["tokenizer"]["tokens"] == PIECES
    assert config_side["config"]["num_attention_heads"] == 2 and config_side["config"]["num_key_value_heads"] == 1


def test_two_conversions_at_once_take_turns_and_leave_gguf_s_reader(tiny_gguf):
    """Two first uses converting at once (two threads of a server) take turns: the second block starts after the
    first has ended, and gguf's own reader is back after both."""
    import threading

    original, first_inside, second_trying, overlapped = gguf.GGUFReader, threading.Event(), threading.Event(), []

    def first() -> None:
        with one_parse_per_file():
            first_inside.set()
            second_trying.wait(10)
            threading.Event().wait(0.3)  # time for the second to get in, were it let in
            first_inside.clear()

    def second() -> None:
        first_inside.wait(10)
        second_trying.set()
        with one_parse_per_file():
            overlapped.append(first_inside.is_set())

    threads = [threading.Thread(target=first), threading.Thread(target=second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(20)
    assert overlapped == [False] and gguf.GGUFReader is original


def test_a_conversion_reads_the_gguf_in_the_process_s_turn_for_loading(tiny_gguf, tmp_path, monkeypatch):
    """transformers' loading is not safe in two threads at once (tests/test_model.py): a bundle's conversion on a
    fresh machine reads its GGUF through transformers while another visitor's model may load, so it takes the same
    turn as model.load_model."""
    import transformers

    from mha_core.engine.loading import bundled

    seen = []

    class Read(Exception):
        """Stops the conversion once transformers was asked to read."""

    def reading(*args, **kwargs):
        seen.append(bundled.TRANSFORMERS_LOADING.locked())
        raise Read

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", reading)
    with pytest.raises(Read):
        bundled.convert_gguf(tiny_gguf, tmp_path / "out", bundled.BUNDLES[0])
    assert seen == [True] and not bundled.TRANSFORMERS_LOADING.locked()
