"""vLLM 0.33's model registry, as kvunits dispatches on it, and what it does with each name.

vLLM picks a model class by the config's ``architectures`` (the first it supports), not by
``model_type`` (vllm/model_executor/models/registry.py ``ModelRegistry``); kvunits does the
same: the first architecture that vLLM 0.33 registers names the family reader, and
``model_type`` is the fallback for files without a known architecture. The lists below are
vLLM 0.33.0's own (``_TEXT_GENERATION_MODELS``, ``_MULTIMODAL_MODELS``,
``_TRANSFORMERS_SUPPORTED_MODELS``, ``_PREVIOUSLY_SUPPORTED_MODELS``), copied from the
installed package; ``tests/config/test_hf_registry.py`` checks them against it when vLLM is
installed (``.venv-vllm``).

Every text-generating architecture is either read (`ARCHITECTURE_TYPES`: the model type whose
family reader follows its vLLM model file) or refused with the feature kvunits does not model
(`REFUSED`); `architecture_reason` says which.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

#: vLLM 0.33 ``_TEXT_GENERATION_MODELS``.
TEXT_GENERATION: Final = frozenset(
    {
        "AXK1ForCausalLM", "AfmoeForCausalLM", "AliceAIForCausalLM", "ApertusForCausalLM",
        "BailingMoeForCausalLM", "BailingMoeV2ForCausalLM", "BailingMoeV2_5ForCausalLM",
        "BailingMoeV3ForCausalLM", "BeamForCausalLM", "BloomForCausalLM",
        "ChatGLMForConditionalGeneration", "ChatGLMModel", "Cohere2ForCausalLM",
        "Cohere2MoeForCausalLM", "CohereForCausalLM", "DbrxForCausalLM", "DeciLMForCausalLM",
        "DeepseekForCausalLM", "DeepseekV2ForCausalLM", "DeepseekV32ForCausalLM",
        "DeepseekV3ForCausalLM", "DeepseekV4ForCausalLM", "DomynEdgeForCausalLM",
        "DoryForCausalLM", "Ernie4_5ForCausalLM", "Ernie4_5_MoeForCausalLM", "Exaone4ForCausalLM",
        "ExaoneForCausalLM", "ExaoneMoEForCausalLM", "ExaoneMoeForCausalLM", "FalconForCausalLM",
        "FalconH1ForCausalLM", "FalconMambaForCausalLM", "FlintForCausalLM", "GPT2LMHeadModel",
        "GPTJForCausalLM", "Gemma2ForCausalLM", "Gemma3ForCausalLM", "Gemma3nForCausalLM",
        "Gemma4ForCausalLM", "GemmaForCausalLM", "Glm4ForCausalLM", "Glm4MoeForCausalLM",
        "Glm4MoeLiteForCausalLM", "Glm5NextForCausalLM", "GlmMoeDsaForCausalLM",
        "GptOssForCausalLM", "GraniteForCausalLM", "GraniteMoeForCausalLM",
        "GraniteMoeHybridForCausalLM", "GraniteMoeSWAForCausalLM", "GraniteMoeSharedForCausalLM",
        "GraniteSWAForCausalLM", "HCXVisionV2ForCausalLM", "HYV3ForCausalLM", "HYV4ForCausalLM",
        "HrmTextForCausalLM", "HyperCLOVAXForCausalLM", "IQuestCoderForCausalLM",
        "IQuestLoopCoderForCausalLM", "InklingForCausalLM", "InklingForConditionalGeneration",
        "InternLM2ForCausalLM", "InternLM3ForCausalLM", "JambaForCausalLM",
        "K2HorizonForCausalLM", "KimiLinearForCausalLM", "LLaMAForCausalLM", "LagunaForCausalLM",
        "Lfm2ForCausalLM", "Lfm2MoeForCausalLM", "Llama4ForCausalLM", "LlamaForCausalLM",
        "LongcatFlashForCausalLM", "LongcatFlashNgramForCausalLM", "Mamba2ForCausalLM",
        "MambaForCausalLM", "MiMoForCausalLM", "MiMoV2FlashForCausalLM", "MiMoV2ForCausalLM",
        "MiniCPM3ForCausalLM", "MiniCPMForCausalLM", "MiniMaxM2ForCausalLM",
        "MiniMaxM3SparseForCausalLM", "Ministral3ForCausalLM", "MistralForCausalLM",
        "MistralLarge3ForCausalLM", "MixtralForCausalLM", "MuseGlimmerForCausalLM",
        "NemotronForCausalLM", "NemotronHForCausalLM", "NemotronHPuzzleForCausalLM",
        "OPTForCausalLM", "OlmoHybridForCausalLM", "OlmoeForCausalLM", "OrionForCausalLM",
        "PanguEmbeddedForCausalLM", "PanguProMoEV2ForCausalLM", "PanguUltraMoEForCausalLM",
        "Param2MoEForCausalLM", "Phi3ForCausalLM", "PhiMoEForCausalLM", "Plamo3ForCausalLM",
        "Qwen2ForCausalLM", "Qwen2MoeForCausalLM", "Qwen3ForCausalLM", "Qwen3MoeForCausalLM",
        "Qwen3NextForCausalLM", "Qwen3_5ForCausalLM", "Qwen3_5MoeForCausalLM",
        "Qwen4ExpForCausalLM", "Rnj1ForCausalLM", "SarvamMLAForCausalLM", "SarvamMoEForCausalLM",
        "SolarForCausalLM", "StableLmForCausalLM", "Step1ForCausalLM", "Step3TextForCausalLM",
        "Step3p5ForCausalLM", "Step5ForCausalLM", "TeleChat2ForCausalLM", "TeleChat3ForCausalLM",
        "TeleFLMForCausalLM", "Zamba2ForCausalLM",
    }
)
#: vLLM 0.33 ``_MULTIMODAL_MODELS``: the decoder is a text config read by its own family.
MULTIMODAL: Final = frozenset(
    {
        "Alpamayo2Super", "AriaForConditionalGeneration",
        "AudioFlamingo3ForConditionalGeneration", "BagelForConditionalGeneration",
        "BailingMoeV3VLForConditionalGeneration", "BeeForConditionalGeneration",
        "Blip2ForConditionalGeneration", "Cohere2VisionForConditionalGeneration",
        "CohereAsrForConditionalGeneration", "CohereCompassForConditionalGeneration",
        "Cosmos3EdgeForConditionalGeneration", "Cosmos3ForConditionalGeneration",
        "DeepseekOCR2ForCausalLM", "DeepseekOCRForCausalLM", "DeepseekV41ForCausalLM",
        "DeepseekV4ForConditionalGeneration", "DeepseekVLV2ForCausalLM",
        "DiffusionGemmaForBlockDiffusion", "Dots3NoteForCausalLM", "DotsOCRForCausalLM",
        "Eagle2_5_VLForConditionalGeneration", "Ernie4_5_VLMoeForConditionalGeneration",
        "Exaone4_5_ForConditionalGeneration", "FireRedASR2ForConditionalGeneration",
        "FunASRForConditionalGeneration", "FunAudioChatForConditionalGeneration",
        "GLM4VForCausalLM", "Gemma3ForConditionalGeneration", "Gemma3nForConditionalGeneration",
        "Gemma4ForConditionalGeneration", "Gemma4UnifiedForConditionalGeneration",
        "Glm4vForConditionalGeneration", "Glm4vMoeForConditionalGeneration",
        "Glm5NextForConditionalGeneration", "GlmAsrForConditionalGeneration",
        "GlmOcrForConditionalGeneration", "Granite4VisionForConditionalGeneration",
        "GraniteSpeechForConditionalGeneration", "GraniteSpeechPlusForConditionalGeneration",
        "H2OVLChatModel", "HfMoondream", "Idefics3ForConditionalGeneration",
        "InternS1ForConditionalGeneration", "InternS1ProForConditionalGeneration",
        "InternS2MobiusForConditionalGeneration", "InternS2PreviewForConditionalGeneration",
        "InternVLChatModel", "InternVLForConditionalGeneration", "IsaacForConditionalGeneration",
        "KananaVForConditionalGeneration", "KeyeForConditionalGeneration",
        "KeyeVL1_5ForConditionalGeneration", "KimiK25ForConditionalGeneration",
        "KimiK3ForConditionalGeneration", "KimiVLForConditionalGeneration",
        "Lfm2VlForConditionalGeneration", "LightOnOCRForConditionalGeneration",
        "Llama4ForConditionalGeneration", "Llama_Nemotron_Nano_VL",
        "LlavaForConditionalGeneration", "LlavaNextForConditionalGeneration",
        "LlavaNextVideoForConditionalGeneration", "LlavaOnevision2ForConditionalGeneration",
        "LlavaOnevisionForConditionalGeneration", "MiDashengLMModel", "MiMoV2OmniForCausalLM",
        "MiniCPMO", "MiniCPMOcrForConditionalGeneration", "MiniCPMV",
        "MiniCPMV4_6ForConditionalGeneration", "MiniCPMV4_7ForConditionalGeneration",
        "MiniMaxM3SparseForConditionalGeneration", "Mistral3ForConditionalGeneration",
        "Molmo2ForConditionalGeneration", "MolmoForCausalLM", "Moondream3ForCausalLM",
        "MoonshotKimiaForCausalLM", "MossAudioModel",
        "MossTranscribeDiarizeForConditionalGeneration", "MuseGlimmerForConditionalGeneration",
        "MuseSparkForConditionalGeneration", "NVLM_D", "NemotronH_Nano_Omni_Reasoning_V3",
        "NemotronH_Nano_VL_V2", "NemotronH_Omni_Reasoning_V3",
        "NemotronH_Super_Omni_Reasoning_V3", "NemotronParseForConditionalGeneration",
        "OpenCUAForConditionalGeneration", "OpenPanguVLForConditionalGeneration",
        "OpenVLAForActionPrediction", "Ovis", "Ovis2_5", "Ovis2_6ForCausalLM",
        "Ovis2_6_MoeForCausalLM", "PaddleOCRVLForConditionalGeneration",
        "PaliGemmaForConditionalGeneration", "Phi3VForCausalLM", "Phi4ForCausalLMV",
        "Phi4MMForCausalLM", "PixtralForConditionalGeneration",
        "QianfanOCRForConditionalGeneration", "Qwen2AudioForConditionalGeneration",
        "Qwen2VLForConditionalGeneration", "Qwen2_5OmniForConditionalGeneration",
        "Qwen2_5OmniModel", "Qwen2_5_VLForConditionalGeneration",
        "Qwen3ASRForConditionalGeneration", "Qwen3ASRRealtimeGeneration",
        "Qwen3OmniMoeForConditionalGeneration", "Qwen3VLForConditionalGeneration",
        "Qwen3VLMoeForConditionalGeneration", "Qwen3_5ForConditionalGeneration",
        "Qwen3_5MoeForConditionalGeneration", "Qwen4ExpForConditionalGeneration",
        "RForConditionalGeneration", "RadioMBartPrefixForCausalLM", "SkyworkR1VChatModel",
        "SmolVLMForConditionalGeneration", "Step3VLForConditionalGeneration",
        "Step3p7ForConditionalGeneration", "Step5ForConditionalGeneration",
        "StepVLForConditionalGeneration", "UltravoxModel", "UnlimitedOCRForCausalLM",
        "VoxtralForConditionalGeneration", "VoxtralRealtimeGeneration",
        "WhisperForConditionalGeneration",
    }
)
#: vLLM 0.33 ``_TRANSFORMERS_SUPPORTED_MODELS``: served by its Transformers backend.
TRANSFORMERS_BACKEND: Final = frozenset(
    {
        "ArceeForCausalLM", "CwmForCausalLM", "Emu3ForConditionalGeneration",
        "FlexOlmoForCausalLM", "GPTBigCodeForCausalLM", "GPTNeoXForCausalLM", "GlmForCausalLM",
        "HunYuanDenseV1ForCausalLM", "HunYuanMoEV1ForCausalLM",
        "HunYuanVLForConditionalGeneration", "Jais2ForCausalLM", "Kolibri1ForCausalLM",
        "MellumForCausalLM", "NanbeigeForCausalLM", "Olmo2ForCausalLM", "Olmo3ForCausalLM",
        "OlmoForCausalLM", "PhiForCausalLM", "SeedOssForCausalLM", "SmolLM3ForCausalLM",
        "Starcoder2ForCausalLM", "VaultGemmaForCausalLM", "VibeVoiceAsrForConditionalGeneration",
    }
)
#: vLLM 0.33 ``_PREVIOUSLY_SUPPORTED_MODELS``: vLLM 0.33 refuses them.
PREVIOUSLY_SUPPORTED: Final = frozenset(
    {
        "AquilaForCausalLM", "AquilaModel", "ArcticForCausalLM",
        "AyaVisionForConditionalGeneration", "BaiChuanForCausalLM", "BaichuanForCausalLM",
        "BambaForCausalLM", "ChameleonForConditionalGeneration", "Cheers",
        "CheersForConditionalGeneration", "DonutForConditionalGeneration", "Dots1ForCausalLM",
        "ErnieForSequenceClassification", "ErnieForTokenClassification", "ErnieModel",
        "Fairseq2LlamaForCausalLM", "FireRedLIDForConditionalGeneration", "FuyuForCausalLM",
        "GritLM", "Grok1ForCausalLM", "Grok1ModelForCausalLM", "HCXVisionForCausalLM",
        "InternLM2VEForCausalLM", "InternLMForCausalLM", "JAISLMHeadModel", "MPTForCausalLM",
        "MantisForConditionalGeneration", "MiniMaxForCausalLM", "MiniMaxM1ForCausalLM",
        "MiniMaxText01ForCausalLM", "MiniMaxVL01ForConditionalGeneration",
        "MllamaForConditionalGeneration", "MotifForCausalLM", "MptForCausalLM",
        "MusicFlamingoForConditionalGeneration", "OuroForCausalLM", "PersimmonForCausalLM",
        "Phi3SmallForCausalLM", "Phi4FlashForCausalLM", "Phi4MultimodalForCausalLM",
        "Plamo2ForCausalLM", "PrithviGeoSpatialMAE", "QWenLMHeadModel",
        "QwenVLForConditionalGeneration", "RWForCausalLM", "StableLMEpochForCausalLM",
        "Tarsier2ForConditionalGeneration", "TarsierForConditionalGeneration",
        "TeleChatForCausalLM", "XverseForCausalLM",
    }
)

_STATE = "recurrent state layers ({}), whose vLLM state shapes kvunits does not model for it"
_LOOP = "layers run several times per token (looped/recurrent depth, {}), not modelled"

#: Architectures vLLM 0.33 serves that kvunits refuses, each with the feature not modelled.
REFUSED: Final[Mapping[str, str]] = {
    "AliceAIForCausalLM": _STATE.format("linear attention, alice_ai.py"),
    "BailingMoeV2_5ForCausalLM": "lightning linear-attention state layers next to MLA "
    "layers (bailing_moe_linear.py), not modelled",
    "BailingMoeV3ForCausalLM": "linear-attention state layers next to sparse MLA layers "
    "(bailing_moe_v3.py), not modelled",
    "BeamForCausalLM": "vllm.models.beam builds its cache in its own package, not modelled",
    "DeepseekV4ForCausalLM": "compressed MLA caches (4 and 128 tokens per state) in blocks of "
    "256, 64, 8 and 4 tokens (DeepSeek V4), which kvunits' own planner does not model; "
    "`kvunits plan` gives vLLM's numbers for it (kvunits.runtime.plan_deepseek_v4_like_vllm)",
    "DomynEdgeForCausalLM": "per-layer head sizes (per_layer_config[i].head_dim) and windows "
    "(window_sizes[i][0] + 1) of domyn_edge.py, from custom config code, not modelled",
    "DoryForCausalLM": _LOOP.format("dory.py"),
    "FlintForCausalLM": "vllm.models.flint builds its cache in its own package, not modelled",
    "Glm5NextForCausalLM": "an indexer cache of one entry per index_kpool tokens "
    "(Glm5NextIndexerCache: tokens_per_state), a circular-buffer tail cache "
    "(Glm5NextTailCache: CircularBufferSpec) and Kimi delta attention states "
    "(vllm/models/glm5next/common/attention.py, kda.py), not modelled",
    "HCXVisionV2ForCausalLM": "HyperCLOVA X vision's language model config, not located",
    "HrmTextForCausalLM": _LOOP.format("hrm_text.py"),
    "InklingForCausalLM": "vllm.models.inkling builds its cache in its own package",
    "InklingForConditionalGeneration": "vllm.models.inkling builds its cache in its own package",
    "MiniMaxM3SparseForCausalLM": "an indexer key cache of index_head_dim bf16 (or fp8, "
    "without scales) elements beside GQA attention (vllm/models/minimax_m3/common/indexer.py "
    "MiniMaxM3IndexerCache; kvunits' indexer kind is DeepSeek's fp8 key with float32 "
    "scales), not modelled",
    "NemotronHPuzzleForCausalLM": "per-layer block_configs of the Nemotron-H Puzzle variant, "
    "which vLLM reads through the checkpoint's own get_nemotron_h_config_for_layer (custom "
    "config code), not modelled",
    "Plamo3ForCausalLM": "per-layer interleaved_sliding_window of plamo3.py, not modelled",
    "Qwen4ExpForCausalLM": _STATE.format("several Mamba state layouts of qwen4_exp"),
    "Step3p5ForCausalLM": "looped layers with per-layer windows (step3p5.py), not modelled",
    "Step5ForCausalLM": "vllm.models.step5 builds its cache in its own package",
    # Served by the Transformers backend with field names kvunits does not map.
    "NanbeigeForCausalLM": "Nanbeige through the Transformers backend, not mapped",
    "Emu3ForConditionalGeneration": "Emu3's image-token decoder, not located",
    "HunYuanVLForConditionalGeneration": "Hunyuan VL's language model config, not located",
    "VibeVoiceAsrForConditionalGeneration": "VibeVoice's speech decoder, not modelled",
    # Multimodal models whose decoder is not a plain text config.
    "DeepseekV4ForConditionalGeneration": "DeepSeek V4's compressed MLA caches beside a vision "
    "tower without a cache, which kvunits' own planner does not model; `kvunits plan` gives "
    "vLLM's numbers for it (kvunits.runtime.plan_deepseek_v4_like_vllm)",
    "DeepseekV41ForCausalLM": "compressed MLA caches of 1 and 2 tokens per state shared "
    "between layers, windows in blocks of 32 tokens and compressor rings (DeepSeek V4.1), "
    "which kvunits' own planner does not model; `kvunits plan --like-vllm h100|h200` gives "
    "vLLM's numbers for it (kvunits.runtime.plan_deepseek_v41_like_vllm; SM100 not modelled)",
}


#: Decoder model types (a multimodal config's ``text_config``) of refused architectures: the
#: refusal names the architecture's reason rather than an unknown model type.
REFUSED_MODEL_TYPES: Final[Mapping[str, str]] = {
    "deepseek_v4": "DeepseekV4ForCausalLM",
    # transformers' text model types of multimodal wrappers (get_text_config) whose decoder
    # is a refused architecture.
    "step3p5": "Step3p5ForCausalLM",
    "minimax_m3_vl_text": "MiniMaxM3SparseForCausalLM",
    "glm5_next_text": "Glm5NextForCausalLM",
    "qwen4_exp_text": "Qwen4ExpForCausalLM",
    "inkling_text": "InklingForCausalLM",
}


def architecture_refusal(architecture: str) -> str | None:
    """Why kvunits does not read ``architecture`` (``None``: it may be read)."""
    if architecture in REFUSED:
        return REFUSED[architecture]
    if architecture in PREVIOUSLY_SUPPORTED:
        return (
            "vLLM 0.33 no longer serves it (_PREVIOUSLY_SUPPORTED_MODELS): `vllm serve` "
            "refuses this checkpoint"
        )
    return None
