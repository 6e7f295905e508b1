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
_SPARSE = "a sparse-attention indexer cache beside the MLA cache ({}), not modelled"
_LOOP = "layers run several times per token (looped/recurrent depth, {}), not modelled"

#: Architectures vLLM 0.33 serves that kvunits refuses, each with the feature not modelled.
REFUSED: Final[Mapping[str, str]] = {
    "AXK1ForCausalLM": _SPARSE.format("AXK1.py"),
    "AliceAIForCausalLM": _STATE.format("linear attention, alice_ai.py"),
    "BailingMoeV2_5ForCausalLM": "lightning linear-attention state layers next to MLA "
    "layers (bailing_moe_linear.py), not modelled",
    "BailingMoeV3ForCausalLM": "linear-attention state layers next to sparse MLA layers "
    "(bailing_moe_v3.py), not modelled",
    "BeamForCausalLM": "vllm.models.beam builds its cache in its own package, not modelled",
    "Cohere2MoeForCausalLM": "Cohere 2 MoE's dense and sparse layer mix (cohere2_moe.py) is "
    "not modelled",
    "DeepseekV4ForCausalLM": "compressed MLA caches (several tokens per state) and an indexer "
    "cache (DeepSeek V4), not modelled",
    "DomynEdgeForCausalLM": "per-layer window sizes of domyn_edge.py (window_size), not modelled",
    "DoryForCausalLM": _LOOP.format("dory.py"),
    "ExaoneMoEForCausalLM": "EXAONE MoE's multi-token-prediction layers and window layout "
    "(exaone_moe.py), not modelled",
    "ExaoneMoeForCausalLM": "EXAONE MoE's multi-token-prediction layers and window layout "
    "(exaone_moe.py), not modelled",
    "FlintForCausalLM": "vllm.models.flint builds its cache in its own package, not modelled",
    "Gemma3nForCausalLM": "Gemma 3n's KV-shared layers across window kinds and its per-layer "
    "inputs (gemma3n.py), not modelled",
    "Glm5NextForCausalLM": _SPARSE.format("GLM-5"),
    "HCXVisionV2ForCausalLM": "HyperCLOVA X vision's language model config, not located",
    "HYV4ForCausalLM": _SPARSE.format("Hunyuan V4"),
    "HrmTextForCausalLM": _LOOP.format("hrm_text.py"),
    "IQuestLoopCoderForCausalLM": _LOOP.format("iquest_loopcoder.py"),
    "InklingForCausalLM": "vllm.models.inkling builds its cache in its own package",
    "InklingForConditionalGeneration": "vllm.models.inkling builds its cache in its own package",
    "K2HorizonForCausalLM": _LOOP.format("k2_horizon.py"),
    "KimiLinearForCausalLM": _STATE.format("Kimi delta attention"),
    "LagunaForCausalLM": "attention sinks with per-layer windows (laguna.py), not modelled",
    "Lfm2ForCausalLM": _STATE.format("short convolutions of lfm2.py"),
    "Lfm2MoeForCausalLM": _STATE.format("short convolutions of lfm2_moe.py"),
    "LongcatFlashForCausalLM": "two MLA blocks per layer (LongCat-Flash), not modelled",
    "LongcatFlashNgramForCausalLM": "two MLA blocks per layer and n-gram embeddings "
    "(LongCat-Flash n-gram), not modelled",
    "MiniMaxM3SparseForCausalLM": _SPARSE.format("MiniMax M3"),
    "MuseGlimmerForCausalLM": "per-layer windows of muse_glimmer.py, not modelled",
    "NemotronHPuzzleForCausalLM": "per-layer block_configs of the Nemotron-H Puzzle variant, "
    "not modelled",
    "OlmoHybridForCausalLM": _STATE.format("linear attention of olmo_hybrid.py"),
    "PanguEmbeddedForCausalLM": "MLA and sliding-window layers mixed (openpangu.py)",
    "PanguProMoEV2ForCausalLM": "MLA and sliding-window layers mixed (openpangu.py)",
    "PanguUltraMoEForCausalLM": "MLA and sliding-window layers mixed (openpangu.py)",
    "Param2MoEForCausalLM": "Param2 MoE's attention (param2moe.py) is not modelled",
    "Plamo3ForCausalLM": "per-layer interleaved_sliding_window of plamo3.py, not modelled",
    "Qwen4ExpForCausalLM": _STATE.format("several Mamba state layouts of qwen4_exp"),
    "Rnj1ForCausalLM": "chunked layers of rnj1.py sliding over sliding_window, not modelled",
    "SarvamMLAForCausalLM": _SPARSE.format("Sarvam MLA"),
    "SarvamMoEForCausalLM": _SPARSE.format("Sarvam MoE"),
    "Step3p5ForCausalLM": "looped layers with per-layer windows (step3p5.py), not modelled",
    "Step5ForCausalLM": "vllm.models.step5 builds its cache in its own package",
    # Served by the Transformers backend with field names kvunits does not map.
    "CwmForCausalLM": "CWM's per-layer windows through the Transformers backend, not modelled",
    "Jais2ForCausalLM": "Jais 2 through the Transformers backend, not mapped",
    "Kolibri1ForCausalLM": "Kolibri 1 through the Transformers backend, not mapped",
    "MellumForCausalLM": "Mellum through the Transformers backend, not mapped",
    "NanbeigeForCausalLM": "Nanbeige through the Transformers backend, not mapped",
    "Emu3ForConditionalGeneration": "Emu3's image-token decoder, not located",
    "HunYuanVLForConditionalGeneration": "Hunyuan VL's language model config, not located",
    "VibeVoiceAsrForConditionalGeneration": "VibeVoice's speech decoder, not modelled",
    # Multimodal models whose decoder is not a plain text config.
    "Gemma3nForConditionalGeneration": "Gemma 3n's KV-shared layers across window kinds and its "
    "per-layer inputs (gemma3n.py), not modelled",
    "DeepseekV4ForConditionalGeneration": "compressed MLA caches and an indexer (DeepSeek V4)",
    "DeepseekV41ForCausalLM": "compressed MLA caches and an indexer (DeepSeek V4.1)",
    "Qwen2_5OmniForConditionalGeneration": "two decoders (thinker and talker) with caches",
    "Qwen2_5OmniModel": "two decoders (thinker and talker) with caches",
    "Qwen3OmniMoeForConditionalGeneration": "two decoders (thinker and talker) with caches",
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
