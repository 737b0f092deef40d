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
:data:`TRUST_ENV`, which :func:`trusted_models` sets for its block and restores after it.
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


def model_trusted(trust_model: Optional[bool] = None) -> bool:
    """``trust_model`` when given, else whether the caller is inside :func:`trusted_models` (or
    ``--trust-model``), here or in the parent of this episode worker."""
    if trust_model is not None:
        return bool(trust_model)
    return os.environ.get(TRUST_ENV) == "1"


@contextlib.contextmanager
def trusted_models(enabled: bool = True) -> Iterator[None]:
    """Trust every model file loaded inside the block (and by the worker processes it starts);
    ``enabled=False`` is a no-op, so callers can pass their flag through."""
    if not enabled:
        yield
        return
    before = os.environ.get(TRUST_ENV)
    os.environ[TRUST_ENV] = "1"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TRUST_ENV, None)
        else:
            os.environ[TRUST_ENV] = before


def add_trust_flag(parser: argparse.ArgumentParser) -> None:
    """Add ``--trust-model`` to a command that loads policies from files."""
    parser.add_argument(TRUST_FLAG, dest="trust_model", action="store_true",
                        help="let model files run code when loaded (SB3 zips that need unpickling, TorchScript "
                             "modules); only for files you made or trust")


def trust_from_args(args: argparse.Namespace, stream=None) -> "contextlib.AbstractContextManager[None]":
    """The command's trust: :func:`trusted_models` with a one-line warning when ``--trust-model``
    was given, else nothing."""
    if not getattr(args, "trust_model", False):
        return contextlib.nullcontext()
    print(f"warning: {TRUST_FLAG}: the model files of this command are trusted: {TRUST_RISK}. Use it only for "
          f"files you made or whose source you trust.", file=stream or sys.stderr)
    return trusted_models()


__all__ = ["TRUST_ENV", "TRUST_FLAG", "TRUST_RISK", "UntrustedModelError", "add_trust_flag", "model_trusted",
           "trust_from_args", "trusted_models"]
