"""The reviewed differences between torch 2.13's call signatures and ember's (test_signatures_match_torch.py).

Each entry: the qualified name -> (the sweep's exact difference strings, why ember differs on purpose or why
the difference is harmless). A new difference fails the test; so does an entry that no longer differs (remove it).
"""
from __future__ import annotations

_STORAGE = ("missing _internal", "torch's private flag of the legacy storage classes (it silences their deprecation "
                                 "warning inside torch itself)")
_REDUCTION_ENUM = ("reduction=1 vs 0", "ATen's schema says reduction=Mean (1), but torch's Python binding parses that "
                   "default as 0: torch.kl_div(x, t) returns the unreduced tensor. ember follows the behaviour "
                   "(checked in test_aten_reduction_default_is_none_as_torchs_binding)")
_UNBIASED = ("unbiased=True vs None", "None selects the unbiased estimate, as torch's True (the correction= overload "
                                      "shares the parameter list)")
_OUT_DTYPE = ("missing out_dtype", "torch 2.13's out_dtype overloads run on CUDA only: torch's CPU build raises "
                                   "'Could not run aten::mm.dtype'")
_PACKED_RNN = ("missing data; missing batch_sizes", "the packed-sequence overload of the functional RNN kernels "
                                                    "(nn.LSTM on a PackedSequence runs ember's own packed path)")
_QUANT = ("missing input", "ao's quantized-tensor queries name their argument tensor; positional in every caller")
_VAR_KW = ("takes **kwargs", "forwards every argument to one implementation, which checks names as torch's does")
_REMOVED = ("takes **kwargs", "removed from torch (eig, lstsq, solve, symeig, matrix_rank): ember raises torch's "
                              "RuntimeError naming the replacement, whatever the arguments")

ALLOWED: dict[str, tuple[list[str], str]] = {
    **{f"{k}Storage": ([_STORAGE[0]], _STORAGE[1]) for k in (
        "BFloat16", "Bool", "Byte", "Char", "ComplexDouble", "ComplexFloat", "Double", "Float", "Half", "Int",
        "Long", "Short", "Typed", "")},
    "GradScaler": (["device='cuda' vs 'cpu'"], "ember's amp scales on the CPU by default: torch's CPU build warns "
                                               "and disables a GradScaler() made for 'cuda'"),
    "amp.GradScaler": (["device='cuda' vs 'cpu'"], "as torch.GradScaler"),
    "SymBool": ([_VAR_KW[0]], "symbolic scalars wrap ember's values, not torch's SymNode"),
    "SymFloat": ([_VAR_KW[0]], "symbolic scalars wrap ember's values, not torch's SymNode"),
    "SymInt": ([_VAR_KW[0]], "symbolic scalars wrap ember's values, not torch's SymNode"),
    "compile": ([_VAR_KW[0], "options required"],
                "ember.compile takes torch.compile's keywords (options={...}, dynamic, mode, backend, ...) through "
                "**options and checks them as torch does (ember/graph/compile_options.py), beside its own passes"),
    "save": (["takes **kwargs", "pickle_module=pickle vs None"],
             "ember's writer takes its own options; None means the pickle module (formats21's serialization)"),
    **{n: ([_OUT_DTYPE[0]], _OUT_DTYPE[1]) for n in ("addmm", "baddbmm", "bmm", "mm", "Tensor.addmm",
                                                     "Tensor.baddbmm", "Tensor.bmm", "Tensor.mm")},
    **{n: ([_REDUCTION_ENUM[0]], _REDUCTION_ENUM[1]) for n in (
        "binary_cross_entropy_with_logits", "cosine_embedding_loss", "ctc_loss", "hinge_embedding_loss", "kl_div",
        "margin_ranking_loss", "triplet_margin_loss")},
    **{n: ([_UNBIASED[0]], _UNBIASED[1]) for n in ("std", "var", "std_mean", "var_mean", "Tensor.std",
                                                   "Tensor.var")},
    **{n: (_PACKED_RNN[0].split("; "), _PACKED_RNN[1]) for n in ("gru", "lstm", "rnn_relu", "rnn_tanh")},
    **{n: ([_QUANT[0]], _QUANT[1]) for n in ("dequantize", "int_repr", "q_per_channel_axis", "q_per_channel_scales",
                                             "q_per_channel_zero_points", "q_scale", "q_zero_point")},
    **{n: ([_REMOVED[0]], _REMOVED[1]) for n in ("Tensor.eig", "Tensor.lstsq", "Tensor.solve", "Tensor.symeig",
                                                 "eig", "lstsq", "matrix_rank", "solve", "symeig")},
    "cdist": (["compute_mode='use_mm_for_euclid_dist_if_necessary' vs None"],
              "None is torch's documented default meaning (use matrix products when a side has over 25 rows)"),
    "cumulative_trapezoid": (["dx=1 vs None"], "None means spacing 1, as torch's dx=1 (x= takes its place)"),
    "trapezoid": (["dx=1 vs None"], "None means spacing 1, as torch's dx=1 (x= takes its place)"),
    "trapz": (["dx=1.0 vs None"], "None means spacing 1, as torch's dx=1 (x= takes its place)"),
    "gradient": (["spacing=None vs 1"], "ATen's spacing=None means unit spacing; ember writes the 1 it stands for"),
    "isin": (["missing test_element", "missing element"],
             "the Scalar overloads' names; ember takes a number in either position as torch does"),
    "meshgrid": (["indexing=None vs 'ij'"], "torch's default None warns and means 'ij'; ember means 'ij' silently"),
    "nan_to_num": (["nan=None vs 0.0"], "ember writes torch's effective default (None means 0.0)"),
    "Tensor.nan_to_num": (["nan=None vs 0.0"], "ember writes torch's effective default (None means 0.0)"),
    "norm": (["out kw-only", "order ['input', 'p', 'dim', 'keepdim', 'out', 'dtype'] vs "
                             "['input', 'p', 'dim', 'keepdim', 'dtype']"],
             "torch.norm's out is its 5th positional parameter; ember takes out= by keyword only"),
    "tensordot": (["out kw-only", "order ['a', 'b', 'dims', 'out'] vs ['a', 'b', 'dims']"],
                  "out= by keyword only"),
    "nn.functional.normalize": (["out kw-only", "order ['input', 'p', 'dim', 'eps', 'out'] vs "
                                                "['input', 'p', 'dim', 'eps']"], "out= by keyword only"),
    "promote_types": (["missing type1", "missing type2"], "dtypes are passed positionally; ember's core names them "
                                                          "a, b"),
    "result_type": (["missing tensor", "missing other", "missing scalar"],
                    "torch's four overloads name the operands per type; ember takes any two operands positionally"),
    "sparse_coo_tensor": (["missing layout"], "ATen lists layout; torch's Python binding refuses it too"),
    "sparse_csc_tensor": (["missing layout"], "the layout is the function's; torch's binding takes no layout"),
    "sparse_csr_tensor": (["missing layout"], "the layout is the function's; torch's binding takes no layout"),
    "split": (["split_size_or_sections optional"], "ember's split also takes Tensor.split's split_size= keyword"),
    "tensor": (["missing t"], "TorchScript's tensor(t[] data) overloads; torch.tensor(data, ...) is the Python form"),
    "Tensor.copy_": (["missing other"], "TorchScript-only copy_(Tensor self, Tensor other) overload"),
    "Tensor.expand": (["missing implicit"], "ATen's internal flag (torch's docs: 'do not use')"),
    "Tensor.is_set_to": (["missing tensor"], "rare; positional"),
    "Tensor.pow_": (["missing exponent"], "x.pow_(exponent=) is rare; positional calls are the same"),
    "Tensor.resize_": (["missing size"], "ember's resize_(*sizes) takes sizes positionally"),
    "Tensor.resize_as": (["missing tensor", "requires extra ['other']"], "positional"),
    "Tensor.resize_as_": (["missing the_template"], "positional"),
    "Tensor.istft": ([_VAR_KW[0]], _VAR_KW[1]),
    "Tensor.stft": ([_VAR_KW[0]], _VAR_KW[1]),
    "Tensor.unique_consecutive": ([_VAR_KW[0]], _VAR_KW[1]),
    "nn.functional.multi_head_attention_forward": ([_VAR_KW[0]], _VAR_KW[1]),
    "autograd.backward": (["missing grad_variables"], "torch's pre-0.4 spelling of grad_tensors"),
    "autograd.graph.RemovableHandle": (["missing hooks_dict", "missing extra_dict", "requires extra ['hooks', 'hook']"],
                                       "handles are made by register_*hook, never by user code"),
    "testing.make_tensor": (["device optional"], "ember defaults to the CPU; torch requires the argument"),
    "utils.checkpoint.checkpoint": (["context_fn=noop_context_fn vs None"], "None means no context, as torch's noop"),
}
