"""The session layer: a request's typed option groups → validated request → plan, estimate or table, with notes.

Everything between a front end and the planner lives here, so that the command line (:mod:`autotune.cli`, parsing
and rendering) and the Python API (:mod:`autotune.api`) share one path: resolving the model, GPUs and calibration
(:mod:`.resolve`, :mod:`.calibration_choice`), tokenizing a dataset into its workload (:mod:`.dataset_lengths`,
:mod:`.dataset_plan`), planning (:mod:`.planning`) and the notes a plan carries (:mod:`.attention_note`). It prints
nothing: progress goes to :mod:`.progress`'s sink, notes come back with the results. It never imports torch.
"""
