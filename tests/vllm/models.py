"""The shipped Hugging Face examples whose KV-cache specs vLLM 0.33's own model code builds on
the CPU (`built.built_specs`), with the engine arguments each needs, and why the others cannot
be built here."""

from __future__ import annotations

from typing import Any, Final

#: Example directory (examples/hf/) -> EngineArgs fields beyond the defaults. Quantized
#: weights are dropped (``quantization_config``: no CPU kernel implements FP8 or MXFP4 linear
#: layers; a weight format does not touch the KV-cache specs).
BUILT: Final[dict[str, dict[str, Any]]] = {
    "c4ai-command-r7b-12-2024": {},
    "deepseek-v2-lite": {"max_model_len": 32768},
    "deepseek-v3": {"hf_overrides": {"quantization_config": None}, "max_model_len": 32768},
    "gemma-2-2b-it": {},
    "gemma-3-1b-it": {},
    "gpt-oss-20b": {"hf_overrides": {"quantization_config": None}, "max_model_len": 32768},
    "jamba-v0.1": {"max_model_len": 32768},
    "llama-3.1-8b": {},
    "mistral-7b-v0.1": {},
    "mixtral-8x7b-v0.1": {},
    "nemotron-h-56b-base-8k": {},
    "nvidia-nemotron-nano-9b-v2": {"max_model_len": 32768},
    "phi-3-mini-4k-instruct": {},
    "phi-3.5-mini-instruct": {},
    "qwen2.5-7b-instruct": {},
    "qwen3-30b-a3b": {},
    "qwen3-8b": {},
    "whisper-large-v3": {},
}

#: The others, and what stops vLLM's model code on this CPU install.
NOT_BUILT: Final[dict[str, str]] = {
    "devstral-small-2-24b-instruct": "Mistral3's Pixtral vision tower imports torchvision",
    "gemma-3-4b-it": "Gemma3ForConditionalGeneration's processor imports torchvision",
    "gemma-4-26b-a4b": "Gemma4's processor imports torchvision",
    "llama-4-maverick-17b-128e-instruct": "Llama4's processor imports torchvision",
    "llama-4-scout-17b-16e-instruct": "Llama4's processor imports torchvision",
    "llava-1.5-7b-hf": "LLaVA's processor imports torchvision",
    "qwen2.5-vl-7b-instruct": "Qwen2.5-VL's processor imports torchvision",
    "qwen3-next-80b-a3b-instruct": "its gated delta net layers need a CUDA kernel to build",
    "qwen3.5-35b-a3b": "its vision tower's processor imports torchvision",
    "voxtral-mini-3b-2507": "Voxtral's processor needs its preprocessor_config.json",
    "voxtral-mini-4b-realtime-2602": (
        "vLLM serves this transformers-format config with its Transformers backend, whose "
        "processor needs a preprocessor_config.json; its native model "
        "(vllm/model_executor/models/whisper_causal.py) is tested from its spec rules"
    ),
    "nemotron-3-nano-30b-a3b": "its MoE activation (is_act_and_mul=False) is CUDA-only",
}

#: Model types no shipped example builds here, recorded from transformers' default config of
#: the type (transformers 5.20.2, benchmarks/vllm-nodeps.txt) -> the vLLM architecture built:
#: a layout each takes the audit through that the shipped ones do not.
DEFAULTS: Final[dict[str, str]] = {
    # Full layers 512 wide beside sliding ones 256 wide: vLLM grows the sliding layers'
    # block to 32 tokens so that every group has one page.
    "gemma4_text": "Gemma4ForCausalLM",
    # Attention and a Mamba-2 mixer in every layer, the mixer named model.{n + i}.mixer.
    "falcon_h1": "FalconH1ForCausalLM",
    # Mamba-2 layers, hybrid ones with a shared attention block named model.attn.{j}.
    "zamba2": "Zamba2ForCausalLM",
    # Gated delta net states beside full attention (qwen3-next-80b needs a CUDA kernel).
    "qwen3_next": "Qwen3NextForCausalLM",
    # Chunked local attention on three layers of four (the shipped Llama 4 examples' processor
    # imports torchvision).
    "llama4_text": "Llama4ForCausalLM",
    # Attention-free Mamba-2 and Mamba-1 states.
    "mamba2": "Mamba2ForCausalLM",
    "falcon_mamba": "FalconMambaForCausalLM",
}
