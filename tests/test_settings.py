import pytest

from retrieval.settings import ENV_VARS, Settings


def test_defaults_are_valid():
    s = Settings.from_env({})
    assert s.hybrid_enabled and s.rrf_k == 10 and s.top_k >= 1
    assert (s.bm25_tokenizer, s.query_weighting, s.dense_weight) == ("snowball", "auto", 2.0)
    assert (s.rerank_mode, s.rerank_weight) == ("rrf", 0.5)


def test_adr_recipe_is_valid_settings():
    from retrieval.settings import ADR_RECIPE

    s = Settings.from_env({}, **ADR_RECIPE)
    assert (s.rrf_k, s.bm25_tokenizer, s.dense_weight, s.candidate_depth) == (60, "plain", 1.0, 20)
    assert s.candidate_depth == s.top_k * s.candidate_multiplier


def test_env_parsing():
    s = Settings.from_env(
        {
            "RETRIEVAL_HYBRID_ENABLED": "false",
            "RRF_K": "10",
            "MIN_SIMILARITY": "0.4",
            "CHROMA_HOST": "127.0.0.1",
            "CHROMA_PORT": "9000",
        }
    )
    assert (s.hybrid_enabled, s.rrf_k, s.min_similarity, s.chroma_host, s.chroma_port) == (
        False,
        10,
        0.4,
        "127.0.0.1",
        9000,
    )


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RRF_K": "-5"}, r"RRF_K=-5 is out of range: allowed 1 to 1000"),
        ({"RRF_K": "sixty"}, r"RRF_K='sixty' is not a whole number"),
        ({"TOP_K": "0"}, r"TOP_K=0 is out of range: allowed 1 to 1000"),
        ({"MIN_SIMILARITY": "high"}, r"MIN_SIMILARITY='high' is not a number"),
        ({"MIN_SIMILARITY": "1.5"}, r"MIN_SIMILARITY=1.5 is out of range"),
        ({"RETRIEVAL_HYBRID_ENABLED": "maybe"}, r"RETRIEVAL_HYBRID_ENABLED='maybe' is not a boolean"),
        ({"CANDIDATE_MULTIPLIER": "0"}, r"CANDIDATE_MULTIPLIER=0 is out of range"),
        ({"RERANKER_MAX_INPUT": "1000"}, r"RERANKER_MAX_INPUT=1000 is out of range"),
        ({"CHROMA_PORT": "70000"}, r"CHROMA_PORT=70000 is out of range: allowed 1 to 65535"),
        ({"BM25_WEIGHT": "0", "DENSE_WEIGHT": "0"}, r"both 0"),
    ],
)
def test_invalid_values_name_the_variable_and_range(env, message):
    with pytest.raises(ValueError, match=message):
        Settings.from_env(env)


def test_every_env_var_maps_to_a_field():
    fields = set(Settings.__dataclass_fields__)
    assert set(ENV_VARS.values()) <= fields


def test_replace_validates():
    with pytest.raises(ValueError, match="TOP_K"):
        Settings().replace(top_k=0)


def test_min_similarity_defaults_per_embedding_model():
    from retrieval.settings import DEFAULT_MIN_SIMILARITY

    assert Settings.from_env({}).min_similarity == DEFAULT_MIN_SIMILARITY["bge-small-en-v1.5"]
    assert Settings.from_env({"EMBEDDING_MODEL": "all-MiniLM-L6-v2"}).min_similarity == 0.25
    assert Settings.from_env({}, embedding_model="multilingual-e5-small").min_similarity == 0.81
    assert Settings.from_env({"EMBEDDING_MODEL": "all-MiniLM-L6-v2", "MIN_SIMILARITY": "0.4"}).min_similarity == 0.4


def test_a_huge_slider_value_is_echoed_short():
    """1e308 sent to an integer control was echoed as its 309 digits (int(1e308)); now as 1e+308."""
    knob = Settings.knobs()["rrf_k"]
    for sent, shown in ((1e308, "RRF_K=1e+308 "), (-1e300, "RRF_K=-1e+300 "), (10**400, "more than 300 digits")):
        with pytest.raises(ValueError, match="out of range: allowed 1 to 1000") as caught:
            knob.coerce(sent)
        assert shown in str(caught.value) and len(str(caught.value)) < 100


def test_trusted_proxies_must_be_addresses():
    assert Settings.from_env({}).trusted_proxies is None  # default: no proxy trusted
    assert Settings.from_env({"TRUSTED_PROXIES": "127.0.0.1, 10.0.0.0/8"}).trusted_proxies
    with pytest.raises(ValueError, match="TRUSTED_PROXIES has 'nginx', not an address"):
        Settings.from_env({"TRUSTED_PROXIES": "127.0.0.1,nginx"})
