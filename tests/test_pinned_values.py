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
