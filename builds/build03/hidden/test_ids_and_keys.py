"""Build 03's judges of content_id and content_key: FNV-1a, SHA-256 ids, canonical-JSON
keys, the same in every interpreter, and rows without a canonical form.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

from builds.build03.hidden import probes as P
from builds.build03.hidden.expected import canonical, fnv1a_64, key_of, seeded
from grader.suites.digest import content_id
from grader.suites.judging import Fail, Observed, check, equal, is_hex_digest, listed, ok, raises
from workbook.checking.feedback import message, show_json

# ─────────────────────────────────────────────────────────────── visible tests, graded


def _bytes_text(data: bytes) -> str:
    return "bytes(range(256))" if data == bytes(range(256)) else repr(data)


def test_fnv1a_vectors(observed: Observed) -> None:
    seen, rng = seeded(observed, "fnv1a_vectors")
    inputs = (*P.FNV_INPUTS, P.draw_bytes(rng), P.draw_bytes(rng))
    digests = listed(seen["digests"], len(inputs), "fnv1a_64 of each input", "digests")
    public = {b"", b"a", b"foobar"}
    for data, got in zip(inputs, digests, strict=True):
        call = f"fnv1a_64({_bytes_text(data)})"
        value = ok(got, call, "16 lowercase hex digits")
        note = ""
        if type(value) is not str:
            note = 'Return text: f"{h:016x}".'
        elif len(value) > 16:
            note = "Keep 64 bits: `& MASK_64` after every multiplication."
        elif len(value) < 16:
            note = 'Pad to 16 digits: f"{h:016x}".'
        say = None if data in public else "its FNV-1a 64-bit digest, 16 lowercase hex digits"
        equal(call, value, fnv1a_64(data), say=say, note=note)


def test_same_content_hashes_stable_distinct_content_differs(observed: Observed) -> None:
    seen, rng = seeded(observed, "same_content_hashes_stable_distinct_content_differs")
    drawn = P.draw_pairs(rng, 2)
    calls = (*P.SAME_CONTENT_CALLS, drawn[0], drawn[0], drawn[1])
    ids = listed(seen["ids"], len(calls), "content_id of each pair", "ids")
    first = ok(ids[0], 'content_id("row", "x")', "an id")
    check(
        is_hex_digest(first, 64),
        'content_id("row", "x")',
        show_json(first),
        "64 lowercase hex digits (hashlib.sha256(...).hexdigest())",
    )
    again = ok(ids[1], 'content_id("row", "x"), a second time')
    equal('content_id("row", "x"), a second time', again, first, note="Same content, same id.")
    other = ok(ids[2], 'content_id("row", "y")')
    check(other != first, 'content_id("row", "y")', show_json(other), "an id other than for 'x'")
    as_a, as_b = ok(ids[3], 'content_id("a", "x")'), ok(ids[4], 'content_id("b", "x")')
    check(
        as_a != as_b,
        'content_id("a", "x") and content_id("b", "x")',
        "the same id twice",
        "two different ids: the kind tag goes into the hash",
    )
    joined, split = ok(ids[5], 'content_id("ab", "c")'), ok(ids[6], 'content_id("a", "bc")')
    check(
        joined != split,
        'content_id("ab", "c") and content_id("a", "bc")',
        "the same id twice",
        "two different ids: one 0x00 byte between kind and canonical",
    )
    for (kind, text), got in zip(calls, ids, strict=True):
        equal(
            _id_call(kind, text),
            ok(got, _id_call(kind, text)),
            content_id(kind, text),
            say="sha256 of the UTF-8 kind, one 0x00 byte, then canonical, in lowercase hex",
            note='For ("row", "x"): sha256(b"row\\x00x").hexdigest().',
        )


def test_content_key_is_stable_and_distinguishes_rows(observed: Observed) -> None:
    seen, rng = seeded(observed, "content_key_is_stable_and_distinguishes_rows")
    launch, _, renamed = P.stable_inputs(rng)
    nan_names = [P.draw_text(rng), P.draw_text(rng)]
    key = ok(seen["launch"], "content_key(launch)", "a key")
    check(is_hex_digest(key, 64), "content_key(launch)", show_json(key), "64 lowercase hex digits")
    equal(
        "content_key(twin), twin == launch but another object",
        ok(seen["twin"], "content_key(twin)"),
        key,
        note="Equal rows get equal keys.",
    )
    changed = ok(seen["renamed"], "content_key(launch with a changed name)")
    check(
        changed != key,
        "content_key(launch with a changed name)",
        show_json(changed),
        "a key other than content_key(launch)",
    )
    by_id = ok(seen["toy_by_id"], 'content_id("row", \'{"alt_km":420.0,"name":"ISS"}\')')
    equal(
        'content_key(Row("ISS", 420.0))',
        ok(seen["toy"], 'content_key(Row("ISS", 420.0))'),
        by_id,
        say='content_id("row", \'{"alt_km":420.0,"name":"ISS"}\')',
        note="The canonical form: sorted keys, no spaces, non-ASCII kept, NaN refused.",
    )
    # Stable and distinct is not enough: any consistent digest is both. The keys are these.
    for label, row, got in (
        (f"the fixture launch {launch.id}", launch, key),
        (f"the fixture launch {launch.id} renamed", renamed, changed),
    ):
        equal(
            f"content_key({label})",
            got,
            key_of(row),
            say='content_id("row", canonical JSON of dataclasses.asdict(row))',
        )
    equal(
        'content_id("row", \'{"alt_km":420.0,"name":"ISS"}\')', by_id, key_of(P.Row("ISS", 420.0))
    )
    equal(
        'content_key(Row("Союз", 420.0))',
        ok(seen["cyrillic"], 'content_key(Row("Союз", 420.0))'),
        key_of(P.Row("Союз", 420.0)),
        say="its key: non-ASCII kept as it is (ensure_ascii=False)",
    )
    nan = listed(seen["nan"], 2, "content_key of two rows holding NaN", "keys")
    for name, got in zip(nan_names, nan, strict=True):
        raises(
            got,
            f"content_key(Row({name!r}, math.nan))",
            "ParseError",
            note="No canonical form, no key: a default key would merge the two rows.",
        )


# ─────────────────────────────────────────────────────────────── hidden


def _id_call(kind: str, text: str) -> str:
    return f"content_id({kind!r}, {text!r})"


def test_content_id_is_sha256_of_kind_nul_canonical(observed: Observed) -> None:
    seen, rng = seeded(observed, "content_id_is_sha256_of_kind_nul_canonical")
    pairs = (*P.CONTENT_ID_INPUTS, *P.draw_pairs(rng, 3))
    for (kind, text), got in zip(
        pairs, listed(seen["ids"], len(pairs), "content_id of each pair", "ids"), strict=True
    ):
        call = _id_call(kind, text)
        value = ok(got, call, "an id")
        if value == content_id(kind, text):
            continue
        note = ""
        if value == hashlib.sha256((kind + text).encode()).hexdigest():
            note = "That is sha256(kind + canonical): the 0x00 separator is missing."
        elif value == hashlib.sha256(text.encode()).hexdigest():
            note = "That is sha256(canonical) alone: hash the kind first."
        elif type(value) is str and value.lower() == content_id(kind, text):
            note = "Use lowercase hex: .hexdigest()."
        raise Fail(
            message(
                call,
                show_json(value),
                "sha256 of the UTF-8 bytes of kind, one 0x00 byte, then canonical, as 64"
                " lowercase hex digits",
                note,
            )
        )


def key_rows_and_labels(rng: random.Random) -> list[tuple[Any, str]]:
    drawn = P.draw_key_rows(rng)
    return [
        *zip(P.key_rows(), P.KEY_ROW_LABELS, strict=True),
        *((r, P.row_label(r)) for r in drawn),
    ]


def test_content_key_hashes_the_canonical_json(observed: Observed) -> None:
    seen, rng = seeded(observed, "content_key_hashes_the_canonical_json")
    rows = key_rows_and_labels(rng)
    for (row, label), got in zip(
        rows, listed(seen["keys"], len(rows), "content_key of each row", "keys"), strict=True
    ):
        call = f"content_key({label})"
        value = ok(got, call, "a key")
        if value == key_of(row):
            continue
        slips: dict[str, dict[str, Any]] = {
            "without sort_keys=True": {"sort_keys": False},
            'with json.dumps\'s default separators (", ", ": ")': {"separators": None},
            "with ensure_ascii left at True (non-ASCII escaped)": {"ensure_ascii": True},
        }
        note = next(
            (
                f"That is the key of the JSON written {slip}."
                for slip, change in slips.items()
                if value == content_id("row", canonical(row, **change))
            ),
            "",
        )
        raise Fail(
            message(
                call,
                show_json(value),
                'content_id("row", json.dumps(dataclasses.asdict(row), sort_keys=True,'
                ' separators=(",", ":"), ensure_ascii=False, allow_nan=False))',
                note,
            )
        )


def test_keys_equal_across_interpreters(observed: Observed) -> None:
    name = "keys_equal_across_interpreters"
    here, rng = seeded(observed, name)
    there, _ = seeded(observed, name, interpreter=2)
    rows = key_rows_and_labels(rng)
    pairs = (*P.CONTENT_ID_INPUTS, *P.draw_pairs(rng, 2))
    if type(here["hash"]) is not int or here["hash"] == there["hash"]:
        # The servers run with PYTHONHASHSEED 1 and 2: only a forged report says otherwise.
        raise Fail(message(name, "two reports claiming the same hash seed", "two processes"))
    for process, seen in (("the first", here), ("a second (another PYTHONHASHSEED)", there)):
        keys = listed(seen["keys"], len(rows), "content_key of each row", "keys")
        for (row, label), got in zip(rows, keys, strict=True):
            call = f"content_key({label}) in {process} Python process"
            equal(
                call,
                ok(got, call, "a key"),
                key_of(row),
                say="the key of the row's canonical JSON, the same in every process",
                note="Keys must not depend on hash(), on id(), or on the order of a set.",
            )
        ids = listed(seen["ids"], len(pairs), "content_id of each pair", "ids")
        for (kind, text), got in zip(pairs, ids, strict=True):
            call = f"{_id_call(kind, text)} in {process} Python process"
            equal(call, ok(got, call), content_id(kind, text), say="its id, in every process")


def test_row_without_canonical_form_raises_parse_error(observed: Observed) -> None:
    seen, rng = seeded(observed, "row_without_canonical_form_raises_parse_error")
    bad, more = P.unencodable_inputs(rng)
    good = ok(seen["good"], 'content_key(Row("finite", 1.5))', "a key")
    check(is_hex_digest(good, 64), 'content_key(Row("finite", 1.5))', show_json(good), "a key")
    drawn = [*bad[len(P.UNENCODABLE_LABELS) :], *more]
    labels = (*P.UNENCODABLE_LABELS, *(repr(row) for row in drawn))
    answers = listed(seen["bad"], len(bad), "content_key", "keys")
    answers += listed(seen["more"], len(more), "content_key", "keys")
    for label, got in zip(labels, answers, strict=True):
        raises(
            got,
            f"content_key({label})",
            "ParseError",
            note="json.dumps writes NaN and Infinity unless allow_nan=False, and has no form for"
            " a datetime or bytes; the ValueError or TypeError it then raises must become"
            " etl.ParseError, never a default key.",
        )
