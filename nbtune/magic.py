"""`%tune`: launch, steer and inspect nbtune runs from one line of a notebook.

    %load_ext nbtune
    %tune train --space space --samples 20 --metric loss --mode min --scheduler asha \
        --concurrency 2 --name sweep --as t
    %tune pause 3
    %tune df

A thin layer over the `Tuner` API: each word is parsed (argparse) into exactly the arguments
of one `Tuner` call. Mistakes come back as one line, IPython's `UsageError`, never as a
traceback. This is the only module that imports IPython; `nbtune.load_ipython_extension`
imports it when `%load_ext nbtune` runs, so `import nbtune` stays free of IPython.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import keyword
import shlex
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NoReturn

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_magic, magics_class, no_var_expand

from nbtune import registry
from nbtune import space as space_module
from nbtune.errors import IllegalTransitionError, RunEndedError, TrialNotFoundError
from nbtune.metrics import format_value
from nbtune.space import SEPARATOR, SearchSpace
from nbtune.stopping import StopCriteria
from nbtune.trial import ITERATION, RESULT_KEYS, Trial, TrialStatus
from nbtune.tuner import Tuner

DEFAULT_VARIABLE = "_tuner"
"""The name a launched Tuner is bound to in the notebook, unless `--as VAR` names another."""

_TUNER_OPTIONS = (
    "metric",
    "mode",
    "num_samples",
    "max_concurrent",
    "name",
    "seed",
    "searcher",
    "scheduler",
    "executor",
    "stop",
    "time_budget_s",
    "storage_path",
    "fail_fast",
    "overwrite",
    "resume",
)
"""Launch options that are passed on to `Tuner(...)` under the same name, when given."""

_USER_ERRORS = (
    ImportError,
    FileNotFoundError,
    TrialNotFoundError,
    IllegalTransitionError,
    RunEndedError,
    ValueError,
    TypeError,
    FileExistsError,
    PermissionError,
)
"""What the Tuner raises for a mistake the user can fix; shown as one line."""


# ----- parsing words ---------------------------------------------------------------------------


class _HelpShown(Exception):
    """argparse has printed a help text (`-h`); there is nothing else to do."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that reports a wrong argument as a UsageError instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message}\n{self.format_usage().rstrip()}")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        raise _HelpShown


def _trial_id(word: str) -> int | str:
    if word == "all":
        return word
    try:
        return int(word)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{word!r} is not a trial id (a number, or all)") from None


def _assignment(word: str) -> tuple[tuple[str, ...], Any]:
    """`model/layers=2` -> (("model", "layers"), 2): the value is a Python literal, else a str."""
    key, equals, text = word.partition("=")
    path = tuple(key.split(SEPARATOR))
    if not equals or not text or not all(path):
        raise argparse.ArgumentTypeError(
            f"{word!r} is not KEY=VALUE (e.g. lr=0.01, act=relu, model/layers=2)"
        )
    try:
        value = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        value = text
    return path, value


DOMAINS = (
    "uniform",
    "loguniform",
    "quniform",
    "qloguniform",
    "randint",
    "qrandint",
    "lograndint",
    "qlograndint",
    "randn",
    "qrandn",
    "choice",
    "grid",
)
"""The domains `%tune space` writes as calls: `lr=loguniform(1e-5,1e-2)`."""


def _failed(words: list[str]) -> str | list[int]:
    """`errored`, or the trial ids of `%tune retry`."""
    if words == ["errored"]:
        return "errored"
    try:
        return [int(word) for word in words]
    except ValueError:
        raise ValueError(f"retry {' '.join(words)}: pass errored, or trial ids") from None


def _domain_assignment(word: str) -> tuple[str, Any]:
    """`lr=loguniform(1e-5,1e-2)` -> ("lr", loguniform(1e-5, 1e-2)): a domain of nbtune's
    with literal arguments, else a constant as `_assignment` reads it."""
    path, value = _assignment(word)
    text = word.partition("=")[2]
    try:
        call = ast.parse(text, mode="eval").body
    except SyntaxError:
        return SEPARATOR.join(path), value
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)):
        return SEPARATOR.join(path), value
    if call.func.id not in DOMAINS:
        raise argparse.ArgumentTypeError(
            f"{call.func.id!r} is not a domain; use one of {', '.join(DOMAINS)}"
        )
    try:
        args = [ast.literal_eval(arg) for arg in call.args]
        keywords = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
        return SEPARATOR.join(path), getattr(space_module, call.func.id)(*args, **keywords)
    except (ValueError, TypeError, SyntaxError) as exc:
        raise argparse.ArgumentTypeError(f"{word!r}: {exc}") from None


def _space_changes(tuner: Tuner, changes: list[tuple[str, Any]]) -> SearchSpace:
    """The run's space with `changes` made (a define-by-run space cannot be changed here)."""
    if not isinstance(tuner.space, SearchSpace):
        raise ValueError("%tune space changes a dict space; call tuner.update_space(fn) instead")
    return tuner.space.with_changes(dict(changes))


def _nested(assignments: Iterable[tuple[tuple[str, ...], Any]]) -> dict[str, Any]:
    """The dict that `_assignment`s describe: `model/layers=2` sets `["model"]["layers"]`."""
    config: dict[str, Any] = {}
    for path, value in assignments:
        name = SEPARATOR.join(path)
        group = config
        for depth, key in enumerate(path[:-1]):
            group = group.setdefault(key, {})
            if not isinstance(group, dict):
                raise ValueError(f"{name} is set, but so is {SEPARATOR.join(path[: depth + 1])}")
        if isinstance(group.get(path[-1]), dict):
            raise ValueError(f"{name} is set, but so are names under it ({name}{SEPARATOR}...)")
        if path[-1] in group:
            raise ValueError(f"{name} is set twice")
        group[path[-1]] = value
    return config


def _named(word: str) -> tuple[str, dict[str, Any]]:
    """`asha` -> ("asha", {}); `asha(max_t=27, grace_period=2)` -> ("asha", {"max_t": 27, ...}).

    Options are keyword arguments with literal values, as KEY=VALUE takes them: a launch line
    names things and sets values, it runs no code.
    """
    try:
        node = ast.parse(word, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        node = None
    if isinstance(node, ast.Name):
        return node.id, {}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        options = _literal_keywords(node.keywords)
        if options is not None:
            return node.func.id, options
    raise argparse.ArgumentTypeError(
        f"{word!r} is not NAME or NAME(KEY=VALUE, ...) with literal values; quote it whole, "
        "e.g. \"asha(max_t=27, time_attr='epoch')\""
    )


def _literal_keywords(keywords: list[ast.keyword]) -> dict[str, Any] | None:
    """`max_t=27, grace_period=2` as a dict; None if one is no KEY=literal or a KEY repeats."""
    keys = [item.arg for item in keywords]
    if None in keys or len(set(keys)) < len(keys):
        return None
    try:
        return {item.arg: ast.literal_eval(item.value) for item in keywords}
    except (ValueError, TypeError, MemoryError, RecursionError):
        return None


def _options(family: str, args: argparse.Namespace) -> tuple[str, dict[str, Any]]:
    """The name given for `family` and the options for its constructor: those of its call
    form, plus what other launch options say (the Dask address, a scheduler's budget)."""
    name, options = getattr(args, family)
    if family == "executor" and args.address is not None:
        if "address" in options:
            raise ValueError("the address is given twice: keep --address or dask(address=...)")
        options = {**options, "address": args.address}
    if family == "scheduler":
        options = _budget(name, options, args)
    return name, options


def _budget(name: str, options: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """`--stop training_iteration=N` as the max_t of a scheduler that the table gives a default
    one, unless max_t or time_attr is set: `--scheduler hyperband --stop training_iteration=9`
    makes HyperBand(max_t=9), whose brackets fit the trials' length, not HyperBand(max_t=81)."""
    entry = registry.TABLE["scheduler"].get(name)
    stop = _nested(args.stop or [])
    if entry is None or "max_t" not in entry.defaults or "training_iteration" not in stop:
        return options
    if {"max_t", "time_attr"} & options.keys():
        return options
    return {**options, "max_t": stop["training_iteration"]}


def _identifier(word: str) -> str:
    if not word.isidentifier() or keyword.iskeyword(word):
        raise argparse.ArgumentTypeError(f"{word!r} is not a Python variable name")
    return word


def _launch_parser() -> _Parser:
    parser = _Parser(
        prog="%tune",
        usage="%(prog)s TRAINABLE [--space NAME] [options]",
        description="Launch a run in the background (Tuner(...).start()); the dashboard shows "
        "under the cell and the Tuner is bound to a variable.",
    )
    add = parser.add_argument
    add("trainable", metavar="TRAINABLE", help="name of the trainable (a function or a Trainable)")
    add("--space", metavar="NAME", help="name of the search space (a dict)")
    add("--samples", dest="num_samples", type=int, metavar="N", help="configurations to sample")
    add("--metric", metavar="NAME", help="the reported value to optimise, e.g. loss")
    add("--mode", choices=("min", "max"), help="minimise or maximise it (default: min)")
    add("--concurrency", dest="max_concurrent", type=int, metavar="N", help="trials at once")
    add("--name", metavar="NAME", help="the experiment's name, its folder under --storage")
    add("--seed", type=int, metavar="N", help="makes the sampled configurations reproducible")
    for family in registry.TABLE:
        names = ", ".join(registry.names(family))
        add(
            f"--{family}",
            type=_named,
            metavar="NAME",
            help=f"one of: {names}; NAME(KEY=VALUE, ...) sets options (see below)",
        )
    add("--address", metavar="URL", help="the Dask scheduler, with --executor dask")
    add(
        "--stop",
        nargs="+",
        action="extend",
        type=_assignment,
        metavar="KEY=VALUE",
        help="stop each trial when it reaches these, e.g. training_iteration=10",
    )
    add(
        "--time-budget",
        dest="time_budget_s",
        type=float,
        metavar="SECONDS",
        help="end the run after that",
    )
    add("--storage", dest="storage_path", metavar="PATH", help="default: nbtune-runs")
    add("--overwrite", action="store_true", default=None, help="replace a run of the same name")
    add("--resume", action="store_true", default=None, help="carry on a run of the same name")
    add("--fail-fast", action="store_true", default=None, help="end the run at the first error")
    _add_binding(add)
    return parser


def _add_binding(add: Callable[..., Any]) -> None:
    """The options of commands that start a run: where the Tuner goes, and the dashboard."""
    add("--no-display", dest="display", action="store_false", default=None, help="no dashboard")
    add(
        "--as",
        dest="variable",
        type=_identifier,
        default=DEFAULT_VARIABLE,
        metavar="VAR",
        help=f"bind the Tuner to VAR (default: {DEFAULT_VARIABLE})",
    )


def _restore_parser() -> _Parser:
    parser = _Parser(
        prog="%tune restore",
        description="Carry on a stopped or crashed run from its directory "
        "(Tuner.restore(PATH, TRAINABLE).start()).",
    )
    parser.add_argument("path", metavar="PATH", help="the run's directory, e.g. nbtune-runs/sweep")
    parser.add_argument("trainable", metavar="TRAINABLE", help="name of the trainable")
    _add_binding(parser.add_argument)
    return parser


Action = Callable[[Tuner, argparse.Namespace], Any]
"""One subcommand's call: (the run's Tuner, the parsed arguments) -> what the cell shows."""


def _command_parsers() -> dict[str, tuple[_Parser, Action]]:
    """Each subcommand: its parser, and the one Tuner call it makes."""
    target = _Parser(add_help=False)
    target.add_argument("--run", metavar="NAME", help="the run (default: the latest launched)")
    commands: dict[str, tuple[_Parser, Action]] = {}

    def command(name: str, summary: str, action: Action) -> Callable[..., Any]:
        parser = _Parser(prog=f"%tune {name}", description=summary, parents=[target])
        commands[name] = (parser, action)
        return parser.add_argument

    ids = {"metavar": "ID", "type": _trial_id}
    pause = command(
        "pause",
        "Pause trials, or all of them.",
        lambda t, a: _acknowledge(t, a.ids, "pause", lambda: t.pause(*a.ids)),
    )
    pause("ids", nargs="+", **ids)
    resume = command(
        "resume",
        "Resume trials, or all of them.",
        lambda t, a: _acknowledge(t, a.ids, "resume", lambda: t.resume(*a.ids)),
    )
    resume("ids", nargs="+", **ids)
    stop = command(
        "stop",
        "End trials; with no ID (or all), end the run.",
        lambda t, a: _acknowledge(t, a.ids, "stop", lambda: t.stop(*a.ids, force=a.force)),
    )
    stop("ids", nargs="*", **ids)
    stop("--force", action="store_true", help="kill the trials at once where the executor can")
    fork = command(
        "fork",
        "Start a new trial from trial ID's latest checkpoint, with some values changed; "
        "returns its id.",
        lambda t, a: t.fork(a.id, _nested(a.changes)),
    )
    fork("id", metavar="ID", type=int)
    fork("changes", nargs="*", type=_assignment, metavar="KEY=VALUE")
    add = command(
        "add",
        "Queue a hand-picked configuration (every parameter); returns its id.",
        lambda t, a: t.add_trial(_nested(a.config)),
    )
    add("config", nargs="+", type=_assignment, metavar="KEY=VALUE")
    concurrency = command(
        "concurrency", "Run N trials at once from now on.", lambda t, a: t.set_max_concurrent(a.n)
    )
    concurrency("n", metavar="N", type=int)
    space = command(
        "space",
        "Search these parameters anew from now on (the others as they are), e.g. "
        "lr=loguniform(1e-5,1e-2) layers=choice([2,3]).",
        lambda t, a: t.update_space(_space_changes(t, a.changes)),
    )
    space("changes", nargs="+", type=_domain_assignment, metavar="KEY=DOMAIN")
    extend = command("extend", "Sample N more configurations.", lambda t, a: t.extend(a.n))
    extend("n", metavar="N", type=int)
    retry = command(
        "retry",
        "Run failed trials again, under their ids: errored (every one) or IDs.",
        lambda t, a: t.retry(_failed(a.ids), from_scratch=a.from_scratch),
    )
    retry("ids", nargs="+", metavar="ID", help="errored, or trial ids")
    retry("--from-scratch", action="store_true", help="not from their latest checkpoints")
    command("status", "The run's state and its trials counted by status.", lambda t, a: t.status)
    df = command(
        "df",
        "The trials as a DataFrame (one row per trial), or with --history the result log.",
        lambda t, a: t.history() if a.history else t.dataframe(),
    )
    df("--history", action="store_true", help="one row per reported result instead")
    command(
        "best",
        "The best trial's config and result (a dict, shown as a short summary).",
        lambda t, a: BestResult(t),
    )
    wait = command(
        "wait", "Block until the run ends; returns whether it did.", lambda t, a: t.wait(a.timeout)
    )
    wait("--timeout", type=float, metavar="S", help="give up after S seconds")
    return commands


_LAUNCH = _launch_parser()
_RESTORE = _restore_parser()
_COMMANDS = _command_parsers()
_USAGE = _LAUNCH.format_usage().rstrip()


def _help() -> str:
    commands = "\n".join(
        f"  {parser.format_usage().removeprefix('usage: ').rstrip()}\n      {parser.description}"
        for parser, _ in _COMMANDS.values()
    )
    names = registry.describe().replace("\n", "\n  ")
    return f"""\
Launch, steer and inspect nbtune runs from one line: the same calls as the Tuner API.

{_LAUNCH.format_help().rstrip()}

  {_RESTORE.format_usage().removeprefix("usage: ").rstrip()}
      {_RESTORE.description}

Commands act on the latest run launched with %tune, or on the one named by --run NAME:
{commands}

Names for --scheduler, --searcher and --executor, and what each makes:
  {names}

NAME(KEY=VALUE, ...) passes options to what NAME makes, as literals (quote it whole):
  --scheduler "asha(max_t=27, grace_period=2)"    --executor "loky(max_workers=4)"
  --scheduler "pbt(perturbation_interval=4, hyperparam_mutations={{'lr': [0.001, 0.01, 0.1]}})"
With --stop training_iteration=N, a scheduler with a default max_t (asha, hyperband) takes N.

KEY=VALUE: the value is a Python literal (lr=0.02, sizes=[64,64], flag=True), anything else is
a string (act=relu; write x='"1"' for the string "1"); "/" nests: model/layers=2 sets
config["model"]["layers"]. A subcommand's name wins over a trainable of the same name.
`%tune COMMAND -h` shows one command's options.
"""


# ----- the magic -------------------------------------------------------------------------------


@magics_class
class TuneMagics(Magics):
    """The `%tune` line magic and the runs it launched in this kernel, by name."""

    def __init__(self, shell: Any) -> None:
        super().__init__(shell)
        self.runs: dict[str, Tuner] = {}
        """Tuners launched with `%tune`, by name, the latest last: commands act on it."""

    # no_var_expand: the line reaches nbtune as typed. IPython would otherwise run the code in
    # `{...}` and read `$name` before nbtune saw them, and a launch line runs no code.
    @line_magic
    @no_var_expand
    def tune(self, line: str) -> Any:
        try:
            words = shlex.split(line)
        except ValueError as exc:
            raise UsageError(f"%tune: {exc}") from None
        if not words:
            raise UsageError(
                f"%tune: name a trainable to launch, or a command: {', '.join(_COMMANDS)}\n{_USAGE}"
            )
        if words[0] in ("-h", "--help"):
            print(_help())
            return None
        try:
            if words[0] == "restore":
                return _one_line(_RESTORE.prog, self._restore, _RESTORE.parse_args(words[1:]))
            if words[0] in _COMMANDS:
                parser, action = _COMMANDS[words[0]]
                args = parser.parse_args(words[1:])
                return _one_line(parser.prog, action, self._target(args.run), args)
            self._check_known(words[0])
            return _one_line("%tune", self._launch, _LAUNCH.parse_args(words))
        except _HelpShown:
            return None

    tune.__doc__ = _help()

    def _launch(self, args: argparse.Namespace) -> None:
        options = {k: v for k, v in vars(args).items() if k in _TUNER_OPTIONS and v is not None}
        if args.address is not None and (args.executor or ("",))[0] != "dask":
            raise ValueError("--address goes with --executor dask")
        if "stop" in options:
            options["stop"] = _nested(options["stop"])
            StopCriteria(options["stop"], args.metric, args.mode or "min")  # before max_t=stop
        for family in registry.TABLE:
            if family in options:
                name, given = _options(family, args)
                options[family] = registry.create(family, name, **given)
        trainable = self._lookup(args.trainable)
        space = None if args.space is None else self._lookup(args.space)
        self._adopt(Tuner(trainable, space, **options), args)

    def _restore(self, args: argparse.Namespace) -> None:
        self._adopt(Tuner.restore(args.path, self._lookup(args.trainable)), args)

    def _adopt(self, tuner: Tuner, args: argparse.Namespace) -> None:
        """Start `tuner`, make it the latest run and bind it to `--as`."""
        tuner.start(display=args.display)
        self.runs.pop(tuner.name, None)
        self.runs[tuner.name] = tuner
        self.shell.user_ns[args.variable] = tuner

    def _target(self, name: str | None) -> Tuner:
        if not self.runs:
            raise UsageError(
                f"%tune: no run was launched with %tune yet; launch one first\n{_USAGE}"
            )
        if name is None:
            return next(reversed(self.runs.values()))
        if name not in self.runs:
            raise UsageError(f"%tune: no run named {name!r}; there are {', '.join(self.runs)}")
        return self.runs[name]

    def _check_known(self, word: str) -> None:
        """A first word that is no command must name something in the notebook."""
        if word.startswith("-") or word in self.shell.user_ns:
            return
        close = difflib.get_close_matches(word, _COMMANDS, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise UsageError(
            f"%tune: {word!r} is neither a command nor a name defined in the notebook; {hint}"
            f"commands: {', '.join(_COMMANDS)}\n{_USAGE}"
        )

    def _lookup(self, name: str) -> Any:
        try:
            return self.shell.user_ns[name]
        except KeyError:
            raise UsageError(f"%tune: {name!r} is not defined in the notebook") from None


# ----- what a command prints -----------------------------------------------------------------


def _acknowledge(tuner: Tuner, ids: list[int | str], verb: str, call: Callable[[], None]) -> None:
    """Make the call (`pause`, `resume` or `stop` of `ids`), then print in one line what it
    did: what took effect at once, and what happens at a trial's next report."""
    before = {trial.trial_id: trial.status for trial in tuner.trials}
    call()
    if verb == "stop" and ids in ([], ["all"]):
        print(
            f"the run {tuner.name!r} is ending: its running trials stop at their next report"
            if tuner.live
            else f"the run {tuner.name!r} has ended ({tuner.state})"
        )
        return
    every = ids == ["all"]
    now = {trial.trial_id: trial for trial in tuner.trials}
    chosen = sorted(before) if every else [int(i) for i in ids]
    print(_acknowledgement(verb, chosen, before, now, every))


_DONE = {"pause": "paused", "resume": "resumed", "stop": "stopped"}
_LATER = {
    "pause": ("pauses", "pause", "at its next report", "at their next report"),
    "stop": ("stops", "stop", "at its next report", "at their next report"),
    "resume": ("waits", "wait", "for a worker", "for workers"),
}


def _acknowledgement(
    verb: str,
    chosen: list[int],
    before: Mapping[int, TrialStatus],
    now: Mapping[int, Trial],
    every: bool,
) -> str:
    """The line to print: "paused trial 0", "trial 0 pauses at its next report", "resumed
    trial 1; trial 3 waits for a worker"; with `every` ("all"), of the trials it changed."""
    done: list[int] = []
    later: list[int] = []
    for trial_id in chosen:
        trial = now.get(trial_id)
        if trial is None:
            continue
        was = before.get(trial_id)
        if verb == "pause":
            if was is TrialStatus.PAUSED or trial.status.is_finished:
                continue
            (done if trial.status is TrialStatus.PAUSED else later).append(trial_id)
        elif verb == "resume":
            if was is not TrialStatus.PAUSED:
                continue
            (done if trial.status is TrialStatus.RUNNING else later).append(trial_id)
        else:
            if was is not None and was.is_finished:
                continue
            (done if trial.status.is_finished else later).append(trial_id)
    parts = []
    if done:
        parts.append(f"{_DONE[verb]} {_trials(done)}")
    if later:
        one, several, when_one, when_several = _LATER[verb]
        if len(later) == 1:
            line = f"{_trials(later)} {one} {when_one}"
        else:
            line = f"{_trials(later)} {several} {when_several}"
        if verb == "resume":
            resumes = [now[i] for i in later if now[i].has_checkpoint]
            if len(later) == 1 and resumes:
                line += f" (from iter {resumes[0].checkpoint_iteration})"
        parts.append(line)
    if not parts:
        return f"no trial to {verb}" if every else f"{_trials(chosen)}: nothing to {verb}"
    if every and verb == "pause":
        parts.append("no new trial starts until %tune resume all")
    return "; ".join(parts)


def _trials(ids: Iterable[int]) -> str:
    ids = list(ids)
    return f"trial {ids[0]}" if len(ids) == 1 else f"trials {', '.join(map(str, ids))}"


class BestResult(dict):
    """What `%tune best` returns: `{"config": tuner.best_config, "result": tuner.best_result}`,
    a dict to use in code, shown in the notebook as a short summary with every number to four
    significant digits (`nbtune.metrics.format_number`):

        best loss = 0.03333 · trial 0, iteration 3
        config: lr=0.1, model/layers=1
        also reported: acc=0.9123
    """

    def __init__(self, tuner: Tuner) -> None:
        super().__init__(config=tuner.best_config, result=tuner.best_result)
        self.metric = tuner.metric

    def __repr__(self) -> str:
        config, result = self["config"], self["result"]
        if result is None:
            return f"no result of {self.metric!r} yet"
        lines = [
            f"best {self.metric} = {format_value(result.get(self.metric))} · trial "
            f"{result.get('trial_id')}, iteration {result.get(ITERATION)}"
        ]
        if config is not None:
            flat = SearchSpace.flatten(config)
            lines.append("config: " + ", ".join(f"{k}={format_value(v)}" for k, v in flat.items()))
        others = {k: v for k, v in result.items() if k not in (*RESULT_KEYS, self.metric)}
        if others:
            lines.append(
                "also reported: " + ", ".join(f"{k}={format_value(v)}" for k, v in others.items())
            )
        return "\n".join(lines)

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))


def _one_line(prog: str, call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args)`, with the Tuner's errors shown as one line: `%tune pause: there is no ...`."""
    try:
        return call(*args)
    except _USER_ERRORS as exc:
        raise UsageError(f"{prog}: {exc}") from None


def load_ipython_extension(ipython: Any) -> None:
    """Register `%tune` with `ipython` (what `%load_ext nbtune` calls)."""
    ipython.register_magics(TuneMagics)
