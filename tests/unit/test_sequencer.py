"""The sequencer comparator (CONTRACT C2; docs/payloads.md sections 0 and 3)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from s3ingest_fn.core import sequencer

pytestmark = pytest.mark.contract("C2")

HEX = "0123456789ABCDEFabcdef"


def test_right_padding_orders_a_shorter_later_sequencer_after_a_longer_earlier_one() -> None:
    # docs/payloads.md 0: B is one second after A (…F9 -> …FA) but four characters shorter.
    a, b = "00643717F9F8B85354", "00643717FA1234"
    # The pair discriminates: left-padding (the 2018-2021 doc wording) orders it the other way.
    assert b.rjust(len(a), "0") < a
    assert b.ljust(len(a), "0") > a

    assert sequencer.compare(b, a) == 1
    assert sequencer.compare(a, b) == -1


def test_normalize_upper_cases_and_right_pads_to_the_stored_width() -> None:
    assert sequencer.WIDTH == 64
    assert sequencer.normalize("617f08299329d189") == "617F08299329D189" + "0" * 48
    assert sequencer.normalize("00643717F9F8B85354") == "00643717F9F8B85354" + "0" * 46


def test_case_is_normalised_before_comparing() -> None:
    # As raw strings 'F' < 'f', so an upper-case newer value would sort below a lower-case older
    # one (real captures are upper-case, the EventBridge doc examples lower-case).
    newer, older = "00643717FA0000", "00643717f9ffff"
    assert newer < older
    assert sequencer.compare(newer, older) == 1
    assert sequencer.compare(older, newer) == -1
    assert sequencer.compare("006408cad69598b05e", "006408CAD69598B05E") == 0


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("006408CAD69598B05E", "006408CAD69598B05E"),  # the same event delivered twice
        ("00643717FA1234", "00643717FA123400"),  # equal once the shorter is right-padded
        ("617b3980", "617B398000000000"),
    ],
)
def test_equal_after_padding_is_a_duplicate(a: str, b: str) -> None:
    assert sequencer.compare(a, b) == 0
    assert sequencer.compare(b, a) == 0


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "   ",
        0x643717,
        b"00643717F9F8B85354",
        "Happy Sequencer",
        "0066LIFECYCLE890",
        "sequencer",
        "object-sequencer",  # fixtures, snapshots
        "0x643717F9",
        "-00643717F9",
        "00643717 F9F8",
        "0" * 65,  # longer than WIDTH
    ],
)
def test_unusable_value_normalises_to_none_and_cannot_be_compared(raw: object) -> None:
    assert sequencer.normalize(raw) is None
    with pytest.raises(ValueError):
        sequencer.compare(raw, "00643717F9F8B85354")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        sequencer.compare("00643717F9F8B85354", raw)  # type: ignore[arg-type]


def test_longest_accepted_value_is_width_characters() -> None:
    longest = "A" * sequencer.WIDTH
    assert sequencer.normalize(longest) == longest
    assert sequencer.normalize(longest + "0") is None


# --- properties on real-format sequencers: "00" + 8 hex digits of Unix seconds + a suffix ---------

seconds = st.integers(min_value=0, max_value=0xFFFFFFFF)
#: Suffixes of any length that keeps the whole value within WIDTH (10 + 54 = 64).
suffixes = st.text(alphabet=HEX, max_size=sequencer.WIDTH - 10)


def real_format(secs: int, suffix: str, lower: bool) -> str:
    value = f"00{secs:08X}{suffix}"
    return value.lower() if lower else value


@given(seconds, seconds, suffixes, suffixes, st.booleans(), st.booleans())
def test_a_later_second_always_compares_greater_whatever_the_suffix_lengths(
    t1: int, t2: int, s1: str, s2: str, lower1: bool, lower2: bool
) -> None:
    a, b = real_format(t1, s1, lower1), real_format(t2, s2, lower2)
    if t1 < t2:
        assert (sequencer.compare(a, b), sequencer.compare(b, a)) == (-1, 1)
    elif t1 > t2:
        assert (sequencer.compare(a, b), sequencer.compare(b, a)) == (1, -1)


@given(seconds, suffixes, suffixes)
def test_within_one_second_the_suffix_decides_as_right_padded_strings(
    t: int, s1: str, s2: str
) -> None:
    a, b = real_format(t, s1, False), real_format(t, s2, False)
    width = max(len(a), len(b))
    pa, pb = a.upper().ljust(width, "0"), b.upper().ljust(width, "0")
    assert sequencer.compare(a, b) == (pa > pb) - (pa < pb)


@given(seconds, suffixes, st.integers(min_value=0, max_value=54), st.booleans())
def test_trailing_zeros_never_change_the_order(t: int, s: str, zeros: int, lower: bool) -> None:
    a = real_format(t, s, lower)
    padded = (a + "0" * zeros)[: sequencer.WIDTH]
    assert sequencer.compare(a, padded) == 0


@given(seconds, suffixes, seconds, suffixes, st.booleans())
def test_normalize_is_idempotent_and_keeps_the_order(
    t1: int, s1: str, t2: int, s2: str, lower: bool
) -> None:
    a, b = real_format(t1, s1, lower), real_format(t2, s2, not lower)
    na, nb = sequencer.normalize(a), sequencer.normalize(b)
    assert na is not None and nb is not None
    assert len(na) == len(nb) == sequencer.WIDTH
    # Normalising a normalised value, or one with its padding stripped, changes nothing.
    assert sequencer.normalize(na) == na
    assert sequencer.normalize(na.rstrip("0") or "0") == na
    # Stored (normalised) values compare as plain strings exactly as the raw values do, which is
    # what lets DynamoDB apply the rule with a string "<" in a condition expression.
    assert (na > nb) - (na < nb) == sequencer.compare(a, b) == sequencer.compare(na, nb)


# -- the shape S3 sends (CONTRACT C2, C9) ------------------------------------------------------

NOW = 1_700_000_000.0  # 2023-11-14T22:13:20Z


def test_real_and_documented_sequencers_are_accepted() -> None:
    for raw in ("00643717F9F8B85354", "006408CAD69598B05E", "617f08299329d189", "617b398000000000"):
        assert sequencer.problem(raw, NOW) is None, raw


def test_absent_or_empty_is_no_sequencer_not_a_problem() -> None:
    assert sequencer.problem(None, NOW) is None
    assert sequencer.problem("", NOW) is None


def test_garbage_lengths_and_forged_values_are_refused_with_a_reason() -> None:
    assert sequencer.problem("Happy Sequencer", NOW) == "sequencer-not-hex"
    assert sequencer.problem(12345, NOW) == "sequencer-not-hex"
    assert sequencer.problem("   ", NOW) == "sequencer-not-hex"
    assert sequencer.problem("F" * 64, NOW) == "sequencer-length"
    assert sequencer.problem("0" * 33, NOW) == "sequencer-length"


def test_a_sequencer_from_beyond_the_skew_is_refused() -> None:
    at = int(NOW)
    within = f"00{at + sequencer.SKEW_SECONDS:08X}00000000"
    beyond = f"00{at + sequencer.SKEW_SECONDS + 1:08X}00000000"
    assert sequencer.problem(within, NOW) is None
    assert sequencer.problem(beyond, NOW) == "sequencer-from-future"
    assert sequencer.problem("00FFFFFFFF00000000", NOW) == "sequencer-from-future"


def test_seconds_of_reads_both_layouts() -> None:
    assert sequencer.seconds_of("00643717F9F8B85354") == 0x643717F9
    assert sequencer.seconds_of("617f08299329d189") == 0x617F0829
    assert sequencer.seconds_of("0064") == 0x64000000  # read right-padded, as compared
    assert sequencer.seconds_of("6B") == 0x6B000000
    assert sequencer.seconds_of("") is None
    assert sequencer.seconds_of("zz643717F9F8B85354") is None


def test_a_stored_forged_sequencer_is_contradicted_and_a_real_one_is_not() -> None:
    real = sequencer.normalize("00643717F9F8B85354")
    assert real is not None and sequencer.contradicted(real, NOW) is None
    forged = sequencer.normalize("F" * 64)
    assert forged is not None and sequencer.contradicted(forged, NOW) == "sequencer-length"
    future = sequencer.normalize("00FFFFFFFF00000000")
    assert future is not None and sequencer.contradicted(future, NOW) == "sequencer-from-future"


def test_short_sequencers_are_accepted_there_is_no_length_floor() -> None:
    # the docs/sequencer.md pair: the 14-character later one must not be refused (issue 34)
    assert sequencer.problem("00643717FA1234", NOW) is None
    for short in ("0", "00", "0064", "00643717", "617f0829"):
        assert sequencer.problem(short, NOW) is None, short
    # a short value is judged as it is compared, right-padded: "FF" is "FF00000000..." (2105)
    assert sequencer.problem("FF", NOW) == "sequencer-from-future"
    assert sequencer.problem("0" * 32, NOW) is None
    assert sequencer.problem("0" * 33, NOW) == "sequencer-length"


#: Late 2026: 0x6B000000 (the documentation layout's time of ``6B00000000000000``) is in the past.
LATE_2026 = 0x6B000000 + 86_400


@pytest.mark.parametrize(
    "forged",
    ["0100000000000000", "6B00000000000000", "6b00000000000000", "6AFFFFFF" + "F" * 24, "6B", "01"],
)
def test_a_forged_value_of_another_layout_is_accepted_but_contradicted_once_stored(
    forged: str,
) -> None:
    # S3 documents only "hex", so an event carrying it is accepted (its time is not ahead) ...
    assert sequencer.problem(forged, LATE_2026) is None
    # ... but every real sequencer starts 00 + its seconds, so a stored value above the clock's
    # ceiling cannot have come from S3: reconciliation and observations reset it (C7, C12)
    stored = sequencer.normalize(forged)
    assert stored is not None and stored > sequencer.ceiling(LATE_2026)
    assert sequencer.contradicted(stored, LATE_2026) == "sequencer-above-clock"


def test_a_value_within_the_skew_is_not_contradicted_until_the_clock_passes_it() -> None:
    at = int(NOW)
    ahead = sequencer.normalize(f"00{at + 600:08X}FFFFFFFFFF")
    assert ahead is not None and sequencer.contradicted(ahead, NOW) is None
    # (a stale real event the bucket shows current repairs such a row: test_stale_repair.py)


@given(
    st.integers(min_value=0, max_value=0xFFFFFFFF - 2 * sequencer.SKEW_SECONDS),
    st.integers(min_value=0, max_value=sequencer.SKEW_SECONDS),
    st.text(alphabet=HEX, max_size=sequencer.MAX_EVENT_WIDTH - 10),
)
def test_no_real_sequencer_up_to_the_skew_is_ever_contradicted(t: int, ahead: int, s: str) -> None:
    real = sequencer.normalize(f"00{t + ahead:08X}{s}")
    assert real is not None and real <= sequencer.ceiling(t)
    assert sequencer.contradicted(real, t) is None
    # and the clock moving on only ever finds fewer contradicted
    assert sequencer.contradicted(real, t + 1) is None
