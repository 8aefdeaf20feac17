"""What every Hydra entry point (gyre.main, gyre.eval, gyre.serve, gyre.sim, gyre.sft) shares on its command
line: an unknown key is named with its section's known keys and the closest match, and ``--help`` lists the
config groups the entry point uses.

Hydra alone answers a mistyped key (``trainer.totl_steps=3``) with "Could not override ... use
+trainer.totl_steps=3", which leads to adding the typo as a new key. `hydra_entry` checks the command
line's overrides against the composed config first and stops with Gyre's own message instead. A
`gyre.config.ConfigError` raised while the entry point builds its parts (a moved or retired key, a bad
value) is likewise printed as one line, exit status 2.

``--help`` is Hydra's, shaped by ``hydra.help`` in each primary config (conf/*.yaml): a description and
examples, then ``${gyre_groups:...}``, a resolver registered here that lists the groups the composed
config chose (``hydra.runtime.choices``) with their options, plus the optional groups named as its
arguments (added with ``+group=option``, e.g. ``recipe``).
"""

from __future__ import annotations

import contextlib
import functools
import io
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from gyre.config import ConfigError, closest

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"


class UnknownKey(ValueError):
    """An override names a key the composed config does not have; the message says which and what is there."""


def hydra_entry(config_name: str) -> Callable[[Callable[[Any], Any]], Callable[[], Any]]:
    """``@hydra.main`` on ``conf/<config_name>.yaml``, with the command line checked for unknown keys first."""
    import hydra

    def wrap(task: Callable[[Any], Any]) -> Callable[[], Any]:
        @functools.wraps(task)
        def checked_task(cfg: Any) -> Any:
            try:
                return task(cfg)
            except ConfigError as error:  # a config mistake is one line, not Hydra's report and a traceback
                print(f"{program_name()}: {error}", file=sys.stderr)
                raise SystemExit(2) from None

        hydra_main = hydra.main(config_path=str(CONF_DIR), config_name=config_name, version_base=None)(checked_task)

        @functools.wraps(task)
        def entry() -> Any:
            from gyre.progress import quiet_library_bars

            quiet_library_bars()
            try:
                check_command_line(config_name, sys.argv[1:])
            except UnknownKey as error:
                print(f"{program_name()}: {error}", file=sys.stderr)
                raise SystemExit(2) from None
            return hydra_main()

        return entry

    return wrap


def program_name() -> str:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    name = spec.name.removesuffix(".__main__") if spec is not None else Path(sys.argv[0]).name
    return f"python -m {name}" if spec is not None else name


def check_command_line(config_name: str, argv: list[str]) -> None:
    """Raise `UnknownKey` for the first override of a key that the config does not have. Anything this
    cannot judge (a malformed line, a group option that does not exist) is left to Hydra's own errors."""
    from hydra._internal.utils import get_args_parser  # Hydra's own flags (-m, --cfg, --config-name, ...)

    with contextlib.redirect_stderr(io.StringIO()):
        try:
            args = get_args_parser().parse_args(argv)
        except SystemExit:
            return
    check_overrides(args.config_name or config_name, args.overrides)


def check_overrides(config_name: str, overrides: list[str]) -> None:
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException

    try:
        parsed = OverridesParser.create().parse_overrides(overrides)
    except HydraException:
        return
    groups = config_groups()
    to_check = [o for o in parsed if o.type == OverrideType.CHANGE and o.package is None
                and not o.key_or_group.startswith("hydra") and o.key_or_group not in groups]
    if not to_check:
        return
    # The config the other overrides make (group choices, recipes, added and deleted keys), each sweep at its
    # first value: the keys that exist for the overrides checked.
    checked = {id(o) for o in to_check}
    base = []
    for override in parsed:
        if id(override) in checked or override.key_or_group.startswith("hydra"):
            continue
        if override.is_sweep_override():
            try:
                first = next(iter(override.sweep_string_iterator()))
            except Exception:  # a range or interval sweep of a group: nothing sensible to compose
                return
            base.append(f"{override.get_key_element()}={first}")
        else:
            base.append(override.input_line)
    composed = compose(config_name, base)
    if composed is None:
        return
    for override in to_check:
        check_key(composed, override.key_or_group)


def compose(config_name: str, overrides: list[str]) -> dict[str, Any] | None:
    """The composed config as plain containers (interpolations unresolved), or None when it does not compose."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = hydra_compose(config_name=config_name, overrides=overrides)
    except Exception:  # Hydra will report it, in its words, when it composes for real
        return None
    return OmegaConf.to_container(cfg, resolve=False)  # type: ignore[return-value]


def check_key(config: dict[str, Any], dotted: str) -> None:
    node: Any = config
    walked: list[str] = []
    for part in dotted.split("."):
        if not isinstance(node, dict) or (walked and not node):
            return  # a value, a list or a free-form map ({} in yaml, filled with +key=...): Hydra's to judge
        if part not in node:
            raise UnknownKey(unknown_key_message(dotted, walked, sorted(map(str, node))))
        node = node[part]
        walked.append(part)


def unknown_key_message(dotted: str, walked: list[str], known: list[str]) -> str:
    section = ".".join(walked)
    name = dotted.split(".")[len(walked)]
    match = closest(name, known)
    where = f"of {section}" if section else "at the top level"
    lines = [f"unknown key '{dotted}'" + (f": did you mean '{'.'.join([*walked, match])}'?" if match else "."),
             f"  known keys {where}: {', '.join(known)}",
             "  every key is commented in conf/; add --cfg job to see the composed config with its values"]
    return "\n".join(lines)


def config_groups() -> set[str]:
    """Top-level folders of conf/ that hold options (yaml files)."""
    return {p.name for p in CONF_DIR.iterdir() if p.is_dir() and any(p.glob("*.yaml"))}


def group_options(group: str) -> list[str]:
    return sorted(p.stem for p in (CONF_DIR / group).glob("*.yaml"))


def format_groups(*optional: str, _root_: Any) -> str:
    """The ``${gyre_groups:...}`` help text: each chosen group with its options (the choice marked with *),
    then each of ``optional`` (groups added with +group=option)."""
    choices = {str(k): v for k, v in (_root_.hydra.runtime.choices or {}).items() if not str(k).startswith("hydra")}
    chosen = sorted(g for g in choices if "/" not in g)
    width = max(map(len, [*chosen, *optional]), default=0)
    lines = []
    for group in chosen:
        options = " | ".join(f"{o}*" if o == choices[group] else o for o in group_options(group))
        lines.append(f"  {group:<{width}}  {options}")
    for group in optional:
        if group not in choices:
            lines.append(f"  {group:<{width}}  {' | '.join(group_options(group))}   (add one: +{group}=NAME)")
    return "\n".join(lines)


OmegaConf.register_new_resolver("gyre_groups", format_groups, replace=True)


def swept_keys(argv: list[str] | None = None) -> set[str]:
    """The keys a ``-m`` command line sweeps over (``key=a,b``, ``range(...)``, ``choice(...)``, ...)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    args = [arg for arg in (sys.argv[1:] if argv is None else argv) if "=" in arg and not arg.startswith("-")]
    try:
        overrides = OverridesParser.create().parse_overrides(args)
    except Exception:  # noqa: BLE001 - a name is still made, only without the swept keys first
        return set()
    return {override.key_or_group for override in overrides if override.is_sweep_override()}


_UNSAFE = re.compile(r"[^A-Za-z0-9_.+@%-]")  # what Hydra reads as part of an unquoted value, and is safe in a name


def _name_part(override: str) -> str:
    """``key=value`` as ``key-value``, other characters Hydra would not take unquoted as ``_``."""
    key, equals, value = override.partition("=")
    return _UNSAFE.sub("_", key) + (f"-{_UNSAFE.sub('_', value)}" if equals else "")


def sweep_dirname(overrides: Any, limit: int = 240, swept: set[str] | None = None) -> str:
    """A sweep point's folder name from its overrides (``hydra.overrides.task``, or one comma-joined
    string): ``key-value`` parts joined by ``__``, the swept keys first (so they stay in sight), then the
    fixed ones. The name holds only characters Hydra takes in an unquoted value, so a path into the folder
    can be passed as one (``model.path=runs/sweep_<time>/<point>/checkpoints/latest``); values that lost
    other characters (``/``, ``[``, ``,``...) get a digest of the overrides, so distinct points stay
    distinct. Within the file system's 255-byte name length (a longer name keeps its head and a digest;
    leave fixed keys out with hydra.job.config.override_dirname.exclude_keys)."""
    if isinstance(overrides, str):
        items = [item for item in overrides.split(",") if item]
    else:
        swept = swept_keys() if swept is None else swept
        items = sorted(str(item) for item in overrides)
        items.sort(key=lambda item: item.split("=", 1)[0].lstrip("+~") not in swept)  # stable: swept first
    name = "__".join(_name_part(item) for item in items) or "default"
    import hashlib

    digest = hashlib.sha256(",".join(items).encode()).hexdigest()[:12]
    lossy = any(_UNSAFE.search(item.partition("=")[2]) or _UNSAFE.search(item.partition("=")[0]) for item in items)
    if lossy:
        name = f"{name[: limit - 13]}-{digest}"
    if len(name.encode()) <= limit:
        return name
    return f"{name.encode()[: limit - 13].decode(errors='ignore')}-{digest}"


OmegaConf.register_new_resolver("gyre_sweep_dirname", sweep_dirname, replace=True)
