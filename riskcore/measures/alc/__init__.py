"""The Anonymity Loss Coefficient (the ALC paper): PRC and ALC, the learned baseline, the
best-row-match attack, the attack loop with its halting rules, and the ``alc`` family."""

from .brm import BestRowMatch, Predictions
from .inputs import ALCData, from_encoded, from_frames
from .manager import ALCConfig, ALCResult, PerTargetAttack, run_alc
from .prc import PRCParams, alc, band, best_prc, prc

__all__ = ["ALCConfig", "ALCData", "ALCResult", "BestRowMatch", "PRCParams", "PerTargetAttack",
           "Predictions", "alc", "band", "best_prc", "from_encoded", "from_frames", "prc",
           "run_alc"]
