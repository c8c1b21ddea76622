"""`workbook.shared.registry.Registry`: named entries in declaration order, each name once."""

from __future__ import annotations

import pytest

from workbook.shared.registry import Registry


class Probes(Registry[int]):
    kind = "probe"


def test_entries_keep_their_declaration_order() -> None:
    """Iteration, `names` and `len` follow the order of `register`, which hands the entry back."""
    registry: Registry[int] = Registry()
    assert registry.register("b", 2) == 2
    registry.register("a", 1)
    registry.register("c", 3)
    assert registry.names == ["b", "a", "c"]
    assert list(registry) == [2, 1, 3] and len(registry) == 3
    assert "a" in registry and "z" not in registry
    assert (registry.get("c"), registry.get("z")) == (3, None)


def test_an_empty_registry_holds_nothing() -> None:
    registry: Registry[str] = Registry()
    assert (registry.names, list(registry), len(registry)) == ([], [], 0)
    assert registry.get("anything") is None


def test_a_name_declared_twice_is_an_error_naming_the_kind() -> None:
    """Never a silent replacement: the first entry stays."""
    probes = Probes()
    probes.register("retries", 1)
    with pytest.raises(ValueError, match="probe 'retries' declared twice"):
        probes.register("retries", 2)
    assert probes.get("retries") == 1
    plain: Registry[int] = Registry()
    plain.register("x", 1)
    with pytest.raises(ValueError, match="entry 'x' declared twice"):
        plain.register("x", 1)


def test_include_adds_another_registry_in_its_order_and_refuses_clashes() -> None:
    first, second = Probes(), Probes()
    first.register("a", 1)
    second.register("b", 2)
    second.register("c", 3)
    first.include(second)
    assert first.names == ["a", "b", "c"] and second.names == ["b", "c"]
    clash = Probes()
    clash.register("b", 20)
    with pytest.raises(ValueError, match="probe 'b' declared twice"):
        first.include(clash)
