"""Options that several subcommands share, for the modules that add subcommands.

Why a module of its own on the ground floor: the plug-ins (``mediator``, ``msp``,
``mcp``, ``stats.targets``, ...) add their options here without importing
:mod:`tersetalk.cli`, which imports them (the layer test, tests/test_import_graph.py).
Reading the files ``--config`` names is :func:`tersetalk.pipeline.config.load_workflow_config`.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Mapping
from functools import partial

__all__ = ["DEFAULT_CONFIG", "LazySubParsers", "add_config_option", "add_renamed_option",
           "nonnegative_int", "positive_int", "user_error"]  # fmt: skip

#: the workflow's default config (the Snakefile's ``configfile:``), relative to the
#: working directory; every ``--config`` file is layered over it
DEFAULT_CONFIG = "config/config.yaml"


def add_config_option(parser: argparse.ArgumentParser, what: str = "") -> None:
    """``--config FILE ...``: the one meaning of ``--config`` in every subcommand
    (read with :func:`tersetalk.pipeline.config.load_workflow_config`)."""
    parser.add_argument(
        "--config",
        nargs="+",
        default=[],
        metavar="FILE",
        help=f"workflow config YAML file(s), each layered over the previous and all over "
        f"{DEFAULT_CONFIG} (as snakemake --configfile does){what}",
    )


def add_renamed_option(parser: argparse.ArgumentParser, old: str, new: str) -> None:
    """A hidden ``old`` flag that still works as ``new``, with a warning.

    Why: ``--config`` names a workflow config YAML in every subcommand; a command whose
    ``--config`` used to name another kind of file keeps accepting it for a while.
    """
    target = next(a for a in parser._actions if new in a.option_strings)

    class _Renamed(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            print(f"{parser.prog}: warning: {old} is deprecated here, use {new} ({old} names "
                  "a workflow config YAML elsewhere)", file=sys.stderr)  # fmt: skip
            setattr(namespace, target.dest, target.type(values) if target.type else values)

    parser.add_argument(old, action=_Renamed, help=argparse.SUPPRESS, metavar=target.metavar,
                        default=argparse.SUPPRESS)  # fmt: skip


def _int_at_least(text: str, low: int, said: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {said}, got {value}")
    return value


def positive_int(text: str) -> int:
    """An argparse type: a whole number of at least 1 (a count of examples)."""
    return _int_at_least(text, 1, "at least 1")


def nonnegative_int(text: str) -> int:
    """An argparse type: a whole number of 0 or more (a seed, a count that may be 0).

    Why refuse at parse time: a negative seed ends in NumPy's traceback after the inputs
    are read, and a negative count slices from the end and silently gives a wrong result.
    """
    return _int_at_least(text, 0, "0 or more")


def user_error(message: str) -> SystemExit:
    """``message`` printed on stderr, and a SystemExit of code 2 to raise.

    For subcommands that stop with ``raise SystemExit(...)``: a user's error is exit
    code 2, as argparse's and ``tersetalk``'s own, where a bare ``SystemExit(message)``
    would exit 1. The exception still reads as ``message``.
    """
    print(message, file=sys.stderr)
    exc = SystemExit(message)
    exc.code = 2
    return exc


#: a parser builder: adds one or more subcommands to the subparsers action it is given
Builder = Callable[[argparse._SubParsersAction], None]

_UNBUILT = object()  # the map's value for a subcommand whose parser is not built yet


class _LazyParsers(dict):
    """The name -> parser map of :class:`LazySubParsers`: a parser is built when looked up.

    Membership and iteration (what argparse checks a choice against and lists in errors)
    read only the names; ``[name]``, ``get``, ``values`` and ``items`` build what they
    return.
    """

    def __init__(self, owner: LazySubParsers) -> None:
        super().__init__()
        self._owner = owner

    def __getitem__(self, name: str) -> argparse.ArgumentParser:
        value = super().__getitem__(name)
        return self._owner.build(name) if value is _UNBUILT else value

    def get(self, name, default=None):
        return self[name] if name in self else default

    def values(self):
        return [self[name] for name in list(self)]

    def items(self):
        return [(name, self[name]) for name in list(self)]


class LazySubParsers(argparse._SubParsersAction):
    """Subcommands listed by name and one-line help, their parsers built on first use.

    Why: building a parser can mean importing its module, and some modules import
    pandas, scipy or matplotlib; ``tersetalk X`` should pay only for X.
    Pass it as ``parser.add_subparsers(action=LazySubParsers, ...)``; then
    :meth:`add_lazy` (a builder) or :meth:`add_module_commands` (a module's
    ``add_commands``) declares names, and ``add_parser`` still adds a parser at once.
    ``--help`` lists the declared helps; parsing ``X`` builds X's parser (and the others
    its builder adds). Callables in :attr:`on_build` see each parser built later, as
    ``hook(name, parser)``. tests/test_cli_imports.py checks that each builder adds
    exactly the names and helps declared for it.
    """

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._name_parser_map = self.choices = _LazyParsers(self)
        #: name -> the builder declared for it (kept after building, for the check)
        self.declared: dict[str, Builder] = {}
        self.on_build: list[Callable[[str, argparse.ArgumentParser], None]] = []

    def add_lazy(self, name: str, help: str, build: Builder) -> None:
        """List ``name`` with ``help``; ``build`` adds its parser when it is first needed."""
        if name in self._name_parser_map:
            raise argparse.ArgumentError(self, f"conflicting subparser: {name}")
        self._choices_actions.append(self._ChoicesPseudoAction(name, (), help))
        self.declared[name] = build
        dict.__setitem__(self._name_parser_map, name, _UNBUILT)

    def add_module_commands(self, module: str, commands: Mapping[str, str]) -> None:
        """The ``commands`` (name -> help) that ``module``'s ``add_commands`` adds."""
        build = partial(add_module_commands, module)
        for name, help in commands.items():
            self.add_lazy(name, help, build)

    def is_built(self, name: str) -> bool:
        return dict.__getitem__(self._name_parser_map, name) is not _UNBUILT

    def built_items(self) -> list[tuple[str, argparse.ArgumentParser]]:
        """The (name, parser) pairs built so far, without building any."""
        return [(n, p) for n, p in dict.items(self._name_parser_map) if p is not _UNBUILT]

    def build(self, name: str) -> argparse.ArgumentParser:
        """Build ``name``'s parser (and every unbuilt one of the same builder)."""
        if self.is_built(name):
            return dict.__getitem__(self._name_parser_map, name)
        build = self.declared[name]
        scratch = argparse._SubParsersAction(
            option_strings=[], prog=self._prog_prefix, parser_class=self._parser_class
        )
        build(scratch)
        names = [n for n, b in self.declared.items() if b is build and not self.is_built(n)]
        missing = [n for n in names if n not in scratch._name_parser_map]
        if missing:
            raise RuntimeError(f"{build} did not add the subcommand(s) {missing} declared for it")
        for n in names:
            dict.__setitem__(self._name_parser_map, n, scratch._name_parser_map[n])
        for n in names:
            for hook in self.on_build:
                hook(n, dict.__getitem__(self._name_parser_map, n))
        return dict.__getitem__(self._name_parser_map, name)


def add_module_commands(module: str, sub: argparse._SubParsersAction) -> None:
    """Import ``module`` and let its ``add_commands`` add its subcommands to ``sub``.

    A module that is not there (a trimmed install) is a usage error naming it; a missing
    dependency inside the module is its own ModuleNotFoundError.
    """
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name is None or not (module + ".").startswith(exc.name + "."):
            raise
        raise argparse.ArgumentError(
            None, f"this subcommand's module {module} is not installed"
        ) from None
    mod.add_commands(sub)
