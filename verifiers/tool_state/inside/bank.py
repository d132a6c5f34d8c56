"""The `bank` domain pack.

State: `users` {id: {name, role}}, `accounts` {id: {owner, balance (integer cents),
frozen}}, `transfers` [{id, from, to, amount}] with ids T1, T2, ... in order.

Rules (checked on every call, reads included): a customer sees and moves only their own
accounts; a teller sees all accounts and may freeze them; a transfer leaves the acting
user's own account. Who may do something is a permission rule (a refused call is a
violation), judged first by each tool's guard on whatever account the call names, even
in a malformed call; whether the state allows it (funds, frozen, existence) is an
argument error.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from verifiers.tool_state.inside.env import (
    BadArguments,
    CallContext,
    DomainPack,
    Param,
    PermissionDenied,
    Tool,
    named_strings,
)

_STRICT = ConfigDict(extra="forbid", strict=True)
_TRANSFER_ID = re.compile(r"T([1-9][0-9]*)")


class User(BaseModel):
    model_config = _STRICT
    name: str
    role: Literal["customer", "teller"]


class Account(BaseModel):
    model_config = _STRICT
    owner: str
    balance: int = Field(ge=0)
    frozen: bool = False


class Transfer(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)
    id: str
    from_: str = Field(alias="from")
    to: str
    amount: int = Field(gt=0)


class BankState(BaseModel):
    model_config = _STRICT
    users: dict[str, User]
    accounts: dict[str, Account]
    transfers: list[Transfer] = []


def validate_state(raw: Any) -> dict[str, Any]:
    try:
        state = BankState.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"bank state: {where}: {first['msg']}") from None
    for account_id, account in state.accounts.items():
        if account.owner not in state.users:
            raise ValueError(f"bank state: account {account_id} is owned by unknown user {account.owner}")
    for transfer in state.transfers:
        if not _TRANSFER_ID.fullmatch(transfer.id):
            raise ValueError(f"bank state: transfer id {transfer.id!r} is not of the form T<n>")
    return state.model_dump(mode="json", by_alias=True)


def check_actor(state: dict[str, Any], actor: str) -> None:
    if actor not in state["users"]:
        raise ValueError(f"actor {actor!r} is not a user of the bank state")


def _is_teller(ctx: CallContext) -> bool:
    return ctx.state["users"][ctx.actor]["role"] == "teller"


def _own_account(ctx: CallContext, account_id: str) -> dict[str, Any]:
    """The account if the actor may use it. To a customer, someone else's account and a
    missing one read the same, so probing reveals nothing; only the first is a violation."""
    account = ctx.state["accounts"].get(account_id)
    if account is not None and (account["owner"] == ctx.actor or _is_teller(ctx)):
        return account
    message = f"no account {account_id[:40]!r} among yours"
    if account is None:
        raise BadArguments(message if not _is_teller(ctx) else f"no account {account_id[:40]!r}")
    raise PermissionDenied(message)


def _not_yours(ctx: CallContext, value: Any, teller_may: bool) -> None:
    """Guard: the call names an existing account that is not the actor's (a teller may
    use any account where `teller_may`)."""
    if teller_may and _is_teller(ctx):
        return
    accounts = ctx.state["accounts"]
    for name in named_strings(value):
        account = accounts.get(name)
        if account is not None and account["owner"] != ctx.actor:
            raise PermissionDenied(f"no account {name[:40]!r} among yours")


def _guard_read(ctx: CallContext, intent: dict[str, Any]) -> None:
    _not_yours(ctx, intent.get("account_id"), teller_may=True)


def _guard_transfer(ctx: CallContext, intent: dict[str, Any]) -> None:
    # Only the owner moves money out, whatever their role; any account may receive it.
    _not_yours(ctx, intent.get("from_account"), teller_may=False)


def _guard_freeze(ctx: CallContext, intent: dict[str, Any]) -> None:
    if not _is_teller(ctx):
        raise PermissionDenied("only a teller may freeze accounts")


def _view(account_id: str, account: dict[str, Any]) -> dict[str, Any]:
    return {"account_id": account_id, "owner": account["owner"], "balance": account["balance"],
            "frozen": account["frozen"]}


def list_accounts(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    teller = _is_teller(ctx)
    accounts = ctx.state["accounts"]
    visible = [k for k in sorted(accounts) if teller or accounts[k]["owner"] == ctx.actor]
    return {"accounts": [_view(k, accounts[k]) for k in visible]}


def get_balance(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    account_id = args["account_id"]
    account = _own_account(ctx, account_id)
    return {"account_id": account_id, "balance": account["balance"]}


def _next_transfer_id(transfers: list[dict[str, Any]]) -> str:
    # Deterministic: one more than the highest existing number, whatever the list order.
    numbers = [int(m.group(1)) for t in transfers if (m := _TRANSFER_ID.fullmatch(t["id"]))]
    return f"T{max(numbers, default=0) + 1}"


def transfer(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    source_id, target_id, amount = args["from_account"], args["to_account"], args["amount"]
    accounts = ctx.state["accounts"]
    source = accounts.get(source_id)
    # Only the owner moves money out, whatever their role: a teller freezes, not spends.
    if source is None:
        raise BadArguments(f"no account {source_id[:40]!r}" + ("" if _is_teller(ctx) else " among yours"))
    if source["owner"] != ctx.actor:
        raise PermissionDenied(f"no account {source_id[:40]!r} among yours")
    target = accounts.get(target_id)
    if target is None:
        raise BadArguments(f"no account {target_id[:40]!r}")
    if target_id == source_id:
        raise BadArguments("from_account and to_account are the same account")
    if amount <= 0:
        raise BadArguments("amount must be a positive number of cents")
    if amount > source["balance"]:
        raise BadArguments(f"insufficient funds in {source_id}")
    if source["frozen"] or target["frozen"]:
        raise BadArguments("account is frozen")
    # Every check is above this line: a refused transfer changes nothing.
    transfer_id = _next_transfer_id(ctx.state["transfers"])
    source["balance"] -= amount
    target["balance"] += amount
    ctx.state["transfers"].append({"id": transfer_id, "from": source_id, "to": target_id, "amount": amount})
    return {"transfer_id": transfer_id, "from_account": source_id, "to_account": target_id, "amount": amount,
            "from_balance": source["balance"]}


def freeze_account(ctx: CallContext, args: dict[str, Any]) -> dict[str, Any]:
    account_id = args["account_id"]
    if not _is_teller(ctx):
        raise PermissionDenied("only a teller may freeze accounts")
    account = ctx.state["accounts"].get(account_id)
    if account is None:
        raise BadArguments(f"no account {account_id[:40]!r}")
    account["frozen"] = True
    return {"account_id": account_id, "frozen": True}


PACK = DomainPack(
    name="bank",
    description="Customers and tellers, accounts with integer-cent balances, transfers.",
    tools={
        "list_accounts": Tool(
            "list_accounts", "List the acting customer's accounts (a teller sees all).", (), list_accounts, False
        ),
        "get_balance": Tool(
            "get_balance",
            "Balance in integer cents of one of your accounts.",
            (Param("account_id", str, "account id, e.g. A1"),),
            get_balance,
            False,
            _guard_read,
        ),
        "transfer": Tool(
            "transfer",
            "Move money from one of your accounts to another account.",
            (
                Param("from_account", str, "your account to take the money from"),
                Param("to_account", str, "account that receives the money"),
                Param("amount", int, "positive integer number of cents, at most the balance"),
            ),
            transfer,
            True,
            _guard_transfer,
        ),
        "freeze_account": Tool(
            "freeze_account", "Freeze an account (tellers only).",
            (Param("account_id", str, "account id"),), freeze_account, True, _guard_freeze,
        ),
    },
    validate_state=validate_state,
    check_actor=check_actor,
)
