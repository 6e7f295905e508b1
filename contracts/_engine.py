"""The engine's settings that size the cache (a frozen Pydantic model)."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import ConfigDict, Field, ValidationInfo, field_validator, model_validator

from ._dtype import CacheDType, parse_dtype_field
from ._model import SpecModel
from ._origin import in_python, written_in_python
from ._quantity import EncoderTokens, Tokens
from .deploy import Parallelism, RankBytes, requested_memory

#: vLLM's ``CacheConfig.gpu_memory_utilization`` default (``vllm/config/cache.py``).
GPU_MEMORY_UTILIZATION: Final = 0.92

_MAX_COUNT: Final = 2**63 - 1
_Ranks = Annotated[int, Field(strict=True, ge=1, le=1 << 16)]


class EngineSpec(SpecModel):
    """Block size, sequence limits, the deployment's shape and the memory of one engine.

    Limits are written in the model's units; each group's manager unit is derived from them
    by the named conversions (``pool_length`` for a pooled group). The parallel sizes and the
    work in flight follow vLLM's names (``--tensor-parallel-size``, ``--async-scheduling``,
    …). Memory is per rank (one GPU): a KV cache budget (``memory_budget``, vLLM's
    ``kv_cache_memory_bytes``), or the device's memory × ``gpu_memory_utilization`` less what
    the weights and activations take.

    Example:
        >>> engine = EngineSpec.model_validate({"max_model_len": "8192 token",
        ...     "max_num_batched_tokens": "2048 token", "memory_budget": "40 GiB",
        ...     "async_scheduling": True, "num_speculative_tokens": 4})
        >>> str(engine.memory_budget), engine.concurrent_batches
        ('42949672960 byte/rank', 2)
        >>> str(engine.max_in_flight)
        '4100 token'
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    block_size_slots: Annotated[int, Field(strict=True, ge=1, le=1 << 16)] = Field(
        default=16,
        description="slots per cache block: tokens for a token layer, pooled blocks for a "
        "pooled layer (so a pooled block holds block_size_slots × P encoder tokens)",
    )
    max_model_len: Tokens = Field(description="longest decoder sequence of one request")
    max_num_batched_tokens: Tokens = Field(description="decoder tokens scheduled per step")
    max_encoder_len: EncoderTokens | None = Field(
        default=None,
        description="longest encoder sequence of one request (needed by encoder-side layers)",
    )
    max_encoder_tokens_per_step: EncoderTokens | None = Field(
        default=None,
        description="encoder tokens scheduled per step (needed by encoder-side layers)",
    )
    tensor_parallel_size: _Ranks = Field(
        default=1, description="ranks that split every layer's KV heads (vLLM -tp)"
    )
    pipeline_parallel_size: _Ranks = Field(
        default=1, description="pipeline stages that split the layers (vLLM -pp)"
    )
    decode_context_parallel_size: _Ranks = Field(
        default=1,
        description="TP ranks that split a sequence's positions (vLLM -dcp); divides the "
        "tensor-parallel size",
    )
    async_scheduling: Annotated[bool, Field(strict=True)] = Field(
        default=False,
        description="schedule the next step while one runs: one more batch in flight "
        "(vLLM 0.33 turns it on by default; kvunits plans it when asked)",
    )
    max_concurrent_batches: _Ranks | None = Field(
        default=None,
        description="batches in flight at once; unset: pipeline_parallel_size, plus 1 with "
        "async scheduling (vLLM VllmConfig.max_concurrent_batches)",
    )
    num_speculative_tokens: Annotated[int, Field(strict=True, ge=0, le=1 << 10)] = Field(
        default=0,
        description="draft tokens a speculative decoder proposes per step: KV slots reserved "
        "past the scheduled tokens (vLLM num_lookahead_tokens)",
    )
    memory_budget: RankBytes | None = Field(
        default=None,
        description="KV cache memory of each rank (GPU), e.g. '40 GiB' (vLLM "
        "kv_cache_memory_bytes); or give gpu_memory instead",
    )
    gpu_memory: RankBytes | None = Field(
        default=None,
        validate_default=True,
        description="total memory of each GPU, e.g. '80 GiB': the KV budget is then "
        "gpu_memory × gpu_memory_utilization − weights_memory − activation_memory",
    )
    gpu_memory_utilization: Annotated[
        float, Field(strict=True, gt=0, le=1, allow_inf_nan=False)
    ] = Field(
        default=GPU_MEMORY_UTILIZATION,
        description="fraction of gpu_memory the engine may use (vLLM's default 0.92)",
    )
    weights_memory: RankBytes | None = Field(
        default=None,
        validate_default=True,
        description="memory the model's weights take on each GPU (with gpu_memory)",
    )
    activation_memory: RankBytes | None = Field(
        default=None,
        validate_default=True,
        description="peak memory of activations and everything but weights and the KV cache "
        "on each GPU (with gpu_memory)",
    )
    cache_dtype: CacheDType | None = Field(
        default=None, description="overrides every layer's cache dtype when set"
    )
    kv_cache_layout: Literal["per_group", "shared"] = Field(
        default="per_group",
        description="per_group: a block pool per layer group, the budget split between them; "
        "shared: one pool all groups draw from, with one page size (vLLM's hybrid allocator: "
        "smaller pages grow by scaling their block size)",
    )

    admission: Literal["reserve", "on_demand", "declared"] = Field(
        default="reserve",
        description="how the runtime admits requests: reserve (each request's admission cap "
        "at the engine's limits, so a step never runs short), on_demand (vLLM's: blocks are "
        "taken as steps need them, and a step that runs short preempts running requests), "
        "declared (each request declares its length and reserves exactly what it needs)",
    )
    scheduling_policy: Literal["fcfs", "priority"] = Field(
        default="fcfs",
        description="which running request on_demand preempts first (vLLM's "
        "scheduling_policy): fcfs, the latest admitted; priority, the lowest priority (the "
        "largest value), the latest arrival among equals",
    )
    watermark: Annotated[float, Field(strict=True, ge=0, lt=1, allow_inf_nan=False)] = Field(
        default=0.0,
        description="fraction of each pool's cache blocks on_demand keeps free when it admits "
        "a request while others run (vLLM 0.33 SchedulerConfig.watermark; 0: none)",
    )

    @field_validator("cache_dtype", mode="before")
    @classmethod
    def _parse_dtype(cls, value: object, info: ValidationInfo) -> object:
        if isinstance(value, str) and value.strip().lower() == "auto":
            if in_python(info):
                raise written_in_python(
                    info, value, "None (each layer's own dtype)", "a CacheDType"
                )
            return None
        return parse_dtype_field(value, info)

    @field_validator("max_model_len", "max_num_batched_tokens")
    @classmethod
    def _positive(cls, value: Tokens) -> Tokens:
        if not value:
            raise ValueError(f"must be > 0, got {value}")
        return value

    @field_validator("max_encoder_len", "max_encoder_tokens_per_step")
    @classmethod
    def _positive_encoder(cls, value: EncoderTokens | None) -> EncoderTokens | None:
        if value is not None and not value:
            raise ValueError(f"must be > 0, got {value}")
        return value

    @field_validator("decode_context_parallel_size")
    @classmethod
    def _dcp_divides_tp(cls, value: int, info: ValidationInfo) -> int:
        tp = info.data.get("tensor_parallel_size")
        if tp is not None and tp % value:
            raise ValueError(
                f"{value} does not divide tensor_parallel_size {tp}: DCP splits a sequence "
                "over the TP ranks (vLLM ParallelConfig)"
            )
        return value

    @field_validator("memory_budget", "gpu_memory")
    @classmethod
    def _positive_memory(cls, value: RankBytes | None) -> RankBytes | None:
        if value is not None and value._value < 1:
            raise ValueError(f"must be > 0, got {value}")
        return value

    @field_validator("gpu_memory", mode="after")
    @classmethod
    def _one_budget(cls, value: RankBytes | None, info: ValidationInfo) -> RankBytes | None:
        if value is not None and info.data.get("memory_budget") is not None:
            raise ValueError(
                "memory_budget is set too: the KV cache budget is either memory_budget "
                "(vLLM's kv_cache_memory_bytes) or gpu_memory × gpu_memory_utilization − "
                "weights_memory − activation_memory; give one"
            )
        if value is None and "memory_budget" in info.data and info.data["memory_budget"] is None:
            raise ValueError(
                "no memory given: set memory_budget (the KV cache of each GPU) or gpu_memory"
            )
        return value

    @field_validator("weights_memory", "activation_memory", mode="after")
    @classmethod
    def _with_gpu_memory(cls, value: RankBytes | None, info: ValidationInfo) -> RankBytes | None:
        gpu = info.data.get("gpu_memory")
        if gpu is None and value is not None and "gpu_memory" in info.data:
            raise ValueError(f"{info.field_name} is read only with gpu_memory, which is not set")
        if gpu is not None and value is None:
            raise ValueError(
                f"gpu_memory is set, so {info.field_name} is needed: kvunits does not profile "
                "the model, say what it takes on each GPU"
            )
        if gpu is not None and info.field_name == "activation_memory":
            weights = info.data.get("weights_memory")
            utilization = info.data.get("gpu_memory_utilization")
            if weights is not None and value is not None and utilization is not None:
                requested = requested_memory(gpu, utilization)
                if weights._value + value._value >= requested._value:
                    raise ValueError(
                        f"no memory left for the KV cache: gpu_memory {gpu} × "
                        f"{utilization} = {requested}, weights {weights} and activations "
                        f"{value} take it all; raise gpu_memory_utilization or lower them"
                    )
        return value

    @model_validator(mode="after")
    def _in_flight_within_int64(self) -> EngineSpec:
        # Every count a plan states is an int64; what is in flight is a product of settings.
        batches = f"max_concurrent_batches {self.concurrent_batches}"
        encoder = self.max_encoder_in_flight
        if self.max_in_flight.numerical_value_in(Tokens) > _MAX_COUNT:
            product = (
                f"{batches} × max_num_batched_tokens {self.max_num_batched_tokens} + "
                f"num_speculative_tokens {self.num_speculative_tokens}"
            )
        elif encoder is not None and encoder.numerical_value_in(EncoderTokens) > _MAX_COUNT:
            product = f"{batches} × max_encoder_tokens_per_step {self.max_encoder_tokens_per_step}"
        else:
            return self
        raise ValueError(f"{product} in flight is past 2**63 - 1 (int64); lower them")

    @property
    def parallelism(self) -> Parallelism:
        """The tensor, pipeline and decode-context parallel sizes."""
        return Parallelism(
            tensor_parallel_size=self.tensor_parallel_size,
            pipeline_parallel_size=self.pipeline_parallel_size,
            decode_context_parallel_size=self.decode_context_parallel_size,
        )

    @property
    def kv_cache_memory(self) -> RankBytes:
        """Each rank's KV cache budget: ``memory_budget``, or ``ceil(gpu_memory ×
        gpu_memory_utilization) − weights_memory − activation_memory`` (vLLM's
        ``request_memory`` less the non-KV memory its profiling measures)."""
        if self.memory_budget is not None:
            return self.memory_budget
        # The validators make these present together (and leave the budget > 0).
        assert self.gpu_memory is not None
        assert self.weights_memory is not None and self.activation_memory is not None
        requested = requested_memory(self.gpu_memory, self.gpu_memory_utilization)
        return requested - self.weights_memory - self.activation_memory

    @property
    def concurrent_batches(self) -> int:
        """Batches in flight at once: ``max_concurrent_batches`` when set, else the pipeline's
        stages plus one with async scheduling (vLLM 0.33's ``max_concurrent_batches`` with its
        default model runner, V2: ``pp + 1`` async, ``pp`` otherwise)."""
        if self.max_concurrent_batches is not None:
            return self.max_concurrent_batches
        return self.pipeline_parallel_size + (1 if self.async_scheduling else 0)

    @property
    def num_lookahead_tokens(self) -> Tokens:
        """KV slots a step reserves past its scheduled tokens: the speculative tokens (vLLM's
        ``num_lookahead_tokens`` for EAGLE, MTP and draft models)."""
        return Tokens(self.num_speculative_tokens)

    @property
    def max_in_flight(self) -> Tokens:
        """Decoder tokens scheduled but not yet settled: ``max_concurrent_batches ×
        max_num_batched_tokens + num_lookahead_tokens``.

        vLLM's ``max_in_flight_tokens`` is the product alone; kvunits adds the lookahead, as
        the sliding-window and chunked caps must also keep the drafted slots (MISSION.md).
        """
        return self.max_num_batched_tokens * self.concurrent_batches + (self.num_lookahead_tokens)

    @property
    def max_encoder_in_flight(self) -> EncoderTokens | None:
        """Encoder tokens scheduled but not yet settled: ``max_concurrent_batches ×
        max_encoder_tokens_per_step`` (a speculative decoder drafts decoder tokens only)."""
        if self.max_encoder_tokens_per_step is None:
            return None
        return self.max_encoder_tokens_per_step * self.concurrent_batches
