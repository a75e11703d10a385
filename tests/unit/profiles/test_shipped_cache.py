"""The parsed-catalog cache: used when the sources are unchanged, rebuilt when they change or the file is bad,
never a different answer from parsing; and the C YAML loader gives the pure-Python loader's data."""

from __future__ import annotations

import datetime
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from autotune import yamlio
from autotune.profiles import shipped_cache
from autotune.profiles.catalog import load_profile_dir
from autotune.profiles.shipped_cache import CACHE_FORMAT, cache_dir, load_shipped_yaml, parsed_sources, source_digest
from autotune.schemas.hardware import GpuSpec
from autotune.schemas.model import ModelSpec

PROFILES = resources.files("autotune.profiles")
SOURCES = [("a.yaml", "key: a\nvalue: 1\n"), ("b.yaml", "key: b\nvalue: [1.5, true, null]\n")]


class CountingParser:
    """yamlio.safe_load that counts its calls (a cache hit parses nothing)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, name: str, text: str) -> Any:
        self.calls += 1
        return yamlio.safe_load(text, shipped=True)


def _cache_file(kind: str = "test") -> Path:
    return cache_dir() / f"catalog-{kind}.json"


def test_second_read_comes_from_the_cache_and_equals_parsing() -> None:
    parse = CountingParser()
    first = parsed_sources("test", SOURCES, parse)
    assert parse.calls == 2 and _cache_file().is_file()
    second = parsed_sources("test", SOURCES, parse)
    assert parse.calls == 2  # nothing parsed again
    assert second == first == [{"key": "a", "value": 1}, {"key": "b", "value": [1.5, True, None]}]
    document = json.loads(_cache_file().read_text(encoding="utf-8"))
    assert document["format"] == CACHE_FORMAT and document["sources_sha256"] == source_digest(SOURCES)


def test_a_changed_source_rebuilds_the_cache() -> None:
    parse = CountingParser()
    parsed_sources("test", SOURCES, parse)
    changed = [SOURCES[0], ("b.yaml", "key: b\nvalue: 2\n")]
    assert parsed_sources("test", changed, parse) == [{"key": "a", "value": 1}, {"key": "b", "value": 2}]
    assert parse.calls == 4
    renamed = [("c.yaml", SOURCES[0][1]), SOURCES[1]]  # same texts, another file name: another key
    assert source_digest(renamed) != source_digest(SOURCES)
    parsed_sources("test", renamed, parse)
    assert parse.calls == 6
    assert parsed_sources("test", renamed, parse) and parse.calls == 6


@pytest.mark.parametrize(
    "content",
    [
        b"\x00\xff not json",
        b'{"format": 1, "sources_sha256": "',
        b"[1, 2]",
        b'{"format": 999, "sources_sha256": "DIGEST", "data": [{"key": "stale"}, {}]}',
        b'{"format": 1, "sources_sha256": "DIGEST", "data": [{"key": "stale"}]}',
        b'{"format": 1, "sources_sha256": "DIGEST", "data": {"key": "stale"}}',
        b'{"format": 1, "sources_sha256": "0000", "data": [{"key": "stale"}, {}]}',
    ],
)
def test_a_corrupt_or_foreign_cache_file_is_ignored_and_rebuilt(content: bytes) -> None:
    path = _cache_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content.replace(b"DIGEST", source_digest(SOURCES).encode()))
    parse = CountingParser()
    assert parsed_sources("test", SOURCES, parse) == [
        {"key": "a", "value": 1},
        {"key": "b", "value": [1.5, True, None]},
    ]
    assert parse.calls == 2
    assert json.loads(path.read_text(encoding="utf-8"))["sources_sha256"] == source_digest(SOURCES)  # rebuilt


@pytest.mark.parametrize(
    "text", ["when: 2024-01-01\n", "1: integer key\n", "x: .nan\n", "x: !!binary aGVsbG8=\n", "x: [[1, 2], {3: 4}]\n"]
)
def test_data_json_cannot_hold_exactly_is_never_cached(text: str) -> None:
    parse = CountingParser()
    expected = yaml.safe_load(text)
    result = parsed_sources("test", [("x.yaml", text)], parse)
    if isinstance(expected.get("x"), float):  # NaN != NaN
        assert repr(result) == repr([expected])
    else:
        assert result == [expected]
    assert not _cache_file().exists()
    parsed_sources("test", [("x.yaml", text)], parse)
    assert parse.calls == 2  # parsed every time, never served from a lossy copy


def test_a_date_survives_uncached() -> None:
    result = parsed_sources("test", [("d.yaml", "when: 2024-01-01\n")], CountingParser())
    assert result == [{"when": datetime.date(2024, 1, 1)}]


def test_an_unwritable_cache_dir_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory", encoding="utf-8")
    monkeypatch.setenv(shipped_cache.CACHE_DIR_ENV, str(blocker / "cache"))
    parse = CountingParser()
    assert parsed_sources("test", SOURCES, parse)[0] == {"key": "a", "value": 1}
    assert parsed_sources("test", SOURCES, parse)[0] == {"key": "a", "value": 1}
    assert parse.calls == 4


def test_a_parse_error_is_raised_and_nothing_is_cached() -> None:
    def failing(name: str, text: str) -> Any:
        raise ValueError(f"profile {name}: not valid YAML")

    with pytest.raises(ValueError, match=r"a\.yaml"):
        parsed_sources("test", SOURCES, failing)
    assert not _cache_file().exists()


def test_cache_dir_follows_the_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(shipped_cache.CACHE_DIR_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "autotune"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "autotune"


# ---- the catalog through the cache ---------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "schema"), [("gpus", GpuSpec), ("models", ModelSpec)])
def test_the_cached_catalog_equals_the_parsed_one(kind: str, schema: type) -> None:
    parsed = load_profile_dir(PROFILES / kind, schema)
    first = load_profile_dir(PROFILES / kind, schema, cache_kind=kind)
    assert _cache_file(kind).is_file()
    assert load_profile_dir(PROFILES / kind, schema, cache_kind=kind) == first == parsed


def test_an_edited_profile_is_read_anew_not_from_the_cache(tmp_path: Path) -> None:
    source = PROFILES / "gpus" / "l4.yaml"
    (tmp_path / "l4.yaml").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    before = load_profile_dir(tmp_path, GpuSpec, cache_kind="edited")[0]
    text = (tmp_path / "l4.yaml").read_text(encoding="utf-8")
    edited = text.replace(f"name: {before.name}", "name: An Edited L4", 1)
    assert edited != text
    (tmp_path / "l4.yaml").write_text(edited, encoding="utf-8")
    assert load_profile_dir(tmp_path, GpuSpec, cache_kind="edited")[0].name == "An Edited L4"


def test_invalid_yaml_in_a_cached_catalog_still_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "l4.yaml").write_text("key: [unclosed\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"profile l4\.yaml: not valid YAML"):
        load_profile_dir(tmp_path, GpuSpec, cache_kind="broken")


# ---- the C loader --------------------------------------------------------------------------------------------


def _shipped_yaml_texts() -> list[tuple[str, str]]:
    texts = [("op_counts.yaml", (PROFILES / "op_counts.yaml").read_text(encoding="utf-8"))]
    for kind in ("gpus", "models", "calibration"):
        for entry in sorted((PROFILES / kind).iterdir(), key=lambda item: item.name):
            if entry.name.endswith(".yaml"):
                texts.append((f"{kind}/{entry.name}", entry.read_text(encoding="utf-8")))
    return texts


@pytest.mark.skipif(not hasattr(yaml, "CSafeLoader"), reason="PyYAML built without libyaml")
def test_the_c_loader_and_the_python_fallback_give_the_same_data() -> None:
    assert yamlio._SafeLoader is yaml.CSafeLoader
    texts = _shipped_yaml_texts()
    assert len(texts) > 40
    for name, text in texts:
        assert yamlio.safe_load(text, shipped=True) == yaml.load(text, Loader=yaml.SafeLoader), name


def test_yamlio_falls_back_to_the_python_safe_loader(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(yamlio, "_SafeLoader", yaml.SafeLoader)
    _name, text = _shipped_yaml_texts()[0]
    assert yamlio.safe_load(text, shipped=True) == yaml.load(text, Loader=yaml.SafeLoader)
    with pytest.raises(yaml.constructor.ConstructorError):  # still the safe loader: no Python objects
        yamlio.safe_load("x: !!python/object/apply:os.system ['true']\n", shipped=True)


@pytest.mark.parametrize("name", ["op_counts.yaml", "calibration/seeds.yaml"])
def test_shipped_single_files_read_through_the_cache_equal_safe_load(name: str) -> None:
    text = (PROFILES / name).read_text(encoding="utf-8")
    first = load_shipped_yaml("single", name, text)
    assert _cache_file("single").is_file()
    assert load_shipped_yaml("single", name, text) == first == yaml.safe_load(text)


def test_an_oversized_cache_file_is_ignored_unread(monkeypatch: pytest.MonkeyPatch) -> None:
    parse = CountingParser()
    parsed_sources("test", SOURCES, parse)
    monkeypatch.setattr(shipped_cache, "MAX_CACHE_BYTES", 10)
    assert parsed_sources("test", SOURCES, parse)[0] == {"key": "a", "value": 1}
    assert parse.calls == 4


def test_no_home_directory_means_no_cache_not_an_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_home() -> Path:
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv(shipped_cache.CACHE_DIR_ENV)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(Path, "home", staticmethod(no_home))
    parse = CountingParser()
    assert parsed_sources("test", SOURCES, parse)[1] == {"key": "b", "value": [1.5, True, None]}
    assert parse.calls == 2
