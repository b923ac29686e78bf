"""ConvTranspose1d/2d/3d share one implementation: output_size picks output_padding, and an
unreachable size is refused, in every dimensionality, as PyTorch does."""
import numpy as np
import pytest
import torch

import ember


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_output_size_matches_torch_and_unreachable_sizes_are_refused(dims):
    name = f"ConvTranspose{dims}d"
    torch.manual_seed(0)
    reference = getattr(torch.nn, name)(4, 6, 3, stride=2, padding=1, groups=2)
    ours = getattr(ember.nn, name)(4, 6, 3, stride=2, padding=1, groups=2)
    ours.load_state_dict({k: ember.tensor(v.detach().numpy()) for k, v in reference.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 4) + (5,) * dims).astype(np.float32)
    expected = reference(torch.tensor(x), output_size=(10,) * dims).detach().numpy()
    got = ours(ember.tensor(x), output_size=(10,) * dims).detach().numpy()
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError):
        reference(torch.tensor(x), output_size=(20,) * dims)
    with pytest.raises(ValueError, match=f"{name}: requested output_size"):
        ours(ember.tensor(x), output_size=(20,) * dims)
