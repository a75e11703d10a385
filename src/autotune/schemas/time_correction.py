"""The local time correction a calibration learned from the user's rows, and where in the setting space they lie.

Written by ``autotune calibrate`` (``calibration/coverage.py``), read by the cost model
(``costmodel/time_correction.py``): a Gaussian-process posterior on log(measured / predicted) over the rows'
:class:`SettingPoint` coordinates, so a correction applies in full near the rows and fades back to the stack factor
away from them, and the time band widens with the distance (Rasmussen & Williams, *Gaussian Processes for Machine
Learning*, 2006, eqs. 2.25–2.26; the model-discrepancy term of Kennedy & O'Hagan, JRSS B 63 (2001) 425).
"""

from __future__ import annotations

from pydantic import Field, model_validator

from autotune.schemas._base import FrozenModel


class SettingPoint(FrozenModel):
    """Where a setting lies for the correction's kernel: the six axes a few rows cover or do not (issue 43).

    Numbers are base-2 logarithms, so a distance counts doublings.
    """

    method: str = Field(description="Fine-tuning method (full, lora, qlora, ...).")
    sharding: str = Field(description="Sharding strategy (none, fsdp, zero3, ...).")
    log2_seq_len: float = Field(description="log₂ of the sequence length, tokens.")
    log2_micro_batch: float = Field(description="log₂ of the micro batch size.")
    log2_params_b: float = Field(description="log₂ of the model's parameters, billions.")
    log2_gpus: float = Field(description="log₂ of the GPU count (world size).")


class LocalTimeCorrection(FrozenModel):
    """A Gaussian-process posterior on the log time residual after the stack factor (module docstring).

    With Σ = ``local_log_variance`` · K + ``noise_log_variance`` · I over the anchors (K the kernel of
    ``costmodel.time_correction.kernel``), ``weights`` = Σ⁻¹ r (r the rows' residual log ratios at the refit without
    this correction) and ``precision`` = (``stack_log_variance`` 11ᵀ + Σ)⁻¹. The mean correction at a point x is
    ``local_log_variance`` · k(x)ᵀ ``weights``; its variance the joint posterior of stack factor and correction
    (``costmodel.time_correction.log_correction``). Natural-log units throughout.
    """

    anchors: list[SettingPoint] = Field(min_length=1, description="The rows' settings (outliers left out).")
    row_ids: list[str] = Field(description="The rows' ids, in the order of anchors.")
    weights: list[float] = Field(description="Σ⁻¹ r, one per anchor.")
    precision: list[list[float]] = Field(description="Σ⁻¹, anchors × anchors.")
    local_log_variance: float = Field(ge=0, description="Prior variance of the setting-dependent log error.")
    noise_log_variance: float = Field(gt=0, description="Variance of one row's log error no setting explains.")
    stack_log_variance: float = Field(ge=0, description="Prior variance of log time_scale where fitted (0 when kept).")

    @model_validator(mode="after")
    def _shapes(self) -> LocalTimeCorrection:
        count = len(self.anchors)
        if len(self.row_ids) != count or len(self.weights) != count:
            raise ValueError("row_ids and weights need one entry per anchor")
        if len(self.precision) != count or any(len(line) != count for line in self.precision):
            raise ValueError("precision must be a square matrix with one row per anchor")
        return self
