"""Transactions: END_TRANSACTION, batch commits, the check pass's state."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter

from broker.routes import Ctrl, JsonBody, replicated
from broker.transaction import COMMIT, ROLLBACK
from connector.protocol.msgid import decode_offset_msg_id
from connector.protocol.rest import (
    BatchCommitRequest,
    BatchCommitView,
    EndTransactionRequest,
    EndTransactionView,
)

router = APIRouter(tags=["send"])


@router.post("/transactions/end", dependencies=[JsonBody])
async def end_transaction(ctrl: Ctrl, req: EndTransactionRequest) -> EndTransactionView:
    """END_TRANSACTION: commit or roll back a half (a send with ``transaction_group``).
    The same decision again changes nothing (``already``); the other is refused with
    409 TRANSACTION_ALREADY_DECIDED."""
    ctrl.send.check_master()
    _, commit_log_offset = decode_offset_msg_id(req.offset_msg_id)
    decision = COMMIT if req.action == "commit" else ROLLBACK
    result = await asyncio.to_thread(
        ctrl.transactions.end, req.producer_group, req.queue_offset, commit_log_offset,
        decision,
    )  # fmt: skip
    await replicated(ctrl)
    return EndTransactionView.model_validate(
        {"decision": result.decision, "already": result.already,
         "half_queue_offset": result.half_offset}
    )  # fmt: skip


@router.get("/transactions")
async def transactions(ctrl: Ctrl) -> dict[str, int]:
    """The check pass's progress through the half topic, and what it did."""
    tx = ctrl.transactions
    return {
        "halves": tx.halves_stored,
        "half_progress": tx.half_progress,
        "undecided": await asyncio.to_thread(lambda: tx.undecided),
        "check_backs_sent": tx.checked,
        "rolled_back_after_checks": tx.rolled_back_unchecked,
    }


@router.get("/transactions/{half_queue_offset}")
async def transaction_state(ctrl: Ctrl, half_queue_offset: int) -> dict[str, Any]:
    """``open``, ``committed`` or ``rolled_back``: a half, by its queue offset."""
    state = await asyncio.to_thread(ctrl.transactions.state, half_queue_offset)
    return {"half_queue_offset": half_queue_offset, "state": state}


@router.post("/transactions/batch-commit", dependencies=[JsonBody])
async def commit_batch(ctrl: Ctrl, req: BatchCommitRequest) -> BatchCommitView:
    """Commit the batch halves of one (writer, batch) key, all or none, once: a
    repeated commit of the key answers ``already`` with what the first committed."""
    ctrl.send.check_master()
    result = await asyncio.to_thread(
        ctrl.transactions.commit_batch, req.producer_group, req.writer, req.batch,
        [(q, p) for q, p in req.halves], req.manifest,
    )  # fmt: skip
    await replicated(ctrl)
    return BatchCommitView(
        already=result.already, halves=result.halves, messages=result.messages,
        manifest=result.manifest,
    )  # fmt: skip
