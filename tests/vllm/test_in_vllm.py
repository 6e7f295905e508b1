"""Against vLLM 0.33 itself, on the CPU (``.venv-vllm``, benchmarks/vllm-nodeps.txt); skipped
without it. vLLM's own spec classes, its own formulas, and its engine core's KV-cache step
(``get_kv_cache_configs``, called as ``EngineCore._initialize_kv_caches`` in
``vllm/v1/engine/core.py`` calls it) wrapped by the plugin, in warn and error modes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from .support import AUDIO, ROOT, TEXT, voxtral_specs

# The checkout's root (pytest puts it on sys.path for tests/) holds kvunits' `kernels/`,
# which Hugging Face's probe for its `kernels` package would import: vLLM and transformers
# are imported with the root off the path (kvunits itself is installed from src/).
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
# vLLM's CPU platform (resolved once, on first use): its attention backends build the models.
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
vllm = pytest.importorskip("vllm", reason="vLLM 0.33 is not installed (.venv-vllm)")
torch = pytest.importorskip("torch")

from vllm.v1 import kv_cache_interface as kvi  # noqa: E402

from kvunits.vllm import (  # noqa: E402
    audit,
    build_vllm_spec,
    from_vllm,
    plugin,
    read_dump,
    spec_to_dict,
)

from .models import BUILT, DEFAULTS  # noqa: E402
from .record import DEFAULTS_DIR, RECORDED, build, build_default  # noqa: E402


@contextlib.contextmanager
def _outside_checkout(where: Path) -> Iterator[None]:
    """Run vLLM from ``where``: it inspects models in a subprocess started there, and the
    checkout's root (its ``kernels/``) stays off the path."""
    here = os.getcwd()
    try:
        os.chdir(where)
        sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
        yield
    finally:
        os.chdir(here)


def voxtral_objects(window: int) -> dict[str, Any]:
    """The dumps of `support.voxtral_specs`, built as vLLM's classes (whisper_causal.py's
    replace(spec, tokens_per_state=Fraction(1, 4)) and its window)."""
    return {name: build_vllm_spec(data) for name, data in voxtral_specs(window).items()}


def test_real_classes_match_the_dumps() -> None:
    built = voxtral_objects(189)
    audio = built[AUDIO.format(0)]
    assert type(audio) is kvi.SlidingWindowSpec
    assert audio.tokens_per_state == Fraction(1, 4) and audio.page_size_bytes == 524288
    for name, data in voxtral_specs(189).items():
        assert spec_to_dict(built[name])["page_size_bytes"] == data["page_size_bytes"]
    read = from_vllm(audio)
    assert str(read.block_size) == "16 pooled_block/cache_block"
    assert str(read.kernel_block_size()) == "64 encoder_token/cache_block"
    assert str(read.sliding_window) == "189 pooled_block"
    assert str(read.widest_kernel_window()) == "753 encoder_token"


@pytest.mark.parametrize("window", [188, 189, 750])
@pytest.mark.parametrize("in_flight", [1, 2048, 4096])
def test_vllm_admission_cap_is_vllms_formula(window: int, in_flight: int) -> None:
    audio = voxtral_objects(window)[AUDIO.format(0)]
    ours = from_vllm(audio).vllm_admission_cap(in_flight, 131072)
    theirs = audio.max_admission_blocks_per_request(in_flight, 131072)
    assert ours._value == theirs


def test_seed_specs_from_vllms_classes() -> None:
    # The seed's check, on vLLM's objects: 750 → 48 against 13 with one token a step.
    assert voxtral_objects(750)[AUDIO.format(0)].max_admission_blocks_per_request(1, 131072) == 48
    assert voxtral_objects(189)[AUDIO.format(0)].max_admission_blocks_per_request(1, 131072) == 13


def _vllm_config(tmp_path: Path) -> Any:
    """A CPU VllmConfig of Voxtral Realtime's config (vLLM serves this transformers-format
    config with its Transformers backend, whose audio processor needs files the example does
    not ship: the engine settings are built for its text architecture), with the hybrid
    KV-cache manager on as on a GPU."""
    from vllm.config import CacheConfig, DeviceConfig, ModelConfig, SchedulerConfig, VllmConfig

    source = ROOT / "examples/hf/voxtral-mini-4b-realtime-2602/config.json"
    config = json.loads(source.read_text())
    config["architectures"] = ["MistralForCausalLM"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    # vLLM inspects the architecture in a subprocess started in the working directory, and
    # transformers probes for a `kernels` package: neither may see the checkout's root.
    os.chdir(tmp_path)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
    model = ModelConfig(
        model=str(tmp_path), skip_tokenizer_init=True, dtype="bfloat16", max_model_len=131072
    )
    vllm_config = VllmConfig(
        model_config=model,
        cache_config=CacheConfig(block_size=16),
        scheduler_config=SchedulerConfig(
            max_num_batched_tokens=2048, max_model_len=131072, is_encoder_decoder=False
        ),
        device_config=DeviceConfig("cpu"),
    )
    vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
    # The model's own architecture back in the config the audit reads (kvunits dispatches on
    # it first, as vLLM does): the text class above only spared vLLM the audio processor.
    model.hf_config.architectures = json.loads(source.read_text())["architectures"]
    return vllm_config


def _engine_step(vllm_config: Any, specs: dict[str, Any]) -> Any:
    """What EngineCore._initialize_kv_caches does around the step (vllm/v1/engine/core.py):
    resolve the layout, group the layers, then call the module-level name it imported."""
    import vllm.v1.engine.core as core
    from vllm.v1.attention.backends.utils import resolve_kv_cache_layout
    from vllm.v1.core.kv_cache_planning import get_global_kv_cache_groups

    if vllm_config.cache_config.kv_cache_layout is None:
        resolve_kv_cache_layout(vllm_config, [["LBHNC"]], list(specs.values()))
    groups = get_global_kv_cache_groups(vllm_config, [specs])
    return core.get_kv_cache_configs(vllm_config, [specs], [40 << 30], groups)


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory: pytest.TempPathFactory) -> Any:
    here = os.getcwd()
    model_dir = tmp_path_factory.mktemp("voxtral")
    os.chdir(model_dir)
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT]
    import vllm.v1.engine.core as core
    from vllm.v1.core import kv_cache_planning

    original = kv_cache_planning.get_kv_cache_configs
    plugin.register()
    plugin.register()  # vLLM loads plugins in every process, sometimes twice: one wrapper
    assert core.get_kv_cache_configs is kv_cache_planning.get_kv_cache_configs
    assert core.get_kv_cache_configs.__wrapped__ is original
    try:
        yield _vllm_config(model_dir)
    finally:
        os.chdir(here)
    core.get_kv_cache_configs = original
    kv_cache_planning.get_kv_cache_configs = original


def test_warn_mode_logs_the_seed_bug(
    wrapped: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    monkeypatch.setenv("KVUNITS_VLLM_AUDIT", "warn")
    monkeypatch.setenv("KVUNITS_VLLM_AUDIT_DUMP", str(tmp_path / "dump.json"))
    with caplog.at_level(logging.INFO, logger="kvunits.vllm"):
        configs = _engine_step(wrapped, voxtral_objects(750))
    assert configs[0].num_blocks == 2560  # vLLM's own plan, returned unchanged
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    # vLLM's cap of the window read as 750 slots against the 189 that keep every key, with
    # what this config has in flight (4096 tokens with async scheduling, 2048 without).
    in_flight = wrapped.max_in_flight_tokens
    held, needed = -(-(749 + in_flight) // 16) + 1, -(-(188 + in_flight) // 16) + 1
    assert any(f"{held} cache_block per request where {needed} cache_block" in m for m in warned), (
        warned
    )
    report = audit(read_dump(json.loads((tmp_path / "dump.json").read_text())))
    assert [f.check for f in report.findings] == ["window"]


def test_error_mode_refuses_and_passes_the_fixed_spec(
    wrapped: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KVUNITS_VLLM_AUDIT", "error")
    monkeypatch.delenv("KVUNITS_VLLM_AUDIT_DUMP", raising=False)
    with pytest.raises(plugin.KVCacheAuditError, match="a key lost"):
        _engine_step(wrapped, voxtral_objects(188))
    assert _engine_step(wrapped, voxtral_objects(189))[0].num_blocks == 2560


def test_off_mode_and_a_text_group(wrapped: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KVUNITS_VLLM_AUDIT", "off")
    assert _engine_step(wrapped, voxtral_objects(750))[0].num_blocks == 2560
    assert TEXT.format(0) in voxtral_objects(189)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILT))
def test_recorded_dumps_are_what_vllm_builds(name: str) -> None:
    # vLLM's model code, on the meta device, builds the specs test_recorded.py audits.
    with _outside_checkout(RECORDED):
        built = build(name)
    recorded = json.loads((RECORDED / f"{name}.json").read_text())
    assert built["workers"] == recorded["workers"]
    assert built["kv_cache_configs"] == recorded["kv_cache_configs"]
    assert built["engine"] == recorded["engine"]


@pytest.mark.slow
def test_the_dumps_do_not_depend_on_the_hosts_cpu() -> None:
    # On a host with AVX512-BF16, vLLM's CPU platform makes Jamba's Mamba SSM state float32
    # (vllm/platforms/cpu.py, check_and_update_config); a GPU keeps it in the model dtype,
    # bfloat16. `built.engine_config` builds the GPU's on any host.
    from unittest import mock

    with (
        _outside_checkout(RECORDED),
        mock.patch("torch.cpu._is_avx512_bf16_supported", return_value=True),
    ):
        built = build("jamba-v0.1")
    mixer = built["workers"][0]["model.layers.0.mixer"]
    assert mixer["fields"]["dtypes"] == ["bfloat16", "bfloat16"]
    recorded = json.loads((RECORDED / "jamba-v0.1.json").read_text())
    assert built["workers"] == recorded["workers"]
    assert built["kv_cache_configs"] == recorded["kv_cache_configs"]


@pytest.mark.slow
@pytest.mark.parametrize("index", [0, 1], ids=["falcon_h1", "zamba2"])
def test_parallel_hybrids_are_audited_by_vllms_own_names(index: int, tmp_path: Path) -> None:
    # vLLM's model code names the second cache of a layer with another index than the
    # layer's (falcon_h1.py, zamba2.py): the names test_audit.py reads back are vLLM's own,
    # and the audit of what vLLM builds compares every layer, state pages included, clean.
    from kvunits.vllm import dump_from_vllm

    from .built import built_specs, engine_config
    from .record import MEMORY, engine_step
    from .test_audit import _PARALLEL_HYBRIDS

    hf_config, names = _PARALLEL_HYBRIDS[index]
    (tmp_path / "config.json").write_text(json.dumps({**hf_config, "dtype": "bfloat16"}))
    with _outside_checkout(tmp_path):
        vllm_config = engine_config(str(tmp_path), max_model_len=2048)
        vllm_config.scheduler_config.disable_hybrid_kv_cache_manager = False
        specs = built_specs(vllm_config)
        configs = engine_step(vllm_config, specs)
    assert sorted(specs) == sorted(names)
    dump = json.loads(json.dumps(dump_from_vllm(vllm_config, [specs], [MEMORY], configs)))
    report = audit(read_dump(dump))
    assert report.ok and report.layers == len(names), "\n".join(report.lines())
    skipped = {n for note in report.notes if note.check == "not_audited" for n in note.layers}
    assert skipped <= {""}, sorted(skipped)


@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(DEFAULTS))
def test_default_dumps_are_what_vllm_builds(model_type: str) -> None:
    # The recorded default configs (test_recorded.py audits them), built again by vLLM's
    # model code from the config each recorded: its specs and KV-cache configuration.
    recorded = json.loads((DEFAULTS_DIR / f"{model_type}.json").read_text())
    with _outside_checkout(DEFAULTS_DIR):
        built = build_default(model_type, recorded["hf_config"])
    assert built["workers"] == recorded["workers"]
    assert built["kv_cache_configs"] == recorded["kv_cache_configs"]
    assert built["engine"] == recorded["engine"]
