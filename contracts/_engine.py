"""The engine's settings that size the cache (a frozen Pydantic model)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ._dtype import CacheDType
from ._quantity import Bytes, EncoderTokens, Tokens


class EngineSpec(BaseModel):
    """Block size, sequence limits and the memory budget of one engine.

    Limits are written in the model's units; each group's manager unit is derived from them
    by the named conversions (``pool_length`` for a pooled group).

    Example:
        >>> engine = EngineSpec.model_validate({"max_model_len": "8192 token",
        ...     "max_num_batched_tokens": "2048 token", "memory_budget": "40 GiB"})
        >>> str(engine.memory_budget)
        '42949672960 byte'
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
    memory_budget: Bytes = Field(description="memory for the KV cache, e.g. '40 GiB'")
    cache_dtype: CacheDType | None = Field(
        default=None, description="overrides every layer's cache dtype when set"
    )

    @field_validator("cache_dtype", mode="before")
    @classmethod
    def _parse_dtype(cls, value: object) -> object:
        if isinstance(value, str):
            return None if value.strip().lower() == "auto" else CacheDType.parse(value)
        return value

    @field_validator("max_model_len", "max_num_batched_tokens", "memory_budget")
    @classmethod
    def _positive(cls, value: Tokens | Bytes) -> Tokens | Bytes:
        if value.value < 1:
            raise ValueError(f"must be > 0, got {value}")
        return value

    @field_validator("max_encoder_len", "max_encoder_tokens_per_step")
    @classmethod
    def _positive_encoder(cls, value: EncoderTokens | None) -> EncoderTokens | None:
        if value is not None and value.value < 1:
            raise ValueError(f"must be > 0, got {value}")
        return value
