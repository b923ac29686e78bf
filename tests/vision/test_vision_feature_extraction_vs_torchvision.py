"""torchvision.models.feature_extraction on ember: node names equal torchvision's for the same architectures
(train and eval), the extractor's outputs equal the intermediate values computed directly, state_dict keys are the
model's, and errors name the problem."""
import warnings

import numpy as np
import pytest

import ember
import ember.vision.models as em
from ember.vision.models.feature_extraction import create_feature_extractor, get_graph_node_names

ARCHITECTURES = ["resnet18", "mobilenet_v3_small", "efficientnet_b0", "vit_b_16", "convnext_tiny", "swin_t",
                 "regnet_y_400mf", "shufflenet_v2_x0_5", "googlenet", "alexnet"]
META_BUILDS = {"convnext_tiny", "swin_t", "vit_b_16", "googlenet", "efficientnet_b0"}


@pytest.mark.parametrize("name", ARCHITECTURES)
def test_node_names_equal_torchvision(name: str) -> None:
    pytest.importorskip("torch")
    try:
        from torchvision_ref import import_torchvision
        tv = import_torchvision()
    except ImportError:
        pytest.skip("torchvision is not installed")
    from torchvision.models.feature_extraction import get_graph_node_names as tv_names

    import torch

    # The big ones are built on the meta device in both libraries: node names come from the module tree and the
    # forward code, which no weight value changes, and a full-size build's random init cost ~1.5 s per model and
    # library. The small ones keep a real build, so names from models with weights are compared too (regnet's
    # builder cannot run on meta in torchvision: it reads a tensor's value).
    real = name not in META_BUILDS
    with warnings.catch_warnings(), ember.device("cpu" if real else "meta"), torch.device("cpu" if real else "meta"):
        warnings.simplefilter("ignore")
        assert get_graph_node_names(getattr(em, name)()) == tv_names(getattr(tv.models, name)())


def test_extracted_values_equal_direct_computation() -> None:
    ember.manual_seed(0)
    model = em.resnet18().eval()
    x = ember.randn(2, 3, 32, 32)
    extractor = create_feature_extractor(model, return_nodes={"layer1": "low", "layer2.0.relu_1": "mid",
                                                              "flatten": "flat"})
    out = extractor(x)
    with ember.no_grad():
        stem = model.maxpool(model.relu(model.bn1(model.conv1(x))))
        low = model.layer1(stem)
        mid = model.layer2[0](low)
        flat = ember.flatten(model.avgpool(model.layer4(model.layer3(model.layer2(low)))), 1)
    for key, expected in (("low", low), ("mid", mid), ("flat", flat)):
        np.testing.assert_allclose(out[key].detach().numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)
    assert sorted(extractor.state_dict()) == sorted(k for k in model.state_dict() if not k.startswith("fc."))
    assert "fc" not in dict(extractor.named_children())  # cut: nothing asked for needs it


def test_train_and_eval_graphs_and_errors() -> None:
    model = em.resnet18()
    extractor = create_feature_extractor(model, train_return_nodes=["layer1"], eval_return_nodes=["layer2"])
    x = ember.randn(2, 3, 32, 32)
    assert list(extractor.train()(x)) == ["layer1"]
    assert list(extractor.eval()(x)) == ["layer2"]
    with pytest.raises(ValueError, match="node: 'layer9' is not present in model"):
        create_feature_extractor(model, return_nodes=["layer9"])
    with pytest.raises(ValueError, match="should be specified"):
        create_feature_extractor(model)
