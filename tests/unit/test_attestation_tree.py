"""The attestation's Merkle trees (issue 38, :mod:`s3ingest_fn.core.attestation`): the leaf's
bytes, determinism, a single change naming its key, partitioned builds equal to whole ones, and
the streaming builder's memory bound."""

from __future__ import annotations

import hashlib
import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3ingest_fn.core.attestation import (
    ABSENT,
    EMPTY_ROOT,
    FANOUT,
    NOT_DONE,
    Fragment,
    Leaf,
    PairBuilder,
    absent,
    combine,
    compare,
    depth_of,
    key_order,
    leaf_hash,
    levels_of,
    node_hash,
    path_of,
    root_of,
)

keys_st = st.lists(st.text(min_size=1, max_size=12), max_size=300, unique=True).map(
    lambda ks: sorted(ks, key=key_order)
)


def _leaf(key: str, version: str = "v1", done: str = "2") -> Leaf:
    return Leaf("b", key, version, "etag-" + key[:3], processors=(("extract", done),))


def _hashes(n: int) -> list[bytes]:
    return [hashlib.sha256(i.to_bytes(4, "big")).digest() for i in range(n)]


def test_leaf_bytes_are_length_prefixed_fields_after_their_count() -> None:
    leaf = Leaf("bkt", "a/é", "v", "e", processors=(("x", "3"),))
    fields = [b"s3ingest-attestation-leaf/1", b"bkt", b"a/\xc3\xa9", b"v", b"e", b"present"]
    fields += [b"x", b"3"]
    expected = (8).to_bytes(4, "big") + b"".join(len(f).to_bytes(4, "big") + f for f in fields)
    assert leaf.encode() == expected
    assert leaf.hash() == hashlib.sha256(b"\x00" + expected).digest()


def test_leaf_and_node_hashes_are_domain_separated() -> None:
    """RFC 6962: a node over one child is not its child, and no leaf's hash is a node's."""
    h = _hashes(1)[0]
    assert node_hash([h]) == hashlib.sha256(b"\x01" + h).digest() != h
    assert leaf_hash(h) != node_hash([h])


def test_empty_and_single_leaf_roots() -> None:
    assert Fragment().root() == EMPTY_ROOT == root_of([]) == hashlib.sha256(b"").digest()
    h = _hashes(1)[0]
    assert Fragment().extend([h]).root() == h == root_of([h])


def test_fields_cannot_run_into_each_other() -> None:
    assert Leaf("b", "ab", "c").hash() != Leaf("b", "a", "bc").hash()
    assert Leaf("b", "k", processors=(("p", "1"),)).hash() != Leaf("b", "k").hash()


def test_processors_are_encoded_in_name_order() -> None:
    one = Leaf("b", "k", processors=(("a", "1"), ("b", "2")))
    other = Leaf("b", "k", processors=(("b", "2"), ("a", "1")))
    assert one.encode() == other.encode()


@given(
    st.one_of(
        st.integers(min_value=0, max_value=600),
        st.sampled_from([255, 256, 257, 4095, 4096, 4097]),
    )
)
def test_streaming_root_equals_the_whole_levels_root(n: int) -> None:
    hashes = _hashes(n)
    fragment = Fragment().extend(hashes)
    assert fragment.root() == root_of(hashes)
    # memory: open nodes per level at most FANOUT - 1
    assert fragment.held() <= (FANOUT - 1) * max(depth_of(n), 1)


@given(keys_st, st.randoms(use_true_random=False))
def test_same_inputs_give_byte_identical_roots(keys: list[str], rnd: object) -> None:
    one, two = PairBuilder(), PairBuilder()
    for k in keys:
        one.add(k, _leaf(k), _leaf(k))
        two.add(k, _leaf(k), _leaf(k))
    assert one.roots() == two.roots()
    assert one.roots()[0] == one.roots()[1]
    assert one.differences() == []


@given(
    keys_st.filter(bool),
    st.data(),
    st.sampled_from(["version", "etag", "state", "processor", "bucket"]),
)
def test_any_single_change_changes_the_root_and_names_its_key(
    keys: list[str], data: st.DataObject, what: str
) -> None:
    target = data.draw(st.sampled_from(keys))
    builder = PairBuilder()
    for k in keys:
        leaf = _leaf(k)
        other = leaf
        if k == target:
            other = {
                "version": Leaf("b", k, "v2", leaf.etag, processors=leaf.processors),
                "etag": Leaf("b", k, "v1", "changed", processors=leaf.processors),
                "state": absent("b", k, ["extract"]),
                "processor": _leaf(k, done=NOT_DONE),
                "bucket": Leaf("c", k, "v1", leaf.etag, processors=leaf.processors),
            }[what]
        builder.add(k, leaf, other)
    left, right = builder.roots()
    assert left != right
    found = builder.differences()
    assert [d.key for d in found] == [target]
    index = keys.index(target)
    assert found[0].path == path_of(index, len(keys))
    # the descent from the roots over the whole trees names the same key
    lefts = levels_of([_leaf(k).hash() for k in keys])
    rights_hashes = [_leaf(k).hash() for k in keys]
    rights_hashes[index] = (
        absent("b", target, ["extract"]).hash() if what == "state" else b"\xff" * 32
    )
    assert compare(lefts, levels_of(rights_hashes), keys)[0].key == target


@given(keys_st, st.lists(st.integers(min_value=0, max_value=300), max_size=6))
def test_partitioned_build_equals_the_whole_build(keys: list[str], cuts: list[int]) -> None:
    hashes = [_leaf(k).hash() for k in keys]
    bounds = sorted({0, len(hashes), *(min(c, len(hashes)) for c in cuts)})
    parts = [Fragment(a).extend(hashes[a:b]) for a, b in itertools.pairwise(bounds)]
    whole = Fragment().extend(hashes)
    assert combine(parts or [Fragment()]).root() == whole.root() == root_of(hashes)


@given(st.sets(st.integers(min_value=0, max_value=999), max_size=40))
def test_compare_names_every_differing_key_and_only_those(changed: set[int]) -> None:
    keys = [f"k{i:04d}" for i in range(1000)]
    left = [_leaf(k).hash() for k in keys]
    right = [
        _leaf(k, version="v9").hash() if i in changed else h
        for i, (k, h) in enumerate(zip(keys, left, strict=True))
    ]
    found = compare(levels_of(left), levels_of(right), keys)
    assert [d.index for d in found] == sorted(changed)
    assert all(d.path == path_of(d.index, 1000) for d in found)


def test_paths_are_base_fanout_digits_from_the_root() -> None:
    assert path_of(0, 1) == ()
    assert path_of(17, 300) == (0, 1, 1)
    assert path_of(FANOUT**2 - 1, FANOUT**2) == (FANOUT - 1, FANOUT - 1)


def test_a_run_must_start_where_the_one_before_ends() -> None:
    with pytest.raises(ValueError, match="starts at 3, not 2"):
        Fragment().extend(_hashes(2)).combine(Fragment(3))
    with pytest.raises(ValueError, match="start 0"):
        Fragment(1).root()


def test_keys_must_come_in_utf8_order() -> None:
    builder = PairBuilder()
    builder.add("b", _leaf("b"), _leaf("b"))
    with pytest.raises(ValueError, match="out of order"):
        builder.add("a", _leaf("a"), _leaf("a"))
    # code point order: U+FFFD sorts after U+00E9 in UTF-8 too; "é" after "z"
    builder.add("z", _leaf("z"), _leaf("z"))
    builder.add("é", _leaf("é"), _leaf("é"))


def test_absent_leaf_has_no_version_and_no_processor() -> None:
    leaf = absent("b", "k", ["x"])
    assert (leaf.state, leaf.version_id, leaf.etag, leaf.processors) == (
        ABSENT,
        "",
        "",
        (("x", "-"),),
    )
