"""Whether a model file may run code when it is loaded: never, unless the user says they trust it.

A model file a user hands us is untrusted. Loading a Stable-Baselines3 zip with SB3's own
``load`` unpickles its ``data`` entry (cloudpickle: any Python code), and loading a TorchScript
module runs its program. :func:`baselines.load_agent` therefore rebuilds an SB3 policy from its
parameters (``torch.load(weights_only=True)``) and plain JSON alone, and does anything that needs
unpickling or TorchScript only when trusted, as Hugging Face's ``trust_remote_code`` does:

* in Python, ``load_agent(path, trust_model=True)`` (or ``score_agent(..., trust_model=True)``);
  ``with trusted_models(): ...`` trusts every model file loaded inside the block, episode
  workers included;
* on the command line, ``--trust-model`` on each ``cluster-bench`` command that loads policies
  (:func:`add_trust_flag`), with a warning that names the risk.

The trust reaches episode workers (other processes, Ray) through the environment variable
:data:`TRUST_ENV`, which :func:`trusted_models` sets for its block and restores after it. Set by
the user (``CLUSTER_BENCH_TRUST_MODEL=1``), it trusts as the flag does and prints the flag's
warning, once: a command that loads policies prints it when it starts, any other loader at its
first load (:func:`model_trusted`).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from pathlib import Path
from typing import Iterator, Optional

#: Set to ``"1"`` by :func:`trusted_models` (and ``--trust-model``) for the processes it starts.
TRUST_ENV = "CLUSTER_BENCH_TRUST_MODEL"
#: Set beside :data:`TRUST_ENV` once the trust was announced (the warning printed) or given in
#: code, so that neither this process nor the workers it starts warn again.
ANNOUNCED_ENV = "CLUSTER_BENCH_TRUST_MODEL_ANNOUNCED"
#: How the warning names the environment variable as the source of the trust.
ENV_SOURCE = f"{TRUST_ENV}=1 (environment)"
#: The command-line flag, one spelling everywhere.
TRUST_FLAG = "--trust-model"
#: What trusting a model file allows, named in the warning and in the errors.
TRUST_RISK = ("loading it may run code stored in the file (SB3 fields stored with pickle, a TorchScript "
              "program) with your permissions")


class UntrustedModelError(ValueError):
    """A model file that can only be loaded by running code from it, refused without trust; the
    message names the file, what needs code and the flag (``hint``: how to trust it)."""

    hint = (f"pass {TRUST_FLAG} (Python: trust_model=True) only for a file you made or whose source you "
            f"trust: {TRUST_RISK}")

    def __init__(self, path: "str | Path", why: str) -> None:
        super().__init__(f"{path}: {why}; loading it runs code from the file, refused without {TRUST_FLAG} "
                         f"(Python: trust_model=True)")
        self.path = str(path)


def trust_warning(source: str) -> str:
    """The one-line warning printed when model files are trusted (``source``: the flag or the
    environment variable), the same for both ways of trusting."""
    return (f"warning: {source}: the model files of this command are trusted: {TRUST_RISK}. Use it only for "
            f"files you made or whose source you trust.")


def model_trusted(trust_model: Optional[bool] = None) -> bool:
    """``trust_model`` when given, else whether the caller is inside :func:`trusted_models` (or
    ``--trust-model``), here or in the parent of this episode worker, or the user set
    :data:`TRUST_ENV` (then the warning is printed on stderr unless it already was)."""
    if trust_model is not None:
        return bool(trust_model)
    if os.environ.get(TRUST_ENV) != "1":
        return False
    if os.environ.get(ANNOUNCED_ENV) != "1":
        print(trust_warning(ENV_SOURCE), file=sys.stderr)
        os.environ[ANNOUNCED_ENV] = "1"       # once: here and in the workers started from now on
    return True


@contextlib.contextmanager
def trusted_models(enabled: bool = True) -> Iterator[None]:
    """Trust every model file loaded inside the block (and by the worker processes it starts);
    ``enabled=False`` is a no-op, so callers can pass their flag through."""
    if not enabled:
        yield
        return
    before = {name: os.environ.get(name) for name in (TRUST_ENV, ANNOUNCED_ENV)}
    os.environ[ANNOUNCED_ENV] = "1"      # given in code, or announced by the caller: no load warns
    os.environ[TRUST_ENV] = "1"
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def add_trust_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--trust-model`` to a command that loads policies from files."""
    parser.add_argument(TRUST_FLAG, dest="trust_model", action="store_true",
                        help="let model files run code when loaded (SB3 zips that need unpickling, TorchScript "
                             "modules); only for files you made or trust")


def trust_from_args(args: argparse.Namespace, stream=None) -> "contextlib.AbstractContextManager[None]":
    """The command's trust: :func:`trusted_models` with a one-line warning when ``--trust-model``
    was given or the user set :data:`TRUST_ENV` (the same warning, once, naming which), else
    nothing. Commands without the flag load no policies up front; a load they make warns itself."""
    flag = bool(getattr(args, "trust_model", False))
    from_env = hasattr(args, "trust_model") and os.environ.get(TRUST_ENV) == "1"
    if not flag and not from_env:
        return contextlib.nullcontext()
    # Inside trusted_models() in code (announced), the environment's trust needs no warning.
    if flag or os.environ.get(ANNOUNCED_ENV) != "1":
        print(trust_warning(TRUST_FLAG if flag else ENV_SOURCE), file=stream or sys.stderr)
    return trusted_models()         # marks the trust announced for the command and its workers


__all__ = ["ANNOUNCED_ENV", "TRUST_ENV", "TRUST_FLAG", "TRUST_RISK", "UntrustedModelError", "add_trust_flag",
           "model_trusted", "trust_from_args", "trust_warning", "trusted_models"]
