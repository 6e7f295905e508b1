"""Where a config comes from: a file, a model directory, a model id in the local Hugging Face
cache (a temporary fake cache laid out as ``huggingface_hub`` lays it out; no network)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kvunits.contracts.config import ConfigError, hub_cache, load_config
from kvunits.runtime.capacity import plan

from ..cli.test_cli import run
from .conftest import EXAMPLES

MODEL_ID = "mistralai/Voxtral-Mini-4B-Realtime-2602"
REVISION = "0123456789abcdef0123456789abcdef01234567"
CONFIG = EXAMPLES / "hf" / "voxtral-mini-4b-realtime-2602" / "config.json"


def fake_cache(hub: Path, model_id: str = MODEL_ID, *, ref: bool = True) -> Path:
    """``models--org--name/{blobs,refs/main,snapshots/<rev>/config.json → blob}``."""
    org, name = model_id.split("/")
    repo = hub / f"models--{org}--{name}"
    blob = repo / "blobs" / "e3b0c44298fc1c149afbf4c8996fb92427ae41e4"
    blob.parent.mkdir(parents=True)
    shutil.copyfile(CONFIG, blob)
    snapshot = repo / "snapshots" / REVISION
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to(Path("../..") / "blobs" / blob.name)
    if ref:
        (repo / "refs").mkdir()
        (repo / "refs" / "main").write_text(REVISION)
    return snapshot


def _clear(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)


def test_a_model_id_in_hf_hub_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _clear(monkeypatch)
    fake_cache(tmp_path / "hub")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    config = load_config(MODEL_ID)
    assert config.model.name == "Voxtral-Mini-4B-Realtime-2602"
    assert config.source.endswith(f"snapshots/{REVISION}/config.json")
    audio = plan(config.model, config.engine).group("audio")
    assert str(audio.group.manager.sliding_window) == "189 pooled_block"
    assert str(audio.admission_cap) == "13 cache_block"


@pytest.mark.parametrize("variable", ["HF_HOME", "XDG_CACHE_HOME", "HOME"])
def test_the_cache_folder_as_huggingface_hub_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    _clear(monkeypatch)
    hub = {
        "HF_HOME": tmp_path / "hub",
        "XDG_CACHE_HOME": tmp_path / "huggingface" / "hub",
        "HOME": tmp_path / ".cache" / "huggingface" / "hub",
    }[variable]
    monkeypatch.setenv(variable, str(tmp_path))
    assert hub_cache() == hub
    fake_cache(hub)
    assert len(load_config(MODEL_ID).model.layers) == 58


def test_a_model_that_is_not_cached(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _clear(monkeypatch)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ConfigError) as excinfo:
        load_config(MODEL_ID)
    assert str(excinfo.value) == (
        f"{MODEL_ID}: no such file, and no model {MODEL_ID} in the local Hugging Face cache "
        f"({tmp_path}; set by HF_HUB_CACHE or HF_HOME). kvunits never downloads: fetch it "
        f"with `huggingface-cli download {MODEL_ID} config.json`, or pass a config.json path"
    )


def test_a_cache_without_refs_main(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _clear(monkeypatch)
    fake_cache(tmp_path, ref=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(ConfigError, match=f"without refs/main.*snapshots: {REVISION}"):
        load_config(MODEL_ID)


def test_a_model_directory(tmp_path: Path) -> None:
    shutil.copyfile(CONFIG, tmp_path / "config.json")
    config = load_config(tmp_path)
    assert config.model.name == tmp_path.name  # the file has no _name_or_path
    (tmp_path / "config.json").unlink()
    (tmp_path / "params.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"Mistral-format params\.json but no config\.json"):
        load_config(tmp_path)


def test_a_missing_config_file_is_still_a_missing_file(tmp_path: Path) -> None:
    # A path with a config extension is never taken for a model id.
    with pytest.raises(ConfigError, match="cannot read: No such file or directory"):
        load_config("mistralai/config.json")


def test_kvunits_plan_a_cached_model_id(tmp_path: Path) -> None:
    fake_cache(tmp_path)
    done = run("plan", MODEL_ID, "--format", "json", env={"HF_HUB_CACHE": str(tmp_path)})
    assert done.returncode == 0, done.stderr
    (audio,) = [g for g in json.loads(done.stdout)["groups"] if g["name"] == "audio"]
    assert audio["manager_sliding_window"] == {
        "value": 189,
        "unit": "pooled_block",
        "kind": "window",
    }
    missing = run("plan", "org/none", env={"HF_HUB_CACHE": str(tmp_path)})
    assert missing.returncode == 2
    assert missing.stderr.startswith("org/none: no such file, and no model org/none in the local")
