"""Engine settings from ``KVUNITS_*`` environment variables, read with pydantic-settings.

Imported only when such a variable is set (pydantic-settings costs ~0.1 s to import). Values
stay text here; they are validated with the rest of the engine settings (``_load``), so an
error names the variable, the expected unit and what was given.
"""

from __future__ import annotations

from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict


class EngineSettings(BaseSettings):
    """``KVUNITS_BLOCK_SIZE_SLOTS=16``, ``KVUNITS_MEMORY_BUDGET="40 GiB"``, …: one variable
    per `EngineSpec` field, written like the config file's value (with its unit)."""

    model_config = SettingsConfigDict(
        env_prefix="KVUNITS_", case_sensitive=False, extra="ignore", frozen=True
    )

    block_size_slots: str | None = None
    max_model_len: str | None = None
    max_num_batched_tokens: str | None = None
    max_encoder_len: str | None = None
    max_encoder_tokens_per_step: str | None = None
    memory_budget: str | None = None
    cache_dtype: str | None = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment only: no .env file or secrets directory is read behind the user's
        # back; flags are merged above this by the loader.
        return (env_settings,)
