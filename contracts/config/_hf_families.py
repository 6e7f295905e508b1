"""The model families the Hugging Face reader knows, and what each is read as.

A family is found by the config's ``model_type`` (else its first ``architectures`` entry);
a multimodal wrapper (llava, mistral3, gemma3, …) names the family of its ``text_config``.
Each family lists the transformers class defaults its reader applies to absent keys, and the
cache-sizing fields it reads or knowingly ignores (with vLLM's reason): a field that sizes
the cache in *some* family (`CACHE_FIELDS`) and that this family's reader neither reads nor
ignores is refused, by name, rather than guessed at. ``kvunits models`` prints `FAMILIES`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from .._layers import LayerSpec
from ._hf_decoders import (
    read_cohere2,
    read_cohere2_moe,
    read_deepseek,
    read_deepseek_sparse,
    read_exaone_moe,
    read_gemma,
    read_gemma3n,
    read_gemma4,
    read_gpt_oss,
    read_hy_v4,
    read_llama,
    read_llama4,
    read_longcat_flash,
    read_mimo_v2,
    read_minicpm3,
    read_qwen2,
    read_qwen3_moe,
)
from ._hf_fields import Section
from ._hf_generic import (
    HeadRule,
    WindowRule,
    attention_reader,
    patterned_reader,
    read_chatglm,
    read_dbrx,
    read_exaone4,
    read_falcon,
    read_gpt_bigcode,
    read_iquest_loopcoder,
    read_nemotron_nas,
    read_rnj1,
    read_step1,
    read_step3_text,
)
from ._hf_hybrids import read_gated_delta_net, read_jamba, read_nemotron_h, read_olmo_hybrid
from ._hf_kimi import read_kimi_linear
from ._hf_layers import DTypes
from ._hf_openpangu import read_openpangu
from ._hf_speech import read_whisper
from ._hf_ssm import (
    read_falcon_h1,
    read_granite_hybrid,
    read_lfm2,
    read_mamba,
    read_mamba2,
    read_zamba2,
)

Reader = Callable[[Section, DTypes], dict[str, LayerSpec] | None]

#: Fields that size or shape the KV cache in at least one family: a family reader must read
#: or knowingly ignore each one a file sets (non-null), or the file is refused.
CACHE_FIELDS: Final = frozenset(
    {
        "sliding_window",
        "layer_types",
        "use_sliding_window",
        "max_window_layers",
        "sliding_window_pattern",
        "interleaved_sliding_window",
        "attention_chunk_size",
        "no_rope_layers",
        "no_rope_layer_interval",
        "head_dim",
        "num_key_value_heads",
        "global_head_dim",
        "num_global_key_value_heads",
        "attention_k_eq_v",
        "num_kv_shared_layers",
        "per_layer_config",
        "kv_lora_rank",
        "qk_rope_head_dim",
        "index_topk",
        "index_topk_freq",
        "index_topk_pattern",
        "attn_layer_period",
        "attn_layer_offset",
        "full_attention_interval",
        "linear_num_key_heads",
        "linear_num_value_heads",
        "mamba_d_state",
        "mamba_expand",
        "hybrid_override_pattern",
        "layers_block_type",
        "mamba_num_heads",
        "ssm_state_size",
        "block_pool_size",
        "cross_attention_layers",
        "use_bidirectional_attention",
        "attention_head_dim",
    }
)


@dataclass(frozen=True)
class Family:
    """One family reader.

    Attributes:
        name: the family's name (``kvunits models``).
        model_types: the ``model_type`` values it reads (of the decoder section).
        architectures: vLLM architectures it stands for (used when ``model_type`` is absent).
        read_as: what its layers are read as, for people.
        read: the reader.
        reads: the `CACHE_FIELDS` it reads.
        ignores: the `CACHE_FIELDS` it ignores, each with vLLM's reason.
        defaults: per model type, the class defaults applied to absent keys.
    """

    name: str
    model_types: tuple[str, ...]
    architectures: tuple[str, ...]
    read_as: str
    read: Reader
    reads: frozenset[str]
    ignores: Mapping[str, str] = field(default_factory=dict)
    defaults: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: per model type, a field's other name in the file (``num_layers`` for
    #: ``num_hidden_layers``): transformers' ``attribute_map``, which vLLM reads through.
    aliases: Mapping[str, Mapping[str, str]] = field(default_factory=dict)


_ATTN: Final = frozenset({"num_key_value_heads", "head_dim"})
#: DeepSeek sparse attention's indexer fields (vllm/models/deepseek_v32/attention.py).
_DSA_READS: Final = frozenset({"index_topk", "index_topk_freq", "index_topk_pattern"})
_LLAMA_READS: Final = _ATTN | {"sliding_window", "layer_types"}

#: transformers' Gemma3TextConfig defaults (gemma3 and rnj1 read it).
_GEMMA3_TEXT: Final = {
    "hidden_size": 2304,
    "num_hidden_layers": 26,
    "num_attention_heads": 8,
    "num_key_value_heads": 4,
    "head_dim": 256,
    "max_position_embeddings": 131072,
    "sliding_window": 4096,
}
_LLAMA: Final = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32}
_QWEN: Final = {
    "max_position_embeddings": 32768,
    "use_sliding_window": False,
    "sliding_window": 4096,
}
_QWEN_VL: Final = {
    **_QWEN,
    "hidden_size": 8192,
    "num_hidden_layers": 80,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "max_window_layers": 80,
}

_NO_SLIDING: Final = {
    "use_sliding_window": "transformers keeps no window unless it is true (then refused)",
    "max_window_layers": "read only with use_sliding_window, which is refused when true",
}
_DERIVED: Final = {"head_dim": "vLLM takes hidden_size / num_attention_heads"}
_LAYERS: Final = {"num_hidden_layers": "num_layers"}
_GPT: Final = {
    "num_hidden_layers": "n_layer",
    "num_attention_heads": "n_head",
    "hidden_size": "n_embd",
    "max_position_embeddings": "n_positions",
}

#: Multimodal decoders' text model types read as a text family: glm4_1v.py
#: ``Glm4vForConditionalGeneration`` builds its language model on ``text_config`` as
#: ``Glm4ForCausalLM`` for glm4v and glm_ocr, as ``Glm4MoeForCausalLM`` for glm4v_moe.
_DECODER_OF: Final[Mapping[str, tuple[str, ...]]] = {
    "glm4": ("glm4v_text", "glm_ocr_text"),
    "glm4_moe": ("glm4v_moe_text",),
    # paddleocr_vl.py builds Ernie4_5ForCausalLM on the text config (PaddleOCRTextConfig,
    # which transformers fills from the published file's flat top level).
    "ernie4_5": ("paddleocr_vl_text",),
    # ernie45_vl_moe.py Ernie4_5_VLMoeAttention: full attention, head_dim (else hidden_size
    # / heads) and num_key_value_heads of the text config, no window.
    "ernie4_5_moe": ("ernie4_5_vl_moe_text",),
    # granite4_vision.py builds Granite4VisionLLMForCausalLM, a GraniteForCausalLM, on
    # text_config (vllm_config.with_hf_config(config.text_config)).
    "granite": ("granite4_vision_text",),
}
#: Cache fields a generic family knowingly ignores, with vLLM's reason.
_IGNORES_OF: Final[Mapping[str, Mapping[str, str]]] = {
    "transformers": {
        # SmolLM3's published config (SmolLM3Config): every 4th layer skips RoPE.
        "no_rope_layers": "which layers skip RoPE changes no cache: vLLM's Transformers "
        "backend builds one Attention per layer over the whole context",
        "no_rope_layer_interval": "which layers skip RoPE changes no cache: vLLM's "
        "Transformers backend builds one Attention per layer over the whole context",
    },
}
#: Config classes' defaults (transformers' GemmaConfig, Glm4vTextConfig, Glm4vMoeTextConfig,
#: GlmOcrTextConfig), which vLLM sees when the file leaves a field out.
_DECODER_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    # GemmaConfig: PaliGemma's text_config leaves head_dim and the length to the class.
    "gemma": {
        "hidden_size": 3072,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 16,
        "head_dim": 256,
        "max_position_embeddings": 8192,
    },
    # Ernie4_5_VLMoeTextConfig, Granite4VisionTextConfig, Molmo2TextConfig (transformers
    # 5.20): what vLLM reads where a published text_config leaves a field out.
    "ernie4_5_vl_moe_text": {
        "hidden_size": 2560,
        "num_hidden_layers": 28,
        "num_attention_heads": 20,
        "num_key_value_heads": 4,
        "max_position_embeddings": 131072,
    },
    "granite4_vision_text": {
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 2048,
    },
    # CohereCompassTextConfig (transformers 5.20).
    "cohere_compass_text": {
        "hidden_size": 8192,
        "num_hidden_layers": 40,
        "num_attention_heads": 64,
        "num_key_value_heads": 64,
        "head_dim": 128,
        "max_position_embeddings": 8192,
    },
    # Cosmos3EdgeTextConfig (transformers 5.20).
    "cosmos3_edge_text": {
        "hidden_size": 2048,
        "num_hidden_layers": 28,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 131072,
    },
    "molmo2_text": {
        "hidden_size": 4096,
        "num_hidden_layers": 36,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "head_dim": 128,
        "max_position_embeddings": 36864,
    },
    "glm4v_text": {
        "hidden_size": 4096,
        "num_hidden_layers": 40,
        "num_attention_heads": 32,
        "num_key_value_heads": 2,
        "max_position_embeddings": 32768,
    },
    "glm4v_moe_text": {
        "hidden_size": 4096,
        "num_hidden_layers": 46,
        "num_attention_heads": 96,
        "num_key_value_heads": 8,
        "max_position_embeddings": 65536,
    },
    "paddleocr_vl_text": {
        "hidden_size": 1024,
        "num_hidden_layers": 18,
        "num_attention_heads": 16,
        "num_key_value_heads": 2,
        "head_dim": 128,
        "max_position_embeddings": 131072,
    },
    "glm_ocr_text": {
        "hidden_size": 1024,
        "num_hidden_layers": 16,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "max_position_embeddings": 131072,
    },
}

#: Families of one attention decoder (`attention_reader`): name, model types, the vLLM
#: architectures, head rule, window rule, vLLM file, what they are read as, the extra
#: cache fields read, those ignored (with vLLM's reason), field aliases per model type.
_GENERIC: Final[
    tuple[
        tuple[
            str,
            tuple[str, ...],
            tuple[str, ...],
            HeadRule,
            WindowRule,
            str,
            str,
            frozenset[str],
            Mapping[str, str],
            Mapping[str, Mapping[str, str]],
        ],
        ...,
    ]
] = (
    (
        "k2_horizon",
        ("k2_horizon",),
        ("K2HorizonForCausalLM",),
        "head_dim",
        "gated_none",
        "k2_horizon.py K2HorizonAttention, K2HorizonMoVAAttention (the mixture-of-value "
        "experts changes no cache)",
        "full attention, head size head_dim (else hidden_size / heads); a sliding window only "
        "with use_sliding_window (then refused)",
        frozenset({"use_sliding_window"}),
        {},
        {},
    ),
    (
        "qwen2_moe",
        ("qwen2_moe",),
        ("Qwen2MoeForCausalLM",),
        "derived",
        "gated_none",
        "qwen2_moe.py Qwen2MoeAttention",
        "full attention, head size hidden_size / heads (a sliding window is refused)",
        frozenset({"use_sliding_window", "max_window_layers"}),
        {**_NO_SLIDING, **_DERIVED},
        {},
    ),
    *(
        (
            name,
            (name,),
            (arch,),
            "derived",
            "none",
            source,
            "full attention, head size hidden_size / heads",
            frozenset(),
            _DERIVED,
            {},
        )
        for name, arch, source in (
            ("internlm2", "InternLM2ForCausalLM", "internlm2.py InternLM2Attention"),
            ("olmoe", "OlmoeForCausalLM", "olmoe.py OlmoeAttention"),
            ("minicpm", "MiniCPMForCausalLM", "minicpm.py MiniCPMAttention"),
            ("orion", "OrionForCausalLM", "orion.py OrionAttention"),
            ("stablelm", "StableLmForCausalLM", "stablelm.py StablelmAttention"),
            ("deepseek", "DeepseekForCausalLM", "deepseek_v2.py (DeepSeek v1, no MLA)"),
        )
    ),
    *(
        (
            name,
            (name, *_DECODER_OF.get(name, ())),
            archs,
            "head_dim",
            "none",
            source,
            "full attention, head size head_dim (else hidden_size / heads)",
            frozenset(),
            {},
            aliases,
        )
        for name, archs, source, aliases in (
            ("gemma", ("GemmaForCausalLM",), "gemma.py GemmaAttention", {}),
            ("cohere", ("CohereForCausalLM",), "commandr.py CohereAttention (v1)", {}),
            ("glm4", ("Glm4ForCausalLM",), "glm4.py Glm4Attention", {}),
            ("glm4_moe", ("Glm4MoeForCausalLM",), "glm4_moe.py Glm4MoeAttention", {}),
            ("exaone", ("ExaoneForCausalLM",), "exaone.py ExaoneAttention", {"exaone": _LAYERS}),
            ("solar", ("SolarForCausalLM",), "solar.py SolarAttention", {}),
            ("nemotron", ("NemotronForCausalLM",), "nemotron.py NemotronAttention", {}),
            (
                "ernie4_5_moe",
                ("Ernie4_5_MoeForCausalLM",),
                "ernie45_moe.py Ernie4_5_MoeAttention",
                {},
            ),
            (
                "bailing_moe",
                ("BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "SarvamMoEForCausalLM"),
                "bailing_moe.py BailingAttention (sarvam.py SarvamMoEForCausalLM is its subclass)",
                {},
            ),
            ("hyperclovax", ("HyperCLOVAXForCausalLM",), "hyperclovax.py", {}),
            (
                "param2moe",
                ("Param2MoEForCausalLM",),
                "param2moe.py Param2MoEAttention (TP must divide the KV heads)",
                {},
            ),
            (
                "gpt_neox",
                ("GPTNeoXForCausalLM",),
                "transformers/base.py (vLLM's Transformers backend)",
                {},
            ),
            ("hunyuan_v3", ("HYV3ForCausalLM",), "hy_v3.py", {}),
            ("gpt2", ("GPT2LMHeadModel",), "gpt2.py GPT2Attention", {"gpt2": _GPT}),
            ("gptj", ("GPTJForCausalLM",), "gpt_j.py GPTJAttention", {"gptj": _GPT}),
            ("opt", ("OPTForCausalLM",), "opt.py OPTAttention", {}),
            (
                "bloom",
                ("BloomForCausalLM",),
                "bloom.py BloomAttention (ALiBi)",
                {"bloom": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head"}},
            ),
        )
    ),
    *(
        (
            name,
            (name,),
            archs,
            "head_dim",
            "global",
            source,
            "full attention, head size head_dim (else hidden_size / heads); every layer "
            "slides when sliding_window is set and layer_types is absent or all sliding",
            frozenset(),
            {},
            {},
        )
        for name, archs, source in (
            ("minimax_m2", ("MiniMaxM2ForCausalLM",), "minimax_m2.py MiniMaxM2Attention"),
            ("phimoe", ("PhiMoEForCausalLM",), "phimoe.py PhiMoEAttention"),
        )
    ),
    (
        "cosmos3_edge",
        ("cosmos3_edge_text",),
        (),
        "head_dim",
        "none",
        "cosmos3_edge.py Cosmos3EdgeAttention (nemotron_h.py NemotronHAttention)",
        "the text_config's decoder, rebuilt as Nemotron-H attention and MLP layers "
        "(_to_nemotron_h_config): full attention on each of num_hidden_layers layers, head size "
        "head_dim (else hidden_size / heads)",
        frozenset(),
        {},
        {},
    ),
    (
        "molmo2",
        ("molmo2_text",),
        (),
        "head_dim",
        "none",
        "molmo2.py Molmo2Attention",
        "the text_config's decoder: full attention on every layer, head size head_dim "
        "(Molmo2TextConfig default 128), no window; the vision backbone keeps no cache",
        frozenset(),
        {},
        {},
    ),
    *(
        (
            name,
            (*model_types, *_DECODER_OF.get(name, ())),
            archs,
            "head_dim",
            "per_layer",
            source,
            "as llama: layer_types' sliding_attention layers slide (else every layer when "
            "sliding_window is set and layer_types is absent); head size head_dim (else "
            "hidden_size / heads)",
            frozenset(),
            _IGNORES_OF.get(name, {}),
            {},
        )
        for name, model_types, archs, source in (
            (
                "granite",
                ("granite",),
                ("GraniteForCausalLM", "GraniteSWAForCausalLM"),
                "granite.py granite_layer_attn_params",
            ),
            ("afmoe", ("afmoe",), ("AfmoeForCausalLM",), "afmoe.py AfmoeAttention"),
            ("apertus", ("apertus",), ("ApertusForCausalLM",), "apertus.py ApertusAttention"),
            ("ernie4_5", ("ernie4_5",), ("Ernie4_5ForCausalLM",), "ernie45.py (llama.py)"),
            (
                "cohere_compass",
                ("cohere_compass_text",),
                (),
                "cohere_compass.py CohereCompassAttention (CohereCompassForConditionalGeneration's "
                "text_config)",
            ),
            (
                "transformers",
                (
                    "olmo",
                    "olmo2",
                    "olmo3",
                    "flex_olmo",
                    "starcoder2",
                    "phi",
                    "smollm3",
                    "seed_oss",
                    "arcee",
                    "glm",
                    "hunyuan_v1_dense",
                    "hunyuan_v1_moe",
                    "vaultgemma",
                    "jais2",
                ),
                (
                    "OlmoForCausalLM",
                    "Olmo2ForCausalLM",
                    "Olmo3ForCausalLM",
                    "FlexOlmoForCausalLM",
                    "Starcoder2ForCausalLM",
                    "PhiForCausalLM",
                    "SmolLM3ForCausalLM",
                    "SeedOssForCausalLM",
                    "ArceeForCausalLM",
                    "GlmForCausalLM",
                    "HunYuanDenseV1ForCausalLM",
                    "HunYuanMoEV1ForCausalLM",
                    "VaultGemmaForCausalLM",
                    "Jais2ForCausalLM",
                ),
                "transformers/base.py create_attention_instances (vLLM's Transformers backend)",
            ),
        )
    ),
    (
        "granitemoe",
        ("granitemoe", "granitemoeshared"),
        ("GraniteMoeForCausalLM", "GraniteMoeSharedForCausalLM", "GraniteMoeSWAForCausalLM"),
        "derived",
        "per_layer",
        "granitemoe.py GraniteMoeAttention, granite_layer_attn_params",
        "as granite, head size hidden_size / heads",
        frozenset(),
        _DERIVED,
        {},
    ),
)

FAMILIES: Final[tuple[Family, ...]] = (
    Family(
        "llama",
        (
            "llama",
            "mistral",
            "ministral3",
            "voxtral_realtime_text",
            "internlm3",
            "telechat",
            "teleflm",
            "aria_text",
        ),
        (
            "LlamaForCausalLM",
            "LLaMAForCausalLM",
            "MistralForCausalLM",
            "Ministral3ForCausalLM",
            "InternLM3ForCausalLM",
            "IQuestCoderForCausalLM",
            "TeleChat3ForCausalLM",
            "TeleChat2ForCausalLM",
            "TeleFLMForCausalLM",
        ),
        "full attention; every layer slides when sliding_window is set and layer_types is "
        "absent, else the sliding_attention entries of layer_types; head_dim or hidden_size / "
        "heads",
        read_llama,
        _LLAMA_READS,
        aliases={"telechat": {"num_hidden_layers": "n_layer", "num_attention_heads": "n_head"}},
        defaults={
            "llama": {**_LLAMA, "max_position_embeddings": 2048},
            # AriaTextConfig: aria.py's AriaTextModel is a LlamaModel on text_config.
            "aria_text": {**_LLAMA, "max_position_embeddings": 2048},
            "mistral": {
                **_LLAMA,
                "num_key_value_heads": 8,
                "max_position_embeddings": 131072,
                "sliding_window": 4096,
            },
            "voxtral_realtime_text": {
                **_LLAMA,
                "num_key_value_heads": 8,
                "max_position_embeddings": 131072,
                "sliding_window": 4096,
            },
            "ministral3": {
                **_LLAMA,
                "num_hidden_layers": 34,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "max_position_embeddings": 262144,
            },
        },
    ),
    Family(
        "mixtral",
        ("mixtral",),
        ("MixtralForCausalLM",),
        "full attention; every layer slides when sliding_window is set (default null)",
        read_llama,
        _ATTN | {"sliding_window"},
        defaults={
            "mixtral": {**_LLAMA, "num_key_value_heads": 8, "max_position_embeddings": 131072},
        },
    ),
    Family(
        "phi3",
        ("phi3", "phi4mm"),
        ("Phi3ForCausalLM", "Phi4MMForCausalLM"),
        "as llama (sliding_window slides every layer); with a longrope RoPE the default "
        "max_model_len is original_max_position_embeddings; Phi-4-multimodal (phi4mm.py) "
        "builds a LlamaModel on its flat config, the vision and audio towers keep no cache",
        read_llama,
        _LLAMA_READS,
        defaults={
            "phi3": {
                "hidden_size": 3072,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "max_position_embeddings": 4096,
                "original_max_position_embeddings": 4096,
            },
            # Phi4MMConfig (the checkpoint's configuration_phi4mm.py): Phi3Config's defaults.
            "phi4mm": {
                "hidden_size": 3072,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "max_position_embeddings": 4096,
                "original_max_position_embeddings": 4096,
            },
        },
    ),
    Family(
        "qwen2",
        (
            "qwen2",
            "qwen2_5_vl",
            "qwen2_5_vl_text",
            "qwen2_vl",
            "qwen2_vl_text",
            "mimo",
            "qwen2_5_omni_text",
        ),
        ("Qwen2ForCausalLM", "MiMoForCausalLM"),
        "full attention, or sliding on every layer (use_sliding_window with max_window_layers "
        "0); a mix of the two is refused, as vLLM refuses it; head size hidden_size / heads",
        read_qwen2,
        _ATTN | {"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"},
        ignores={"head_dim": "vLLM's qwen2.py takes hidden_size / num_attention_heads"},
        defaults={
            "qwen2": {**_QWEN, **_LLAMA, "num_key_value_heads": 32, "max_window_layers": 28},
            "mimo": {**_QWEN, **_LLAMA, "num_key_value_heads": 32, "max_window_layers": 28},
            "qwen2_vl": _QWEN_VL,
            "qwen2_vl_text": _QWEN_VL,
            "qwen2_5_vl": _QWEN_VL,
            "qwen2_5_vl_text": _QWEN_VL,
            # Qwen2_5OmniTextConfig: the thinker's decoder (qwen2_5_omni_thinker.py builds a
            # Qwen2ForCausalLM on it).
            "qwen2_5_omni_text": {
                **_QWEN,
                "hidden_size": 3584,
                "num_hidden_layers": 28,
                "num_attention_heads": 28,
                "num_key_value_heads": 4,
                "sliding_window": 32768,
                "max_window_layers": 28,
            },
        },
    ),
    Family(
        "qwen3",
        ("qwen3", "qwen3_vl_text"),
        ("Qwen3ForCausalLM",),
        "as qwen2, with head_dim (default 128)",
        read_qwen2,
        _ATTN | {"sliding_window", "use_sliding_window", "max_window_layers", "layer_types"},
        defaults={
            "qwen3_vl_text": {**_QWEN, "head_dim": 128, "max_window_layers": 0},
            "qwen3": {
                **_QWEN,
                **_LLAMA,
                "num_key_value_heads": 32,
                "head_dim": 128,
                "max_window_layers": 28,
            },
        },
    ),
    Family(
        "qwen3_moe",
        ("qwen3_moe", "qwen3_vl_moe_text", "qwen3_omni_moe_text"),
        ("Qwen3MoeForCausalLM",),
        "full attention, or sliding on every layer with use_sliding_window; head_dim or "
        "hidden_size / heads",
        read_qwen3_moe,
        _ATTN | {"sliding_window", "use_sliding_window"},
        ignores={
            "max_window_layers": "Qwen3MoeConfig derives no layer_types from it, and vLLM's "
            "qwen3_moe.py does not read it",
        },
        defaults={
            "qwen3_vl_moe_text": _QWEN,
            # Qwen3OmniMoeTextConfig: the thinker's decoder (qwen3_omni_moe_thinker.py builds a
            # Qwen3MoeLLMForCausalLM on it); the class has no window field.
            "qwen3_omni_moe_text": {
                **_QWEN,
                "hidden_size": 2048,
                "num_hidden_layers": 28,
                "num_attention_heads": 28,
                "num_key_value_heads": 4,
                "sliding_window": None,
            },
            "qwen3_moe": {
                **_QWEN,
                "hidden_size": 2048,
                "num_hidden_layers": 24,
                "num_attention_heads": 32,
                "num_key_value_heads": 4,
            },
        },
    ),
    Family(
        "gemma2",
        ("gemma2",),
        ("Gemma2ForCausalLM",),
        "layer_types, else even layers sliding and odd layers full; float16 and float32 "
        "checkpoints are served in bfloat16",
        read_gemma,
        _LLAMA_READS,
        defaults={
            "gemma2": {
                "hidden_size": 2304,
                "num_hidden_layers": 26,
                "num_attention_heads": 8,
                "num_key_value_heads": 4,
                "head_dim": 256,
                "max_position_embeddings": 8192,
                "sliding_window": 4096,
            }
        },
    ),
    Family(
        "gemma3",
        ("gemma3_text",),
        ("Gemma3ForCausalLM",),
        "layer_types, else every sliding_window_pattern-th layer (default 6) full and the "
        "rest sliding; max_model_len never scaled by RoPE",
        read_gemma,
        _LLAMA_READS | {"sliding_window_pattern", "use_bidirectional_attention"},
        defaults={
            "gemma3_text": {**_GEMMA3_TEXT, "sliding_window_pattern": 6}
        },
    ),
    Family(
        "gemma4",
        # gemma4_unified_text: gemma4_unified.py builds Gemma4ForCausalLM on its text_config.
        ("gemma4_text", "gemma4_unified_text"),
        ("Gemma4ForCausalLM",),
        "as gemma3 (pattern 6, last layer full); full layers have global_head_dim and, with "
        "attention_k_eq_v, num_global_key_value_heads; the last num_kv_shared_layers layers "
        "keep no cache of their own",
        read_gemma4,
        _LLAMA_READS
        | {
            "global_head_dim",
            "num_global_key_value_heads",
            "attention_k_eq_v",
            "num_kv_shared_layers",
            "per_layer_config",
            "use_bidirectional_attention",
        },
        defaults={
            "gemma4_text": {
                "hidden_size": 2304,
                "num_hidden_layers": 30,
                "num_attention_heads": 8,
                "num_key_value_heads": 4,
                "head_dim": 256,
                "max_position_embeddings": 131072,
                "sliding_window": 512,
                "global_head_dim": 512,
                "attention_k_eq_v": False,
                "num_kv_shared_layers": 0,
            },
            # Gemma4UnifiedTextConfig: Gemma4TextConfig's but for these two.
            "gemma4_unified_text": {
                "hidden_size": 2304,
                "num_hidden_layers": 30,
                "num_attention_heads": 8,
                "num_key_value_heads": 4,
                "head_dim": 256,
                "max_position_embeddings": 262144,
                "sliding_window": 1024,
                "global_head_dim": 512,
                "attention_k_eq_v": False,
                "num_kv_shared_layers": 0,
            },
        },
    ),
    Family(
        "exaone4",
        ("exaone4",),
        ("Exaone4ForCausalLM",),
        "layer_types' sliding_attention layers slide over sliding_window; an absent "
        "layer_types is Exaone4Config's pattern (layer i slides where (i + 1) % "
        "sliding_window_pattern != 0, default 4); head size head_dim (else hidden_size / "
        "heads); vllm/model_executor/models/exaone4.py Exaone4Attention",
        read_exaone4,
        _LLAMA_READS | {"sliding_window_pattern"},
        defaults={
            # Exaone4Config's defaults (transformers).
            "exaone4": {
                **_LLAMA,
                "num_key_value_heads": 32,
                "max_position_embeddings": 2048,
                "sliding_window": 4096,
                "sliding_window_pattern": 4,
            }
        },
    ),
    Family(
        "gemma3n",
        ("gemma3n_text",),
        ("Gemma3nForCausalLM",),
        "layer_types, else every 5th layer full; head_dim; from layer n - num_kv_shared_layers "
        "on, a layer reads the cache of layer n - num_kv_shared_layers - 2 (sliding) or - 1 "
        "(full) and keeps none of its own; the per-layer inputs keep no cache; "
        "vllm/model_executor/models/gemma3n.py Gemma3nAttention",
        read_gemma3n,
        _LLAMA_READS | {"num_kv_shared_layers", "use_bidirectional_attention"},
        defaults={
            # Gemma3nTextConfig's defaults (transformers).
            "gemma3n_text": {
                "hidden_size": 2048,
                "num_hidden_layers": 35,
                "num_attention_heads": 8,
                "num_key_value_heads": 2,
                "head_dim": 256,
                "max_position_embeddings": 32768,
                "sliding_window": 512,
                "num_kv_shared_layers": 15,
            }
        },
    ),
    Family(
        "cohere2",
        ("cohere2",),
        ("Cohere2ForCausalLM",),
        "layer_types, else every sliding_window_pattern-th layer (default 4) full; a sliding "
        "layer's window is sliding_window + 1; head size hidden_size / heads",
        read_cohere2,
        _LLAMA_READS | {"sliding_window_pattern"},
        ignores={"head_dim": "transformers' Cohere2Config sets hidden_size / heads"},
        defaults={
            "cohere2": {
                "hidden_size": 8192,
                "num_hidden_layers": 40,
                "num_attention_heads": 64,
                "max_position_embeddings": 8192,
                "sliding_window": 4096,
                "sliding_window_pattern": 4,
            }
        },
    ),
    Family(
        "gpt_oss",
        ("gpt_oss",),
        ("GptOssForCausalLM",),
        "even layers sliding (sliding_window), odd layers full, whatever layer_types says",
        read_gpt_oss,
        _ATTN | {"sliding_window"},
        ignores={"layer_types": "vLLM's gpt_oss.py slides on even layers whatever it says"},
        defaults={
            "gpt_oss": {
                "hidden_size": 2880,
                "num_hidden_layers": 36,
                "num_attention_heads": 64,
                "num_key_value_heads": 8,
                "head_dim": 64,
                "max_position_embeddings": 131072,
                "sliding_window": 128,
            }
        },
    ),
    Family(
        "llama4",
        ("llama4_text",),
        ("Llama4ForCausalLM",),
        "RoPE layers chunked local (attention_chunk_size), NoPE layers (no_rope_layers 0, "
        "default every 4th) full",
        read_llama4,
        _ATTN | {"attention_chunk_size", "no_rope_layers", "no_rope_layer_interval"},
        ignores={"layer_types": "vLLM's llama4.py picks the kind from no_rope_layers"},
        defaults={
            "llama4_text": {
                "hidden_size": 5120,
                "num_hidden_layers": 48,
                "num_attention_heads": 40,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "max_position_embeddings": 131072,
                "no_rope_layer_interval": 4,
                "attention_chunk_size": 8192,
            }
        },
    ),
    Family(
        "deepseek",
        (
            "deepseek_v2",
            "deepseek_v3",
            "kimi_k2",
            "glm4_moe_lite",
            "axk1",
            "sarvam_mla",
        ),
        (
            "DeepseekV2ForCausalLM",
            "DeepseekV3ForCausalLM",
            "MistralLarge3ForCausalLM",
            "Glm4MoeLiteForCausalLM",
            "AXK1ForCausalLM",
            "SarvamMLAForCausalLM",
        ),
        "MLA on every layer: one latent head of kv_lora_rank + qk_rope_head_dim, no V (AXK1: "
        "vllm/model_executor/models/AXK1.py AXK1MLAAttention, no indexer; Sarvam MLA: "
        "sarvam.py SarvamMLAAttention, an MLA layer whatever ModelConfig.use_mla says)",
        read_deepseek,
        frozenset({"kv_lora_rank", "qk_rope_head_dim", *_DSA_READS}),
        ignores={
            "num_key_value_heads": "MLA caches one latent head",
            "head_dim": "MLA caches kv_lora_rank + qk_rope_head_dim",
        },
        defaults={
            "deepseek_v2": {
                "num_hidden_layers": 32,
                "max_position_embeddings": 2048,
                "kv_lora_rank": 512,
                "qk_rope_head_dim": 64,
            },
            "deepseek_v3": {
                "num_hidden_layers": 61,
                "max_position_embeddings": 4096,
                "kv_lora_rank": 512,
                "qk_rope_head_dim": 64,
            },
            # transformers' AXK1Config (vLLM reads axk1 with it).
            "axk1": {
                "num_hidden_layers": 61,
                "max_position_embeddings": 32768,
                "kv_lora_rank": 512,
                "qk_rope_head_dim": 64,
                "qk_nope_head_dim": 128,
            },
        },
    ),
    Family(
        "openpangu",
        ("openpangu",),
        ("PanguEmbeddedForCausalLM", "PanguProMoEV2ForCausalLM", "PanguUltraMoEForCausalLM"),
        "one attention for every layer (vllm/model_executor/models/openpangu.py "
        "OpenPanguDecoderLayer): MLA (kv_lora_rank + qk_rope_head_dim) when qk_nope_head_dim, "
        "qk_rope_head_dim, v_head_dim and kv_lora_rank are set; else grouped-query attention "
        "of head_dim (else hidden_size / heads), sliding over interleaved_sliding_window (an "
        "int, or a list cycled by layer index); static sink attention (param_sink_number) is "
        "refused",
        read_openpangu,
        frozenset({*_ATTN, "kv_lora_rank", "qk_rope_head_dim", "interleaved_sliding_window"}),
    ),
    Family(
        "minicpm3",
        ("minicpm3",),
        ("MiniCPM3ForCausalLM",),
        "full attention on every layer, the latent expanded: every attention head's K and V "
        "of qk_nope_head_dim + qk_rope_head_dim (vllm/model_executor/models/minicpm3.py "
        "MiniCPM3Attention; not MLA in vLLM 0.33)",
        read_minicpm3,
        frozenset({"qk_rope_head_dim"}),
        ignores={
            "num_key_value_heads": "minicpm3.py caches num_local_heads KV heads, every "
            "attention head",
            "kv_lora_rank": "the latent is expanded before attention: it sizes no cache",
            "head_dim": "the head size is qk_nope_head_dim + qk_rope_head_dim",
        },
    ),
    Family(
        "deepseek_sparse",
        ("deepseek_v32", "glm_moe_dsa"),
        ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"),
        "DeepSeek sparse attention: MLA on every layer (an fp8 cache in FlashMLA's fp8_ds_mla "
        "layout) and, on the layers that run the indexer (index_topk_freq / "
        "index_skip_topk_offset / index_topk_pattern), its key cache of index_head_dim fp8 "
        "elements and a float32 scale per 128; vllm/models/deepseek_v32/attention.py",
        read_deepseek_sparse,
        frozenset({"kv_lora_rank", "qk_rope_head_dim", *_DSA_READS}),
        ignores={
            "num_key_value_heads": "MLA caches one latent head",
            "head_dim": "MLA caches kv_lora_rank + qk_rope_head_dim (glm_moe_dsa sets it to "
            "the RoPE part)",
            "layer_types": "glm_moe_dsa's indexed_attention on every layer: vLLM builds each "
            "layer's caches from index_topk and its schedule",
        },
        defaults={
            # vLLM reads deepseek_v32 with transformers' DeepseekV3Config
            # (vllm/transformers_utils/config.py), which has no indexer defaults.
            "deepseek_v32": {
                "num_hidden_layers": 61,
                "max_position_embeddings": 4096,
                "kv_lora_rank": 512,
                "qk_rope_head_dim": 64,
            },
            "glm_moe_dsa": {
                "num_hidden_layers": 78,
                "max_position_embeddings": 202752,
                "kv_lora_rank": 512,
                "qk_rope_head_dim": 64,
                "index_topk": 2048,
                "index_head_dim": 128,
            },
        },
    ),
    Family(
        "cohere2_moe",
        ("cohere2_moe",),
        ("Cohere2MoeForCausalLM",),
        "layer_types (absent: Cohere2MoeConfig's list, the first_k_dense_replace dense layers "
        "by prefix_dense_sliding_window_pattern, default all full, then every "
        "sliding_window_pattern-th full); a sliding layer's window is sliding_window + 1; head "
        "size head_dim; vllm/model_executor/models/cohere2_moe.py Cohere2MoeAttention",
        read_cohere2_moe,
        _ATTN | {"sliding_window", "layer_types", "sliding_window_pattern"},
        defaults={
            # transformers' Cohere2MoeConfig (vLLM reads through it).
            "cohere2_moe": {
                "hidden_size": 8192,
                "num_hidden_layers": 40,
                "num_attention_heads": 64,
                "head_dim": 128,
                "max_position_embeddings": 8192,
                "sliding_window": 4096,
                "sliding_window_pattern": 4,
                "prefix_dense_sliding_window_pattern": 1,
            }
        },
    ),
    Family(
        "exaone_moe",
        ("exaone_moe",),
        ("ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM"),
        "layer_types (absent: every sliding_window_pattern-th layer full); a sliding layer "
        "slides over its sliding_windows entry (else sliding_window); head size head_dim (else "
        "hidden_size / heads); vllm/model_executor/models/exaone_moe.py ExaoneMoeAttention",
        read_exaone_moe,
        _ATTN | {"sliding_window", "layer_types", "sliding_window_pattern"},
        defaults={
            # transformers' ExaoneMoeConfig (vLLM reads through it).
            "exaone_moe": {
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 32,
                "max_position_embeddings": 2048,
                "sliding_window": 4096,
                "sliding_window_pattern": 4,
            }
        },
    ),
    Family(
        "longcat_flash",
        ("longcat_flash",),
        ("LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM"),
        "num_layers decoder layers of two MLA blocks each: two caches a layer of one latent "
        "head of kv_lora_rank + qk_rope_head_dim (the n-gram embeddings keep none); "
        "vllm/model_executor/models/longcat_flash.py FlashDecoderLayer",
        read_longcat_flash,
        frozenset({"kv_lora_rank", "qk_rope_head_dim"}),
        ignores={
            "num_key_value_heads": "MLA caches one latent head",
            "head_dim": "MLA caches kv_lora_rank + qk_rope_head_dim",
        },
        defaults={
            # transformers' LongcatFlashConfig (vLLM reads both architectures through it).
            "longcat_flash": {
                "num_layers": 28,
                "max_position_embeddings": 131072,
                "kv_lora_rank": 512,
                "qk_rope_head_dim": 64,
            }
        },
    ),
    Family(
        "hy_v4",
        ("hy_v4",),
        ("HYV4ForCausalLM",),
        "MLA on every layer; layer_types' sparse_attention (sparse, indexed_attention, "
        "deepseek_sparse_attention) layers are DeepSeek sparse attention, with the indexer's "
        "key cache where indexer_types says full (default: layer 0 and every 4th from 1), none "
        "where shared; without layer_types every layer is dense MLA; "
        "vllm/models/hy_v4/nvidia/attention.py HYV4MLAAttention",
        read_hy_v4,
        frozenset({"kv_lora_rank", "qk_rope_head_dim", "layer_types", *_DSA_READS}),
        ignores={
            "num_key_value_heads": "MLA caches one latent head",
            "head_dim": "HYV4Config sets it to qk_rope_head_dim; MLA caches kv_lora_rank + "
            "qk_rope_head_dim",
        },
        defaults={
            # transformers' HYV4Config (vllm/transformers_utils/configs/hy_v4.py).
            "hy_v4": {
                "num_hidden_layers": 34,
                "max_position_embeddings": 262144,
                "kv_lora_rank": 512,
                "qk_rope_head_dim": 64,
                "index_topk": 2048,
                "index_head_dim": 128,
            }
        },
    ),
    Family(
        "mimo_v2",
        ("mimo_v2_flash", "mimo_v2"),
        ("MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM"),
        "hybrid_layer_pattern: 1 slides over sliding_window_size tokens with the swa_ heads "
        "and head sizes, 0 is full attention with num_key_value_heads, head_dim and "
        "v_head_dim (K and V heads of different sizes; attention sinks keep no cache); "
        "vllm/model_executor/models/mimo_v2.py MiMoV2DecoderLayer",
        read_mimo_v2,
        frozenset({"num_key_value_heads", "head_dim"}),
        ignores={
            "sliding_window": "vLLM's mimo_v2.py takes sliding_window_size (transformers "
            "stores sliding_window_size + 1 here)",
            "layer_types": "vLLM's mimo_v2.py reads hybrid_layer_pattern",
            "attention_chunk_size": "vLLM's mimo_v2.py builds no chunked attention",
        },
        defaults={
            "mimo_v2_flash": {
                "num_hidden_layers": 48,
                "num_attention_heads": 64,
                "num_key_value_heads": 4,
                "head_dim": 192,
                "v_head_dim": 128,
                "max_position_embeddings": 131072,
            }
        },
    ),
    Family(
        "jamba",
        ("jamba",),
        ("JambaForCausalLM",),
        "full attention where i % attn_layer_period == attn_layer_offset, Mamba-1 state "
        "elsewhere (inner mamba_expand × hidden_size); head size hidden_size / heads",
        read_jamba,
        _ATTN | {"attn_layer_period", "attn_layer_offset", "mamba_d_state", "mamba_expand"},
        ignores={
            "head_dim": "vLLM's jamba.py takes hidden_size / num_attention_heads",
            "sliding_window": "vLLM's jamba.py passes no window, and JambaConfig's layer_types "
            "is not all sliding, so the model-level window is unset",
        },
        defaults={
            "jamba": {
                "hidden_size": 4096,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "max_position_embeddings": 262144,
                "attn_layer_period": 8,
                "attn_layer_offset": 4,
                "mamba_d_state": 16,
                "mamba_d_conv": 4,
                "mamba_expand": 2,
            }
        },
    ),
    Family(
        "qwen3_next",
        ("qwen3_next", "qwen3_5_text", "qwen3_5_moe_text"),
        ("Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM"),
        "full_attention layers and linear_attention (gated delta net) state layers, from "
        "layer_types or every full_attention_interval-th layer full; Qwen3.5's recurrent "
        "state in mamba_ssm_dtype",
        read_gated_delta_net,
        _ATTN
        | {
            "layer_types",
            "full_attention_interval",
            "linear_num_key_heads",
            "linear_num_value_heads",
        },
        ignores={
            "sliding_window": "vLLM's qwen3_next.py passes no window, and the model-level "
            "window is unset when not every layer slides",
        },
        defaults={
            model_type: {
                "hidden_size": hidden,
                "num_hidden_layers": layers,
                "num_attention_heads": 16,
                "num_key_value_heads": kv,
                "head_dim": 256,
                "max_position_embeddings": 32768,
                "full_attention_interval": 4,
                "linear_num_key_heads": 16,
                "linear_num_value_heads": 32,
                "linear_key_head_dim": 128,
                "linear_value_head_dim": 128,
                "linear_conv_kernel_dim": 4,
            }
            for model_type, hidden, layers, kv in (
                ("qwen3_next", 2048, 48, 2),
                ("qwen3_5_text", 4096, 32, 4),
                ("qwen3_5_moe_text", 2048, 40, 2),
            )
        },
    ),
    Family(
        "nemotron_h",
        ("nemotron_h",),
        ("NemotronHForCausalLM",),
        "hybrid_override_pattern: M Mamba-2 state (inner mamba_num_heads × mamba_head_dim, "
        "SSM state in mamba_ssm_cache_dtype, default float32), * attention, - and E no cache",
        read_nemotron_h,
        _ATTN
        | {
            "hybrid_override_pattern",
            "layers_block_type",
            "mamba_num_heads",
            "ssm_state_size",
            "sliding_window",
            "attention_head_dim",
        },
        defaults={
            "nemotron_h": {
                "hidden_size": 4096,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "max_position_embeddings": 4096,
                "ssm_state_size": 128,
                "mamba_num_heads": 128,
                "mamba_head_dim": 64,
                "n_groups": 8,
                "conv_kernel": 4,
                "mamba_ssm_cache_dtype": "float32",
            }
        },
    ),
    *(
        Family(
            name,
            model_types,
            architectures,
            f"{how}; vllm/model_executor/models/{source}",
            attention_reader(head, window),
            _ATTN | {"sliding_window", "layer_types"} | frozenset(reads),
            ignores=ignores,
            aliases=aliases,
            defaults={t: _DECODER_DEFAULTS[t] for t in model_types if t in _DECODER_DEFAULTS},
        )
        for name, model_types, architectures, head, window, source, how, reads, ignores, aliases
        in _GENERIC
    ),
    *(
        Family(
            name,
            # muse_glimmer_text: MuseGlimmerForConditionalGeneration's text_config, which
            # muse_glimmer.py _text_config reads as the decoder's config.
            tuple(dict.fromkeys((name, model_type))),
            (arch,),
            f"as llama: layer_types' sliding_attention layers slide over sliding_window, and "
            f"an absent layer_types is the config class's pattern ({pattern}); head size "
            f"head_dim; vllm/model_executor/models/{source}",
            patterned_reader(full_layer),
            _ATTN | {"sliding_window", "layer_types"},
            defaults={model_type: defaults},
        )
        for name, model_type, arch, source, pattern, full_layer, defaults in (
            (
                "cwm",
                "cwm",
                "CwmForCausalLM",
                "transformers/base.py create_attention_instances (vLLM's Transformers backend)",
                "layer i full where i % 4 == 0",
                lambda i, n: i % 4 == 0,
                {
                    "hidden_size": 6144,
                    "num_hidden_layers": 64,
                    "num_attention_heads": 48,
                    "num_key_value_heads": 8,
                    "head_dim": 128,
                    "max_position_embeddings": 131072,
                    "sliding_window": 8192,
                },
            ),
            (
                "kolibri1",
                "kolibri1",
                "Kolibri1ForCausalLM",
                "transformers/base.py create_attention_instances (vLLM's Transformers backend)",
                "layer i full where (i + 1) % 5 == 0",
                lambda i, n: (i + 1) % 5 == 0,
                {
                    "hidden_size": 2560,
                    "num_hidden_layers": 50,
                    "num_attention_heads": 48,
                    "num_key_value_heads": 4,
                    "head_dim": 128,
                    "max_position_embeddings": 262144,
                    "sliding_window": 513,
                },
            ),
            (
                "mellum",
                "mellum",
                "MellumForCausalLM",
                "transformers/base.py create_attention_instances (vLLM's Transformers backend)",
                "every layer full",
                lambda i, n: True,
                {
                    "hidden_size": 2304,
                    "num_hidden_layers": 28,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 4,
                    "head_dim": 128,
                    "max_position_embeddings": 131072,
                    "sliding_window": 1024,
                },
            ),
            (
                "laguna",
                "laguna",
                "LagunaForCausalLM",
                "laguna.py LagunaAttention (per-layer query heads and attention sinks change no "
                "cache)",
                "every layer full",
                lambda i, n: True,
                {
                    "hidden_size": 2048,
                    "num_hidden_layers": 40,
                    "num_attention_heads": 48,
                    "num_key_value_heads": 8,
                    "head_dim": 128,
                    "max_position_embeddings": 131072,
                    "sliding_window": 512,
                },
            ),
            (
                "muse_glimmer",
                "muse_glimmer_text",
                "MuseGlimmerForCausalLM",
                "muse_glimmer.py MuseGlimmerAttention",
                "layer i full where (n - 1 - i) % 4 == 0",
                lambda i, n: (n - 1 - i) % 4 == 0,
                {
                    "hidden_size": 6656,
                    "num_hidden_layers": 52,
                    "num_attention_heads": 32,
                    "num_key_value_heads": 2,
                    "head_dim": 128,
                    "max_position_embeddings": 131072,
                    "sliding_window": 2048,
                },
            ),
        )
    ),
    Family(
        "iquest_loop",
        ("iquest_loopcoder",),
        ("IQuestLoopCoderForCausalLM",),
        "each layer runs loop_num times (default 2), a cache per loop: the first full "
        "attention, the later ones sliding over loop_window_size (default 64); head size "
        "hidden_size / heads; vllm/model_executor/models/iquest_loopcoder.py "
        "LoopCoderAttention",
        read_iquest_loopcoder,
        _ATTN | {"sliding_window", "use_sliding_window", "max_window_layers"},
        ignores={"head_dim": "vLLM's iquest_loopcoder.py takes hidden_size / heads"},
    ),
    Family(
        "rnj1",
        ("rnj1",),
        ("Rnj1ForCausalLM",),
        "layer_types: chunked_attention layers slide over sliding_window (vLLM caches the "
        "block-local attention as that window), the others full (every layer slides when "
        "all are sliding_attention); head size head_dim; vllm/model_executor/models/rnj1.py "
        "Rnj1Attention",
        read_rnj1,
        _ATTN | {"sliding_window", "layer_types"},
        ignores={
            "sliding_window_pattern": "vLLM's rnj1.py reads layer_types, not Gemma 3's pattern"
        },
        defaults={
            # rnj1.py reads transformers' Gemma3TextConfig (an Rnj-1 checkpoint's model_type).
            "gemma3_text": _GEMMA3_TEXT
        },
    ),
    Family(
        "olmo_hybrid",
        ("olmo_hybrid",),
        ("OlmoHybridForCausalLM",),
        "layer_types: linear_attention a gated delta net state (linear_num_key_heads, "
        "linear_num_value_heads, linear_key_head_dim, linear_value_head_dim, "
        "linear_conv_kernel_dim; OlmoHybridConfig's defaults), the others full attention of "
        "hidden_size / heads; absent layer_types: full where i % 4 == 3; "
        "vllm/model_executor/models/olmo_hybrid.py",
        read_olmo_hybrid,
        _ATTN | {"layer_types", "linear_num_key_heads", "linear_num_value_heads"},
        ignores={"head_dim": "vLLM's olmo_hybrid.py takes hidden_size / num_attention_heads"},
        defaults={
            "olmo_hybrid": {
                "hidden_size": 3840,
                "num_hidden_layers": 32,
                "num_attention_heads": 30,
                "max_position_embeddings": 65536,
                "linear_conv_kernel_dim": 4,
            }
        },
    ),
    Family(
        "kimi_linear",
        ("kimi_linear",),
        ("KimiLinearForCausalLM",),
        "linear_attn_config.kda_layers (1-based): a Kimi delta attention state (kda_state_shape: "
        "conv 3 × num_heads × head_dim over short_conv_kernel_size − 1, recurrent num_heads × "
        "head_dim² in float32), the other layers MLA of kv_lora_rank + qk_rope_head_dim; "
        "vllm/models/kimi_k3/nvidia/model.py KimiDecoderLayer",
        read_kimi_linear,
        frozenset({"kv_lora_rank", "qk_rope_head_dim"}),
        ignores={
            "num_key_value_heads": "MLA caches one latent head",
            "head_dim": "MLA caches kv_lora_rank + qk_rope_head_dim",
            # vllm/transformers_utils/config.py registers its own KimiLinearConfig.
            "layer_types": "vLLM 0.33 reads kimi_linear with its own KimiLinearConfig "
            "(transformers_utils/configs/kimi_linear.py): the KDA layers are "
            "linear_attn_config.kda_layers, transformers 5's layer_types is not read",
        },
    ),
    Family(
        "lfm2",
        ("lfm2", "lfm2_moe"),
        ("Lfm2ForCausalLM", "Lfm2MoeForCausalLM"),
        "layer_types: full_attention layers full attention of hidden_size / heads, the others "
        "(conv) a short-convolution state (conv_L_cache − 1) × conv_dim (lfm2_moe: × "
        "hidden_size) in the model dtype; absent layer_types: full attention on full_attn_idxs "
        "(default every layer); vllm/model_executor/models/lfm2.py, lfm2_moe.py",
        read_lfm2,
        _ATTN | {"layer_types"},
        ignores={"head_dim": "vLLM's lfm2.py takes hidden_size / num_attention_heads"},
        defaults={
            # transformers' Lfm2Config and Lfm2MoeConfig (vLLM reads through them).
            "lfm2": {
                "hidden_size": 2560,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "max_position_embeddings": 128000,
                "conv_L_cache": 3,
            },
            "lfm2_moe": {
                "hidden_size": 2048,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "max_position_embeddings": 128000,
                "conv_L_cache": 3,
            },
        },
    ),
    Family(
        "chatglm",
        ("chatglm",),
        ("ChatGLMModel", "ChatGLMForConditionalGeneration"),
        "full attention; KV heads multi_query_group_num (with multi_query_attention), head "
        "size hidden_size / heads; vllm/model_executor/models/chatglm.py GLMAttention",
        read_chatglm,
        frozenset(),
    ),
    Family(
        "dbrx",
        ("dbrx",),
        ("DbrxForCausalLM",),
        "full attention; n_layers layers, attn_config.kv_n_heads KV heads of d_model / n_heads; "
        "vllm/model_executor/models/dbrx.py DbrxAttention",
        read_dbrx,
        frozenset(),
    ),
    Family(
        "step3_text",
        ("step3_text",),
        ("Step3TextForCausalLM",),
        "full attention, one KV head of head_dim (asserted by vLLM); "
        "vllm/model_executor/models/step3_text.py Step3TextDecoderLayer",
        read_step3_text,
        frozenset({"head_dim", "num_key_value_heads"}),
        ignores={"num_key_value_heads": "vLLM's step3_text.py builds one KV head"},
    ),
    Family(
        "nemotron_nas",
        ("nemotron-nas", "deci"),
        ("DeciLMForCausalLM",),
        "one block_configs entry per layer: no cache where attention.no_op, else full "
        "attention with num_attention_heads / n_heads_in_group KV heads (layers differ); "
        "vllm/model_executor/models/nemotron_nas.py DeciLMDecoderLayer",
        read_nemotron_nas,
        _ATTN,
        ignores={"num_key_value_heads": "each layer's block_configs entry sets its KV heads"},
    ),
    Family(
        "granite_h",
        ("granitemoehybrid",),
        ("GraniteMoeHybridForCausalLM",),
        "layer_types (layers_block_type): mamba a Mamba-2 state (inner mamba_expand × "
        "hidden_size), attention full attention of hidden_size / heads; "
        "vllm/model_executor/models/granitemoehybrid.py",
        read_granite_hybrid,
        _ATTN | {"layer_types", "layers_block_type", "mamba_d_state", "mamba_expand"},
        ignores={"head_dim": "vLLM's granitemoehybrid.py takes hidden_size / heads"},
        defaults={
            "granitemoehybrid": {
                **_LLAMA,
                "max_position_embeddings": 2048,
                "mamba_n_heads": 128,
                "mamba_n_groups": 1,
                "mamba_d_state": 256,
                "mamba_d_head": "auto",
                "mamba_d_conv": 4,
                "mamba_expand": 2,
            }
        },
    ),
    Family(
        "falcon_h1",
        ("falcon_h1",),
        ("FalconH1ForCausalLM",),
        "every layer full attention (head_dim, else hidden_size / heads) and a Mamba-2 state "
        "(inner mamba_d_ssm, else mamba_expand × hidden_size) side by side; "
        "vllm/model_executor/models/falcon_h1.py",
        read_falcon_h1,
        _ATTN | {"mamba_d_state", "mamba_expand"},
        defaults={
            "falcon_h1": {
                **_LLAMA,
                "num_key_value_heads": 8,
                "max_position_embeddings": 8192,
                "mamba_d_ssm": 1024,
                "mamba_n_heads": 128,
                "mamba_d_head": "auto",
                "mamba_n_groups": 1,
                "mamba_d_state": 256,
                "mamba_d_conv": 4,
                "mamba_expand": 2,
            }
        },
    ),
    Family(
        "zamba2",
        ("zamba2",),
        ("Zamba2ForCausalLM",),
        "layers_block_type: a Mamba-2 state on every layer (inner mamba_expand × hidden_size), "
        "and on hybrid layers full attention of num_attention_heads heads of 2 × hidden_size / "
        "heads; vllm/model_executor/models/zamba2.py",
        read_zamba2,
        frozenset({"layers_block_type", "layer_types", "mamba_d_state", "mamba_expand"}),
        ignores={
            "attention_head_dim": "Zamba2Config sets 2 × hidden_size / heads",
            "head_dim": "Zamba2Config's alias of attention_head_dim, set from hidden_size",
            "num_key_value_heads": "vLLM's zamba2.py builds Attention without KV heads: as "
            "many as the attention heads",
        },
        aliases={"zamba2": {"layers_block_type": "layer_types"}},
        defaults={
            "zamba2": {
                "hidden_size": 2560,
                "num_hidden_layers": 54,
                "num_attention_heads": 32,
                "max_position_embeddings": 4096,
                "mamba_d_state": 64,
                "mamba_d_conv": 4,
                "mamba_expand": 2,
                "mamba_ngroups": 1,
                "n_mamba_heads": 8,
            }
        },
    ),
    Family(
        "mamba",
        ("mamba", "falcon_mamba"),
        ("MambaForCausalLM", "FalconMambaForCausalLM"),
        "attention-free: a Mamba-1 state per layer (inner expand × hidden_size); "
        "vllm/model_executor/models/mamba.py",
        read_mamba,
        frozenset(),
        defaults={
            model_type: {
                "hidden_size": 768,
                "num_hidden_layers": 32,
                "state_size": 16,
                "expand": 2,
                "conv_kernel": 4,
            }
            for model_type in ("mamba", "falcon_mamba")
        },
    ),
    Family(
        "mamba2",
        ("mamba2",),
        ("Mamba2ForCausalLM",),
        "attention-free: a Mamba-2 state per layer (inner expand × hidden_size, num_heads of "
        "head_dim, n_groups); vllm/model_executor/models/mamba2.py",
        read_mamba2,
        frozenset({"head_dim"}),
        defaults={
            "mamba2": {
                "hidden_size": 4096,
                "num_hidden_layers": 64,
                "num_heads": 128,
                "head_dim": 64,
                "state_size": 128,
                "expand": 2,
                "conv_kernel": 4,
                "n_groups": 8,
            }
        },
    ),
    Family(
        "falcon",
        ("falcon",),
        ("FalconForCausalLM",),
        "full attention of hidden_size / heads; KV heads num_kv_heads with "
        "new_decoder_architecture, else 1 with multi_query, else the heads; "
        "vllm/model_executor/models/falcon.py FalconAttention",
        read_falcon,
        frozenset(),
        ignores={"num_key_value_heads": "vLLM's falcon.py reads num_kv_heads"},
        defaults={
            "falcon": {
                "hidden_size": 4544,
                "num_hidden_layers": 32,
                "num_attention_heads": 71,
                "multi_query": True,
                "new_decoder_architecture": False,
                "max_position_embeddings": 2048,
            }
        },
    ),
    Family(
        "gpt_bigcode",
        ("gpt_bigcode",),
        ("GPTBigCodeForCausalLM",),
        "full attention of n_embd / n_head; one KV head with multi_query (default), else "
        "n_head (GPTBigCodeConfig); vllm/model_executor/models/transformers/base.py",
        read_gpt_bigcode,
        frozenset(),
        ignores={"num_key_value_heads": "GPTBigCodeConfig sets it from multi_query"},
        aliases={"gpt_bigcode": _GPT},
        defaults={
            "gpt_bigcode": {
                "max_position_embeddings": 1024,
                "hidden_size": 768,
                "num_hidden_layers": 12,
                "num_attention_heads": 12,
                "multi_query": True,
            }
        },
    ),
    Family(
        "step1",
        ("step1",),
        ("Step1ForCausalLM",),
        "ALiBi full attention of hidden_size / heads, KV heads num_attention_groups (else "
        "num_key_value_heads, else 1); vllm/model_executor/models/step1.py Step1Attention",
        read_step1,
        frozenset({"num_key_value_heads"}),
        ignores={"head_dim": "vLLM's step1.py takes hidden_size / heads"},
    ),
    Family(
        "whisper",
        ("whisper",),
        ("WhisperForConditionalGeneration",),
        "encoder layers without a cache; per decoder layer a full self-attention and a "
        "cross-attention over max_source_positions encoder outputs",
        read_whisper,
        frozenset(),
        defaults={
            "whisper": {
                "encoder_layers": 4,
                "decoder_layers": 4,
                "decoder_attention_heads": 6,
                "d_model": 384,
                "max_source_positions": 1500,
                "max_target_positions": 448,
            }
        },
    ),
)


@dataclass(frozen=True)
class Wrapper:
    """A multimodal config whose decoder is its ``text_config``.

    Attributes:
        text_type: the decoder's model type when ``text_config`` does not say it.
        text_defaults: values the wrapper's config class merges into ``text_config``.
        audio: what its ``audio_config`` is: ``"none"`` (no audio tower or one without a
            cache we plan), ``"encoder"`` (voxtral: layers without a cache), ``"pooled"``
            (voxtral_realtime: a causal, pooled, sliding-window encoder).
        flat: the decoder's fields may sit at the top level (qwen2_5_vl's published file).
    """

    text_type: str
    architectures: tuple[str, ...]
    read_as: str
    text_defaults: Mapping[str, Any] = field(default_factory=dict)
    audio: str = "none"
    flat: bool = False


WRAPPERS: Final[Mapping[str, Wrapper]] = {
    "llava": Wrapper("llama", ("LlavaForConditionalGeneration",), "text_config as its family"),
    "llava_next": Wrapper(
        "llama", ("LlavaNextForConditionalGeneration",), "text_config as its family"
    ),
    "mistral3": Wrapper(
        "mistral", ("Mistral3ForConditionalGeneration",), "text_config as its family"
    ),
    "gemma3": Wrapper("gemma3_text", ("Gemma3ForConditionalGeneration",), "text_config as gemma3"),
    "gemma4": Wrapper(
        "gemma4_text",
        ("Gemma4ForConditionalGeneration",),
        "text_config as gemma4; the vision and audio towers keep no cache",
    ),
    "llama4": Wrapper("llama4_text", ("Llama4ForConditionalGeneration",), "text_config as llama4"),
    "qwen3_5": Wrapper(
        "qwen3_5_text", ("Qwen3_5ForConditionalGeneration",), "text_config as qwen3_next"
    ),
    "qwen3_5_moe": Wrapper(
        "qwen3_5_moe_text", ("Qwen3_5MoeForConditionalGeneration",), "text_config as qwen3_next"
    ),
    "phi3_v": Wrapper(
        "phi3",
        ("Phi3VForCausalLM",),
        "the top level as phi3 (vLLM's phi3v.py builds a Phi3 decoder); the image "
        "encoder keeps no cache",
        flat=True,
    ),
    "qwen2_5_vl": Wrapper(
        "qwen2_5_vl",
        ("Qwen2_5_VLForConditionalGeneration",),
        "the top level (or text_config) as qwen2",
        flat=True,
    ),
    "paddleocr_vl": Wrapper(
        "paddleocr_vl_text",
        ("PaddleOCRVLForConditionalGeneration",),
        "the top level (or text_config) as ernie4_5 (paddleocr_vl.py builds "
        "Ernie4_5ForCausalLM); the vision encoder keeps no cache",
        flat=True,
    ),
    "voxtral": Wrapper(
        "llama",
        ("VoxtralForConditionalGeneration",),
        "text_config as llama; the audio encoder (not causal) keeps no cache",
        text_defaults={
            "hidden_size": 3072,
            "num_hidden_layers": 30,
            "num_key_value_heads": 8,
            "max_position_embeddings": 131072,
            "head_dim": 128,
        },
        audio="encoder",
    ),
    "voxtral_realtime": Wrapper(
        "mistral",
        ("VoxtralRealtimeForConditionalGeneration",),
        "text_config as a sliding-window mistral; the causal audio encoder slides over "
        "audio_config.sliding_window encoder tokens and pools downsample_factor of them "
        "per cache slot",
        text_defaults={
            "hidden_size": 3072,
            "num_hidden_layers": 26,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "max_position_embeddings": 131072,
            "head_dim": 128,
            "sliding_window": 8192,
        },
        audio="pooled",
    ),
}

#: The encoders' class defaults (the audio towers of voxtral and voxtral_realtime).
ENCODER_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "voxtral": {"num_hidden_layers": 32},
    "voxtral_realtime": {
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "head_dim": 64,
        "sliding_window": 750,
        "max_position_embeddings": 1500,
    },
}
#: Top-level class defaults of a wrapper.
TOP_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "voxtral_realtime": {"downsample_factor": 4},
}

#: The family of each decoder model type.
BY_MODEL_TYPE: Final[Mapping[str, Family]] = {
    model_type: family for family in FAMILIES for model_type in family.model_types
}
#: A model type for each architecture (vLLM dispatches on it; the file's model_type is the
#: fallback). A family listing one model type per architecture maps them pairwise.
BY_ARCHITECTURE: Final[Mapping[str, str]] = {
    **{
        arch: family.model_types[i if len(family.model_types) == len(family.architectures) else 0]
        for family in FAMILIES
        for i, arch in enumerate(family.architectures)
    },
    **{arch: name for name, wrapper in WRAPPERS.items() for arch in wrapper.architectures},
}


def supported() -> str:
    """The model types kvunits reads, for messages."""
    return ", ".join(sorted({*BY_MODEL_TYPE, *WRAPPERS}))


#: Families whose vLLM model file asserts ``num_key_value_heads % tp == 0`` instead of
#: replicating KV heads (param2moe.py ``Param2MoEAttention``): vLLM fails at start-up.
KV_HEADS_DIVIDE_TP: Final = frozenset({"param2moe"})

#: Read by vLLM 0.33 in qwen2.py alone (and the Qwen families built on it, whose readers list
#: them): every other model file takes its windows from ``sliding_window`` and
#: ``layer_types`` whatever these say (Mellum 2.1 and Qwen-derived checkpoints carry them).
_QWEN2_ONLY: Final = frozenset({"use_sliding_window", "max_window_layers"})


#: Read by vLLM 0.33 for Zamba2 alone (model_arch_config_convertor.py
#: ``Zamba2ModelArchConfigConvertor.get_head_size``; the HY-V3 MTP draft prefers ``head_dim``):
#: every other family's head size is ``ModelArchConfigConvertorBase.get_head_size``,
#: ``head_dim`` else hidden_size / heads, whatever it says (Hunyuan's published dense and MoE
#: configs carry it beside ``head_dim``). Families that read it list it (zamba2, nemotron_h).
_ZAMBA2_ONLY: Final = frozenset({"attention_head_dim"})


def check_cache_fields(sec: Section, family: Family) -> bool:
    """Refuse a cache-sizing field the family's reader neither reads nor ignores."""
    known = family.reads | set(family.ignores) | _QWEN2_ONLY | _ZAMBA2_ONLY
    for key in sorted(CACHE_FIELDS - known):
        if sec.data.get(key) not in (None, False):  # null and false switch nothing on
            sec.issue(
                key,
                f"the {sec.model_type} config sets {key}, which sizes the KV cache in other "
                f"families; kvunits' {family.name} reader does not read it, so it cannot say "
                f"what vLLM makes of it (kvunits reads: {supported()})",
            )
            return False
    return True
