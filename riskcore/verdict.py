"""A release's verdict and the exit code that says it: one small module, so that every
command line can read it without the policy's machinery."""

from __future__ import annotations

from enum import Enum


class Verdict(str, Enum):
    """The gate's answer, best first: APPROVED, NEEDS_REVIEW, REJECTED, ERROR."""

    APPROVED = "APPROVED"
    NEEDS_REVIEW = "NEEDS_REVIEW"
    REJECTED = "REJECTED"
    ERROR = "ERROR"

    @property
    def exit_code(self) -> int:
        """0 approved, 1 rejected, 2 needs review, 3 error (the CLI's exit codes)."""
        return {"APPROVED": 0, "REJECTED": 1, "NEEDS_REVIEW": 2, "ERROR": 3}[self.value]
