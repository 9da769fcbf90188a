"""KV cache bytes per token from a model's ``config.json`` and vLLM's ``--kv-cache-dtype``
(RUNBOOK §4.2), for the G3 tier sizing: not a constant, the model's own figures.

* Standard attention (MHA / GQA / MQA): 2 (K and V) × ``num_hidden_layers`` ×
  ``num_key_value_heads`` (absent: ``num_attention_heads``, plain MHA) × ``head_dim`` (absent or
  null: ``hidden_size`` ÷ ``num_attention_heads``, which must divide) × bytes per element.
* MLA (DeepSeek-V2/V3 and kin: ``kv_lora_rank`` present): one latent per token and layer,
  ``num_hidden_layers`` × (``kv_lora_rank`` + ``qk_rope_head_dim``) × bytes per element (vLLM's
  MLA cache holds the compressed latent and the rope key, no separate V).
* Multimodal configs keep the language model's figures in ``text_config``: read there when the
  top level has no ``num_hidden_layers``.
* Bytes per element: ``--kv-cache-dtype`` ``fp8`` / ``fp8_e4m3`` / ``fp8_e5m2`` 1 (half of
  16-bit), ``bfloat16`` / ``float16`` / ``half`` 2; ``auto`` is the model's dtype
  (``torch_dtype``, newer transformers ``dtype``): ``bfloat16`` / ``float16`` 2.

Refused with the field named (:class:`KVSizeError`), never guessed: a missing or non-positive
figure, a head size that does not divide, ``auto`` on a ``float32`` model (vLLM then serves a
16-bit type of its choosing: give ``--kv-cache-dtype``), an unknown dtype, ``fp8_ds_mla`` (a
packed layout of its own), and hybrid models whose ``layer_types`` name layers without a KV
cache of this shape (linear attention, Mamba): their bytes per token are not this formula.
"""

from __future__ import annotations

from typing import Any

#: --kv-cache-dtype → bytes per element (None: the model's dtype)
KV_DTYPE_BYTES: dict[str, int | None] = {
    "auto": None, "fp8": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "bfloat16": 2, "float16": 2,
    "half": 2,
}
MODEL_DTYPE_BYTES = {"bfloat16": 2, "float16": 2}
ATTENTION_LAYERS = frozenset({"full_attention", "sliding_attention", "attention"})


class KVSizeError(ValueError):
    """The KV bytes per token cannot be computed; the message names the field."""


def _positive_int(config: dict[str, Any], field: str) -> int:
    value = config.get(field)
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise KVSizeError(f"config.json field {field} is {value!r}, not a positive integer")
    return value


def _element_bytes(config: dict[str, Any], kv_cache_dtype: str) -> int:
    if kv_cache_dtype not in KV_DTYPE_BYTES:
        raise KVSizeError(f"--kv-cache-dtype {kv_cache_dtype!r}: not one of "
                          f"{', '.join(sorted(KV_DTYPE_BYTES))}: its bytes per element are not "
                          f"known here")
    fixed = KV_DTYPE_BYTES[kv_cache_dtype]
    if fixed is not None:
        return fixed
    field = "torch_dtype" if "torch_dtype" in config else "dtype"
    model = config.get(field)
    if "torch_dtype" not in config and "dtype" not in config:
        raise KVSizeError("config.json has neither torch_dtype nor dtype: --kv-cache-dtype auto "
                          "takes the model's dtype; give --kv-cache-dtype explicitly")
    if model not in MODEL_DTYPE_BYTES:
        raise KVSizeError(f"config.json field {field} is {model!r}: --kv-cache-dtype auto "
                          f"takes the model's dtype (bfloat16 or float16 known); give "
                          f"--kv-cache-dtype explicitly")
    return MODEL_DTYPE_BYTES[str(model)]


def kv_bytes_per_token(config: dict[str, Any], kv_cache_dtype: str = "auto") -> int:
    """Bytes of KV cache one token takes over all layers (all TP ranks together)."""
    if not isinstance(config, dict):
        raise KVSizeError("config.json is not a JSON object")
    if "num_hidden_layers" not in config and isinstance(config.get("text_config"), dict):
        text = dict(config["text_config"])
        for field in ("torch_dtype", "dtype"):
            if field in config and field not in text:
                text[field] = config[field]
        config = text
    layer_types = config.get("layer_types")
    if isinstance(layer_types, list):
        other = sorted({str(t) for t in layer_types} - ATTENTION_LAYERS)
        if other:
            raise KVSizeError(f"config.json field layer_types names {', '.join(other)} layers: "
                              f"a hybrid model's KV bytes per token are not 2 × layers × KV "
                              f"heads × head size")
    if kv_cache_dtype == "fp8_ds_mla":
        raise KVSizeError("--kv-cache-dtype fp8_ds_mla packs the MLA latent in a layout of its "
                          "own: its bytes per token are not computed here")
    element = _element_bytes(config, kv_cache_dtype)
    layers = _positive_int(config, "num_hidden_layers")
    if "kv_lora_rank" in config:
        return layers * (_positive_int(config, "kv_lora_rank")
                         + _positive_int(config, "qk_rope_head_dim")) * element
    heads = _positive_int(config, "num_attention_heads")
    kv_heads = (_positive_int(config, "num_key_value_heads")
                if config.get("num_key_value_heads") is not None else heads)
    if config.get("head_dim") is not None:
        head_dim = _positive_int(config, "head_dim")
    else:
        hidden = _positive_int(config, "hidden_size")
        if hidden % heads:
            raise KVSizeError(f"config.json has no head_dim and hidden_size {hidden} is not a "
                              f"multiple of num_attention_heads {heads}")
        head_dim = hidden // heads
    return 2 * layers * kv_heads * head_dim * element
