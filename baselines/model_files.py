"""Model zips read without running code from them: sizes bounded, SB3 policies rebuilt from parameters.

A ``.zip`` handed to :func:`baselines.load_agent` is untrusted (:mod:`baselines.model_trust`).
This module reads one the safe way:

* **sizes before decompression** (:func:`open_model_zip`): the number of entries, every entry's
  declared size (:data:`MAX_ENTRY_BYTES`, :data:`MAX_DATA_BYTES` for SB3's ``data`` JSON), their
  sum (:data:`MAX_TOTAL_BYTES`) and the compression ratio of large entries (:data:`MAX_RATIO`)
  are checked from the zip's directory before any entry is read, and a read never goes past the
  declared size (``zipfile`` stops there);
* **SB3 without unpickling** (:func:`rebuild_sb3_policy`): SB3's ``data`` entry is JSON whose
  non-JSON fields are base64 cloudpickle (``":serialized:"``), which SB3's ``load`` unpickles.
  We read only its plain JSON fields (the policy class's module and name, the spaces' sizes,
  ``policy_kwargs`` where plain, or the activation named in its text form), build the policy
  class we know for the algorithm (``PPO``, ``A2C``: ``ActorCriticPolicy``; ``MaskablePPO``:
  ``MaskableActorCriticPolicy``) on the view's spaces, and load ``policy.pth`` with
  ``torch.load(weights_only=True)``: tensors only. Anything else (a custom policy class, a
  features extractor, a recurrent algorithm) raises :class:`NeedsCode`, which the loader turns
  into :class:`baselines.model_trust.UntrustedModelError` unless the file is trusted.

The policy acts exactly as the model SB3's ``load`` gives (the model's ``predict`` is its
policy's ``predict``): ``tests/test_model_trust.py`` scores both on the same windows.
"""
from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

#: Bounds checked from a zip's directory before any entry is decompressed. SB3's ``data`` is
#: about 65 KiB for a PPO on philly-v1; ``policy.pth`` 2.2 MiB (a [64, 64] MLP on 4,234 inputs);
#: a TorchScript actor less. The bounds leave two orders of magnitude of room.
MAX_DATA_BYTES = 16 * 2**20
MAX_ENTRY_BYTES = 1 * 2**30
MAX_TOTAL_BYTES = 2 * 2**30
MAX_ENTRIES = 10_000
#: Largest uncompressed/compressed ratio of an entry over :data:`RATIO_FLOOR_BYTES` (SB3 and
#: TorchScript store their entries uncompressed, ratio 1; a zip bomb of spaces deflates ~1000:1).
MAX_RATIO = 100
RATIO_FLOOR_BYTES = 2**20

#: The SB3 algorithms rebuilt without unpickling: name -> (module, policy class) of their MlpPolicy.
SAFE_SB3_POLICIES = {
    "PPO": ("stable_baselines3.common.policies", "ActorCriticPolicy"),
    "A2C": ("stable_baselines3.common.policies", "ActorCriticPolicy"),
    "MaskablePPO": ("sb3_contrib.common.maskable.policies", "MaskableActorCriticPolicy"),
}
#: Activations accepted in ``policy_kwargs`` (by the class's text form ``<class 'torch.nn...X'>``).
SAFE_ACTIVATIONS = ("ReLU", "Tanh", "LeakyReLU", "ELU", "SELU", "GELU", "SiLU", "Sigmoid", "Softplus", "Mish",
                    "Hardtanh", "CELU")
#: ``policy_kwargs`` keys that only shape the optimiser or the initial weights (ignored: the
#: weights are loaded, the policy never trains here).
_IGNORED_KWARGS = ("optimizer_class", "optimizer_kwargs", "ortho_init")
#: Plain ``policy_kwargs`` passed on when their type is right.
_PLAIN_KWARGS = {"share_features_extractor": bool, "normalize_images": bool, "log_std_init": (int, float),
                 "full_std": bool, "use_expln": bool, "squash_output": bool}
_SERIALIZED = ":serialized:"


class ModelFileError(ValueError):
    """A model file that is not what it claims (or too large); the message names the file and the
    entry or field."""


class NeedsCode(Exception):
    """The SB3 zip can be loaded only by SB3's own ``load``, which unpickles (the reason in args[0])."""


@dataclass(frozen=True)
class ModelZip:
    """What the directory and the plain JSON of a model zip say, read with bounded sizes."""

    path: Path
    kind: str                          # "sb3" or "torch" (TorchScript)
    data: Optional[dict] = None        # SB3's ``data`` entry (plain JSON; serialized fields left as text)
    algorithm: Optional[str] = None    # SB3: the algorithm its policy class implies (MaskablePPO / PPO)
    obs_size: Optional[int] = None     # SB3: the observation size its data records
    n_actions: Optional[int] = None    # SB3: the action count its data records


def _check_directory(path: Path, infos: list) -> None:
    if len(infos) > MAX_ENTRIES:
        raise ModelFileError(f"{path}: {len(infos):,} zip entries; a model file has at most {MAX_ENTRIES:,}")
    total = 0
    for info in infos:
        bound = MAX_DATA_BYTES if info.filename == "data" else MAX_ENTRY_BYTES
        if info.file_size > bound:
            raise ModelFileError(f"{path}: zip entry {info.filename!r} declares {info.file_size:,} bytes; a model "
                                 f"file's is at most {bound:,} (refused before decompressing it)")
        if info.file_size > RATIO_FLOOR_BYTES and info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise ModelFileError(f"{path}: zip entry {info.filename!r} expands {info.file_size:,} bytes from "
                                 f"{info.compress_size:,} (more than {MAX_RATIO}:1, a zip bomb's ratio; refused "
                                 "before decompressing it)")
        total += info.file_size
    if total > MAX_TOTAL_BYTES:
        raise ModelFileError(f"{path}: its zip entries declare {total:,} bytes in all; at most {MAX_TOTAL_BYTES:,}")


def read_entry(archive: zipfile.ZipFile, name: str, path: Path) -> bytes:
    """One entry of a zip whose directory :func:`open_model_zip` checked (never past its declared size)."""
    info = archive.getinfo(name)
    try:
        with archive.open(info) as fh:
            return fh.read(info.file_size)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        raise ModelFileError(f"{path}: zip entry {name!r} cannot be read ({exc})") from None


def open_model_zip(path: "str | Path") -> ModelZip:
    """Check ``path``'s zip directory against the bounds and tell an SB3 model (with its ``data``
    JSON, checked field by field) from a TorchScript module; :class:`ModelFileError` otherwise."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            first = min((i.header_offset for i in infos), default=0)
            if first > 0:
                # zipfile found the directory of a zip stored inside this file (SB3 stores each
                # .pth entry as a zip of its own): the file's own directory, at its end, is missing.
                raise ModelFileError(f"{path}: truncated: its zip directory is missing (the one found is that of a "
                                     f"zip stored inside it, from byte {first:,}); save or copy the model again")
            _check_directory(path, infos)
            names = [i.filename for i in infos]
            if "data" in names:
                data = _parse_data(path, read_entry(archive, "data", path))
                algorithm, obs_size, n_actions = _data_summary(path, data)
                return ModelZip(path, "sb3", data, algorithm, obs_size, n_actions)
            # TorchScript writes its program (code/) and constants.pkl; a plain torch.save file has neither.
            if any(n.endswith("constants.pkl") for n in names) and any("/code/" in n for n in names):
                return ModelZip(path, "torch")
    except zipfile.BadZipFile as exc:
        raise ModelFileError(f"{path}: not a complete zip file ({exc}): truncated, or neither a Stable-Baselines3 "
                             "model nor a TorchScript module") from None
    raise ModelFileError(f"{path}: neither a Stable-Baselines3 model (no 'data' entry) nor a TorchScript module "
                         "(no program)")


def _parse_data(path: Path, raw: bytes) -> dict:
    try:
        data = json.loads(raw)
    except RecursionError:
        raise ModelFileError(f"{path}: zip entry 'data' is nested too deeply for the JSON reader") from None
    except ValueError as exc:
        raise ModelFileError(f"{path}: zip entry 'data' is not JSON ({exc}); not a Stable-Baselines3 model") from None
    if not isinstance(data, dict):
        raise ModelFileError(f"{path}: zip entry 'data' is a JSON {type(data).__name__}, not the object of a "
                             "Stable-Baselines3 model")
    return data


def _field(path: Path, data: dict, name: str) -> dict:
    value = data.get(name)
    if not isinstance(value, dict):
        raise ModelFileError(f"{path}: zip entry 'data', field {name!r}: "
                             f"{'missing' if value is None else 'not an object'}; not a Stable-Baselines3 model")
    return value


def _int_text(path: Path, where: str, value: Any) -> int:
    """An SB3 size: an int, or the text of one (numpy integers are stored as text)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)) or not re.fullmatch(r"\d{1,9}", str(value)):
        raise ModelFileError(f"{path}: zip entry 'data', field {where}: {value!r} is not a size")
    return int(value)


def _data_summary(path: Path, data: dict) -> tuple[str, int, int]:
    """(algorithm implied by the policy class, observation size, action count) from plain fields."""
    module = _field(path, data, "policy_class").get("__module__")
    if not isinstance(module, str):
        raise ModelFileError(f"{path}: zip entry 'data', field 'policy_class': no '__module__' text; not a "
                             "Stable-Baselines3 model")
    shape = _field(path, data, "observation_space").get("_shape")
    if not isinstance(shape, list) or len(shape) != 1:
        raise ModelFileError(f"{path}: zip entry 'data', field 'observation_space._shape': {shape!r}; a flat-view "
                             "agent observes a vector (one dimension)")
    size = _int_text(path, "'observation_space._shape'", shape[0])
    n = _int_text(path, "'action_space.n'", _field(path, data, "action_space").get("n"))
    return ("MaskablePPO" if "maskable" in module else "PPO"), size, n


def _class_name(entry: dict) -> Optional[str]:
    """A class's name from SB3's text of its ``__init__`` (``<function NAME.__init__ at 0x..>``)."""
    match = re.fullmatch(r"<function (\w+)\.__init__ at 0x[0-9a-f]+>", str(entry.get("__init__", "")))
    return match.group(1) if match else None


def safe_algorithms(model: ModelZip) -> list[str]:
    """The algorithms of :data:`SAFE_SB3_POLICIES` whose policy class the SB3 zip's data names
    (empty: another policy class, which only SB3's unpickling loader builds)."""
    entry = (model.data or {}).get("policy_class") or {}
    name = _class_name(entry)
    return [a for a, (module, cls) in SAFE_SB3_POLICIES.items()
            if entry.get("__module__") == module and name in (None, cls)]


def policy_kwargs(data: dict) -> dict:
    """The keyword arguments that rebuild the policy's network from ``data['policy_kwargs']``
    (plain JSON, or SB3's serialized dict whose values it also writes as JSON or text); raises
    :class:`NeedsCode` for anything that only unpickling could give."""
    raw = data.get("policy_kwargs") or {}
    if not isinstance(raw, dict) or raw.get(":type:", "<class 'dict'>") != "<class 'dict'>":
        raise NeedsCode(f"policy_kwargs is {raw.get(':type:') if isinstance(raw, dict) else type(raw).__name__}")
    out: dict = {}
    for key, value in raw.items():
        if key in (":type:", _SERIALIZED) or key in _IGNORED_KWARGS:
            continue
        if key == "net_arch":
            out[key] = _net_arch(value)
        elif key == "activation_fn":
            match = re.fullmatch(r"<class 'torch\.nn\.modules\.activation\.(\w+)'>", str(value))
            if not match or match.group(1) not in SAFE_ACTIVATIONS:
                raise NeedsCode(f"policy_kwargs activation_fn {value!r} is not one of torch.nn's "
                                f"{', '.join(SAFE_ACTIVATIONS)}")
            out[key] = match.group(1)            # the class is looked up in torch.nn when built
        elif key == "features_extractor_kwargs" and value in ({}, None):
            continue
        elif key == "features_extractor_class" and str(value).endswith(".FlattenExtractor'>"):
            continue
        elif key in _PLAIN_KWARGS and isinstance(value, _PLAIN_KWARGS[key]) and not (
                _PLAIN_KWARGS[key] is not bool and isinstance(value, bool)):
            out[key] = value
        else:
            raise NeedsCode(f"policy_kwargs {key!r} = {shorten(str(value), 80)!r}")
    return out


def _net_arch(value: Any) -> Any:
    def layers(v: Any) -> list:
        if not isinstance(v, list) or len(v) > 64 or not all(
                isinstance(x, int) and not isinstance(x, bool) and 1 <= x <= 65_536 for x in v):
            raise NeedsCode(f"policy_kwargs net_arch {shorten(str(value), 80)!r} (lists of at most 64 layer sizes "
                            "1..65,536 expected)")
        return list(v)

    if isinstance(value, dict) and set(value) <= {"pi", "vf"}:
        return {k: layers(v) for k, v in value.items()}
    return layers(value)


def rebuild_sb3_policy(model: ModelZip, algorithm: str, observation_space: Any, action_space: Any) -> Any:
    """The SB3 policy of ``model`` (an SB3 :class:`ModelZip`) built on the given spaces with its
    saved parameters, without unpickling anything; :class:`NeedsCode` when only SB3's ``load``
    could build it, :class:`ModelFileError` for a broken file."""
    import importlib

    import torch

    if algorithm not in SAFE_SB3_POLICIES:
        raise NeedsCode(f"algorithm {algorithm!r} is rebuilt only by SB3's loader (without it: "
                        f"{', '.join(SAFE_SB3_POLICIES)})")
    module_name, class_name = SAFE_SB3_POLICIES[algorithm]
    entry = model.data["policy_class"]
    if algorithm not in safe_algorithms(model):
        raise NeedsCode(f"its policy class ({entry.get('__module__')}.{_class_name(entry) or '?'}) is not "
                        f"{algorithm}'s {class_name}")
    if model.data.get("use_sde") not in (None, False):
        raise NeedsCode("use_sde is set")
    kwargs = policy_kwargs(model.data)
    with zipfile.ZipFile(model.path) as archive:
        if "policy.pth" not in archive.namelist():
            raise ModelFileError(f"{model.path}: no 'policy.pth' entry (the policy's parameters)")
        declared = archive.getinfo("policy.pth").file_size
        _check_network_size(model.path, kwargs.get("net_arch"), int(observation_space.shape[0]),
                            int(action_space.n), declared)
        raw = read_entry(archive, "policy.pth", model.path)
    if "activation_fn" in kwargs:
        kwargs["activation_fn"] = getattr(torch.nn, kwargs["activation_fn"])
    cls = getattr(importlib.import_module(module_name), class_name)
    try:
        policy = cls(observation_space, action_space, lambda _: 0.0, **kwargs)
    except (TypeError, ValueError) as exc:
        raise ModelFileError(f"{model.path}: its policy_kwargs do not build a {class_name} ({exc})") from None
    state = load_weights(model.path, "policy.pth", raw)
    try:
        policy.load_state_dict(state, strict=True)
    except (RuntimeError, TypeError, ValueError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ModelFileError(f"{model.path}: zip entry 'policy.pth' does not fit a {class_name} with these spaces "
                             f"and policy_kwargs ({first})") from None
    check_finite(model.path, state)
    return policy.to("cpu").eval()


def _check_network_size(path: Path, net_arch: Any, n_inputs: int, n_actions: int, declared: int) -> None:
    """Refuse, before the network is built, a ``net_arch`` whose float32 weights would not fit in
    the ``policy.pth`` that must hold them (a forged ``[65536, 65536]`` would allocate 16 GiB)."""
    if net_arch is None:
        net_arch = [64, 64]            # SB3's default for PPO / A2C / MaskablePPO on vectors
    arch = net_arch if isinstance(net_arch, dict) else {"pi": net_arch, "vf": net_arch}
    params = 0
    for head, outputs in (("pi", n_actions), ("vf", 1)):
        dims = [n_inputs, *arch.get(head, []), outputs]
        params += sum(a * b + b for a, b in zip(dims, dims[1:]))
    if 4 * params > declared + 2**20:
        raise ModelFileError(f"{path}: policy_kwargs net_arch {net_arch} needs {4 * params:,} bytes of weights but "
                             f"its 'policy.pth' holds {declared:,}; the two do not belong together")


def load_weights(path: Path, entry: str, raw: bytes) -> dict:
    """A state dict from ``raw`` with ``torch.load(weights_only=True)``: tensors and plain values
    only; a file carrying other pickled objects is refused (it would run code)."""
    import torch

    try:
        state = torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds for truncated or foreign bytes
        if carries_objects(exc, raw):
            raise ModelFileError(f"{path}: zip entry {entry!r} carries pickled Python objects beyond tensors "
                                 "(loading them would run code from the file); it is never unpickled") from None
        raise ModelFileError(f"{path}: zip entry {entry!r} is not a torch state dict (truncated or foreign: "
                             f"{torch_error(exc)})") from None
    if not isinstance(state, dict):
        raise ModelFileError(f"{path}: zip entry {entry!r} is a {type(state).__name__}, not a state dict")
    return state


#: Longest quotation of a library's error in a message (cut at a word, with an ellipsis).
QUOTE_CHARS = 160
#: Boilerplate lines of torch's weights-only error, around the line that says what failed.
_TORCH_BOILERPLATE = re.compile(r"^(Weights only load failed|\(\d\)|In PyTorch|Please file an issue|Check the "
                                r"documentation|Re-running)", re.IGNORECASE)
#: Pickle opcodes that import or call something: a stream with any of them holds more than plain values.
_CODE_OPCODES = frozenset({"GLOBAL", "STACK_GLOBAL", "INST", "OBJ", "NEWOBJ", "NEWOBJ_EX", "REDUCE"})
#: How much of a refused pickle stream is scanned for those opcodes.
_SCAN_BYTES = 16 * 2**20


def shorten(text: str, limit: int = QUOTE_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters, cut after a whole word with ``...``."""
    text = " ".join(str(text).split())
    if len(text) <= limit:
        return text
    cut = text[:limit - 3]
    if " " in cut and not text[limit - 3].isspace():
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ,;:") + "..."


def torch_error(exc: BaseException) -> str:
    """The decisive part of an error of ``torch.load`` (its type and the line that says what
    failed, without torch's advice to load with ``weights_only=False``), shortened by words."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    decisive = [line for line in lines if not _TORCH_BOILERPLATE.match(line)]
    line = (decisive or lines or [""])[0]
    line = re.sub(r"^WeightsUnpickler error:\s*", "", line)
    # torch follows the decisive sentence with advice ("Please use ...", "This is an internal miniz error ...")
    line = re.split(r"(?<=[a-z0-9)>'\"])\. (?=[A-Z])", line)[0]
    return shorten(f"{type(exc).__name__}: {line}" if line else type(exc).__name__)


def carries_objects(exc: BaseException, raw: "bytes | Path | None" = None) -> bool:
    """Whether ``torch.load(weights_only=True)`` refused a pickle that imports or calls something
    (a Python object beyond tensors and plain values: loading it fully would run code), told by
    torch's message (any case: torch has written "Unsupported global" and "unsupported GLOBAL")
    or, for a raw pickle torch cannot parse, by its opcodes (``raw``: the bytes or the file), read
    without executing anything."""
    text = str(exc)
    if re.search(r"\bglobal\b|Can only (create new object|build)", text, re.IGNORECASE):
        return True
    if raw is None or not re.search(r"Unsupported operand", text, re.IGNORECASE):
        return False
    import pickletools

    if isinstance(raw, Path):
        try:
            with open(raw, "rb") as fh:
                raw = fh.read(_SCAN_BYTES)
        except OSError:
            return False

    try:
        for op, _, _ in pickletools.genops(raw[:_SCAN_BYTES]):
            if op.name in _CODE_OPCODES:
                return True
    except Exception:  # noqa: BLE001 - a truncated or foreign stream: what was read decides
        pass
    return False


def check_finite(path: Path, state: dict) -> None:
    """Refuse non-finite (NaN or inf) floating-point weights, naming the file and the first ones."""
    import torch

    bad = [k for k, v in state.items()
           if torch.is_tensor(v) and v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise ModelFileError(f"{path}: non-finite weights (NaN or inf) in {', '.join(bad[:3])}{more}: the training "
                             "that wrote it diverged")


__all__ = ["MAX_DATA_BYTES", "MAX_ENTRIES", "MAX_ENTRY_BYTES", "MAX_RATIO", "MAX_TOTAL_BYTES", "ModelFileError",
           "ModelZip", "NeedsCode", "SAFE_SB3_POLICIES", "carries_objects", "check_finite", "load_weights",
           "open_model_zip", "policy_kwargs", "read_entry", "rebuild_sb3_policy", "safe_algorithms", "shorten",
           "torch_error"]
