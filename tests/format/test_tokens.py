"""The tokenizer: the reference rule, its numpy form and its C kernel agree exactly."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.format import tokens as tokens_mod
from shoal.format.tokens import numpy_tokenize_array, tokenize, tokenize_array
from tests.support.collisions import colliding

TEXT = st.text(alphabet=st.characters(exclude_categories=("Cs",)), max_size=40)
# Mostly token material, with separators (every ASCII whitespace byte: the vectorised form
# cuts values into words there first), non-ASCII letters and the Kelvin sign (lowers to k).
WORDY = st.text(alphabet=st.sampled_from(list("abcXYZ019 -_.:=/éüß\u212a\u0130\n\t\r\x0b\x0c"
                                              "\u00a0\u2003")), max_size=40)


# The edges of the C kernel's eight-bytes-at-a-time classes: the ASCII neighbours of the
# letters and digits, and non-ASCII characters whose UTF-8 bytes read as letters or digits
# once their high bit is dropped ("ñ" = C3 B1, "°" = C2 B0, "á" = C3 A1).
EDGES = st.text(alphabet=st.sampled_from(list("@AZ[`az{/09:aaaa00 \xf1\xb0\xe1\xc1")),
                max_size=40)


def test_examples() -> None:
    assert tokenize("Connection-FAILED: timeout42 ü x") == {"connection", "failed", "timeout42"}
    assert tokenize("") == set()
    assert tokenize("a b c") == set()
    assert tokenize("GET /api/v1/Items?id=42") == {"get", "api", "v1", "items", "id", "42"}
    assert tokenize("caf\u00e9au") == {"caf", "au"}            # non-ASCII separates
    assert tokenize("\u212aelvin") == {"elvin"}                # Kelvin sign is not "k"
    assert tokenize("snake_case") == {"snake", "case"}         # underscore separates


def test_vectorised_examples() -> None:
    arr = pa.array(["Connection-FAILED: timeout42 ü x", None, "", "ab", "cd", "e", "ABab"])
    assert sorted(tokenize_array(arr).to_pylist()) == ["ab", "abab", "cd", "connection", "failed",
                                                      "timeout42"]
    # Adjacent values never run together: "ab" + "cd" must not make "abcd".
    assert "abcd" not in tokenize_array(pa.array(["ab", "cd"])).to_pylist()
    assert tokenize_array(pa.array([], pa.string())).to_pylist() == []
    assert tokenize_array(pa.array([None, None], pa.string())).to_pylist() == []


def _reference(values: list[str | None]) -> set[str]:
    out: set[str] = set()
    for v in values:
        if v is not None:
            out |= tokenize(v)
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), TEXT, WORDY), max_size=25), st.integers(0, 5),
       st.booleans())
def test_vectorised_agrees_with_reference(values: list[str | None], cut: int,
                                          large: bool) -> None:
    arr = pa.array(values, type=pa.large_string() if large else pa.string())
    got = tokenize_array(arr).to_pylist()
    assert len(got) == len(set(got))
    assert set(got) == _reference(values)
    sliced = arr.slice(min(cut, len(values)))                 # non-zero array offsets
    assert set(tokenize_array(sliced).to_pylist()) == _reference(values[cut:])
    chunked = pa.chunked_array([arr.slice(0, cut), arr.slice(cut)], type=arr.type)
    assert set(tokenize_array(chunked).to_pylist()) == _reference(values)


@settings(max_examples=300, deadline=None)
@given(st.lists(EDGES, max_size=25), st.integers(0, 7))
def test_the_kernel_at_the_edges_of_its_byte_classes(values: list[str], cut: int) -> None:
    assert set(tokenize_array(pa.array(values, pa.string())).to_pylist()) == \
        _reference(values)
    # Other alignments of the values against the kernel's eight-byte words.
    shifted = ["x" * cut + v for v in values]
    assert set(tokenize_array(pa.array(shifted, pa.string())).to_pylist()) == \
        _reference(shifted)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), TEXT, WORDY), max_size=25))
def test_the_numpy_form_agrees_with_reference(values: list[str | None]) -> None:
    """The stand-in where the C kernel is not built (and the kernel's own reference)."""
    got = numpy_tokenize_array(pa.array(values, pa.string())).to_pylist()
    assert len(got) == len(set(got))
    assert set(got) == _reference(values)


def test_many_and_long_tokens() -> None:
    """Past the kernel's first hash table and token buffer sizes: every token, once."""
    values = [f"w{i} W{i} x{i % 7}" for i in range(50_000)] + ["a" * 5000 + " " + "B" * 300]
    expected = _reference(values)
    got = tokenize_array(pa.array(values)).to_pylist()
    assert len(got) == len(expected) and set(got) == expected
    assert set(numpy_tokenize_array(pa.array(values)).to_pylist()) == expected


def test_the_c_kernel_is_built() -> None:
    """setup builds it; without it token sets silently take the slower numpy path."""
    import os

    if os.environ.get("CI") == "true" or tokens_mod._kernels is not None:
        assert tokens_mod._kernels is not None


@pytest.mark.skipif(tokens_mod._kernels is None, reason="the C kernels are not built")
def test_tokens_chosen_to_collide_go_to_numpy() -> None:
    """Tokens that collide in the C kernel's hash set: past a bounded number of probes the
    kernel gives up and numpy tokenizes (no quadratic time), same set."""
    words = colliding(200, 10, token=True, prefix="w")
    values = [" ".join(words[i:i + 20]) for i in range(0, 200, 20)]
    data = "".join(values).encode()
    offsets = np.cumsum([0] + [len(v) for v in values]).astype(np.int64)
    assert tokens_mod._kernels.tokens(offsets, data, 10**9) is None
    assert set(tokenize_array(pa.array(values)).to_pylist()) == _reference(values)


def test_a_cap_stops_the_kernel_early() -> None:
    values = [f"w{i}" for i in range(5000)]
    capped = tokenize_array(pa.array(values), cap=100)
    assert len(capped) > 100
    assert set(capped.to_pylist()) <= _reference(values)


# ---- the membership hashes of the tokens (token filters) -----------------------------------

def _pairs(h: tuple[np.ndarray, np.ndarray]) -> list[tuple[int, int]]:
    return sorted(zip(h[0].tolist(), h[1].tolist(), strict=True))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), TEXT, WORDY, EDGES), max_size=25), st.integers(0, 7))
def test_token_hashes_are_the_hashes_of_the_tokens(values: list[str | None], cut: int) -> None:
    """The C kernel's hashes of the distinct tokens, without the tokens, are those of the
    tokens themselves, at every alignment against its eight-byte words."""
    from shoal.format.membership import hash_array, token_hashes

    for vals in (values, ["x" * cut + v if v is not None else None for v in values]):
        arr = pa.array(vals, pa.string())
        got = token_hashes(arr)
        assert len(set(_pairs(got))) == len(got[0])
        assert _pairs(got) == _pairs(hash_array(tokenize_array(arr)))


def test_token_hashes_of_many_tokens_and_without_the_kernel(monkeypatch) -> None:
    from shoal.format import membership
    from shoal.format.membership import hash_array, token_hashes

    values = pa.array([f"w{i} W{i} x{i % 7}" for i in range(50_000)]
                      + ["a" * 5000 + " " + "B" * 300, None])
    expected = _pairs(hash_array(tokenize_array(values)))
    assert len(expected) == 50_000 + 7 + 2
    assert _pairs(token_hashes(values)) == expected
    assert _pairs(token_hashes(pa.chunked_array([values.slice(0, 7), values.slice(7)]))) == \
        expected
    monkeypatch.setattr(membership, "_kernels", None)
    assert _pairs(token_hashes(values)) == expected
