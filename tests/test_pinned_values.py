"""Values pinned to their definitions where no checker property and no other test reads
them: the figures of error messages, the scales of tolerances. Found by the generated
mutants of issue 34, part 5 (benchmarks/generated_mutation.py): code whose every run passed
whatever it computed."""

import pytest

from mechanisms.errors import MAX_BYTES, ProblemTooLarge, check_size


def test_a_size_refusal_states_the_size_and_the_guard_in_gib():
    with pytest.raises(ProblemTooLarge) as info:
        check_size("things", 12 * 2**30, "the table", "use fewer")
    assert info.value.field == "things"
    assert MAX_BYTES == 8 * 2**30
    assert info.value.message == "the table would need 12 GiB, over the 8 GiB guard; use fewer"
    check_size("things", MAX_BYTES, "the table")  # at the guard: allowed


def test_a_refused_value_is_shown_whole_up_to_80_characters_then_cut():
    """Bad input -> one line: the value as repr, whole up to 80 characters, else its first 77
    and "..." (80 in all)."""
    from mechanisms.errors import MarketInputError, as_floats

    def shown(value):
        with pytest.raises(MarketInputError) as info:
            as_floats("x", value)
        return info.value.message.split("got text: ", 1)[1]

    for n in (78, 79, 80, 81, 200):
        value = "a" * (n - 2)  # repr adds the two quotes
        assert len(repr(value)) == n
        want = repr(value) if n <= 80 else repr(value)[:77] + "..."
        assert shown(value) == want, n


def test_a_gain_that_is_not_zero_at_zero_is_refused():
    """Gain.check: g(0) = 0 (within 1e-9 of the gain's scale on the checked grid); a gain
    with g(0) = K, increasing and concave otherwise, is refused naming ``gain``."""
    import numpy as np

    from mechanisms.errors import MarketInputError
    from mechanisms.gains import CallableGain

    K, N = np.array([2.0, 3.0]), np.array([10.0, 100.0])
    CallableGain(fn=lambda x, K, N: K * x / (x + N), label="saturating").check(K, N)
    shifted = CallableGain(fn=lambda x, K, N: K * (1.0 + x / (x + N)), label="shifted")
    with pytest.raises(MarketInputError, match=r"g\(0\) = 0") as info:
        shifted.check(K, N)
    assert info.value.field == "gain"
