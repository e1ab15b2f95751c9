"""Model fingerprints: the tokenizer digest is computed once per tokenizer, and stays true."""

from transformers import AutoTokenizer

from store import models
from store.models import default_model_path, tokenizer_digest


def _fresh_tokenizer():
    return AutoTokenizer.from_pretrained(default_model_path(), local_files_only=True)


def test_digest_is_cached_per_tokenizer_and_equals_a_fresh_one(monkeypatch):
    first, second = _fresh_tokenizer(), _fresh_tokenizer()
    digest = tokenizer_digest(first)
    assert len(digest) == 64
    calls = []
    loads = models.json.loads
    monkeypatch.setattr(models.json, "loads", lambda text: calls.append(1) or loads(text))
    assert tokenizer_digest(first) == digest and calls == []  # served from the cache
    assert tokenizer_digest(second) == digest and calls == [1]  # another object: computed


def test_runtime_padding_state_does_not_change_the_digest():
    tokenizer = _fresh_tokenizer()
    digest = tokenizer_digest(tokenizer)
    fresh = _fresh_tokenizer()
    fresh.backend_tokenizer.enable_truncation(max_length=7)
    fresh.backend_tokenizer.enable_padding(length=9)
    assert tokenizer_digest(fresh) == digest


def test_adding_a_token_changes_the_digest_of_the_same_object():
    tokenizer = _fresh_tokenizer()
    before = tokenizer_digest(tokenizer)
    tokenizer.add_tokens(["evidexnewtoken"])
    assert tokenizer_digest(tokenizer) != before


def test_kept_models_are_loaded_once_per_process_and_only_while_kept():
    loads = []

    def load():
        loads.append(1)
        return object()

    try:
        models.keep_models_loaded()
        first = models.kept_model("test", "x", load)
        assert models.kept_model("test", "x", load) is first and len(loads) == 1
        assert models.kept_model("test", "y", load) is not first and len(loads) == 2
    finally:
        models.keep_models_loaded(False)
    assert models.kept_model("test", "x", load) is not first and len(loads) == 3
