"""The one CP-SAT solver factory: every ``CpSolver`` of the package is built and tuned here.

Three rules hold for every solve (placement stages, the explainer, the time model and its split):

* **Signals**: CP-SAT never installs its own SIGINT handler (``catch_sigint_signal = False``). Ctrl-C
  stays with Python, so every command ends through the CLI's documented "interrupted" path (exit 1,
  nothing written) whichever solver runs at that moment.
* **Time**: the wall-clock limit comes from the caller's :class:`~capplan.model.deadline.Deadline` (or
  seconds); an optional deterministic-clock limit stops the search first, so that the same seed gives
  the same result unless the machine is so loaded that the wall clock comes first.
* **Workers**: ``workers`` search workers (at least one), except on models with per-GPU variables
  (:data:`PER_GPU_WORKERS`), which also get a light presolve (:func:`_per_gpu_settings`).
"""

from __future__ import annotations

from ortools.sat.python import cp_model

from capplan.model.deadline import Deadline

#: Workers on a time model with per-GPU variables (MIG slices, shares). OR-Tools 9.15 crashed (segmentation
#: fault, 2 of 2 runs of small-mig seed 1 with 2 workers, at a neighbourhood some 30 s into the search) on
#: these models with several workers; one is safe.
PER_GPU_WORKERS = 1


def make_solver(limit: Deadline | float, seed: int, workers: int = 1, *, deterministic: float | None = None,
                presolve: bool = True, per_gpu: bool = False, fix_to_hint: bool = False) -> cp_model.CpSolver:
    """A CP-SAT solver under the package's rules (see the module docstring).

    Parameters
    ----------
    limit
        The wall-clock limit: a deadline (its time remaining now) or seconds.
    seed
        CP-SAT's random seed.
    workers
        Search workers (at least 1; :data:`PER_GPU_WORKERS` when ``per_gpu``).
    deterministic
        Seconds of CP-SAT's deterministic clock after which the search stops; None: wall clock only.
    presolve
        Whether CP-SAT presolves (large models skip it: it takes seconds and may drop the hint).
    per_gpu
        The model has per-GPU variables: one worker and a light presolve.
    fix_to_hint
        Fix every hinted variable to its hint (completing a partial hint to a full solution).
    """
    solver = cp_model.CpSolver()
    prm = solver.parameters
    seconds = limit.remaining() if isinstance(limit, Deadline) else limit
    prm.max_time_in_seconds = max(0.0, seconds)
    if deterministic is not None:
        prm.max_deterministic_time = max(0.0, deterministic)
    prm.num_workers = PER_GPU_WORKERS if per_gpu else max(1, workers)
    prm.random_seed = seed
    prm.catch_sigint_signal = False  # Ctrl-C stays with Python: the CLI ends through "interrupted"
    prm.cp_model_presolve = presolve
    if fix_to_hint:
        prm.fix_variables_to_their_hinted_value = True
    if per_gpu:
        _per_gpu_settings(prm)
    return solver


def _per_gpu_settings(prm: object) -> None:
    """Settings for a model with per-GPU variables: no symmetry detection (it took the whole budget, 5 s of
    5 s, on a 30-job neighbourhood of 16 nodes; the model breaks GPU symmetry itself) and a light presolve
    rather than none (without presolve OR-Tools 9.15 crashed, segmentation fault, on such neighbourhoods; a
    full presolve took 7 s where the light one and the search took 2 s)."""
    prm.symmetry_level = 0  # type: ignore[attr-defined]
    prm.cp_model_presolve = True  # type: ignore[attr-defined]
    prm.cp_model_probing_level = 0  # type: ignore[attr-defined]
    prm.max_presolve_iterations = 1  # type: ignore[attr-defined]
