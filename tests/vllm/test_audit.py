"""The audit of vLLM's KV-cache plan, from dumps of its specs (no vLLM needed).

Golden numbers: the seed (MISSION.md): Voxtral Realtime's encoder window of 750 encoder tokens
read as 750 pooled slots holds 48 cache blocks a request where 13 keep every key
(block size 16, one token a step, the seed's test), and its first fix, 188, loses a key;
vLLM 0.33's ``whisper_causal.py`` states ``cdiv(750, 4) + 1 = 189``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kvunits.contracts import (
    BlockSize,
    Elements,
    EncoderTokens,
    KVHeads,
    PooledBlocks,
    PoolFactor,
    SlidingWindowLayer,
    Tokens,
    Window,
    manager_view,
    pool_window,
    unpool_window,
)
from kvunits.contracts.deploy import Parallelism, page_size_per_rank
from kvunits.vllm import audit, from_vllm_dict, kvunits_layer_name, read_dump, to_vllm_dict

from .support import AUDIO, ROOT, TEXT, dump, seed_engine, spec, voxtral_specs


def report_of(data: dict[str, Any]) -> Any:
    return audit(read_dump(data))


def test_seed_pre_fix_window_found_with_48_against_13() -> None:
    report = report_of(dump([voxtral_specs(750)]))
    assert [f.check for f in report.findings] == ["window"]
    finding = report.findings[0]
    assert len(finding.layers) == 32 and finding.layers[0] == AUDIO.format(0)
    assert finding.message == (
        "vLLM's sliding window 750 counts pooled slots (tokens_per_state 1/4: 4 encoder_token) "
        "but the model's window is 750 encoder_token: the manager holds 48 cache_block per "
        "request where 13 cache_block keep every key the kernel reads"
    )


def test_seed_first_fix_188_loses_a_key() -> None:
    report = report_of(dump([voxtral_specs(188)]))
    assert [f.check for f in report.findings] == ["window"]
    message = report.findings[0].message
    assert "188 pooled_block keeps 187 slots (748 encoder_token)" in message
    assert "looks back 749: it needs 189 pooled_block" in message
    assert "a key lost" in message


def test_fixed_spec_is_clean() -> None:
    report = report_of(dump([voxtral_specs(189)]))
    assert report.ok, report.lines()


def test_vllm_margin_is_a_choice_not_a_finding() -> None:
    # W = 749: (W - 1) % 4 == 0, so vLLM's cdiv(749, 4) + 1 = 189 is one more than the
    # tight cdiv(748, 4) + 1 = 188: whisper_causal.py's documented margin.
    hf = json.loads((ROOT / "examples/hf/voxtral-mini-4b-realtime-2602/config.json").read_text())
    hf["audio_config"]["sliding_window"] = 749
    report = report_of(dump([voxtral_specs(189)], hf=hf))
    assert report.ok, report.lines()
    assert any(n.check == "choice" and "eviction margin" in n.message for n in report.notes)


def test_seed_era_widened_heads_read_as_pooled_slots() -> None:
    # The seed's own test: num_kv_heads == 128 (32 heads × P), tokens_per_state 1.
    fixed = report_of(dump([voxtral_specs(189, heads=128, tps="1")]))
    assert fixed.ok, fixed.lines()
    assert any("widens each slot's heads × 4" in n.message for n in fixed.notes)
    broken = report_of(dump([voxtral_specs(750, heads=128, tps="1")]))
    assert [f.check for f in broken.findings] == ["window"]
    assert "48 cache_block per request where 13" in broken.findings[0].message


def test_heads_per_rank_bug() -> None:
    # The bug class of transformers #48566 and SGLang #19086: a rank sized with the model's
    # heads. Llama 3.1 8B (8 KV heads) at TP 8 holds 1 per rank, not 8.
    hf = json.loads((ROOT / "examples/hf/llama-3.1-8b/config.json").read_text())
    engine = seed_engine(model="llama", tensor_parallel_size=8, max_model_len=8192)
    names = [f"model.layers.{i}.self_attn.attn" for i in range(32)]
    good = {n: spec("FullAttentionSpec", heads=1, head_size=128) for n in names}
    bad = {n: spec("FullAttentionSpec", heads=8, head_size=128) for n in names}
    assert report_of(dump([good] * 8, hf=hf, engine=engine)).ok
    report = report_of(dump([bad] * 8, hf=hf, engine=engine))
    assert [f.check for f in report.findings] == ["heads"]
    assert "vLLM gives each rank 8 kv_head/rank" in report.findings[0].message
    assert "are 1 kv_head/rank (max(1, H // tp))" in report.findings[0].message


def test_sliding_layer_sized_as_full_attention() -> None:
    # tenstorrent/tt-xla #5727 (a vLLM platform plugin): Gemma's sliding layers given a
    # FullAttentionSpec without their window, so they pay max_model_len.
    hf = json.loads((ROOT / "examples/hf/mistral-7b-v0.1/config.json").read_text())
    engine = seed_engine(
        model="mistral", max_model_len=32768, max_num_batched_tokens=2048, max_in_flight_tokens=2048
    )
    names = [f"model.layers.{i}.self_attn.attn" for i in range(32)]
    good = {
        n: spec("SlidingWindowSpec", heads=8, head_size=128, sliding_window=4096) for n in names
    }
    bad = {n: spec("FullAttentionSpec", heads=8, head_size=128) for n in names}
    assert report_of(dump([good], hf=hf, engine=engine)).ok
    report = report_of(dump([bad], hf=hf, engine=engine))
    assert [f.check for f in report.findings] == ["kind"]
    assert "the manager holds 2048 cache_block per request where 385 cache_block" in (
        report.findings[0].message
    )


def test_workers_that_disagree() -> None:
    # vllm-project/vllm #23883: "KV cache specs are not equal across rank".
    first = voxtral_specs(189)
    second = dict(first)
    second[TEXT.format(0)] = spec("SlidingWindowSpec", heads=4, head_size=128, sliding_window=8192)
    report = report_of(dump([first, second]))
    assert any(
        f.check == "coverage" and "workers state different specs" in f.message
        for f in report.findings
    )


def test_block_size_or_dtype_from_another_group() -> None:
    specs = voxtral_specs(189)
    audio = spec(
        "SlidingWindowSpec", heads=32, head_size=64, tokens_per_state="1/4", sliding_window=189
    )
    text = spec("SlidingWindowSpec", block_size=128, heads=8, head_size=128, sliding_window=8192)
    audio_names = [AUDIO.format(i) for i in range(32)]
    text_names = [TEXT.format(i) for i in range(26)]

    def config(a: dict[str, Any], t: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "num_blocks": 2560,
                "groups": [
                    {"layer_names": audio_names, "spec": a},
                    {"layer_names": text_names, "spec": t},
                ],
            }
        ]

    clean = report_of(dump([specs], kv_cache_configs=config(audio, text)))
    assert clean.ok, clean.lines()
    # The audio group given the text group's block size (128).
    wrong_block = json.loads(json.dumps(audio))
    wrong_block["fields"]["block_size"] = 128
    report = report_of(dump([specs], kv_cache_configs=config(wrong_block, text)))
    assert any(
        f.check == "group" and "block size is 128 pooled_block/cache_block (group 1's)" in f.message
        for f in report.findings
    ), report.lines()
    # The text group given an fp8 dtype the engine does not store.
    wrong_dtype = json.loads(json.dumps(text))
    wrong_dtype["fields"]["dtype"] = "float32"
    report = report_of(dump([specs], kv_cache_configs=config(audio, wrong_dtype)))
    assert any(f.check == "group" and "dtype float32" in f.message for f in report.findings)


def test_a_layer_dtype_and_block_size_in_encoder_tokens() -> None:
    specs = voxtral_specs(189)
    specs[AUDIO.format(3)] = spec(
        "SlidingWindowSpec",
        heads=32,
        head_size=64,
        tokens_per_state="1/4",
        sliding_window=189,
        dtype="float32",
    )
    report = report_of(dump([specs]))
    assert [f.check for f in report.findings] == ["dtype"]
    assert report.findings[0].layers == (AUDIO.format(3),)
    specs = voxtral_specs(189)
    specs[AUDIO.format(0)] = spec(
        "SlidingWindowSpec",
        block_size=64,
        heads=32,
        head_size=64,
        tokens_per_state="1/4",
        sliding_window=189,
    )
    report = report_of(dump([specs]))
    assert any(
        f.check == "block_size" and "counts encoder tokens" in f.message for f in report.findings
    ), report.lines()


def test_missing_and_unknown_layers() -> None:
    specs = voxtral_specs(189)
    del specs[TEXT.format(25)]
    specs["model.layers.40.self_attn.attn"] = spec("FullAttentionSpec", heads=8, head_size=128)
    report = report_of(dump([specs]))
    checks = {f.check for f in report.findings}
    assert checks == {"coverage"}
    text = " ".join(str(f) for f in report.findings)
    assert "text.25 keeps a sliding_window cache" in text and "no cached layer text.40" in text


def test_unknown_version_is_said() -> None:
    report = report_of(dump([voxtral_specs(189)], engine=seed_engine(vllm_version="0.40.1")))
    assert report.ok
    assert any("vLLM 0.40.1 is not a version kvunits knows" in n.message for n in report.notes)


def test_model_kvunits_does_not_read_is_not_audited() -> None:
    report = report_of(dump([voxtral_specs(189)], hf={"model_type": "rwkv"}))
    assert report.ok and report.notes[0].check == "not_audited"


@given(w=st.integers(1, 5000), p=st.integers(2, 16), block=st.sampled_from([1, 8, 16, 64]))
def test_adapter_round_trip(w: int, p: int, block: int) -> None:
    layer = SlidingWindowLayer(
        sliding_window=Window(w, EncoderTokens),
        pool=PoolFactor(p),
        kv_heads=KVHeads(4),
        head_size=Elements(32),
    )
    ours = manager_view(layer, block)
    back = from_vllm_dict(to_vllm_dict(layer, block))
    assert back.slot_unit is PooledBlocks and back.pool == PoolFactor(p)
    assert back.manager_view() == ours  # same kind, block size, window in slots, page
    assert back.page_size == page_size_per_rank(layer, ours, Parallelism())
    slots = back.window_slots
    assert slots is not None
    widest = unpool_window(Window(slots, PooledBlocks), PoolFactor(p))
    assert back.widest_kernel_window() == widest
    assert pool_window(widest, PoolFactor(p)) == ours.sliding_window
    assert widest.numerical_value_in(EncoderTokens) >= w  # the model's window is served
    vllm_rule = from_vllm_dict(to_vllm_dict(layer, block, window_rule="vllm"))
    assert vllm_rule.window_slots == -(-w // p) + 1


@given(s=st.integers(1, 10_000), p=st.integers(1, 64))
def test_unpool_window_is_the_widest_served(s: int, p: int) -> None:
    widest = unpool_window(Window(s, PooledBlocks), PoolFactor(p))
    assert pool_window(widest, PoolFactor(p)) == Window(s, PooledBlocks)
    wider = Window(widest.numerical_value_in(EncoderTokens) + 1, EncoderTokens)
    assert pool_window(wider, PoolFactor(p)) == Window(s + 1, PooledBlocks)


def test_token_layer_round_trip() -> None:
    layer = SlidingWindowLayer(
        sliding_window=Window(4096, Tokens), kv_heads=KVHeads(8), head_size=Elements(128)
    )
    back = from_vllm_dict(to_vllm_dict(layer, 16))
    assert back.slot_unit is Tokens and back.window_slots == 4096
    assert back.kernel_block_size() == BlockSize(16, Tokens)


@pytest.mark.parametrize(
    ("name", "ours"),
    [
        ("whisper_encoder.whisper_encoder.layers.3.self_attn.attn", "audio.3"),
        ("language_model.model.layers.25.self_attn.attn", "text.25"),
        ("model.decoder.layers.0.encoder_attn.attn", "cross.0"),
        ("model.decoder.layers.7.self_attn.attn", "text.7"),
        ("model.layers.12.mixer", "text.12"),
        ("model.layers.1.experts.3.attn", None),
    ],
)
def test_layer_names(name: str, ours: str | None) -> None:
    assert kvunits_layer_name(name) == ours


_ZAMBA2_TYPES = [
    "mamba", "hybrid", "mamba", "hybrid", "hybrid", "mamba", "hybrid", "mamba", "hybrid",
    "hybrid", "mamba", "hybrid", "hybrid", "mamba", "hybrid", "mamba", "mamba", "hybrid",
    "hybrid", "mamba",
]  # fmt: skip

#: Two parallel hybrids and the layer names vLLM 0.33's model code gives their caches (built
#: on the meta device from these configs, as tests/vllm/built.py builds them): falcon_h1.py
#: names layer i's mixer ``model.{n + i}.mixer``; zamba2.py names layer i's mixer
#: ``{H + i}.mixer`` and the attention of each hybrid layer ``model.attn.{j}``, j counted per
#: shared block (with 4 blocks and 11 hybrid layers: 0-5, 7-11; j = 11 beside ``11.mixer``).
_PARALLEL_HYBRIDS = [
    (
        {
            "model_type": "falcon_h1", "architectures": ["FalconH1ForCausalLM"],
            "torch_dtype": "bfloat16", "hidden_size": 256, "num_hidden_layers": 3,
            "num_attention_heads": 4, "num_key_value_heads": 2, "mamba_d_ssm": 256,
            "mamba_n_heads": 4, "mamba_d_head": 64, "mamba_n_groups": 1,
            "mamba_d_state": 256, "mamba_d_conv": 4, "max_position_embeddings": 8192,
        },
        [f"model.layers.{i}.attn" for i in range(3)] + [f"model.{3 + i}.mixer" for i in range(3)],
    ),
    (
        {
            "model_type": "zamba2", "architectures": ["Zamba2ForCausalLM"],
            "torch_dtype": "bfloat16", "hidden_size": 256, "num_hidden_layers": 20,
            "num_attention_heads": 4, "n_mamba_heads": 4, "mamba_expand": 2,
            "mamba_ngroups": 1, "mamba_d_state": 64, "mamba_d_conv": 4,
            "layers_block_type": _ZAMBA2_TYPES, "num_mem_blocks": 4,
            "max_position_embeddings": 4096,
        },
        [f"model.attn.{j}" for j in (0, 1, 2, 3, 4, 5, 7, 8, 9, 10, 11)]
        + [f"{11 + i}.mixer" for i in range(20)],
    ),
]  # fmt: skip


@pytest.mark.parametrize(("hf_config", "names"), _PARALLEL_HYBRIDS, ids=["falcon_h1", "zamba2"])
def test_vllm_names_of_parallel_hybrids_are_their_layers(
    hf_config: dict[str, Any], names: list[str]
) -> None:
    # A layer that keeps two caches gets a second index from vLLM (unique per cache): read
    # back, every vLLM cache is one kvunits layer of its kind, each layer once.
    from kvunits.contracts.config import read_hf_config
    from kvunits.vllm._audit import renumbered

    model = read_hf_config(hf_config, where="config.json").model
    renames = renumbered(hf_config)
    ours = {}
    for name in names:
        generic = kvunits_layer_name(name)
        assert generic is not None
        ours[name] = renames.get((name.endswith(".mixer"), generic), generic)
    assert sorted(ours.values()) == sorted(model.layers)
    for name, layer in ours.items():
        kind = "mamba2" if name.endswith(".mixer") else "full_attention"
        assert model.layers[layer].kind == kind, (name, layer)
    # By the index alone, the mixers would read as other layers (or none).
    assert any(kvunits_layer_name(n) != ours[n] for n in names if n.endswith(".mixer"))


def test_cli_audit(tmp_path: Path) -> None:
    bad, good = tmp_path / "bad.json", tmp_path / "good.json"
    bad.write_text(json.dumps(dump([voxtral_specs(750)])))
    good.write_text(json.dumps(dump([voxtral_specs(189)])))
    serve = tmp_path / "serve.yaml"
    serve.write_text("max-num-batched-tokens: 2048\n")
    run = [sys.executable, "-m", "kvunits", "audit"]
    found = subprocess.run([*run, str(bad)], capture_output=True, text=True, check=False)
    assert found.returncode == 3, found.stderr
    assert "48 cache_block per request where 13" in found.stdout
    wider = subprocess.run(
        [*run, str(bad), "--engine", str(serve)], capture_output=True, text=True, check=False
    )
    assert "176 cache_block per request where 141" in wider.stdout  # 2048 tokens in flight
    clean = subprocess.run(
        [*run, str(good), "--format", "json"], capture_output=True, text=True, check=False
    )
    assert clean.returncode == 0 and json.loads(clean.stdout)["ok"] is True
    broken = subprocess.run([*run, str(serve)], capture_output=True, text=True, check=False)
    assert broken.returncode == 2 and "cannot read a vLLM spec dump" in broken.stderr


def test_importing_kvunits_vllm_imports_no_vllm_nor_torch() -> None:
    code = (
        "import sys, kvunits.vllm, kvunits.vllm.plugin; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('vllm', 'torch')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    # vLLM imports the plugin in every process: it loads none of the audit until a step runs.
    code = (
        "import sys, kvunits.vllm.plugin; "
        "print(sorted(m for m in sys.modules if m.startswith(('kvunits.vllm._', "
        "'kvunits.contracts', 'pydantic'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_plugin_knows_the_audits_versions() -> None:
    from kvunits.vllm import _audit, plugin

    assert plugin.KNOWN_VLLM == _audit.KNOWN_VLLM


def test_plugin_without_vllm_says_so(caplog: pytest.LogCaptureFixture) -> None:
    # kvunits' own venv has no vLLM: register() logs why the audit is off and changes nothing.
    pytest.importorskip("kvunits")
    try:
        import vllm  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("vLLM is installed: test_in_vllm.py covers register()")
    from kvunits.vllm import plugin

    with caplog.at_level("WARNING", logger="kvunits.vllm"):
        plugin.register()
    assert "the KV-cache audit is off. kvunits knows vLLM 0.33" in caplog.text


def test_plugin_mode_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from kvunits.vllm import plugin

    monkeypatch.delenv("KVUNITS_VLLM_AUDIT", raising=False)
    assert plugin.mode() == "warn"
    monkeypatch.setenv("KVUNITS_VLLM_AUDIT", " ERROR ")
    assert plugin.mode() == "error"
    monkeypatch.setenv("KVUNITS_VLLM_AUDIT", "loud")
    with pytest.raises(ValueError, match="KVUNITS_VLLM_AUDIT='loud': use one of off, warn, error"):
        plugin.mode()


def test_wrapped_step_returns_vllms_result_and_wraps_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from kvunits.vllm import plugin

    calls: list[tuple[object, ...]] = []

    def step(*args: object) -> list[str]:
        calls.append(args)
        return ["vLLM's configs"]

    wrapped = plugin.wrap(step)
    assert plugin.wrap(wrapped) is wrapped
    monkeypatch.setenv("KVUNITS_VLLM_AUDIT", "error")
    # An object the audit cannot read: logged, and vLLM's result returned untouched.
    with caplog.at_level("WARNING", logger="kvunits.vllm"):
        assert wrapped("not a VllmConfig", [], [], []) == ["vLLM's configs"]
    assert calls == [("not a VllmConfig", [], [], [])]
    assert "the KV-cache audit could not run" in caplog.text


def test_docs_snippet_prints_what_it_says() -> None:
    import contextlib
    import io

    text = (ROOT / "docs" / "vllm-plugin.md").read_text()
    code = text.split("```python\n", 1)[1].split("```", 1)[0]
    expected = [line[2:] for line in code.splitlines() if line.startswith("# ")]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/vllm-plugin.md", "exec"), {})
    assert out.getvalue().splitlines() == expected


def _llama(tp: int, heads: int, **fields: Any) -> dict[str, Any]:
    hf = json.loads((ROOT / "examples/hf/llama-3.1-8b/config.json").read_text())
    engine = seed_engine(model="llama", tensor_parallel_size=tp, max_model_len=8192, **fields)
    names = [f"model.layers.{i}.self_attn.attn" for i in range(32)]
    specs = {n: spec("FullAttentionSpec", heads=heads, head_size=128) for n in names}
    return dump([specs] * tp, hf=hf, engine=engine)


def test_unsharded_heads_under_tp() -> None:
    # tenstorrent/tt-xla #5728: "vLLM sizes the KV cache using the full, un-sharded
    # num_kv_heads" under TP 4 (Llama 3.1 8B: 8 KV heads, 2 a rank).
    assert report_of(_llama(4, 2)).ok
    report = report_of(_llama(4, 8))
    assert [f.check for f in report.findings] == ["heads"]
    assert "8 kv_head/rank, but the model's 8 kv_head over tensor_parallel_size 4 are 2" in (
        report.findings[0].message
    )


def test_heads_per_rank_rounded_to_zero() -> None:
    # tenstorrent/vllm #50 and PaddlePaddle/FastDeploy #3717: heads per device as H // tp,
    # 0 when tp exceeds the heads (Llama 3's 8 KV heads over 32 devices); max(1, H // tp) = 1.
    assert report_of(_llama(32, 1)).ok
    report = report_of(_llama(32, 0))
    assert [f.check for f in report.findings] == ["heads"]
    assert "vLLM gives each rank 0 kv_head/rank" in report.findings[0].message
    assert "pages too small for the heads the kernel writes" in report.findings[0].message


def test_page_that_ignores_the_element_size() -> None:
    # vllm-project/vllm #41809: SlidingWindowSpec.real_page_size_bytes used the bf16 formula
    # for an NVFP4 cache. The same class on an fp8 cache (1 byte): a page stated 2× too large.
    data = _llama(1, 8, cache_dtype="fp8")
    for layer in data["workers"][0].values():
        layer["fields"]["dtype"] = "uint8"  # vLLM stores fp8 as uint8
    right = json.loads(json.dumps(data))
    for layer in right["workers"][0].values():
        layer["page_size_bytes"] //= 2
    assert report_of(right).ok, report_of(right).lines()
    report = report_of(data)  # the page still the bf16 formula's
    assert [f.check for f in report.findings] == ["page"]
    assert "vLLM's page is 65536 byte/rank but" in report.findings[0].message
    assert "is 32768 byte/rank" in report.findings[0].message


def test_hybrid_manager_disabled_groups_are_a_choice() -> None:
    # vllm/v1/core/kv_cache_planning.py unify_hybrid_kv_cache_specs: with the hybrid manager
    # off (vLLM's CPU platform, --disable-hybrid-kv-cache-manager), sliding layers are grouped
    # as FullAttentionSpec recording their window; the layers' own specs stay sliding.
    specs = voxtral_specs(189)
    promoted = {}
    for name, layer in specs.items():
        group = json.loads(json.dumps(layer))
        group["class"] = group["spec_type"] = "FullAttentionSpec"
        promoted[name] = group
    names = list(specs)
    configs = [
        {
            "num_blocks": 100,
            "groups": [
                {
                    "layer_names": names,
                    "spec": {
                        "class": "UniformTypeKVCacheSpecs",
                        "spec_type": "UniformTypeKVCacheSpecs",
                        "fields": {"block_size": 16, "kv_cache_specs": promoted},
                    },
                }
            ],
        }
    ]
    report = report_of(dump([specs], kv_cache_configs=configs))
    assert not [f for f in report.findings if f.check == "group"], report.lines()
    assert any("hybrid KV-cache manager disabled" in n.message for n in report.notes)


def test_head_size_from_another_layer() -> None:
    specs = voxtral_specs(189)
    specs[TEXT.format(7)] = spec("SlidingWindowSpec", heads=8, head_size=64, sliding_window=8192)
    report = report_of(dump([specs]))
    assert [(f.check, f.layers) for f in report.findings] == [("head_size", (TEXT.format(7),))]
    assert report.findings[0].message.startswith(
        "vLLM's head sizes K 64 element, V 64 element are not the model's K 128 element, "
        "V 128 element"
    )
