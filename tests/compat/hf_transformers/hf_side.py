"""One side of the Hugging Face ``transformers`` comparison: run tiny models with real torch or with ember.

Run as a script (never imported by pytest): ``python hf_side.py torch|ember WORKDIR FAMILY [FAMILY ...]``.

- ``torch``: builds each family's model from a small config with random weights (float64), writes it with
  ``save_pretrained`` (safetensors; ``.bin`` for the families in ``BIN_FAMILIES``) under ``WORKDIR/FAMILY`` and
  records its results;
- ``ember``: installs the ``ember run`` import hook (``import torch`` is ember, nothing else changes), loads the
  same folder with ``from_pretrained`` and records the same results.

Results go to ``WORKDIR/FAMILY.<side>.npz``: logits/hidden states, the loss with labels, every parameter's
gradient (``grad.<name>``), greedy ``generate`` token ids with and without the KV cache, ``sdpa`` logits and
gradient-checkpointing gradients where the family has them. Two entries run on the folders the families wrote:
``trainer`` (three ``Trainer`` steps on GPT-2) and ``pipelines`` (text generation and classification with a tokenizer
made offline). Inputs are drawn with NumPy from fixed seeds, so both
sides see the same ones. The real torchvision of the test venv is hidden (its C++ operators do not load there).
"""
from __future__ import annotations

import os
import sys
import traceback

import numpy as np

SIDE, WORKDIR, FAMILIES = sys.argv[1], sys.argv[2], sys.argv[3:]
sys.modules["torchvision"] = None  # type: ignore[assignment]  # transformers then sees no torchvision
if SIDE == "ember":
    from ember.run import alias
    alias.install()

import torch  # noqa: E402  (ember under the hook)
import transformers  # noqa: E402
from transformers import (  # noqa: E402
    AutoModel, AutoModelForCausalLM, AutoModelForImageClassification, AutoModelForMaskedLM,
    AutoModelForSeq2SeqLM, AutoModelForSequenceClassification, AutoModelForSpeechSeq2Seq,
)

transformers.logging.set_verbosity_error()
BIN_FAMILIES = {"bert"}  # written with safe_serialization=False (pytorch_model.bin through torch.save)
VOCAB = 96


def ids(seed: int, shape: tuple[int, ...], high: int = VOCAB) -> np.ndarray:
    return np.random.default_rng(seed).integers(3, high, size=shape)


def text_inputs(seed: int = 0, batch: int = 2, length: int = 7, pad_last: bool = True) -> dict[str, np.ndarray]:
    input_ids = ids(seed, (batch, length))
    mask = np.ones((batch, length), dtype=np.int64)
    if pad_last:
        mask[-1, -2:] = 0  # the last sequence is shorter: padding on the right
    return {"input_ids": input_ids, "attention_mask": mask}


def configs() -> dict[str, tuple]:
    """family -> (config, auto class, inputs, labels key, generates)."""
    from transformers import (
        BertConfig, CLIPConfig, DistilBertConfig, GPT2Config, LlamaConfig, MistralConfig, Qwen2Config, T5Config,
        ViTConfig, WhisperConfig,
    )
    small = dict(vocab_size=VOCAB)
    text = text_inputs()
    causal_labels = np.where(text["attention_mask"] == 1, text["input_ids"], -100)
    decoder = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, max_position_embeddings=64, pad_token_id=0, bos_token_id=1,
                   eos_token_id=2, tie_word_embeddings=False, **small)
    return {
        "gpt2": (GPT2Config(n_layer=2, n_embd=32, n_head=4, n_positions=64, bos_token_id=1, eos_token_id=2,
                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, **small),
                 AutoModelForCausalLM, text, causal_labels, True),
        "llama": (LlamaConfig(**decoder), AutoModelForCausalLM, text, causal_labels, True),
        "mistral": (MistralConfig(sliding_window=4, **decoder), AutoModelForCausalLM, text, causal_labels, True),
        "qwen2": (Qwen2Config(**decoder), AutoModelForCausalLM, text, causal_labels, True),
        "bert": (BertConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
                            max_position_embeddings=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                            **small),
                 AutoModelForMaskedLM, {**text, "token_type_ids": np.zeros_like(text["input_ids"])},
                 np.where(ids(5, text["input_ids"].shape, 4) == 3, text["input_ids"], -100), False),
        "distilbert": (DistilBertConfig(dim=32, n_layers=2, n_heads=4, hidden_dim=64, max_position_embeddings=64,
                                        dropout=0.0, attention_dropout=0.0, seq_classif_dropout=0.0,
                                        num_labels=3, **small),
                       AutoModelForSequenceClassification, text, np.array([0, 2]), False),
        "t5": (T5Config(d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4, dropout_rate=0.0,
                        decoder_start_token_id=0, relative_attention_num_buckets=8, **small),
               AutoModelForSeq2SeqLM, text, ids(7, (2, 5)), True),
        "whisper": (WhisperConfig(d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                                  decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8,
                                  max_source_positions=16, max_target_positions=32, pad_token_id=0, bos_token_id=1,
                                  eos_token_id=2, decoder_start_token_id=1, dropout=0.0, attention_dropout=0.0,
                                  activation_dropout=0.0, **small),
                    AutoModelForSpeechSeq2Seq,
                    {"input_features": np.random.default_rng(4).standard_normal((2, 8, 32))}, ids(8, (2, 5)), False),
        "clip": (CLIPConfig(text_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                             num_attention_heads=4, max_position_embeddings=16, **small),
                            vision_config=dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                               num_attention_heads=4, image_size=16, patch_size=4),
                            projection_dim=16),
                 AutoModel, {**text, "pixel_values": np.random.default_rng(6).standard_normal((2, 3, 16, 16))},
                 None, False),
        "vit": (ViTConfig(image_size=16, patch_size=4, num_channels=3, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=4, intermediate_size=64, hidden_dropout_prob=0.0,
                          attention_probs_dropout_prob=0.0, num_labels=5),
                AutoModelForImageClassification,
                {"pixel_values": np.random.default_rng(3).standard_normal((2, 3, 16, 16))}, np.array([1, 4]), False),
    }


def as_torch(value: np.ndarray) -> torch.Tensor:
    return torch.tensor(value)


LOGITS = {"clip": "logits_per_image"}  # families whose main output has another name


def forward_record(model, inputs: dict, labels: np.ndarray | None, tag: str, out: dict) -> None:
    """Logits and loss of one forward with labels (``return_loss=True`` when None), and every parameter's gradient."""
    model.zero_grad()
    loss_args = {"labels": as_torch(labels)} if labels is not None else {"return_loss": True}
    result = model(**{k: as_torch(v) for k, v in inputs.items()}, **loss_args)
    logits = getattr(result, LOGITS.get(model.config.model_type, "logits"))
    out[f"{tag}logits"] = logits.detach().numpy()
    out[f"{tag}loss"] = np.array(result.loss.item())
    result.loss.backward()
    for name, p in model.named_parameters():
        if p.grad is not None:
            out[f"{tag}grad.{name}"] = p.grad.numpy().copy()


def run_family(name: str) -> dict:
    config, auto, inputs, labels, generates = configs()[name]
    folder = os.path.join(WORKDIR, name)
    if SIDE == "torch":
        torch.manual_seed(0)
        model = auto.from_config(config, attn_implementation="eager").double()
        model.save_pretrained(folder, safe_serialization=name not in BIN_FAMILIES)
    model = auto.from_pretrained(folder, dtype=torch.float64, attn_implementation="eager")
    model.eval()
    out: dict = {"files": np.array(sorted(os.listdir(folder)))}
    forward_record(model, inputs, labels, "", out)
    if name not in ("t5", "distilbert"):  # families with an sdpa path in transformers
        sdpa = auto.from_pretrained(folder, dtype=torch.float64, attn_implementation="sdpa").eval()
        forward_record(sdpa, inputs, labels, "sdpa.", out)
    if name == "llama":  # flex_attention (torch compiles it with inductor, which takes float32 only on CPU)
        flex = auto.from_pretrained(folder, dtype=torch.float32, attn_implementation="flex_attention").eval()
        with torch.no_grad():
            out["flex.logits"] = flex(**{k: as_torch(v) for k, v in inputs.items()}).logits.numpy()
    model.train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    forward_record(model, inputs, labels, "ckpt.", out)
    model.gradient_checkpointing_disable()
    model.eval()
    if generates:
        prompt = {k: as_torch(v[:, :5]) for k, v in text_inputs(seed=11, pad_last=False).items()}
        with torch.no_grad():
            for cache in (True, False):
                seq = model.generate(**prompt, max_new_tokens=6, do_sample=False, use_cache=cache,
                                     pad_token_id=0)
                out[f"generate.greedy.cache{int(cache)}"] = seq.numpy()
            torch.manual_seed(123)
            first = model.generate(**prompt, max_new_tokens=6, do_sample=True, top_k=20, pad_token_id=0).numpy()
            torch.manual_seed(123)
            again = model.generate(**prompt, max_new_tokens=6, do_sample=True, top_k=20, pad_token_id=0).numpy()
            out["generate.sample"], out["generate.sample_again"] = first, again
    return out


def run_trainer(name: str) -> dict:
    """Three AdamW steps of ``Trainer`` (linear warm-up, weight decay, sequential batches) on the GPT-2 folder."""
    from transformers import Trainer, TrainingArguments

    model = AutoModelForCausalLM.from_pretrained(os.path.join(WORKDIR, "gpt2"), dtype=torch.float64)
    rows = ids(21, (8, 8))
    data = [{"input_ids": as_torch(r), "labels": as_torch(r)} for r in rows]
    args = TrainingArguments(output_dir=os.path.join(WORKDIR, f"trainer-{SIDE}"), max_steps=3,
                             per_device_train_batch_size=4, learning_rate=1e-2, warmup_steps=1, weight_decay=0.01,
                             lr_scheduler_type="linear", logging_steps=1, report_to=[], use_cpu=True,
                             save_strategy="no", seed=0, dataloader_num_workers=0,
                             train_sampling_strategy="sequential", disable_tqdm=True)
    trainer = Trainer(model=model, args=args, train_dataset=data)
    result = trainer.train()
    out = {"losses": np.array([h["loss"] for h in trainer.state.log_history if "loss" in h]),
           "learning_rates": np.array([h["learning_rate"] for h in trainer.state.log_history if "loss" in h]),
           "train_loss": np.array(result.training_loss)}
    for pname, p in model.named_parameters():
        out[f"param.{pname}"] = p.detach().numpy().copy()
    return out


def run_pipelines(name: str) -> dict:
    """``pipeline`` text generation (Llama folder) and text classification (DistilBERT folder) with a word-level
    tokenizer made offline with ``tokenizers``."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, pipeline

    words = Tokenizer(models.WordLevel(vocab={f"w{i}": i for i in range(VOCAB)}, unk_token="w0"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="w0", pad_token="w0", eos_token="w2",
                                        bos_token="w1")
    causal = AutoModelForCausalLM.from_pretrained(os.path.join(WORKDIR, "llama"), dtype=torch.float64)
    generate = pipeline("text-generation", model=causal, tokenizer=tokenizer, device="cpu")
    text = generate("w5 w17 w33", max_new_tokens=5, do_sample=False)[0]["generated_text"]
    classifier = AutoModelForSequenceClassification.from_pretrained(os.path.join(WORKDIR, "distilbert"),
                                                                    dtype=torch.float64)
    classify = pipeline("text-classification", model=classifier, tokenizer=tokenizer, device="cpu", top_k=None)
    scores = classify(["w5 w17 w33", "w9 w9 w40 w41"])
    return {"generated_text": np.array(text),
            "labels": np.array([[d["label"] for d in row] for row in scores]),
            "scores": np.array([[d["score"] for d in row] for row in scores])}


def run_helpers(name: str) -> dict:
    """transformers' argument-free ``is_torch_*`` availability checks (versions, devices, features)."""
    from transformers.utils import import_utils

    answers = {}
    for helper in sorted(n for n in dir(import_utils) if n.startswith("is_torch")):
        try:
            answers[helper] = repr(getattr(import_utils, helper)())
        except TypeError:  # needs arguments
            continue
        except Exception as error:  # noqa: BLE001 - recorded: the answer is what is compared
            answers[helper] = f"raised {type(error).__name__}"
    return {"names": np.array(list(answers)), "answers": np.array(list(answers.values()))}


def main() -> None:
    for name in FAMILIES:
        try:
            runner = {"trainer": run_trainer, "pipelines": run_pipelines, "helpers": run_helpers}.get(name, run_family)
            result = runner(name)
        except Exception:  # recorded, so the test names the family and shows where it failed
            result = {"error": np.array(traceback.format_exc())}
        np.savez(os.path.join(WORKDIR, f"{name}.{SIDE}.npz"), **result)


if __name__ == "__main__":
    main()
