"""Config classes with which ``num_key_value_heads: null`` fails in vLLM.

transformers 5.20's config classes are strict dataclasses: a class that declares
``num_key_value_heads: int`` (``MistralConfig``, ``Qwen3MoeConfig``, ``Gemma3TextConfig``...)
raises ``StrictDataclassFieldValidationError`` on a null before its ``__post_init__`` could
fill it, so vLLM, which loads every config through ``AutoConfig``, refuses the model. A class
that declares ``int | None`` (``LlamaConfig``, ``Qwen2Config``...) fills a null with
``num_attention_heads``, except the few that keep it null (``Qwen2MoeConfig``), which vLLM's
``ModelConfig`` refuses. Listed from the classes' annotations (tests/vllm_oracle/sweep.py
checked each against vLLM 0.33's ``ModelConfig``). Not ``deepseek_v32``: vLLM builds it with
its own config class (``_CONFIG_REGISTRY``), which accepts the null.
"""

from __future__ import annotations

from typing import Final

from ._hf_fields import Section

KV_HEADS_NOT_NULL: Final = frozenset(
    {
        "axk1", "axk2", "beam", "cwm", "deepseek_v4", "diffusion_gemma_text",
        "exaone4", "exaone_moe", "gemma", "gemma2", "gemma3_text", "gemma3n_text",
        "gemma4_text", "gemma4_unified_text", "glm4", "glm4_moe", "glm4_moe_lite",
        "glm4v_moe_text", "glm5_next_text", "glm_moe_dsa", "glm_ocr_text", "gpt_oss", "helium",
        "hy_v3", "hy_v4", "inkling_text", "jamba", "jetmoe", "kolibri1", "laguna", "lfm2",
        "lfm2_moe", "llama4_text", "mellum", "mimo_v2_flash", "minimax", "minimax_m2",
        "minimax_m3_vl_text", "ministral", "ministral3", "mistral", "mixtral",
        "mllama_text_model", "molmo2_text", "muse_glimmer_text", "muse_spark_text",
        "nemotron_h", "phimoe", "qwen3_5_moe_text", "qwen3_5_text", "qwen3_moe", "qwen3_next",
        "qwen3_omni_moe_talker_text", "qwen3_omni_moe_text", "qwen3_vl_moe_text",
        "qwen4_exp_text", "solar_open", "stablelm", "starcoder2", "step3p5",
        "t5gemma2_text", "vaultgemma", "voxtral_realtime_text", "youtu", "zamba", "zaya",
    }
)
"""The model types whose transformers config class declares ``num_key_value_heads: int``."""

KV_HEADS_LEFT_NULL: Final = frozenset(
    {
        "chameleon", "emu3_text_model", "ernie4_5_moe", "ernie4_5_vl_moe_text", "glm",
        "nemotron", "qwen2_moe",
    }
)
"""The model types whose class admits a null and keeps it (no ``__post_init__`` fill):
vLLM's ``ModelConfig`` then refuses a null ``total_num_kv_heads`` (a pydantic int field,
vllm/config/model.py; the sweep saw it for qwen2_moe, ernie4_5_moe and nemotron)."""


def kv_heads_not_null(sec: Section) -> bool:
    """Whether the decoder's ``num_key_value_heads`` is not a null its config class refuses
    (an issue at the field otherwise): such a file fails to load in vLLM, whatever the cache
    (MLA families too), so kvunits refuses it rather than read the attention heads. The
    file's own ``model_type`` names the class transformers builds; the family's, without one."""
    named = sec.data.get("model_type")
    model_type = named if isinstance(named, str) else sec.model_type
    if "num_key_value_heads" not in sec.data or sec.data["num_key_value_heads"] is not None:
        return True
    if model_type in KV_HEADS_NOT_NULL:
        why = "refuses (it declares an int, and vLLM loads the config through it)"
    elif model_type in KV_HEADS_LEFT_NULL:
        why = "keeps as null, which vLLM's ModelConfig refuses (total_num_kv_heads is an int)"
    else:
        return True
    sec.issue(
        "num_key_value_heads",
        f"null, which transformers' {model_type} config class {why}: write the number of "
        "KV heads",
    )
    return False
