"""Tenant names and the id namespace they give."""

from __future__ import annotations

import pytest

from memstrata import InvalidInput
from memstrata.server.tenancy import Tenant, check_tenant
from memstrata.validation import MAX_IDENTIFIER_LENGTH


@pytest.mark.parametrize("name", ["acme", "a", "ACME-2", "team_7.prod", "0" * 64])
def test_valid_tenants(name: str) -> None:
    assert check_tenant(name) == name


@pytest.mark.parametrize(
    "name", ["", "a/b", "/", "acme/", "-acme", ".acme", "a b", "ä", "a\x00", "x" * 65, None, 5, "a\nb"]
)
def test_invalid_tenants(name: object) -> None:
    with pytest.raises(InvalidInput, match="tenant"):
        check_tenant(name)


def test_ids_go_in_and_come_out() -> None:
    tenant = Tenant("acme")
    assert tenant.inside("ana", "user_id") == "acme/ana"
    assert tenant.outside("acme/ana") == "ana"
    assert tenant.inside("globex/ana", "user_id") == "acme/globex/ana"
    assert tenant.outside(tenant.inside("globex/ana", "user_id")) == "globex/ana"
    assert tenant.outside("01JB2Q8V6Z3N4M5K6J7H8G9F0E") == "01JB2Q8V6Z3N4M5K6J7H8G9F0E"  # made by memstrata
    assert tenant.owns("acme/ana") and not tenant.owns("acmex/ana") and not tenant.owns("globex/acme/ana")


def test_one_tenant_cannot_spell_anothers_ids() -> None:
    # "acme" + "/" + anything never equals "acm" + "/" + anything, because names cannot hold "/".
    assert Tenant("acm").inside("e/ana", "user_id") != Tenant("acme").inside("ana", "user_id")


@pytest.mark.parametrize("value", [None, "", "  ", "a\x00b", "\ud800", 7])
def test_unusable_ids_are_invalid_input(value: object) -> None:
    with pytest.raises(InvalidInput, match="user_id"):
        Tenant("acme").inside(value, "user_id")


def test_the_namespace_counts_against_the_id_length() -> None:
    tenant = Tenant("acme")
    longest = MAX_IDENTIFIER_LENGTH - len("acme/")
    assert len(tenant.inside("u" * longest, "user_id")) == MAX_IDENTIFIER_LENGTH
    with pytest.raises(InvalidInput, match=f"longer than {longest}"):
        tenant.inside("u" * (longest + 1), "user_id")


def test_messages_lose_the_namespace() -> None:
    assert Tenant("acme").clean("no memory with id 'acme/x' for user 'acme/ana'") == (
        "no memory with id 'x' for user 'ana'"
    )


def test_only_a_quoted_ids_namespace_is_taken_out_of_a_message() -> None:
    assert Tenant("acme").clean("id \"acme/x\" clashes with 'zzacme/q' in acme/notes") == (
        "id \"x\" clashes with 'zzacme/q' in acme/notes"
    )


def test_an_id_spelled_with_the_namespace_is_never_looked_up_raw() -> None:
    tenant = Tenant("acme")
    assert tenant.may_be_unprefixed("01JB2Q8V6Z3N4M5K6J7H8G9F0E") and tenant.may_be_unprefixed("globex/x")
    assert not tenant.may_be_unprefixed("acme/m-1")


def test_the_whole_store_keeps_ids_as_stored() -> None:
    owner = Tenant.whole_store()
    assert (owner.name, owner.prefix, owner.is_whole_store) == ("*", "", True)
    assert owner.inside("ana", "user_id") == "ana"
    assert owner.inside("acme/ana", "user_id") == "acme/ana"
    assert owner.outside("acme/ana") == "acme/ana"
    assert owner.owns("ana") and owner.owns("acme/ana")
    assert owner.clean("no memory with id 'acme/m-1'") == "no memory with id 'acme/m-1'"
    with pytest.raises(InvalidInput, match="user_id"):
        owner.inside("  ", "user_id")


def test_no_key_can_name_the_whole_store() -> None:
    with pytest.raises(InvalidInput, match="tenant"):
        check_tenant(Tenant.whole_store().name)
    with pytest.raises(InvalidInput, match="tenant"):
        Tenant("*")
