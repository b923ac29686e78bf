"""Every public function wrapped for ``__torch_function__`` still pickles by reference to itself (a module whose
attribute is a function, such as TransformerEncoderLayer's ``activation=F.relu``, is saved whole by real programs:
pytorch/examples' word_language_model does ``torch.save(model)``)."""
import io
import pickle

import ember
from ember import _torch_function


def test_every_wrapped_function_pickles_to_itself() -> None:
    failures = []
    for label, functions in _torch_function.OVERRIDABLE.items():
        for fn in functions:
            try:
                if pickle.loads(pickle.dumps(fn)) is not fn:
                    failures.append(f"{label}.{fn.__qualname__}: another object came back")
            except Exception as error:  # noqa: BLE001  (collected and reported together)
                failures.append(f"{label}.{getattr(fn, '__qualname__', fn)}: {error}")
    assert not failures, failures[:10]


def test_a_whole_module_holding_a_function_saves_and_loads() -> None:
    layer = ember.nn.TransformerEncoderLayer(8, 2, 16)
    buffer = io.BytesIO()
    ember.save(layer, buffer)
    buffer.seek(0)
    loaded = ember.load(buffer, weights_only=False)
    assert loaded.activation is ember.nn.functional.relu
    x = ember.randn(3, 2, 8)
    layer.eval(), loaded.eval()
    assert ember.allclose(loaded(x), layer(x))
